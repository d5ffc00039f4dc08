"""Progress lines of long CLI jobs: on stderr when it is a terminal or with --progress, never on
stdout, following the files the job has open."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kafkalog_spark as kl
from kafkalog_spark.cli.progress import Progress, plain_files, segment_files

from test_read_write import records

pytestmark = pytest.mark.jit_only  # processes and files, not what kernels compute

CLI = "import sys; from kafkalog_spark.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("progress") / "logs"
    kl.write_log(records(600, partitions=3), path, segment_bytes=6000, max_batch_records=20)
    return path


def test_the_line_follows_the_open_file(log_dir: Path) -> None:
    files = segment_files(log_dir)
    assert len(files) >= 6 and files == sorted(files, key=lambda f: (f[0].parent, f[0].name))
    stream = io.StringIO()
    progress = Progress("verify", enabled=True, files=files, stream=stream)
    assert progress.line().startswith(f"verify: 0/{len(files)} segments")
    with open(files[3][0], "rb"):
        progress.sample()
    done = sum(size for _, size in files[:3])
    assert (progress.done_items, progress.done_bytes) == (3, done)
    with open(files[1][0], "rb"):  # an earlier file open again never moves the line back
        progress.sample()
    assert progress.done_items == 3
    assert f"3/{len(files)} segments" in progress.line()
    with progress:
        pass
    assert stream.getvalue().endswith(" done\n")
    assert f"{len(files)}/{len(files)} segments" in stream.getvalue()


def test_explicit_advance_and_no_files() -> None:
    stream = io.StringIO()
    with Progress("compact", enabled=True, stream=stream, unit="partitions") as p:
        p.advance(2, 100, current="t-0")
        assert p.line().startswith("compact: 2 partitions")
    assert stream.getvalue().startswith("compact:") and stream.getvalue().endswith("done\n")
    quiet = io.StringIO()
    with Progress("verify", stream=quiet):  # enabled=None and not a terminal: silent
        pass
    assert quiet.getvalue() == ""


def test_missing_paths_give_no_files(tmp_path: Path) -> None:
    assert segment_files(tmp_path / "missing") == []
    assert plain_files([tmp_path / "missing"]) == []


def cli(args: list, *, tty_stderr: bool = False) -> tuple[int, str, str]:
    argv = [sys.executable, "-c", CLI, *map(str, args)]
    if not tty_stderr:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        return out.returncode, out.stdout, out.stderr
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, text=True)
        os.close(slave)
        stdout, _ = proc.communicate(timeout=300)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    return proc.returncode, stdout, b"".join(chunks).decode()


@pytest.mark.parametrize("args", [["verify", "--json"], ["verify", "--deep"], ["recover"],
                                  ["rebuild-index", "--json"]], ids=" ".join)
def test_progress_goes_to_stderr_only(args, log_dir: Path) -> None:
    code, quiet_out, quiet_err = cli(args + [log_dir])
    assert quiet_err == ""  # stderr is a pipe: no line unless asked
    code2, out, err = cli(args + ["--progress", log_dir])
    assert (code2, out) == (code, quiet_out)
    n = len(segment_files(log_dir))
    assert err.splitlines()[-1].startswith(f"{args[0]}: {n}/{n} segments")
    assert err.endswith(" done\n")
    if "--json" in args:
        json.loads(out)


def test_a_terminal_gets_the_line_without_asking(log_dir: Path) -> None:
    code, out, err = cli(["verify", "--json", log_dir], tty_stderr=True)
    assert code == 0 and json.loads(out)["problems"] == []
    assert "verify:" in err and err.rstrip().endswith("done")
    code, out, err = cli(["verify", "--no-progress", log_dir], tty_stderr=True)
    assert code == 0 and err == ""


def test_dump_and_migrate_progress(log_dir: Path, tmp_path: Path) -> None:
    segment = segment_files(log_dir)[0][0]
    code, out, err = cli(["dump", "--progress", "--deep-iteration", segment])
    assert code == 0 and out.startswith(f"Dumping {segment}")
    assert err.splitlines()[-1].startswith("dump: 1/1 files") and "Dumping" not in err
    code, out, err = cli(["migrate", "--progress", "--dry-run", log_dir, tmp_path / "d"])
    assert code == 1 and "would migrate" in out and err.splitlines()[-1].startswith("migrate:")


def test_compact_progress(log_dir: Path, tmp_path: Path) -> None:
    """The local compaction round's line follows the segments it reads; stdout is the report."""
    import shutil

    copy = shutil.copytree(log_dir, tmp_path / "logs")
    args = ["compact", "--execute", "--force", "--config", "cleanup.policy=compact", copy]
    n = len(segment_files(copy))  # the round merges segments: count them before
    code, out, err = cli([*args, "--progress"])
    assert code == 0 and "cleaned 3 partitions" in out and "compact:" not in out
    assert err.splitlines()[-1].startswith(f"compact: {n}/{n} segments") and err.endswith(" done\n")
    code, out, err = cli(args)  # a second round: nothing due, no line unless asked
    assert code == 0 and err == ""
