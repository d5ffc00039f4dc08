"""The rules every ``kafkalog`` command follows (issue 28; written in full in docs/cli.md): a
path with no Kafka data, a topic that is not there and corrupt data a command reads are one-line
errors with exit code 2, never a run that does nothing and reports success; commands that
change data in place plan unless ``--execute``, commands that create new output write unless
``--dry-run``; a plan that would change something exits 1, nothing to do 0 — run twice, the
second run has nothing to do. No command prints ``None``."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import kafkalog_spark as kl
from kafkalog_spark.cli import cli, main
from kafkalog_spark.delta import migrate
from kafkalog_spark.recovery.recover import recover

from test_recover import crashed
from test_salvage import damage, segments, v2_log

pytestmark = pytest.mark.jit_only  # processes and files, not what kernels compute

# every command, and the tests below that hold it to each rule
COVERED = {"info", "dump", "verify", "rebuild-index", "recover", "reconcile", "compact",
           "retain", "migrate", "restore", "erase"}
NOW = 1_800_000_000_000  # ms: every record below is older than a day at this time


def run(capsys, *args) -> tuple[int, str, str]:
    """``kafkalog ARGS`` as a user runs it: exit code, stdout, stderr; never a traceback nor a
    ``None`` in what it prints."""
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "None" not in out + err, out + err
    return code, out, err


def files(root: Path) -> dict[str, str]:
    """Every file under ``root`` with a digest of its bytes (what a plan must leave alone)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".lock"}


def records(n: int, keys: int = 40) -> pa.Table:
    return pa.table({"key": [b"k%d" % (i % keys) for i in range(n)],
                     "value": [b"value-%d" % i for i in range(n)],
                     "timestamp": pa.array([NOW - 2 * 86_400_000 + i for i in range(n)],
                                           pa.int64())})


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """A log dir of two topics, several segments each."""
    for topic in ("orders", "users"):
        kl.write_log(records(600), tmp_path / "logs", topic=topic, max_batch_records=20,
                     segment_bytes=6_000)
    return tmp_path / "logs"


@pytest.fixture
def odd(tmp_path: Path) -> dict[str, Path]:
    """Paths that hold no Kafka data, or only garbage: an empty folder, a folder of other
    files, a partition dir whose only segment is garbage, a loose garbage ``.log``."""
    rng = np.random.default_rng(28)
    (tmp_path / "empty").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    (tmp_path / "garbage" / "g-0").mkdir(parents=True)
    garbage = bytes(rng.integers(0, 256, 500, dtype=np.uint8))
    (tmp_path / "garbage" / "g-0" / "00000000000000000000.log").write_bytes(garbage)
    (tmp_path / "loose").mkdir()
    (tmp_path / "loose" / "00000000000000000000.log").write_bytes(b"\x07" * 500)
    return {"empty": tmp_path / "empty", "other": tmp_path / "other",
            "garbage": tmp_path / "garbage", "partition": tmp_path / "garbage" / "g-0",
            "loose": tmp_path / "loose" / "00000000000000000000.log"}


def test_every_command_is_held_to_the_rules():
    assert set(cli.list_commands(cli.make_context("kafkalog", [], resilient_parsing=True))) \
        == COVERED


# --- what a path must hold -----------------------------------------------------------------


def _args(command: str, path: Path, tmp_path: Path) -> list:
    """``command`` over ``path`` with what else it needs to run."""
    (tmp_path / "keys.txt").write_text("k1\n")
    return {"migrate": ["migrate", path, tmp_path / "lake"],
            "erase": ["erase", path, "--topic", "orders", "--keys", tmp_path / "keys.txt"],
            "reconcile": ["reconcile", path, path, "--dest", tmp_path / "new"],
            "restore": ["restore", path, tmp_path / "restored"]}.get(command, [command, path])


@pytest.mark.parametrize("command", sorted(COVERED))
@pytest.mark.parametrize("what", ["empty", "other"])
def test_a_path_without_kafka_data_is_an_error(capsys, tmp_path, odd, command, what):
    code, out, err = run(capsys, *_args(command, odd[what], tmp_path))
    assert code == 2, out + err
    if command == "restore":  # a table is expected there
        assert err.startswith("Error:") and "not a Delta table written by kafkalog migrate" in err
    else:
        assert "no Kafka data here" in err and str(odd[what]) in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "lake").exists() and not (tmp_path / "new").exists()


