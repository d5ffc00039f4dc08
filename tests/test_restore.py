"""``kafkalog restore`` (issue 20, parts 1-2): log dir -> migrate -> restore gives back every
record with every field, uncompressed v2 batches byte for byte, transactions with their markers
(read_committed reads the same), for generated data of every codec and every real broker's log
dir; incremental; refusals; a run killed at any step is finished by the next."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner
from kafka.record.memory_records import MemoryRecords

import kafkalog_spark as kl
from kafkalog_spark.cli import cli, main
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.codec.records.schema import HEADERS_TYPE
from kafkalog_spark.delta import migrate
from kafkalog_spark.delta.restore import restore
from kafkalog_spark.errors import InvalidOptionError

from faults import run_script
from test_datasource_read import read, write_txn_partition
from test_verify import REAL_LOG_DIRS

# Delta round trips: heavy for the plain-Python pass, which keeps one (nojit); the kernels they
# use are covered there by the codec tests
pytestmark = pytest.mark.slow
T0 = 1_700_000_000_000
EVERY = ["topic", "partition", "offset", "key", "value", "timestamp", "timestampType", "headers",
         "leaderEpoch", "producerId", "producerEpoch", "sequence", "isTransactional",
         "isControl", "batchBaseOffset", "batchLastOffset"]


def records(n: int, start: int = 0) -> pa.Table:
    idx = range(start, start + n)
    return pa.table({
        "key": [None if i % 11 == 0 else b"k%d" % (i % 50) for i in idx],
        "value": [None if i % 13 == 0 else b"value-%d-" % i * (1 + i % 3) for i in idx],
        "timestamp": pa.array([T0 + i * 7 for i in idx], pa.int64()),
        "headers": pa.array([[{"key": "h", "value": str(i).encode()}, {"key": "n", "value": None}]
                             if i % 3 else [] for i in idx], HEADERS_TYPE)})


def rows(log_dir: Path, **kw) -> list[dict]:
    return kl.read_log(log_dir, include_headers=True, include_metadata=True, **kw).select(
        EVERY).to_pylist()


def entries(log_dir: Path) -> dict[tuple[str, int], bytes]:
    """Every v2 batch of every partition by (partition dir, base offset)."""
    out = {}
    for seg in sorted(log_dir.glob("*-*/*.log")):
        buf = np.frombuffer(seg.read_bytes(), np.uint8)
        t = scan_entries(buf)
        for i in range(len(t)):
            p, n = int(t.position[i]), int(t.entry_size[i])
            out[(seg.parent.name, int(t.offset[i]), int(t.magic[i]), int(t.codec[i]))] = \
                buf[p:p + n].tobytes()
    return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_every_codec(tmp_path, codec):
    src = tmp_path / "logs"
    kl.write_log(records(2000), src, topic="orders", codec=codec, max_batch_records=37,
                 segment_bytes=30_000, leader_epoch=3)
    kl.write_log(records(500, 2000), src, topic="orders", codec=codec, max_batch_records=50,
                 leader_epoch=4)
    migrate(src, tmp_path / "lake", include_control=True)
    result = restore(tmp_path / "lake", tmp_path / "back", segment_bytes=50_000)
    assert result["partitions"][0]["records"] == 2500
    assert rows(tmp_path / "back") == rows(src)
    if codec == "none":  # byte for byte; compressed: the same records (our codecs wrote both)
        assert entries(tmp_path / "back") == entries(src)
    assert kl.verify(tmp_path / "back").ok
    epochs = "orders-0/leader-epoch-checkpoint"
    assert (tmp_path / "back" / epochs).read_text() == (src / epochs).read_text()
    offsets = []
    for seg in sorted((tmp_path / "back" / "orders-0").glob("*.log")):
        recs = MemoryRecords(seg.read_bytes())
        while (batch := recs.next_batch()) is not None:
            offsets.extend(r.offset for r in batch)
    assert offsets == list(range(2500))  # kafka-python reads the restored log


def test_transactions_come_back_with_their_markers(tmp_path):
    src = tmp_path / "logs"
    write_txn_partition(src / "txn-0", with_indexes=False)
    (src / "meta.properties").write_text("version=0\nbroker.id=0\n")
    migrate(src, tmp_path / "lake", include_control=True)
    restore(tmp_path / "lake", tmp_path / "back")
    assert entries(tmp_path / "back") == entries(src)  # markers included, byte for byte
    for level in ("read_uncommitted", "read_committed"):
        opts = {"kafka.isolation.level": level, "includeMetadata": "true"}
        assert read({"path": str(tmp_path / "back"), **opts})[0].to_pylist() == \
            read({"path": str(src), **opts})[0].to_pylist()
    assert (tmp_path / "back" / "txn-0" / "00000000000000000000.txnindex").exists()
    # without markers the transactions would never end: refused, unless asked for
    migrate(src, tmp_path / "plain")
    with pytest.raises(InvalidOptionError, match="transaction markers"):
        restore(tmp_path / "plain", tmp_path / "back2")
    restore(tmp_path / "plain", tmp_path / "back2", allow_open_transactions=True)
    assert [r["offset"] for r in rows(tmp_path / "back2")] == \
        [r["offset"] for r in rows(src)]


@pytest.mark.parametrize("name", REAL_LOG_DIRS)
def test_round_trip_real_brokers_log_dirs(shared_fixtures, tmp_path, name):
    src = shared_fixtures / name
    migrate(src, tmp_path / "lake", layout="single", include_control=True)
    restore(tmp_path / "lake", tmp_path / "back")
    assert rows(tmp_path / "back") == rows(src)
    assert kl.verify(tmp_path / "back").ok
    # uncompressed v2 batches come back byte for byte, but for what a cleaner changed: a batch
    # that lost its first record keeps a base timestamp no column recorded
    before, after = entries(src), entries(tmp_path / "back")
    same = [k for k in before if k[2] == 2 and k[3] == 0 and after.get(k) == before[k]]
    v2_plain = [k for k in before if k[2] == 2 and k[3] == 0]
    differ = [k for k in v2_plain if k not in same]
    assert all(k[0].startswith("__consumer_offsets") for k in differ), differ[:5]


@pytest.mark.nojit
def test_incremental_restore_appends_only_what_is_new(tmp_path):
    src = tmp_path / "logs"
    kl.write_log(records(1000), src, topic="t", max_batch_records=40)
    migrate(src, tmp_path / "lake")
    first = restore(tmp_path / "lake", tmp_path / "back")
    assert first["partitions"][0]["records"] == 1000
    kl.write_log(records(700, 1000), src, topic="t", max_batch_records=40)
    migrate(src, tmp_path / "lake")
    plan = restore(tmp_path / "lake", tmp_path / "back", execute_plan=False)
    assert plan["partitions"][0]["from_offset"] == 1000 and plan["partitions"][0]["records"] == 700
    # the rows to restore are in file order (delta-rs lists the second run's file first, so
    # the whole table is not): they are streamed, not read window by window
    from kafkalog_spark.delta.restore_read import survey
    assert survey(tmp_path / "lake" / "t", lambda tp: 1000)[("t", 0)].ordered
    again = restore(tmp_path / "lake", tmp_path / "back")
    assert again["partitions"][0]["records"] == 700
    assert rows(tmp_path / "back") == rows(src)
    assert restore(tmp_path / "lake", tmp_path / "back")["partitions"][0]["records"] == 0


def test_refusals(tmp_path, capsys):
    from deltalake import write_deltalake

    write_deltalake(str(tmp_path / "other"), pa.table({"x": [1, 2]}))
    with pytest.raises(InvalidOptionError, match="lacks the columns restore needs: topic"):
        restore(tmp_path / "other", tmp_path / "back")
    src = tmp_path / "logs"
    kl.write_log(records(10), src, topic="t")
    migrate(src, tmp_path / "lake", include_metadata=False)
    with pytest.raises(InvalidOptionError, match="leaderEpoch"):
        restore(tmp_path / "lake", tmp_path / "back")
    with pytest.raises(InvalidOptionError, match="not a Delta table"):
        restore(tmp_path / "nothing-here", tmp_path / "back")
    assert main(["restore", str(tmp_path / "other"), str(tmp_path / "back")]) == 2
    err = capsys.readouterr().err
    assert "lacks the columns" in err and "Traceback" not in err


def test_cli_dry_run_then_restore(tmp_path):
    src = tmp_path / "logs"
    kl.write_log(records(300), src, topic="t", max_batch_records=30)
    migrate(src, tmp_path / "lake")
    runner = CliRunner()
    dry = runner.invoke(cli, ["restore", "--dry-run", str(tmp_path / "lake"), str(tmp_path / "b")])
    assert dry.exit_code == 1  # a plan that would write something
    assert "would restore offsets [0, 300)" in dry.output and "run again without --dry-run" \
        in dry.output
    assert not (tmp_path / "b").exists()
    done = runner.invoke(cli, ["restore", str(tmp_path / "lake"), str(tmp_path / "b")])
    assert done.exit_code == 0 and "restored offsets [0, 300)" in done.output, done.output
    assert rows(tmp_path / "b") == rows(src)
    for args in ([], ["--dry-run"]):  # run twice: up to date, exit 0
        again = runner.invoke(cli, ["restore", *args, str(tmp_path / "lake"), str(tmp_path / "b")])
        assert again.exit_code == 0 and "up to date: nothing new to restore" in again.output


@pytest.mark.slow  # a fresh interpreter per step (deltalake does not survive a fork)
def test_a_run_killed_at_any_step_is_finished_by_the_next(tmp_path):
    src = tmp_path / "logs"
    kl.write_log(records(1500), src, topic="t", max_batch_records=40)
    migrate(src, tmp_path / "lake")
    args = dict(table=str(tmp_path / "lake"), segment_bytes=40_000)
    probe = run_script("faults.ops:restore_table", dest=str(tmp_path / "probe"), **args)
    assert probe.finished and len(probe.steps) > 5, probe
    want = rows(src)
    for k in range(1, len(probe.steps) + 1):
        dest = tmp_path / f"d{k}"
        out = run_script("faults.ops:restore_table", kill_at=k, dest=str(dest), **args)
        assert out.killed, (k, out)
        restore(tmp_path / "lake", dest, segment_bytes=40_000)
        assert rows(dest) == want, (k, out.steps[-1])
        assert kl.verify(dest).ok, (k, out.steps[-1])
        shutil.rmtree(dest)


@pytest.mark.spark
def test_the_spark_job_writes_what_the_library_writes(spark, tmp_path, capsys):
    import importlib.util
    import json

    src = tmp_path / "logs"
    kl.write_log(records(900), src, topic="t", max_batch_records=30)
    kl.write_log(records(400).append_column("partition", pa.array([1] * 400, pa.int32())),
                 src, topic="t", max_batch_records=30)
    migrate(src, tmp_path / "lake")
    restore(tmp_path / "lake", tmp_path / "lib")
    path = Path(__file__).resolve().parents[1] / "jobs" / "restore.py"
    spec = importlib.util.spec_from_file_location("jobs_restore", path)
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    capsys.readouterr()
    assert job.main([str(tmp_path / "lake"), str(tmp_path / "job"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["verified"] and len(printed["restore"]["partitions"]) == 2
    assert rows(tmp_path / "job") == rows(tmp_path / "lib") == rows(src)
    assert entries(tmp_path / "job") == entries(tmp_path / "lib")


@pytest.mark.spark
def test_spark_tasks_derive_each_partitions_files_as_recover_does(spark, tmp_path, monkeypatch):
    """Each task writes its new partition's indexes, transaction index, producer snapshots and
    leader epochs (the driver does not read every restored segment again): the files are the
    ones the library path's recover writes, and the driver's recover only counts them."""
    import kafkalog_spark.recovery.recover as rec

    src = tmp_path / "logs"
    write_txn_partition(src / "txn-0", with_indexes=False)
    (src / "meta.properties").write_text("version=0\nbroker.id=0\n")
    kl.write_log(records(900), src, topic="t", max_batch_records=30)
    migrate(src, tmp_path / "lake", include_control=True)
    restore(tmp_path / "lake", tmp_path / "lib")
    handed = []
    real = rec.recover
    monkeypatch.setattr(rec, "recover", lambda *a, **kw: handed.append(kw["recovered"])
                        or real(*a, **kw))
    restore(tmp_path / "lake", tmp_path / "job", spark=spark)

    assert sorted(p.name for p in handed[0]) == ["t-0", "txn-0"]

    def files(root: Path) -> dict[str, bytes]:  # partition.metadata: a random topic id each
        return {str(f.relative_to(root)): f.read_bytes() for f in sorted(root.glob("*-*/*"))
                if f.name != "partition.metadata"}

    made = files(tmp_path / "job")
    assert made == files(tmp_path / "lib")
    assert {"txn-0/00000000000000000000.txnindex", "t-0/00000000000000000000.index",
            "t-0/00000000000000000000.timeindex"} <= made.keys()
    assert any(name.endswith(".snapshot") for name in made)
    assert not real(tmp_path / "job").changed  # nothing left to derive


@pytest.mark.spark
def test_spark_restores_a_big_partition_in_offset_ranges_into_the_library_s_bytes(
        spark, tmp_path, monkeypatch):
    """A partition holding more than ``RANGE_COST`` of work is restored by several range
    tasks and one joining task: the segments (cut inside ranges and across them), indexes and
    derived files are the library path's, no piece is left; an incremental run (continued
    from the log end) splits again, and so does a table whose rows are not in file order."""
    from deltalake import DeltaTable, write_deltalake

    import kafkalog_spark.delta.restore_spark as R
    from kafkalog_spark.delta.restore_read import survey
    from kafkalog_spark.delta.restore_write import log_end

    src, lake = tmp_path / "logs", tmp_path / "lake"
    big = lambda n, start=0: records(n, start).append_column(  # noqa: E731
        "partition", pa.array([1] * n, pa.int32()))
    kl.write_log(records(300), src, topic="t", max_batch_records=30)  # t-0: small, seen first
    kl.write_log(big(2000), src, topic="t", max_batch_records=30, codec="lz4")
    migrate(src, lake)
    found = survey(lake / "t", lambda tp: 0)
    # the session's 2 slots: a slot's share is 1,150 of t-1's 2,000 rows (t-0 holds 300)
    monkeypatch.setattr(R, "RANGE_COST", -(-found[("t", 1)].cost // 5))
    assert spark.sparkContext.defaultParallelism == 2
    target = R.range_cost([s.cost for s in found.values()], 2)
    assert target > R.RANGE_COST
    assert len(R.ranges(found[("t", 1)], target)) == 2 and len(R.ranges(found[("t", 0)], target)) == 1

    def tasks_of(group: str) -> list[int]:  # tasks per Spark job of the group
        tracker = spark.sparkContext.statusTracker()
        return [sum(tracker.getStageInfo(s).numTasks for s in tracker.getJobInfo(j).stageIds)
                for j in sorted(tracker.getJobIdsForGroup(group))]

    def files(root: Path) -> dict[str, bytes]:  # partition.metadata: a random topic id each
        return {str(f.relative_to(root)): f.read_bytes() for f in sorted(root.glob("*-*/*"))
                if f.name != "partition.metadata"}

    def ranges_of(dest: Path) -> int:
        now = survey(lake / "t", lambda tp: log_end(dest / f"t-{tp[1]}"))
        return len(R.ranges(now[("t", 1)], R.range_cost([s.cost for s in now.values()], 2)))

    for run, dest, lib in [("first", "job", "lib"), ("incremental", "job", "lib"),
                           ("any row order", "rev", "lib-rev")]:
        if run == "incremental":
            kl.write_log(big(900, 2000), src, topic="t", max_batch_records=30, codec="lz4")
            migrate(src, lake)
        if run == "any row order":
            table = DeltaTable(str(lake / "t")).to_pyarrow_table()
            write_deltalake(str(lake / "t"), table.take(pa.array(range(table.num_rows))[::-1]),
                            mode="overwrite")
            assert not survey(lake / "t", lambda tp: 0)[("t", 1)].ordered
        restore(lake, tmp_path / lib, segment_bytes=5_000)
        n = ranges_of(tmp_path / dest)
        assert n >= 2, run
        handed = []
        real = spark.sparkContext.parallelize
        with monkeypatch.context() as m:
            m.setattr(spark.sparkContext, "parallelize",
                      lambda data, *a: handed.append(list(data)) or real(data, *a))
            spark.sparkContext.setJobGroup(run, "restore in ranges")
            restore(lake, tmp_path / dest, segment_bytes=5_000, spark=spark)
            spark.sparkContext.setJobGroup("", "")
        if run == "first":  # the biggest tasks first: t-1's 2 ranges (1,000 rows each), then t-0
            assert [kind for kind, _ in handed[-2]] == ["range"] * 2 + ["whole"]
        # partition 0 whole (nothing to add after the first run) + the ranges; a join
        assert tasks_of(run)[-2:] == [1 + n, 1], run
        made = files(tmp_path / dest)
        assert made == files(tmp_path / lib), run
        assert len([n for n in made if n.startswith("t-1/") and n.endswith(".log")]) > 2
        assert not [n for n in made if n.endswith(".tmp")]
        assert entries(tmp_path / dest) == entries(src), run
        assert rows(tmp_path / dest) == rows(src)
        assert kl.verify(tmp_path / dest).ok


def test_partitions_are_cut_only_where_one_would_keep_a_slot_busy_alone():
    """A slot's share decides: a thousand 10 GiB partitions on 128 slots are not cut (each
    cut costs work); one 1 TiB partition among small ones is, into ranges of a slot's share;
    never finer than ``RANGE_COST``."""
    from kafkalog_spark.delta.restore_read import Survey
    from kafkalog_spark.delta.restore_spark import RANGE_COST, range_cost, ranges

    gib = 1 << 30

    def part(cost: int, offsets: int = 10**9) -> Survey:
        return Survey(start=0, rows=offsets, first=0, last=offsets - 1, bytes=cost, cost=cost)

    even = [part(10 * gib)] * 1000
    target = range_cost([p.cost for p in even], 128)
    assert {len(ranges(p, target)) for p in even} == {1}
    skewed = [part(1024 * gib)] + [part(gib)] * 100
    target = range_cost([p.cost for p in skewed], 128)
    assert 8 * gib < target < 9 * gib
    cut = ranges(skewed[0], target)
    assert len(cut) == 117 and len(ranges(skewed[1], target)) == 1
    assert cut[0][0] is None and cut[-1][1] is None
    assert all(a[1] == b[0] for a, b in zip(cut, cut[1:]))  # adjacent, no gap
    assert range_cost([5 * RANGE_COST], 128) == RANGE_COST
    assert len(ranges(part(5 * RANGE_COST), RANGE_COST)) == 5
    assert len(ranges(part(5 * RANGE_COST, offsets=3), RANGE_COST)) == 3  # an offset each


@pytest.mark.spark
def test_spark_surveys_a_table_in_runs_of_its_files_as_the_library_does_whole(
        spark, tmp_path, monkeypatch):
    """With Spark the survey is a task per run of consecutive files (the biggest first); put
    together in the table's file order it is the library's survey of the whole table: rows,
    offsets, flags, bytes and codec costs — and a partition whose offsets go back across two
    files is not in order, though each file is."""
    from deltalake import DeltaTable, write_deltalake

    import kafkalog_spark.delta.restore_read as RR

    src, lake = tmp_path / "logs", tmp_path / "lake"
    part = lambda p, n, start=0: records(n, start).append_column(  # noqa: E731
        "partition", pa.array([p] * n, pa.int32()))
    kl.write_log(records(600), src, topic="t", max_batch_records=50, codec="gzip")
    kl.write_log(part(1, 600), src, topic="t", max_batch_records=50, codec="lz4")
    migrate(src, lake)
    for n in (600, 1200):  # two more runs of migrate: more files
        kl.write_log(part(1, 600, n), src, topic="t", max_batch_records=50)
        migrate(src, lake)
    monkeypatch.setattr(RR, "SURVEY_BYTES", 1)  # every file a run of its own
    files = RR.data_files(lake / "t")

    def surveyed(group: str) -> tuple[dict, int]:
        spark.sparkContext.setJobGroup(group, "survey")
        got = RR.survey_tables([lake / "t"], lambda tp: 100, spark)[lake / "t"]
        spark.sparkContext.setJobGroup("", "")
        tracker = spark.sparkContext.statusTracker()
        tasks = sum(tracker.getStageInfo(s).numTasks for j in tracker.getJobIdsForGroup(group)
                    for s in tracker.getJobInfo(j).stageIds)
        return got, tasks

    got, tasks = surveyed("ordered")
    # runs of at least a slot's share (2 slots: half the bytes), so 3 like files make 2 runs
    assert len(files) == 3 and tasks == 2
    whole = RR.survey(lake / "t", lambda tp: 100)
    assert got.keys() == whole.keys() == {("t", 0), ("t", 1)}
    for tp in got:
        a, b = got[tp], whole[tp]
        assert (a.start, a.rows, a.first, a.last, a.ordered, a.transactional, a.control) == \
            (b.start, b.rows, b.first, b.last, b.ordered, b.transactional, b.control), tp
        assert 0 < a.bytes <= a.cost
    assert got[("t", 1)].rows == 1700
    # bytes at each run's bytes per row: all of them, for rows from offset 0
    everything = RR.survey_tables([lake / "t"], lambda tp: 0, spark)[lake / "t"]
    assert sum(s.bytes for s in everything.values()) == pytest.approx(
        sum(n for _, n in files), abs=2)
    gzip = everything[("t", 0)]
    assert gzip.cost == pytest.approx(RR.CODEC_COST["gzip"] * gzip.bytes, abs=2)
    # two files, each in offset order, whose offsets interleave (blocks of 300 in turn): not
    # in order, whichever file the table lists first
    table = DeltaTable(str(lake / "t")).to_pyarrow_table().sort_by("offset")
    block = pc.bit_wise_and(pc.divide(table["offset"], 300), 1)
    write_deltalake(str(lake / "t"), table.filter(pc.equal(block, 0)), mode="overwrite")
    write_deltalake(str(lake / "t"), table.filter(pc.equal(block, 1)), mode="append")
    with pytest.raises(InvalidOptionError, match="no longer in the table"):  # listed before
        list(RR.scan(lake / "t", ["offset"], files=[files[0][0]]))
    got, tasks = surveyed("interleaved")
    whole = RR.survey(lake / "t", lambda tp: 100)
    assert tasks == 2 and not whole[("t", 1)].ordered and not got[("t", 1)].ordered
    assert got[("t", 1)].rows == whole[("t", 1)].rows == 1700


def test_the_survey_weighs_each_partition_by_its_codecs(tmp_path):
    """Ranges are sized by work, not bytes: a gzip partition costs restore more than twice an
    uncompressed one of the same rows (CODEC_COST), so it is cut where that one is not; rows
    below the restore's start and their codecs count for nothing."""
    from kafkalog_spark.delta.restore_read import CODEC_COST, survey
    from kafkalog_spark.delta.restore_spark import ranges

    src, lake = tmp_path / "logs", tmp_path / "lake"
    part = lambda p, n, start=0: records(n, start).append_column(  # noqa: E731
        "partition", pa.array([p] * n, pa.int32()))
    kl.write_log(records(1000), src, topic="t", max_batch_records=50)  # none
    kl.write_log(part(1, 1000), src, topic="t", max_batch_records=50, codec="gzip")
    kl.write_log(part(2, 500), src, topic="t", max_batch_records=50, codec="gzip")
    kl.write_log(part(2, 500, 500), src, topic="t", max_batch_records=50, codec="lz4")
    migrate(src, lake)
    found = survey(lake / "t", lambda tp: 0)
    plain, gzip, mixed = found[("t", 0)], found[("t", 1)], found[("t", 2)]
    assert plain.bytes == gzip.bytes == mixed.bytes  # the table's bytes per row, 1,000 rows
    assert plain.cost == plain.bytes
    assert gzip.cost == pytest.approx(CODEC_COST["gzip"] * plain.bytes, abs=1)
    assert mixed.cost == pytest.approx((CODEC_COST["gzip"] + CODEC_COST["lz4"]) / 2
                                       * plain.bytes, abs=1)
    target = 2 * plain.cost
    assert [len(ranges(p, target)) for p in (plain, gzip, mixed)] == [1, 2, 1]
    later = survey(lake / "t", lambda tp: 500)[("t", 2)]  # from offset 500: lz4 rows only
    assert later.cost == pytest.approx(CODEC_COST["lz4"] * later.bytes, abs=1)


