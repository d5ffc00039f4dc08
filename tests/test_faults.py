"""Fault injection (issue 7): the writer commit, compaction swap, retention delete, recover and
the Delta migration run in a child process that is SIGKILLed at each named step and at seeded
random moments, given a file size limit (EFBIG) or a full tmpfs (ENOSPC), or has a file removed
under it. After ``recover --execute`` (and a re-run of the operation) every log verifies and the
records are exactly the state before or after the operation (offsets, keys, values, timestamps):
nothing lost, nothing duplicated."""

from __future__ import annotations

import random
import re
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pytest

import kafkalog_spark as kl
from kafkalog_spark.compaction.compact import compact
from kafkalog_spark.errors import KafkaLogError
from kafkalog_spark.codec.files import naming as N
from kafkalog_spark.inspect.verify import verify
from kafkalog_spark.recovery.recover import recover
from kafkalog_spark.retention.retain import retain

from faults import Outcome, fill, run_forked, run_script, tmpfs
from test_read_write import records
from test_recover import crashed

pytestmark = pytest.mark.jit_only  # processes and files, not what kernels compute

COLS = ["topic", "partition", "offset", "key", "value", "timestamp"]
SEGMENT = 6 * 1024
T0 = 1_700_000_000_000
HOUR = 3_600_000


def rows(log_dir: Path) -> list[dict]:
    if not log_dir.exists():
        return []
    return kl.read_log(log_dir).select(COLS).to_pylist()


def settle(log_dir: Path) -> None:
    """What an operator does after a crash: recover, then every log must verify."""
    recover(log_dir, execute_plan=True)
    report = verify(log_dir, deep=True)
    assert report.ok, report.problems
    assert not recover(log_dir).changed  # a second recover has nothing left to do


def same_step(a: str, b: str) -> bool:
    """Step labels of two runs name the same action (paths differ only in their folders)."""
    return re.sub(r"\S*/", "", a) == re.sub(r"\S*/", "", b)


def assert_typed(out: Outcome) -> None:
    """A failed child ended in a typed error that names a file, not a raw traceback."""
    assert out.error is not None, out
    assert out.error["kafkalog"], out.error["traceback"]
    assert out.error["file"], out.error


# --- the operations (each ``op(step, **kwargs)``, run in the child) ---------------------------

NEW = records(110, seed=7)
FRESH = records(80, topic="fresh", seed=8)


def make_write_base(log_dir: Path) -> Path:
    kl.write_log(records(120), log_dir, segment_bytes=SEGMENT, max_batch_records=20)
    return log_dir


def op_write(step, log_dir: str, mode: str, table: pa.Table = NEW) -> None:
    kl.write_log(table, log_dir, segment_bytes=SEGMENT, max_batch_records=20, mode=mode, step=step)


def make_compact_base(log_dir: Path) -> Path:
    n = 120
    table = pa.table({"key": [f"k{i % 23}".encode() for i in range(n)],
                      "value": [None if i % 31 == 0 else f"v{i}".encode() * 8 for i in range(n)],
                      "timestamp": pa.array([T0 + i for i in range(n)], pa.int64())
                      .cast(pa.timestamp("ms"))})
    kl.write_log(table, log_dir, topic="t", partition=0, segment_bytes=2048, max_batch_records=5)
    return log_dir


COMPACT_OPTS = {"cleanup.policy": "compact", "delete.retention.ms": 86_400_000,
                "min.cleanable.dirty.ratio": 0.01}


def op_compact(step, log_dir: str) -> None:
    compact(log_dir, now_ms=T0 + HOUR, options=COMPACT_OPTS, execute=True, step=step)


def make_retain_base(log_dir: Path) -> Path:
    n = 40
    table = pa.table({"key": [f"k{i}".encode() for i in range(n)],
                      "value": [b"x" * 100 for _ in range(n)],
                      "timestamp": pa.array([T0 + i * HOUR for i in range(n)], pa.int64())
                      .cast(pa.timestamp("ms"))})
    kl.write_log(table, log_dir, topic="t", partition=0, segment_bytes=1500, max_batch_records=2)
    return log_dir


