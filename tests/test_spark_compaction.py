"""Compaction with engine="spark": same bytes as the local path (key shuffle + group rewrites),
nothing left behind, a crash in the swap recovered."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kafkalog_spark import verify
from kafkalog_spark.codec.files import checkpoints as C
from kafkalog_spark.compaction.compact import compact
from kafkalog_spark.compaction.plan import GroupTask
from kafkalog_spark.errors import KafkaLogError
from kafkalog_spark.codec.files import naming as N
from kafkalog_spark.storage.atomic import write_checkpoint_file
from kafkalog_spark.log.staging import STAGING_INFIX

from test_compaction import (REAL, D, Crash, T, _find, batches, build_partition, crash_at,
                             prepare_real, rec, rows, txn_log, worked_example)
from test_compaction_passes import same_log

pytestmark = pytest.mark.spark


def leftovers(root: Path) -> list[str]:
    """Staging folders next to the log dir and .cleaned/.swap files inside it."""
    return sorted([p.name for p in root.parent.iterdir() if STAGING_INFIX in p.name]
                  + [p.name for p in root.rglob("*") if p.suffix in (".cleaned", ".swap")])


def same_files(a: Path, b: Path, names: list[str]) -> None:
    for name in names:
        for f in sorted((a / name).iterdir()):
            if f.suffix in (".log", ".index", ".timeindex", ".txnindex"):
                assert (b / name / f.name).read_bytes() == f.read_bytes(), f.name


def test_spark_engine_matches_local(spark, tmp_path):
    log_dir = tmp_path / "local"
    build_partition(log_dir, txn_log(), topic="a")
    segs = [[rec(i, f"k{i % 7}".encode(), None if i % 11 == 0 else b"v%d" % i) for i in range(j, j + 10)]
            for j in range(0, 40, 10)] + [[]]
    build_partition(log_dir, segs, topic="b", partition=3)
    other = tmp_path / "spark"
    shutil.copytree(log_dir, other)
    opts = {"cleanup.policy": "compact", "segment.bytes": 1500}
    local = compact(log_dir, now_ms=T, execute=True, force=True, options=opts)
    dist = compact(other, now_ms=T, execute=True, force=True, options=opts, engine="spark",
                   spark=spark)
    assert rows(other) == rows(log_dir)
    for name in ("a-0", "b-3"):
        assert batches(other / name) == batches(log_dir / name)
    same_files(log_dir, other, ["a-0", "b-3"])
    assert verify(other, deep=True).ok
    for key in ("records_kept", "bytes_written", "batches_copied", "batches_rebuilt"):
        assert dist.metrics[key] == local.metrics[key], key
    assert dist.metrics["shuffle_seconds"] >= 0 and dist.metrics["rewrite_seconds"] >= 0
    assert leftovers(other) == []


def test_uncompacted_clean_range_takes_the_semi_join(spark, tmp_path):
    """A cleaner checkpoint over a range that was never compacted: keys with several clean
    records and no dirty one keep all of them (the semi-join pass), as the local engine does."""
    log_dir = tmp_path / "local"
    key = lambda i: (b"c%d" % (i % 3)) if i < 16 else (b"d%d" % (i % 4))  # noqa: E731
    segs = [[rec(i, key(i), b"v%d" % i) for i in range(j, j + 8)]
            for j in range(0, 32, 8)] + [[rec(32, b"z", b"last")]]
    build_partition(log_dir, segs)
    write_checkpoint_file(log_dir / N.CLEANER_OFFSET_CHECKPOINT,
                          C.format_offset_checkpoint({("t", 0): 16}))
    other = tmp_path / "spark"
    shutil.copytree(log_dir, other)
    opts = {"cleanup.policy": "compact"}
    compact(log_dir, now_ms=T, execute=True, force=True, options=opts)
    compact(other, now_ms=T, execute=True, force=True, options=opts, engine="spark", spark=spark)
    kept = [r[0] for r in rows(other)]
    assert kept == [r[0] for r in rows(log_dir)]
    assert kept[:16] == list(range(16))  # clean keys absent from the dirty range: all kept
    same_files(log_dir, other, ["t-0"])
    assert leftovers(other) == []


def test_crash_in_the_swap_then_recover(spark, tmp_path):
    """The Spark engine's swap renames the task-written .cleaned files: a crash at each step
    of it, then recover, gives the old or the new records, never a mix."""
    from kafkalog_spark.recovery.recover import recover

    opts = {"cleanup.policy": "compact", "delete.retention.ms": D}
    ref, _ = worked_example(tmp_path / "ref")
    old = rows(ref)
    labels: list[str] = []
    compact(ref, now_ms=T, execute=True, options=opts, engine="spark", spark=spark,
            step=labels.append)
    new = rows(ref)
    assert not any(label.startswith("write 00000000000000000000.log") for label in labels)
    for k in sorted({0, len(labels) // 2, len(labels) - 1}):
        log_dir, _ = worked_example(tmp_path / f"c{k}")
        with pytest.raises(Crash):
            compact(log_dir, now_ms=T, execute=True, options=opts, engine="spark", spark=spark,
                    step=crash_at(k))
        assert not [p for p in log_dir.parent.iterdir() if STAGING_INFIX in p.name]
        recover(log_dir, execute_plan=True)
        assert rows(log_dir) in (old, new), labels[k]
        assert verify(log_dir, deep=True).ok, labels[k]


def test_error_before_the_swap_removes_what_tasks_wrote(spark, tmp_path):
    """A source segment vanishing after planning fails the job naming the file; no .cleaned
    file or staging folder stays, and once the file is back the log is unchanged."""
    import kafkalog_spark.compaction.spark_job as job

    log_dir, _ = worked_example(tmp_path)
    before = rows(log_dir)
    real, moved = job.group_items, []

    def vanish(plans):
        items = real(plans)
        src = Path(items[-1][0].sources[-1].log)
        src.rename(tmp_path / "moved.log")
        moved.append(src)
        return items

    job.group_items = vanish
    try:
        with pytest.raises(Exception) as info:
            compact(log_dir, now_ms=T, execute=True, options={"cleanup.policy": "compact"},
                    engine="spark", spark=spark)
    finally:
        job.group_items = real
    assert moved[0].name in str(info.value)
    assert leftovers(log_dir) == []
    (tmp_path / "moved.log").rename(moved[0])
    assert rows(log_dir) == before and verify(log_dir).ok


def spark_variants(spark, tmp_path: Path, build) -> dict[str, Path]:
    """The same log compacted by the local engine and by the Spark engine with key digests and
    with exact keys (and the local engine with exact keys)."""
    out = {}
    for name, kw in (("local", {}), ("local-exact", {"exact_keys": True}),
                     ("spark", {"engine": "spark", "spark": spark}),
                     ("spark-exact", {"engine": "spark", "spark": spark, "exact_keys": True})):
        log_dir = tmp_path / name
        build(log_dir)
        compact(log_dir, now_ms=T, execute=True, force=True,
                options={"cleanup.policy": "compact", "segment.bytes": 1500}, **kw)
        assert leftovers(log_dir) == []
        out[name] = log_dir
    return out


def test_digests_and_exact_keys_agree_on_generated_topics(spark, tmp_path):
    def build(log_dir: Path) -> None:
        build_partition(log_dir, txn_log(), topic="a")
        segs = [[rec(i, b"k%d" % (i * 5 % 17), None if i % 11 == 0 else b"v%d" % i)
                 for i in range(j, j + 10)] for j in range(0, 60, 10)] + [[]]
        build_partition(log_dir, segs, topic="b", partition=3)

    runs = spark_variants(spark, tmp_path, build)
    for name, log_dir in runs.items():
        same_log(runs["local"], log_dir)


@pytest.mark.fixtures
@pytest.mark.parametrize("repo,name", REAL)
def test_digests_and_exact_keys_agree_on_real_fixtures(spark, shared_fixtures, tmp_path, repo,
                                                       name):
    src = _find(shared_fixtures, repo, name)
    runs = spark_variants(spark, tmp_path, lambda log_dir: prepare_real(src, log_dir, name))
    for log_dir in runs.values():
        same_log(runs["local"], log_dir)
        assert verify(log_dir, deep=True).ok


@pytest.mark.parametrize("exact_keys", [False, True])
def test_many_key_tasks_and_buckets_give_the_same_bytes(spark, tmp_path, monkeypatch,
                                                        exact_keys):
    """Row bounds small enough that the key pass runs as many map tasks and reduce tasks
    (buckets) as a huge round would: every key's rows meet in one bucket from several chunks,
    and the result is the local engine's, byte for byte."""
    import kafkalog_spark.compaction.key_shuffle as shuffle
    import kafkalog_spark.compaction.spark_job as job

    log_dir = tmp_path / "local"
    build_partition(log_dir, txn_log(), topic="a")
    segs = [[rec(i, b"k%d" % (i * 5 % 17), None if i % 11 == 0 else b"v%d" % i)
             for i in range(j, j + 10)] for j in range(0, 60, 10)] + [[]]
    build_partition(log_dir, segs, topic="b", partition=3)
    other = tmp_path / "spark"
    shutil.copytree(log_dir, other)
    opts = {"cleanup.policy": "compact", "segment.bytes": 400}
    compact(log_dir, now_ms=T, execute=True, force=True, options=opts, exact_keys=exact_keys)
    chunked = []
    chunk_tasks = job.chunk_tasks
    monkeypatch.setattr(job, "KEY_CHUNK_ROWS", 10)
    monkeypatch.setattr(shuffle, "ROWS_PER_BUCKET", 7)
    monkeypatch.setattr(job, "chunk_tasks",
                        lambda *a, **kw: chunked.append(chunk_tasks(*a, **kw)) or chunked[-1])
    compact(other, now_ms=T, execute=True, force=True, options=opts, engine="spark",
            spark=spark, exact_keys=exact_keys)
    keys = [c for c in chunked if isinstance(c[0][0], tuple) and isinstance(c[0][0][0], GroupTask)]
    assert len(keys) == 1 and len(keys[0]) > 4  # the key tasks: several per partition
    assert shuffle.bucket_count(shuffle.most_rows(60, 10 << 20), 2) > 4
    same_files(log_dir, other, ["a-0", "b-3"])
    assert rows(other) == rows(log_dir) and leftovers(other) == []