@pytest.mark.parametrize("command", ["info", "verify", "dump", "rebuild-index", "migrate",
                                     "erase", "compact", "retain", "recover"])
def test_a_loose_garbage_log_is_no_kafka_data(capsys, tmp_path, odd, command):
    """A ``.log`` outside a partition folder that does not start with an entry is not listed,
    checked or migrated as a partition: the file is named, exit 2."""
    for path in (odd["loose"], odd["loose"].parent):
        if command in ("erase", "compact", "retain", "recover") and path == odd["loose"]:
            continue  # these take folders (click refuses a file)
        code, out, err = run(capsys, *_args(command, path, tmp_path))
        if command == "dump" and path == odd["loose"]:  # dump reads a named file as it is
            assert code == 2 and "Error dumping" in err and "unknown magic byte" in err
            continue
        assert code == 2 and not out, out
        assert "no Kafka data here: 00000000000000000000.log does not start with a Kafka " \
               "record batch" in err and str(odd["loose"]) in err, err


def test_loose_segments_need_their_folder_for_migrate_and_erase(capsys, tmp_path, logs):
    """Valid segments outside a ``<topic>-<partition>`` folder: the commands that read them as
    one partition take them; migrate and erase, which need the topic, say how to name it."""
    shutil.copytree(logs / "orders-0", tmp_path / "backup")
    for command in ("info", "verify", "rebuild-index", "dump"):
        code, out, _ = run(capsys, command, tmp_path / "backup")
        assert code == 0 and out, command
    for command in ("migrate", "erase"):
        code, out, err = run(capsys, *_args(command, tmp_path / "backup", tmp_path))
        assert code == 2 and not out and "outside a <topic>-<partition> folder" in err, err
        assert "move them into a folder named <topic>-<partition>" in err
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize("which", ["garbage", "partition"])
def test_a_garbage_only_segment_is_the_readers_typed_error(capsys, tmp_path, odd, which):
    """migrate, erase and dump read records: the first bad entry's typed error, as read_log
    raises it; verify reports it (exit 1) and recover plans the cut (exit 1); info lists the
    partition dir with its unclean segment."""
    path = odd[which]
    with pytest.raises(kl.KafkaLogError) as read:
        kl.read_log(path)
    for command in ("migrate", "erase", "dump"):
        if command == "erase":
            args = ["erase", path, "--topic", "g", "--keys", tmp_path / "k.txt"]
            (tmp_path / "k.txt").write_text("k1\n")
        else:
            args = _args(command, path, tmp_path)
        code, out, err = run(capsys, *args)
        if command == "dump":  # kafka-dump-log.sh's words for the same entry
            assert code == 2 and ("a log dir; name a partition dir or files" in err
                                  if which == "garbage" else "byte position 0" in err), err
            continue
        assert code == 2 and read.value.reason in err and "byte position 0" in err, (command, err)
    assert not (tmp_path / "lake").exists()
    code, out, _ = run(capsys, "verify", path)
    assert code == 1 and read.value.reason in out
    code, out, _ = run(capsys, "info", path)
    assert code == 0 and "g-0" in out and "unclean tail in segment 0" in out
    if which == "garbage":
        before = files(path)
        code, out, _ = run(capsys, "recover", path)
        assert code == 1 and "cut " in out and files(path) == before