RETAIN_OPTS = {"retention.ms": 25 * HOUR}


def op_retain(step, log_dir: str) -> None:
    retain(log_dir, now_ms=T0 + 39 * HOUR, options=RETAIN_OPTS, execute=True, step=step)


def make_damaged(log_dir: Path) -> Path:
    kl.write_log(records(300), log_dir, segment_bytes=12 * 1024, max_batch_records=40)
    pdir = log_dir / "orders-0"
    segs = sorted(pdir.glob("*.log"))
    data = bytearray(segs[1].read_bytes())
    data[len(data) // 2] ^= 0x10  # a payload bit: CRC mismatch, the log is cut there
    segs[1].write_bytes(data)
    segs[0].with_suffix(".index").unlink()
    (pdir / "00000000000000099999.index").write_bytes(bytes(16))
    crashed(log_dir)  # nothing flushed: a broker's load recovers (and checks) every segment
    return log_dir


def op_recover(step, log_dir: str) -> None:
    recover(log_dir, execute_plan=True, step=step)


# --- expected states ------------------------------------------------------------------------


class Case:
    """One operation: how to build its input, run it, and judge what a fault left."""

    def __init__(self, name, make, op, kwargs, judge):
        self.name, self.make, self.op, self.kwargs, self.judge = name, make, op, kwargs, judge

    def build(self, root: Path) -> Path:
        return self.make(root / "logs")

    def reference(self, root: Path) -> tuple[list[dict], list[dict], list[str]]:
        """(rows before, rows after, step labels) of an uninterrupted run."""
        log_dir = self.build(root / "ref")
        try:
            before = rows(log_dir)
        except KafkaLogError:  # the damaged input of ``recover`` does not read
            before = []
        labels: list[str] = []
        self.op(labels.append, str(log_dir), **self.kwargs)
        return before, rows(log_dir), labels


def judge_append(log_dir: Path, before, after, case: Case) -> None:
    got = rows(log_dir)
    # old records untouched; the new ones a prefix of complete segments (never a part twice)
    assert got[:len(before)] == before and got == after[:len(got)]
    table = case.kwargs.get("table", NEW)
    op_write(None, str(log_dir), "append", table.slice(len(got) - len(before)))  # the producer resumes
    assert rows(log_dir) == after
    assert verify(log_dir, deep=True).ok


def judge_all_or_nothing(rerun: bool):
    def judge(log_dir: Path, before, after, case: Case) -> None:
        got = rows(log_dir)
        assert got in (before, after), (len(got), len(before), len(after))
        if rerun:
            case.op(None, str(log_dir), **case.kwargs)
            assert rows(log_dir) == after
            assert verify(log_dir, deep=True).ok
    return judge


def judge_new_partition(log_dir: Path, before, after, case: Case) -> None:
    got = rows(log_dir)
    fresh = [r for r in got if r["topic"] == "fresh"]
    assert [r for r in got if r["topic"] != "fresh"] == before
    assert fresh in ([], [r for r in after if r["topic"] == "fresh"])
    if not fresh:
        case.op(None, str(log_dir), **case.kwargs)
    assert rows(log_dir) == after


def judge_retain(log_dir: Path, before, after, case: Case) -> None:
    got = rows(log_dir)
    start = after[0]["offset"]
    assert [r for r in got if r["offset"] >= start] == after
    # below the new log start only untouched records may remain, and only the newest of them:
    # segments are deleted oldest first (the re-run deletes the rest)
    below = [r for r in got if r["offset"] < start]
    old_below = [r for r in before if r["offset"] < start]
    assert below == old_below[len(old_below) - len(below):]
    case.op(None, str(log_dir), **case.kwargs)
    assert rows(log_dir) == after


def judge_compact(log_dir: Path, before, after, case: Case) -> None:
    assert rows(log_dir) in (before, after)
    compact(log_dir, now_ms=T0 + HOUR, options=COMPACT_OPTS, execute=True, force=True)
    assert rows(log_dir) == after


def judge_recover(log_dir: Path, before, after, case: Case) -> None:
    assert rows(log_dir) == after


CASES = {
    "write-append": Case("write-append", make_write_base, op_write, {"mode": "append"}, judge_append),
    "write-overwrite": Case("write-overwrite", make_write_base, op_write, {"mode": "overwrite"},
                            judge_all_or_nothing(rerun=True)),
    "write-new-partition": Case("write-new-partition", make_write_base, op_write,
                                {"mode": "append", "table": FRESH}, judge_new_partition),
    "compact": Case("compact", make_compact_base, op_compact, {}, judge_compact),
    "retain": Case("retain", make_retain_base, op_retain, {}, judge_retain),
    "recover": Case("recover", make_damaged, op_recover, {}, judge_recover),
}


@pytest.fixture(scope="module")
def references(tmp_path_factory) -> dict[str, tuple[list[dict], list[dict], list[str]]]:
    root = tmp_path_factory.mktemp("references")
    return {name: case.reference(root / name) for name, case in CASES.items()}


def test_references_change_something(references) -> None:
    for name, (before, after, labels) in references.items():
        assert before != after and len(labels) >= 3, name


# --- SIGKILL at every step ------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CASES))
def test_sigkill_at_every_step(name: str, references, tmp_path: Path) -> None:
    case = CASES[name]
    before, after, labels = references[name]
    for k in range(1, len(labels) + 1):
        log_dir = case.build(tmp_path / f"k{k}")
        out = run_forked(case.op, kill_at=k, log_dir=str(log_dir), **case.kwargs)
        assert out.killed and same_step(out.steps[-1], labels[k - 1]), (k, out)
        settle(log_dir)
        if name == "recover":
            recover(log_dir, execute_plan=True)
        case.judge(log_dir, before, after, case)
        shutil.rmtree(tmp_path / f"k{k}")


# --- SIGKILL at random moments ----------------------------------------------------------------


@pytest.mark.parametrize("name", list(CASES))
def test_sigkill_at_random_moments(name: str, references, tmp_path: Path) -> None:
    """Kills between and inside steps (seeded delays over a probe run's duration). Where the
    kills land depends on the machine's load, so nothing here asserts that: every landing is
    judged; the step-exact kills above cover each phase deterministically."""
    case = CASES[name]
    before, after, _ = references[name]
    probe = case.build(tmp_path / "probe")
    t = time.perf_counter()
    out = run_forked(case.op, log_dir=str(probe), **case.kwargs)
    duration = time.perf_counter() - t
    assert out.finished, out.error
    rng = random.Random(f"faults-{name}")
    for seed in range(6):
        log_dir = case.build(tmp_path / f"s{seed}")
        out = run_forked(case.op, kill_after=rng.uniform(0, duration * 1.1), log_dir=str(log_dir),
                         **case.kwargs)
        assert out.killed or out.finished, out
        settle(log_dir)
        case.judge(log_dir, before, after, case)
        shutil.rmtree(tmp_path / f"s{seed}")


# --- full disk: a file size limit (EFBIG) ------------------------------------------------------


@pytest.mark.parametrize("name", list(CASES))
def test_file_size_limit(name: str, references, tmp_path: Path) -> None:
    case = CASES[name]
    before, after, _ = references[name]
    for limit in (1, 700, 5000):
        log_dir = case.build(tmp_path / f"l{limit}")
        out = run_forked(case.op, fsize=limit, log_dir=str(log_dir), **case.kwargs)
        assert out.finished or out.error is not None, out
        if limit == 1:  # every operation writes at least one file of more than a byte
            assert out.error is not None and not out.finished, out
        settle(log_dir)
        case.judge(log_dir, before, after, case)
        if out.error is not None:
            assert_typed(out)


def test_compaction_full_disk_error_is_typed(tmp_path: Path) -> None:
    """Regression: writing <segment>.log.cleaned on a full disk was a raw OSError."""
    log_dir = make_compact_base(tmp_path / "logs")
    out = run_forked(op_compact, fsize=700, log_dir=str(log_dir))
    assert_typed(out)


# --- full disk: a small tmpfs (ENOSPC) ---------------------------------------------------------


@pytest.fixture()
def small_fs(tmp_path: Path):
    try:
        with tmpfs(tmp_path / "mnt", "2m") as mnt:
            yield mnt
    except OSError as exc:
        pytest.skip(f"no tmpfs for the ENOSPC test: {exc}")


@pytest.mark.parametrize("name", list(CASES))
def test_disk_full(name: str, references, small_fs: Path) -> None:
    case = CASES[name]
    before, after, _ = references[name]
    failed = 0
    for leave in (0, 8192, 65536):
        root = small_fs / f"f{leave}"
        log_dir = case.build(root)
        filler = fill(small_fs, leave)
        try:
            case.op(None, str(log_dir), **case.kwargs)
        except KafkaLogError as exc:
            failed += 1
            assert exc.file, exc
        filler.unlink()
        settle(log_dir)
        case.judge(log_dir, before, after, case)
        shutil.rmtree(root)
        shutil.rmtree(small_fs / "logs.kafkalog-quarantine", ignore_errors=True)
        for left in small_fs.iterdir():  # staging folders of a failed write are removed
            assert left.name.startswith("f"), left
    assert failed, "the disk never ran full"


# --- a file vanishing mid-job ---------------------------------------------------------------


def victim(name: str, log_dir: Path) -> Path | None:
    """The file another process removes: a staged segment of a write, a compaction output or
    an index the operation is about to replace, rebuild or delete."""
    if name.startswith("write"):
        staged = sorted(log_dir.parent.glob(".logs.kafkalog-staging-*/**/*.log"))
        if staged:
            return staged[0]
    pdirs = sorted(p for p in log_dir.iterdir() if p.is_dir())
    if name == "compact":
        made = sorted(pdirs[0].glob("*.cleaned")) + sorted(pdirs[0].glob("*.swap"))
        if made:
            return made[0]
    files = sorted(pdirs[-1].glob("*.timeindex"))
    return files[0] if files else None


@pytest.mark.parametrize("name", list(CASES))
def test_file_vanishes_mid_job(name: str, references, tmp_path: Path) -> None:
    case = CASES[name]
    before, after, labels = references[name]
    picks = sorted({round(i * (len(labels) - 1) / 4) for i in range(5)})
    for k in picks:
        log_dir = case.build(tmp_path / f"v{k}")
        seen, removed = [0], []

        def step(label: str, *_: object) -> None:
            if seen[0] == k and (p := victim(name, log_dir)) is not None:
                p.unlink()
                removed.append(p)
            seen[0] += 1

        try:
            case.op(step, str(log_dir), **case.kwargs)
        except KafkaLogError as exc:
            assert exc.file and removed, (k, exc)
        assert removed, k
        settle(log_dir)
        case.judge(log_dir, before, after, case)
        shutil.rmtree(tmp_path / f"v{k}")




def test_retention_tolerates_a_vanished_index(tmp_path: Path) -> None:
    """Regression: a file gone between planning and the .deleted renames raised a raw
    FileNotFoundError; Kafka's deleteIfExists skips it."""
    log_dir = make_retain_base(tmp_path / "logs")
    gone = log_dir / "t-0" / N.segment_file_name(0, N.TIME_INDEX)

    def step(label: str) -> None:  # removed after planning, before the renames
        if label.startswith("rename") and gone.exists():
            gone.unlink()

    op_retain(step, str(log_dir))
    assert verify(log_dir, deep=True).ok


# --- the Delta migration (fresh interpreters: deltalake's runtime does not survive a fork) ----


@pytest.fixture()
def delta_case(tmp_path: Path):
    from test_delta_migrate import records as delta_records

    logs = tmp_path / "logs"
    kl.write_log(delta_records(300), logs, segment_bytes=8 * 1024, max_batch_records=25)
    dest = tmp_path / "delta"
    from kafkalog_spark.delta import migrate

    migrate(logs, dest, topics=["orders"])
    kl.write_log(delta_records(150, start=300), logs, segment_bytes=8 * 1024, max_batch_records=25)
    return logs, dest


def assert_delta_matches(logs: Path, dest: Path) -> None:
    from test_delta_migrate import delta_rows, log_rows, parquet_on_disk, table_files

    got = delta_rows(dest / "orders")
    assert len({(r["partition"], r["offset"]) for r in got}) == len(got)  # no duplicates
    assert got == log_rows(logs, topics=["orders"])
    assert parquet_on_disk(dest / "orders") == table_files(dest / "orders")


def delta_rerun(logs: Path, dest: Path, copy: Path) -> None:
    from kafkalog_spark.delta import migrate
    from test_delta_migrate import delta_rows

    n = len(delta_rows(dest / "orders"))
    assert n in (300, 450)  # the commit happened entirely or not at all
    m = migrate(logs, dest, topics=["orders"])
    assert m["records"] == 450 - n
    assert_delta_matches(logs, dest)


DELTA_STEPS = ["planned", "files-written", "before-commit", "committed"]


@pytest.mark.parametrize("kill", [f"step:{k}" for k in range(1, 5)] + ["random:0", "random:1"])
def test_delta_migration_sigkill(delta_case, kill: str) -> None:
    logs, dest = delta_case
    how, _, k = kill.partition(":")
    kw = {"kill_at": int(k)} if how == "step" else {
        "kill_after": random.Random(f"delta-{k}").uniform(0.0, 0.6)}
    out = run_script("faults.ops:migrate_topic", logs=str(logs), dest=str(dest), topic="orders",
                     **kw)
    assert out.killed or out.finished, out
    if how == "step":
        assert out.steps[-1] == DELTA_STEPS[int(k) - 1]
    delta_rerun(logs, dest, dest)


def test_delta_migration_disk_full(delta_case, small_fs: Path) -> None:
    logs, dest = delta_case
    moved = small_fs / "delta"
    shutil.copytree(dest, moved)
    filler = fill(small_fs, 4096)
    from kafkalog_spark.delta import migrate

    with pytest.raises(KafkaLogError) as info:
        migrate(logs, moved, topics=["orders"])
    assert info.value.file and str(moved) in info.value.file, info.value
    filler.unlink()
    delta_rerun(logs, moved, moved)


@pytest.mark.parametrize("limit", [1, 3000])
def test_delta_migration_file_size_limit(delta_case, limit: int) -> None:
    logs, dest = delta_case
    out = run_script("faults.ops:migrate_topic", fsize=limit, logs=str(logs), dest=str(dest),
                     topic="orders")
    assert out.error is not None, out  # every run writes Parquet files of more than 3000 bytes
    assert_typed(out)
    delta_rerun(logs, dest, dest)


@pytest.mark.parametrize("what, when", [("segment", "planned"), ("segment", "files-written"),
                                        ("data file", "files-written")])
def test_delta_migration_file_vanishes(delta_case, tmp_path: Path, what: str, when: str) -> None:
    """A source segment removed after planning (the read, planned from the run's listing,
    fails to open it) or after the read, or a Parquet file of the run removed before the
    commit: the run fails naming the file and commits nothing (the table never records
    offsets over a hole, nor adds a missing file); once the segment is back, the re-run
    migrates every record exactly once."""
    from kafkalog_spark.delta import migrate
    from kafkalog_spark.errors import LogDirError

    logs, dest = delta_case
    segment = sorted((logs / "orders-0").glob("*.log"))[-1]  # holds records not migrated yet
    kept = tmp_path / "kept.log"
    shutil.copy2(segment, kept)
    gone: list[Path] = []

    def step(name: str, path: Path) -> None:
        if name != when:
            return
        if what == "segment":
            segment.unlink()
            gone.append(segment)
        else:
            gone.append(sorted((path).rglob("part-kafkalog-*.parquet"),
                               key=lambda p: p.stat().st_mtime)[-1])
            gone[0].unlink()

    said = "cannot open file" if when == "planned" else f"a {what} vanished while migrating"
    with pytest.raises(LogDirError, match=said) as info:
        migrate(logs, dest, topics=["orders"], step=step)
    assert info.value.file == str(gone[0])
    if what == "segment":
        shutil.copy2(kept, segment)
    delta_rerun(logs, dest, dest)


def test_overwrite_refuses_to_publish_a_replacement_with_a_hole(tmp_path: Path) -> None:
    """Regression: a segment removed from the assembled replacement dir just before the swap
    was published silently (a log starting past offset 0); now the write fails naming it and the
    old partition stays."""
    from kafkalog_spark.errors import LogDirError

    log_dir = make_write_base(tmp_path / "logs")
    before = rows(log_dir)
    gone: list[Path] = []

    def step(label: str) -> None:
        if label.startswith("exchange"):
            gone.append(sorted(tmp_path.glob(".logs.kafkalog-staging-*/_publish/orders-0/*.log"))[0])
            gone[0].unlink()

    with pytest.raises(LogDirError, match="vanished") as info:
        op_write(step, str(log_dir), "overwrite")
    assert info.value.file == str(gone[0])
    assert rows(log_dir) == before and verify(log_dir, deep=True).ok
    assert not list(tmp_path.glob(".logs.kafkalog-staging-*"))


def test_recover_names_the_staging_folder_a_killed_write_left(tmp_path: Path) -> None:
    log_dir = make_write_base(tmp_path / "logs")
    out = run_forked(op_write, kill_at=3, log_dir=str(log_dir), mode="overwrite")
    assert out.killed
    (staging,) = tmp_path.glob(".logs.kafkalog-staging-*")
    report = recover(log_dir, execute_plan=True)
    assert any(str(staging) in n and "did not finish" in n for n in report.notes), report.notes
    assert staging.exists()  # a live Spark write's staging looks the same: never deleted here


@pytest.mark.parametrize("name", list(CASES))
def test_disk_fills_mid_job(name: str, references, small_fs: Path) -> None:
    """Another writer takes the last free byte at a chosen step: the rest of the job meets
    ENOSPC on whatever it writes next (checkpoints, snapshots, quarantine copies, indexes)."""
    case = CASES[name]
    before, after, labels = references[name]
    picks = sorted({round(i * (len(labels) - 1) / 3) for i in range(4)})
    failed: list[str] = []
    for k in picks:
        root = small_fs / f"m{k}"
        log_dir = case.build(root)
        seen, filler = [0], []

        def step(label: str, *_: object) -> None:
            if seen[0] == k:
                filler.append(fill(small_fs, 0))
            seen[0] += 1

        try:
            case.op(step, str(log_dir), **case.kwargs)
        except KafkaLogError as exc:
            assert exc.file, exc
            failed.append(f"{labels[k]}: {exc}")
        assert filler, k
        filler[0].unlink()
        settle(log_dir)
        case.judge(log_dir, before, after, case)
        shutil.rmtree(root)
        shutil.rmtree(small_fs / "logs.kafkalog-quarantine", ignore_errors=True)
    assert failed or name == "retain", "the disk never ran full"