def test_damage_found_while_planning_is_a_typed_error_and_nothing_changes(spark, tmp_path):
    """The Spark engine plans in tasks: a damaged batch its planning reads is the typed error
    the local engine raises (file and byte position), and no byte of the log dir changes."""
    segs = [[rec(i, b"k%d" % (i % 3), b"v%d" % i) for i in range(j, j + 5)] for j in (0, 5, 10)]
    build_partition(tmp_path / "logs", segs + [[]], topic="t")
    seg = tmp_path / "logs" / "t-0" / N.segment_file_name(5, N.LOG)
    data = bytearray(seg.read_bytes())
    second = 12 + int.from_bytes(data[8:12], "big")  # where the segment's second batch starts
    data[second + 8:second + 12] = (10**6).to_bytes(4, "big")  # its length runs past the end
    seg.write_bytes(bytes(data))
    def files():  # (the log dir's .lock, which hold_lock leaves as a broker does, aside)
        return {p: p.read_bytes() for p in (tmp_path / "logs").rglob("*")
                if p.is_file() and p.name != ".lock"}

    before = files()
    opts = {"cleanup.policy": "compact"}
    errors = []
    for engine in ("local", "spark"):
        with pytest.raises(KafkaLogError) as err:
            compact(tmp_path / "logs", now_ms=T, execute=True, force=True, options=opts,
                    engine=engine, spark=spark)
        errors.append((type(err.value), str(err.value)))
        assert files() == before
        assert leftovers(tmp_path / "logs") == []
    assert errors[0] == errors[1]
    assert str(seg) in errors[1][1] and f"byte position {second}" in errors[1][1], errors[1][1]