@pytest.mark.parametrize("where", ["entry header", "batch body"])
def test_a_damaged_segment_compaction_would_rewrite_is_an_error_and_nothing_is_lost(
        capsys, logs, where):
    """A broken entry header stops the walk the plan makes: the plan fails already. A broken
    batch body (only its checksum tells) fails the execute run, before anything is swapped."""
    seg = sorted((logs / "orders-0").glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    second = 12 + int.from_bytes(data[8:12], "big")  # where the second entry starts
    at = second + 8 if where == "entry header" else 200  # its size field, or inside a batch
    data[at:at + 60] = b"\x07" * 60
    seg.write_bytes(bytes(data))
    before = files(logs)
    args = ["compact", logs, "--force", "--high-watermark", "log-end", "--now", NOW,
            "--config", "cleanup.policy=compact"]
    code, out, err = run(capsys, *args)
    assert code == (2 if where == "entry header" else 1), out + err
    code, out, err = run(capsys, *args, "--execute")
    assert code == 2 and str(seg) in err and not out, out + err
    assert files(logs) == before  # the damaged segment's bytes were not dropped


@pytest.mark.parametrize("command", ["compact", "retain", "erase", "migrate", "migrate-pattern",
                                     "restore"])
def test_a_topic_that_is_not_there_is_an_error_listing_the_topics(capsys, tmp_path, logs,
                                                                   command):
    before = files(logs)
    (tmp_path / "keys.txt").write_text("k1\n")
    args = {"compact": ["compact", logs, "--topic", "ordres"],
            "retain": ["retain", logs, "--topic", "ordres"],
            "erase": ["erase", logs, "--topic", "ordres", "--keys", tmp_path / "keys.txt",
                      "--execute"],
            "migrate": ["migrate", logs, tmp_path / "lake", "--topic", "ordres"],
            "migrate-pattern": ["migrate", logs, tmp_path / "lake", "--topic-pattern", "ord"],
            "restore": ["restore", tmp_path / "table", tmp_path / "back", "--topic", "ordres"]
            }[command]
    if command == "restore":
        migrate(logs, tmp_path / "table", layout="single")
    code, out, err = run(capsys, *args)
    assert code == 2 and not out and len(err.strip().splitlines()) == 1, out + err
    assert ("no topic matches 'ord'" if command == "migrate-pattern" else
            "topic(s) ordres not found") in err and "topics there: orders, users" in err, err
    assert files(logs) == before and not (tmp_path / "lake").exists()
    assert not (tmp_path / "back").exists()


@pytest.mark.parametrize("command", ["info", "verify", "dump", "rebuild-index"])
def test_a_partition_dir_name_with_a_typo_is_an_error(capsys, logs, command):
    code, _, err = run(capsys, command, logs / "ordres-0")
    assert code == 2 and "ordres-0" in err


# --- when a command writes, and its exit codes --------------------------------------------


def _plan_execute_twice(capsys, root: Path, args: list, execute: list, *, plan_says: str,
                        done_says: str, nothing_says: str) -> None:
    """The plan changes no byte and exits 1; the execute run exits 0; then both a plan and an
    execute run have nothing to do: exit 0 and no byte changed."""
    before = files(root)
    code, out, _ = run(capsys, *args)
    assert code == 1 and plan_says in out, out
    assert files(root) == before
    code, out, _ = run(capsys, *args, *execute)
    assert code == 0 and done_says in out, out
    after = files(root)
    assert after != before
    for extra in ([], execute):  # run twice: the second run has nothing to do
        code, out, _ = run(capsys, *args, *extra)
        assert code == 0 and nothing_says in out, (extra, out)
    assert files(root) == after


def test_compact_plans_unless_execute_and_a_second_run_plans_nothing(capsys, logs):
    _plan_execute_twice(capsys, logs, ["compact", logs, "--force", "--high-watermark",
                                       "log-end", "--now", NOW, "--config",
                                       "cleanup.policy=compact", "--topic", "orders"],
                        ["--execute"], plan_says="would clean 1 partitions",
                        done_says="cleaned 1 partitions", nothing_says=" 0 partitions")


def test_retain_plans_unless_execute(capsys, logs):
    _plan_execute_twice(capsys, logs, ["retain", logs, "--high-watermark", "log-end", "--now",
                                       NOW, "--config", "retention.ms=86400000"],
                        ["--execute"], plan_says="would delete", done_says="deleted",
                        nothing_says=" 0 segments, 0 bytes")


def test_recover_plans_unless_execute(capsys, tmp_path):
    logs = v2_log(tmp_path, "none")
    victim = segments(logs)[1]
    data, _ = damage("bit-flip", bytearray(victim.read_bytes()), np.random.default_rng(2))
    victim.write_bytes(bytes(data))
    _plan_execute_twice(capsys, logs, ["recover", logs], ["--execute"],
                        plan_says="run again with --execute", done_says="did ",
                        nothing_says="nothing to do")


def test_rebuild_index_plans_unless_execute(capsys, logs):
    (logs / "orders-0" / "00000000000000000000.index").unlink()
    _plan_execute_twice(capsys, logs, ["rebuild-index", logs], ["--execute"],
                        plan_says="would write 1 index files", done_says="wrote 1 index files",
                        nothing_says="nothing to rebuild")


def test_erase_plans_unless_execute(capsys, tmp_path, logs):
    (tmp_path / "keys.txt").write_text("k7\nk13\n")
    args = ["erase", logs, "--topic", "orders", "--keys", tmp_path / "keys.txt"]
    _plan_execute_twice(capsys, logs, args, ["--execute"],
                        plan_says="30 records to erase", done_says="30 records erased",
                        nothing_says="orders: 0 records")
    code, out, _ = run(capsys, *args, "--check")
    assert code == 0 and "0 records left" in out


def test_reconcile_plans_unless_execute(capsys, tmp_path, logs):
    shutil.copytree(logs, tmp_path / "copy")
    args = ["reconcile", logs, tmp_path / "copy", "--dest", tmp_path / "new"]
    code, out, _ = run(capsys, *args)
    assert code == 1 and "would write 2 partitions" in out and not (tmp_path / "new").exists()
    code, out, _ = run(capsys, *args, "--execute")
    assert code == 0 and "wrote 2 partitions" in out
    assert kl.read_log(tmp_path / "new").equals(kl.read_log(logs))
    code, _, err = run(capsys, *args, "--execute")  # run twice: the new log dir is there
    assert code == 2 and "is not empty" in err


def test_migrate_writes_unless_dry_run_and_a_second_run_is_up_to_date(capsys, tmp_path, logs):
    args = ["migrate", logs, tmp_path / "lake"]
    code, out, _ = run(capsys, *args, "--dry-run")
    assert code == 1 and "would migrate 2 partitions into 2 tables" in out
    assert "planned: 0 records" not in out and not (tmp_path / "lake").exists()
    code, out, _ = run(capsys, *args)
    assert code == 0 and "done: 1,200 records" in out
    lake = files(tmp_path / "lake")
    for extra in ([], ["--dry-run"]):
        code, out, _ = run(capsys, *args, *extra)
        assert code == 0 and "up to date: nothing new to migrate" in out, out
    assert files(tmp_path / "lake") == lake


def test_restore_writes_unless_dry_run_and_a_second_run_is_up_to_date(capsys, tmp_path, logs):
    migrate(logs, tmp_path / "lake")
    args = ["restore", tmp_path / "lake", tmp_path / "back"]
    code, out, _ = run(capsys, *args, "--dry-run")
    assert code == 1 and "planned: 1,200 records" in out and not (tmp_path / "back").exists()
    code, out, _ = run(capsys, *args)
    assert code == 0 and "done: 1,200 records" in out
    assert kl.read_log(tmp_path / "back").equals(kl.read_log(logs))
    for extra in ([], ["--dry-run"]):
        code, out, _ = run(capsys, *args, *extra)
        assert code == 0 and "up to date: nothing new to restore" in out, out


@pytest.mark.parametrize("path", ["logs", "logs/orders-0", "table"])
def test_restore_of_what_is_not_a_migrate_table_is_one_line(capsys, tmp_path, logs, path):
    (tmp_path / "table").mkdir()
    (tmp_path / "table" / "notes.txt").write_text("x")  # a file among the per-topic tables
    code, out, err = run(capsys, "restore", tmp_path / path, tmp_path / "back")
    assert code == 2 and not out and len(err.strip().splitlines()) == 1, err
    assert "not a Delta table written by kafkalog migrate" in err and "LocalFileSystem" not in err
    if path != "table":
        assert "it holds Kafka log data" in err
    assert not (tmp_path / "back").exists()


def test_read_only_commands_change_nothing_and_exit_0(capsys, logs):
    before = files(logs)
    for args in (["info", logs], ["verify", logs], ["dump", logs / "orders-0"],
                 ["info", "--json", logs]):
        code, out, _ = run(capsys, *args)
        assert code == 0 and out, args
    assert files(logs) == before


def test_a_dump_that_cannot_dump_a_file_exits_2(capsys, logs):
    seg = sorted((logs / "orders-0").glob("*.log"))[0]
    data = seg.read_bytes()
    seg.write_bytes(data[:12 + int.from_bytes(data[8:12], "big")] + bytes(30))  # size 0 next
    code, out, err = run(capsys, "dump", seg)
    assert code == 2 and out.startswith(f"Dumping {seg}") and f"Error dumping {seg}" in err
    assert "baseOffset: 0 " in out  # what could be dumped is printed
    code, _, err = run(capsys, "dump", logs)
    assert code == 2 and "a log dir; name a partition dir or files" in err


# --- recover --salvage: the plan is what the execute run does -----------------------------


def test_the_salvage_plan_lists_every_action_the_execute_run_takes(capsys, tmp_path):
    """Damage a salvage rewrite keeps around, damage at the log's end (a cut: the log end
    moves back, so the producer snapshot there goes and a new one is written) and a broken
    time index, after a crash with nothing flushed (no recovery point: the broker's load
    recovers every segment): the dry run plans all of it, action for action, and changes no
    byte."""
    logs = v2_log(tmp_path, "none")
    crashed(logs)
    segs = segments(logs)
    data, _ = damage("bit-flip", bytearray(segs[1].read_bytes()), np.random.default_rng(1))
    segs[1].write_bytes(bytes(data))
    last = bytearray(segs[-1].read_bytes())
    last[-20] ^= 0xFF
    segs[-1].write_bytes(bytes(last))
    tindex = segs[0].with_suffix(".timeindex")
    tindex.write_bytes(tindex.read_bytes()[:-12] + bytes(12))
    before = files(logs)
    plan = recover([logs], salvage=True)
    assert files(logs) == before
    kinds = {(a.kind, Path(a.path).suffix) for a in plan.actions}
    assert {("salvage-segment", ".log"), ("cut-tail", ".log"), ("write-file", ".timeindex"),
            ("write-file", ".snapshot"), ("quarantine-file", ".snapshot")} <= kinds, kinds
    code, out, _ = run(capsys, "recover", "--salvage", logs)  # the CLI prints the same plan
    assert code == 1 and f"would do {len(plan.actions)} actions" in out
    done = recover([logs], salvage=True, execute_plan=True)
    assert [a.to_dict() for a in plan.actions] == [a.to_dict() for a in done.actions]
    assert plan.to_dict()["partitions"][0]["damage"] == done.to_dict()["partitions"][0]["damage"]
    assert [p.log_end for p in plan.partitions] == [p.log_end for p in done.partitions]
    assert kl.verify(logs).ok and not recover([logs], salvage=True).changed


# --- the spark-submit jobs: the same rules, the same exit codes ------------------------------


@pytest.mark.parametrize("name", ["compact", "retain"])
def test_the_jobs_follow_the_same_rules(capsys, tmp_path, logs, odd, name):
    """The jobs that plan on the driver without a Spark session: a plan exits 1, the rules'
    errors are one line and exit 2 (``run_job``), as in the CLI."""
    from kafkalog_spark.report import run_job
    from test_reconcile import _job

    job = _job(name)
    config = "cleanup.policy=compact" if name == "compact" else "retention.ms=86400000"
    args = ["--high-watermark", "log-end", "--now", str(NOW), "--config", config]
    args += ["--force"] if name == "compact" else []
    before = files(logs)
    assert run_job(lambda: job.main([*args, str(logs)])) == 1  # a plan that would change
    assert files(logs) == before
    capsys.readouterr()
    for bad in ([str(odd["empty"])], [str(odd["loose"].parent)]):
        assert run_job(lambda: job.main([*args, *bad])) == 2
        err = capsys.readouterr().err
        assert err.startswith("Error: no Kafka data here") and len(err.splitlines()) == 1, err
    if name == "compact":  # the retain job has no --topic
        assert run_job(lambda: job.main([*args, "--topic", "ordres", str(logs)])) == 2
        assert "topics there: orders, users" in capsys.readouterr().err