@pytest.mark.parametrize("kernel_copy", [True, False], ids=["copy_file_range", "buffered"])
def test_range_pieces_join_into_the_library_s_segments(tmp_path, monkeypatch, kernel_copy):
    """The Spark restore's range and join tasks, called here: the pieces' batches copied into
    segments cut where the library path cuts them (inside pieces and across them), by the
    kernel or, where ``copy_file_range`` fails (another file system), through a buffer."""
    import errno
    import os

    import kafkalog_spark.delta.restore_spark as R
    from kafkalog_spark.delta.restore_read import survey

    if not kernel_copy:
        def refuse(*args):
            raise OSError(errno.EXDEV, "cross-device")
        monkeypatch.setattr(os, "copy_file_range", refuse)
    src, lake = tmp_path / "logs", tmp_path / "lake"
    kl.write_log(records(2000), src, topic="t", max_batch_records=30, codec="zstd")
    migrate(src, lake)
    restore(lake, tmp_path / "lib", segment_bytes=5_000)
    found = survey(lake / "t", lambda tp: 0)[("t", 0)]
    dest = tmp_path / "joined"
    R.open_partition(dest, ("t", 0))
    pieces = [R._range_piece(lake / "t", ("t", 0), found, k, lo, hi, dest=dest)[1:]
              for k, (lo, hi) in enumerate(R.ranges(found, -(-found.cost // 4)))]
    assert len(pieces) == 4 and all(Path(p).exists() for _, p in pieces)
    done, _ = R._join_task((("t", 0), 0, pieces), dest=dest, segment_bytes=5_000,
                           topic_ids={"t": "AAAAAAAAAAAAAAAAAAAAAQ"})
    assert done.records == 2000 and done.end == 2000 and len(done.segments) > 4
    logs = sorted(f.name for f in (dest / "t-0").iterdir())
    assert [n for n in logs if n.endswith(".log")] == sorted(
        f.name for f in (tmp_path / "lib" / "t-0").glob("*.log"))
    for name in logs:
        if name.endswith((".log", ".index", ".timeindex")):
            assert (dest / "t-0" / name).read_bytes() == \
                (tmp_path / "lib" / "t-0" / name).read_bytes(), name
    assert not [n for n in logs if n.endswith(".tmp")]


def test_carried_batches_and_tables_in_any_row_order(tmp_path, monkeypatch):
    """Scan batches and windows of ~50 rows over batches of 37 records and a compacted-like
    offset gap: every batch straddling a scan batch or window end is carried whole. A table
    whose files give a partition's rows out of offset order (rewritten reversed) is read by
    offset windows instead, with the same result."""
    from deltalake import DeltaTable, write_deltalake

    import kafkalog_spark.delta.restore_read as R

    monkeypatch.setattr(R, "SCAN_ROWS", 50)
    monkeypatch.setattr(R, "WINDOW_ROWS", 50)
    src = tmp_path / "logs"
    kl.write_log(records(1000), src, topic="t", max_batch_records=37)
    kl.write_log(records(300, 5000).append_column("offset", pa.array(range(5000, 5300))), src,
                 topic="t", max_batch_records=37)
    migrate(src, tmp_path / "lake")
    restore(tmp_path / "lake", tmp_path / "back")
    assert rows(tmp_path / "back") == rows(src)
    assert entries(tmp_path / "back") == entries(src)
    table = DeltaTable(str(tmp_path / "lake" / "t")).to_pyarrow_table()
    write_deltalake(str(tmp_path / "lake" / "t"), table.take(pa.array(range(table.num_rows))[::-1]),
                    mode="overwrite")
    found = R.survey(tmp_path / "lake" / "t", lambda tp: 0)
    assert not found[("t", 0)].ordered and found[("t", 0)].rows == 1300
    # offset ranges (a Spark restore's tasks) read window by window: the same whole batches,
    # each in the range of its base offset, a batch straddling a range end carried past it
    every = pa.concat_tables(R.windows(tmp_path / "lake" / "t", ("t", 0), found[("t", 0)]))
    cuts = [None, 333, 700, 5100, None]
    parts = [pa.concat_tables(R.windows(tmp_path / "lake" / "t", ("t", 0), found[("t", 0)],
                                        lo, hi)) for lo, hi in zip(cuts, cuts[1:])]
    assert pa.concat_tables(parts).equals(every)
    assert [p["offset"][-1].as_py() for p in parts] == [332, 702, 5110, 5299]
    restore(tmp_path / "lake", tmp_path / "back2")
    assert entries(tmp_path / "back2") == entries(src)