def test_the_driver_reads_no_segment_to_plan(spark, tmp_path, monkeypatch):
    """The partitions' planning (every segment's batch headers: producer state, transaction
    facts) runs in Spark tasks, not on the driver: with the driver's planning disabled, the
    Spark engine's compaction still gives the local engine's result."""
    import kafkalog_spark.compaction.plan as plan
    import kafkalog_spark.compaction.spark_job as job

    segs = [[rec(i, b"k%d" % (i % 4), b"v%d" % i) for i in range(j, j + 6)] for j in (0, 6, 12)]
    for name in ("local", "spark"):
        for p in (0, 1, 2):
            build_partition(tmp_path / name, segs[2 * p:] + [[]], topic="t", partition=p)
    opts = {"cleanup.policy": "compact"}
    planned = compact(tmp_path / "local", now_ms=T, force=True, options=opts).to_dict()
    compact(tmp_path / "local", now_ms=T, execute=True, force=True, options=opts)

    def refuse(*a, **k):
        raise AssertionError("the driver replayed a partition's producers")

    monkeypatch.setattr(plan, "replay_producers", refuse)
    monkeypatch.setattr(job, "PLAN_CHUNK_BYTES", 1)  # a task per partition: plans kept in order
    dry = compact(tmp_path / "spark", now_ms=T, force=True, options=opts, engine="spark",
                  spark=spark)
    assert dry.to_dict()["partitions"] == planned["partitions"] and not dry.executed
    assert dry.to_dict()["skipped"] == planned["skipped"]
    dist = compact(tmp_path / "spark", now_ms=T, execute=True, force=True, options=opts,
                   engine="spark", spark=spark)
    assert dist.metrics["partitions_cleaned"] == 2  # t-2: the active segment alone
    assert [p.state.partition for p in dist.plans] == [0, 1]
    assert [s.partition for s in dist.skipped] == [2]
    assert rows(tmp_path / "spark") == rows(tmp_path / "local")
    same_files(tmp_path / "local", tmp_path / "spark", ["t-0", "t-1", "t-2"])
    with pytest.raises(AssertionError, match="replayed"):  # the local engine plans here
        compact(tmp_path / "spark", now_ms=T, execute=True, force=True, options=opts)


