"""Security of the commands on hostile or odd disks: symlinks out of a log dir, directory names
that look like paths, files this user may not read, a live and a stale ``.lock``, and read-only
commands that change no byte and no mtime."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import kafkalog_spark as kl
from kafkalog_spark.cli import main
from kafkalog_spark.errors import LogDirError
from kafkalog_spark.codec.files import naming as N
from kafkalog_spark.log.discovery import discover

from test_read_write import records

pytestmark = pytest.mark.jit_only  # processes and files, not what kernels compute

KRAFT = "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data"
SEGMENT = "00000000000000000000.log"


def write(log_dir: Path, n: int = 120, topic: str = "orders", **kw) -> Path:
    kl.write_log(records(n, topic=topic, partitions=2), log_dir, segment_bytes=3000, **kw)
    return log_dir


def state(root: Path) -> dict[str, tuple]:
    """Every file's and folder's content hash, size and mtime (ns) under ``root``; symlinks by
    their target text (never followed)."""
    out: dict[str, tuple] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            st = p.lstat()
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", st.st_mtime_ns)
            else:
                out[rel] = (hashlib.sha256(p.read_bytes()).hexdigest(), st.st_size,
                            st.st_mtime_ns)
    st = root.lstat()
    out["."] = ("dir", st.st_mtime_ns)
    return out


def run(args: list[str], capsys) -> tuple[int, str, str]:
    """``kafkalog ARGS`` in this process: exit code, stdout, stderr."""
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:  # commands exit 1 for "found problems / work to do"
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


# --- symlinks ------------------------------------------------------------------------------

MUTATING = [
    ["recover", "--execute"], ["rebuild-index", "--execute", "--force"],
    ["retain", "--execute", "--config", "retention.ms=1"],
    ["compact", "--execute", "--force", "--config", "cleanup.policy=compact"],
]
READING = [["info"], ["info", "--json"], ["verify"], ["verify", "--deep"], ["recover"],
           ["rebuild-index"], ["retain"], ["compact"]]


@pytest.fixture
def linked(tmp_path: Path) -> tuple[Path, Path]:
    """A log dir whose partition ``linked-0`` is a symlink to a partition dir outside it."""
    outside = write(tmp_path / "outside-logs") / "orders-0"
    log_dir = write(tmp_path / "logs", topic="inside")
    (log_dir / "linked-0").symlink_to(outside)
    return log_dir, outside


@pytest.mark.parametrize("args", READING + MUTATING + [["migrate"]], ids=" ".join)
def test_a_partition_symlinked_out_of_the_log_dir_is_refused(args, linked, tmp_path, capsys):
    log_dir, outside = linked
    before = state(outside.parent)
    argv = args + [log_dir] + ([tmp_path / "delta"] if args == ["migrate"] else [])
    code, out, err = run(argv, capsys)
    assert code == 2, (out, err)
    assert "symlink leads outside" in err and str(log_dir / "linked-0") in err
    assert "Traceback" not in err and err.count("\n") == 1
    assert state(outside.parent) == before
    assert not (tmp_path / "delta").exists()
    with pytest.raises(LogDirError, match="symlink leads outside"):
        kl.read_log(log_dir)


def test_a_segment_or_index_symlinked_out_is_refused(tmp_path: Path, capsys) -> None:
    outside = write(tmp_path / "outside-logs") / "orders-0"
    part = write(tmp_path / "logs") / "orders-1"
    before = state(outside.parent)
    # a segment file inside a partition dir
    (part / "00000000000000900000.log").symlink_to(outside / SEGMENT)
    for args in READING + MUTATING:
        code, _, err = run(args + [part.parent], capsys)
        assert code == 2 and "symlink leads outside" in err, (args, err)
    code, _, err = run(["verify", part], capsys)  # a partition dir named directly
    assert code == 2 and "symlink leads outside" in err
    # a .log named directly that is itself a link, or whose index sibling is one
    code, _, err = run(["rebuild-index", "--execute", part / "00000000000000900000.log"], capsys)
    assert code == 2 and "is a symlink" in err
    (part / "00000000000000900000.log").unlink()
    (part / "00000000000000000000.index").unlink()
    (part / "00000000000000000000.index").symlink_to(outside / "00000000000000000000.index")
    for args in (["verify"], ["rebuild-index", "--execute", "--force"]):
        code, _, err = run(args + [part / SEGMENT], capsys)
        assert code == 2 and "symlink leads outside" in err, (args, err)
    assert state(outside.parent) == before


def test_dump_reads_no_sibling_through_a_link_out(tmp_path: Path, capsys) -> None:
    outside = write(tmp_path / "outside-logs") / "orders-0"
    part = write(tmp_path / "logs") / "orders-1"
    index = part / "00000000000000000000.index"
    (part / SEGMENT).unlink()
    (part / SEGMENT).symlink_to(outside / SEGMENT)  # dump .index checks it against its .log
    code, out, err = run(["dump", index], capsys)
    assert code == 2 and "symlink leads outside" in err and not out
    # a file named on the command line may itself be a link (kafka-dump-log.sh takes files)
    code, out, err = run(["dump", part / SEGMENT], capsys)
    assert code == 0 and out.startswith(f"Dumping {part / SEGMENT}"), err


def test_a_symlink_that_stays_inside_is_followed(tmp_path: Path, capsys) -> None:
    log_dir = write(tmp_path / "logs")
    (log_dir / "alias-0").symlink_to(log_dir / "orders-0")
    code, out, _ = run(["verify", log_dir], capsys)
    assert code == 0 and "checked 3 partitions" in out


# --- names that look like paths --------------------------------------------------------------

ODD_NAMES = ["..-0", ".-0", "%2e%2e-0", "a%2Fb-0", " -0", "t\u00e9-0", "..%2F..-0",
             os.fsdecode(b"t\xff\xfe-0")]
LEGAL_ODD = ["...-0", "__consumer_offsets_-0", "-.-0", f"{'x' * 249}-0"]


@pytest.mark.parametrize("name", ODD_NAMES)
def test_illegal_topic_dir_names_are_not_partitions(name: str) -> None:
    with pytest.raises(LogDirError, match="topic-partition"):
        N.parse_partition_dir_name(name)


@pytest.mark.parametrize("name", LEGAL_ODD)
def test_legal_but_odd_topic_names_parse(name: str) -> None:
    parsed = N.parse_partition_dir_name(name)
    assert (parsed.topic, parsed.partition) == (name[:-2], 0)
    assert N.partition_dir_name(parsed.topic, 0) == name


@pytest.mark.parametrize("topic", ["../x", "a/b", "..", ".", "x\x00y", "/abs"])
def test_a_dir_name_is_never_built_from_a_path(topic: str) -> None:
    with pytest.raises(LogDirError, match="illegal topic"):
        N.partition_dir_name(topic, 0)


@pytest.fixture
def odd_log_dir(tmp_path: Path) -> Path:
    log_dir = write(tmp_path / "box" / "logs")
    for name in ODD_NAMES + LEGAL_ODD:
        shutil.copytree(log_dir / "orders-0", log_dir / name)
    return log_dir


def cli_bytes(args: list, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    """``kafkalog ARGS`` in a child with its own (strict UTF-8) stdout, output as bytes."""
    code = "import sys; from kafkalog_spark.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, **env_extra}
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env,
                          capture_output=True, timeout=300)


def test_odd_dirs_are_reported_never_read_as_topics(odd_log_dir: Path) -> None:
    found = discover(odd_log_dir)
    (log_dir,) = found.log_dirs
    assert sorted(p.name for p in log_dir.unknown) == sorted(ODD_NAMES)
    assert sorted(p.path.name for p in log_dir.partitions) == sorted(
        LEGAL_ODD + ["orders-0", "orders-1"])
    # a UTF-8 locale makes stdout strict: the raw name must still print, not crash
    utf8 = {"LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}
    out = cli_bytes(["verify", "--deep", odd_log_dir], utf8)
    assert out.returncode == 1 and b"Traceback" not in out.stderr, out.stderr[-800:]
    assert out.stdout.count(b"directory whose name is not <topic>-<partition>") == len(ODD_NAMES)
    assert b"t\xff\xfe-0" in out.stdout
    for args in (["info"], ["info", "--json"], ["recover"], ["retain"]):
        out = cli_bytes(args + [odd_log_dir], utf8)
        assert out.returncode in (0, 1) and not out.stderr, (args, out.stderr[-800:])
    table = kl.read_log(odd_log_dir)
    assert set(table.column("topic").to_pylist()) == {"orders", "...", "__consumer_offsets_",
                                                      "-.", "x" * 249}


def test_migrating_odd_names_stays_inside_dest(odd_log_dir: Path, capsys) -> None:
    box = odd_log_dir.parent
    dest = box / "dest"
    before = state(odd_log_dir)
    code, out, err = run(["migrate", odd_log_dir, dest], capsys)
    assert code == 0, err
    assert sorted(os.listdir(box)) == ["dest", "logs"]  # nothing written next to DEST
    assert sorted(os.listdir(dest)) == sorted(["...", "__consumer_offsets_", "-.", "orders",
                                               "x" * 249])
    assert state(odd_log_dir) == before


# --- files this user may not read -------------------------------------------------------------

@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder another user can traverse (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="kafkalog-security-"))
    path.chmod(0o755)
    yield path
    for dirpath, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chmod(Path(dirpath) / name, 0o755, follow_symlinks=False) \
                if not Path(dirpath, name).is_symlink() else None
    shutil.rmtree(path)


def unprivileged(args: list, cwd: Path) -> subprocess.CompletedProcess:
    """``kafkalog ARGS`` as a user without access to 0o000 files: root (who reads anything)
    runs the child as nobody (65534) through ``setpriv``, which, unlike a ``setuid`` in a
    ``preexec_fn``, can still start this venv's interpreter; any other user is already
    blocked by the mode. numba's cache is left to the CLI's own fallback (nobody can write
    neither the checkout's ``__pycache__`` nor root's home)."""
    code = "import sys; from kafkalog_spark.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    prefix: list[str] = []
    if os.getuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: cannot drop privileges to test "
                        "unreadable files")
        prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    return subprocess.run([*prefix, sys.executable, "-c", code, *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def _readable_tree(root: Path) -> None:
    for dirpath, dirs, files in os.walk(root):
        for d in dirs:
            os.chmod(Path(dirpath) / d, 0o755)
        for f in files:
            os.chmod(Path(dirpath) / f, 0o644)


def test_unreadable_files_are_named_never_a_traceback(shared_dir: Path) -> None:
    log_dir = write(shared_dir / "logs")
    _readable_tree(shared_dir)
    part = log_dir / "orders-0"
    # small files: verify reports each one as a problem and goes on
    for name in ("00000000000000000060.snapshot", "leader-epoch-checkpoint"):
        assert (part / name).exists(), name
        (part / name).chmod(0)
    (log_dir / "recovery-point-offset-checkpoint").chmod(0)
    out = unprivileged(["verify", log_dir], shared_dir)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    for name in ("00000000000000000060.snapshot", "leader-epoch-checkpoint",
                 "recovery-point-offset-checkpoint"):
        line = next(ln for ln in out.stdout.splitlines() if name in ln)
        assert line.startswith("error") and "Permission denied" in line
    _readable_tree(shared_dir)
    # a segment: every command but verify (which reports it, next test) stops with one line
    # naming it
    (part / SEGMENT).chmod(0)
    for args in (["info"], ["recover"], ["rebuild-index"], ["retain"], ["migrate", "--dry-run"]):
        argv = args + [log_dir] + ([shared_dir / "dest"] if args[0] == "migrate" else [])
        out = unprivileged(argv, shared_dir)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert out.stderr == ("Error: cannot open file: Permission denied "
                              f"(file {part / SEGMENT})\n"), (args, out.stderr)
    out = unprivileged(["dump", part / SEGMENT], shared_dir)
    assert out.returncode == 2 and "Permission denied" in out.stderr  # an error, as elsewhere
    assert "Traceback" not in out.stderr
    # a partition dir this user may not list
    (part / SEGMENT).chmod(0o644)
    part.chmod(0)
    for args in (["info"], ["verify"], ["recover"]):
        out = unprivileged(args + [log_dir], shared_dir)
        assert out.returncode == 2, (args, out.stderr)
        assert out.stderr == f"Error: Permission denied (file {part})\n", (args, out.stderr)


def test_verify_reports_an_unreadable_segment_as_a_problem(shared_dir: Path) -> None:
    log_dir = write(shared_dir / "logs")
    _readable_tree(shared_dir)
    (log_dir / "orders-0" / SEGMENT).chmod(0)
    out = unprivileged(["verify", log_dir], shared_dir)
    assert out.returncode == 1 and "Permission denied" in out.stdout, out.stderr


# --- .lock -----------------------------------------------------------------------------------

@pytest.mark.parametrize("args", MUTATING + [["recover"]], ids=" ".join)
def test_a_live_lock_refuses_every_mutating_command(args, tmp_path, lock_holder, capsys):
    log_dir = write(tmp_path / "logs")
    holder = lock_holder(log_dir)
    before = state(log_dir)
    code, out, err = run(args + [log_dir], capsys)
    assert code == 2, (out, err)
    assert f"locked by process {holder.pid}" in err and "Traceback" not in err
    assert state(log_dir) == before
    with pytest.raises(kl.LogDirLockedError):
        kl.write_log(records(3), log_dir)


def test_a_stale_lock_does_not_block(tmp_path: Path, capsys) -> None:
    log_dir = write(tmp_path / "logs")
    (log_dir / ".lock").touch()  # left by a broker that died: nobody holds it
    (log_dir / "orders-0" / "00000000000000000000.index").unlink()
    code, out, err = run(["rebuild-index", "--execute", log_dir], capsys)
    assert code == 0 and "wrote" in out, err
    code, out, err = run(["recover", "--execute", log_dir], capsys)
    assert code == 0, err
    code, out, _ = run(["verify", log_dir], capsys)
    assert code == 0, out


# --- read-only commands ----------------------------------------------------------------------

@pytest.fixture
def busy_log_dir(shared_fixtures: Path, tmp_path: Path) -> Path:
    """A real KRaft broker's log dir (transactions, snapshots, KRaft checkpoints) plus written
    topics in every codec, a stale .lock and a leftover .tmp."""
    log_dir = tmp_path / "kafka-data"
    shutil.copytree(shared_fixtures / KRAFT, log_dir)
    _readable_tree(log_dir)
    for codec in ("gzip", "zstd"):
        write(log_dir, topic=f"t-{codec}", codec=codec)
    (log_dir / ".lock").touch()
    (log_dir / "recovery-point-offset-checkpoint.tmp").write_text("0\n")
    return log_dir


def test_read_only_commands_change_no_byte_and_no_mtime(busy_log_dir: Path, tmp_path: Path,
                                                         capsys) -> None:
    log_dir = busy_log_dir
    files = [str(p) for p in sorted(log_dir.rglob("*")) if p.is_file()
             and p.suffix in (".log", ".index", ".timeindex", ".snapshot", ".checkpoint")
             and p.parent.name in ("__transaction_state-44", "__cluster_metadata-0",
                                   "t-gzip-0")]
    assert len(files) >= 10
    before = state(log_dir)
    commands = [
        ["info", log_dir], ["info", "--json", log_dir], ["verify", log_dir],
        ["verify", "--deep", log_dir], ["verify", "--json", "--progress", log_dir],
        ["dump", "--deep-iteration", "--print-data-log", *files],
        ["dump", "--format", "jsonl", "--verify-index-only", *files],
        ["dump", "--transaction-log-decoder", "--deep-iteration", *files],
        ["recover", log_dir], ["rebuild-index", "--force", log_dir],
        ["retain", "--config", "retention.ms=1", log_dir],
        ["compact", "--force", "--config", "cleanup.policy=compact", log_dir],
        ["migrate", "--dry-run", log_dir, tmp_path / "delta"],
    ]
    for args in commands:
        code, _, err = run(args, capsys)
        # dump exits 2 for a file it cannot dump (here an .index whose .log the fixture lacks)
        assert code in ((0, 2) if args[0] == "dump" else (0, 1)), (args[:3], err[-500:])
        assert "Traceback" not in err
        assert state(log_dir) == before, args[:3]
    table = kl.read_log(log_dir, include_headers=True, include_metadata=True,
                        include_control=True)
    assert table.num_rows > 0
    kl.verify(log_dir, deep=True)
    assert state(log_dir) == before
    assert not (tmp_path / "delta").exists()