def test_the_replaced_files_are_removed_in_tasks(spark, tmp_path, monkeypatch):
    """The swaps' replaced files (``.deleted``) are removed by tasks after the checkpoint, not
    on the driver: with the driver's removal refused, the Spark engine still leaves none, and
    the same bytes as the local engine; a second run finds nothing left to clean."""
    from kafkalog_spark.storage.local import LocalStorage

    segs = [[rec(i, b"k%d" % (i % 3), b"v%d" % i) for i in range(j, j + 6)] for j in (0, 6, 12)]
    for name in ("local", "spark"):
        for p in (0, 1):
            build_partition(tmp_path / name, segs + [[]], topic="t", partition=p)
    opts = {"cleanup.policy": "compact"}  # one cleaned segment for the three old ones
    compact(tmp_path / "local", now_ms=T, execute=True, force=True, options=opts)

    remove = LocalStorage.remove

    def refuse(self, path, **kw):  # in this process only: the tasks run in Python workers
        if str(path).endswith(f".{N.DELETED}"):
            raise AssertionError(f"the driver removed {path}")
        remove(self, path, **kw)

    monkeypatch.setattr(LocalStorage, "remove", refuse)
    before = {p.name for p in (tmp_path / "spark" / "t-0").iterdir()}
    dist = compact(tmp_path / "spark", now_ms=T, execute=True, force=True, options=opts,
                   engine="spark", spark=spark)
    assert dist.metrics["partitions_cleaned"] == 2
    gone = before - {p.name for p in (tmp_path / "spark" / "t-0").iterdir()}
    assert len(gone) >= 3  # several old segments were replaced (and removed)
    assert not [p for p in (tmp_path / "spark").rglob("*") if N.DELETED in p.name]
    assert leftovers(tmp_path / "spark") == []
    same_files(tmp_path / "local", tmp_path / "spark", ["t-0", "t-1"])
    again = compact(tmp_path / "spark", now_ms=T, execute=True, options=opts, engine="spark",
                    spark=spark)
    assert again.metrics.get("partitions_cleaned", 0) == 0
