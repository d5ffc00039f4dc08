"""Publishing at the batch positions the stagers recorded (issue 33): the published segments are
byte for byte what walking every staged segment and shifting it gives, the producer snapshot is
what a replay of the whole partition gives, and a staged file that differs from what its stager
recorded fails the write before the log dir changes."""

from __future__ import annotations

import pickle
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import kafkalog_spark as kl
from kafkalog_spark.codec.files import naming as N
from kafkalog_spark.codec.files.index_rebuild import build_indexes
from kafkalog_spark.codec.files.snapshot import ProducerStateTracker, read_snapshot
from kafkalog_spark.codec.records.encode import BatchSpec, encode_batch
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.datasource.writer import KafkaLogWriter
from kafkalog_spark.errors import CorruptRecordError
from kafkalog_spark.inspect.verify import verify
from kafkalog_spark.log.publish import publish
from kafkalog_spark.log.staging import PartitionStager, WriteSettings, create_staging_dir
from kafkalog_spark.storage.lock import hold_lock
from faults import run_forked
from test_datasource_write import batch, schema
from test_faults import rows, same_step, settle
from test_read_write import records

pytestmark = pytest.mark.jit_only  # processes and files, not what kernels compute

PRODUCER = 4242


def walk_shift(data: bytes, shift: int) -> bytes:
    """The reference: each batch found by walking the file, its baseOffset moved by ``shift``."""
    table = scan_entries(np.frombuffer(data, np.uint8))
    assert table.clean and (table.magic == 2).all()
    out = bytearray(data)
    for pos, off in zip(table.position.tolist(), table.offset.tolist()):
        out[pos:pos + 8] = (off + shift).to_bytes(8, "big")
    return bytes(out)


def replayed_snapshot(pdir: Path) -> bytes:
    """The producer snapshot a replay of every segment of the partition gives."""
    tracker = ProducerStateTracker()
    for log in sorted(pdir.glob("*.log")):
        tracker.apply(log.read_bytes(), file=str(log))
    return tracker.snapshot().to_bytes()


def files(log_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(log_dir)): p.read_bytes() for p in sorted(log_dir.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def log_end(pdir: Path) -> int:
    last = sorted(pdir.glob("*.log"))[-1]
    table = scan_entries(np.frombuffer(last.read_bytes(), np.uint8))
    return int(table.last_offset[-1]) + 1


def add_idempotent_batch(pdir: Path) -> None:
    """An idempotent producer's batch at the partition's end, and the broker's snapshot there
    (the state a write must carry forward to its new log end)."""
    last = sorted(pdir.glob("*.log"))[-1]
    base = int(last.name[:20])
    data = last.read_bytes() + encode_batch(
        [b"p1", b"p2"], [b"x", b"y"], [1_700_000_001_000] * 2,
        spec=BatchSpec(log_end(pdir), partition_leader_epoch=0, producer_id=PRODUCER,
                       producer_epoch=3, base_sequence=0))
    last.write_bytes(data)
    idx = build_indexes(data, base, index_interval_bytes=4096, file=str(last))
    last.with_suffix(".index").write_bytes(idx.offset_index.to_bytes())
    last.with_suffix(".timeindex").write_bytes(idx.time_index.to_bytes())
    for old in pdir.glob("*.snapshot"):
        old.unlink()
    (pdir / N.segment_file_name(log_end(pdir), N.SNAPSHOT)).write_bytes(replayed_snapshot(pdir))


def test_commit_publishes_what_walking_the_staged_segments_gives(tmp_path: Path) -> None:
    """Three tasks append to two existing partitions (one with an idempotent producer) and
    create a third, several segments per task and partition; the commit messages go through
    pickle as Spark sends them."""
    log_dir = tmp_path / "logs"
    kl.write_log(records(200, partitions=2), log_dir, codec="gzip", segment_bytes=4096)
    add_idempotent_batch(log_dir / "orders-0")
    before = files(log_dir)
    ends = {p: log_end(log_dir / f"orders-{p}") for p in (0, 1)} | {2: 0}
    w = KafkaLogWriter({"path": str(log_dir), "topic": "orders", "compression": "lz4",
                        "segment.bytes": "1024", "batch.records": "7"},
                       schema("key", "value", "timestamp", "headers", "partition"), False)
    tasks = [batch(n, start, partition=pa.array([(start + i) % 3 for i in range(n)], pa.int32()))
             for n, start in ((90, 0), (1, 90), (150, 91))]
    messages = [pickle.loads(pickle.dumps(w.write(iter([t])))) for t in tasks]
    staged_copy = tmp_path / "staged"
    shutil.copytree(w.staging, staged_copy)

    expected: dict[str, bytes] = {}
    for m in messages:  # in Spark partition order, as the commit publishes them
        for s in m.staged:
            src = staged_copy / Path(s.directory).relative_to(w.staging)
            shift = ends[s.partition] - s.first_offset
            ends[s.partition] += s.next_offset - s.first_offset
            for seg in s.segments:
                for kind in (N.INDEX, N.TIME_INDEX, N.LOG):
                    data = (src / N.segment_file_name(seg.base_offset, kind)).read_bytes()
                    expected[f"orders-{s.partition}/"
                             f"{N.segment_file_name(seg.base_offset + shift, kind)}"] = (
                        walk_shift(data, shift) if kind == N.LOG else data)
    assert sum(len(s.segments) for m in messages for s in m.staged) >= 9
    w.commit(messages)

    after = files(log_dir)
    segments = {k: v for k, v in after.items() if k.endswith((".log", ".index", ".timeindex"))}
    old = {k: v for k, v in before.items() if k.endswith((".log", ".index", ".timeindex"))}
    assert segments == old | expected  # old segments untouched, new ones as the walk shifts them
    for p in range(3):
        pdir = log_dir / f"orders-{p}"
        snap = max(pdir.glob("*.snapshot"))  # the one at the new log end
        assert snap.name == N.segment_file_name(ends[p], N.SNAPSHOT)
        assert snap.read_bytes() == replayed_snapshot(pdir)
    snap = max((log_dir / "orders-0").glob("*.snapshot"))  # the producer was carried forward
    assert [e.producer_id for e in read_snapshot(snap.read_bytes()).entries] == [PRODUCER]
    report = verify(log_dir, deep=True)
    assert report.ok, report.problems


def stage_two_outputs(log_dir: Path) -> tuple[Path, list]:
    """Two outputs for orders-0 (both shifted past its log end), several segments each."""
    staging = create_staging_dir(log_dir)
    settings = WriteSettings(codec="snappy", segment_bytes=2048, max_batch_records=9)
    staged = []
    for order in (0, 1):
        st = PartitionStager(staging / f"t{order}", "orders", 0, order=order, settings=settings)
        st.add(records(80, seed=order + 3))
        staged.append(st.finish())
    assert all(len(s.segments) > 2 for s in staged)
    return staging, staged


def wrong_positions(seg):
    pos, off = seg.batch_table()
    return replace(seg, positions=(pos[1:] - pos[1]).tobytes(), offsets=off[1:].tobytes())


@pytest.mark.parametrize("damage, reason", [
    (lambda seg, path: replace(seg, positions=b"", offsets=b""), "0 positions for"),
    (lambda seg, path: wrong_positions(seg), "positions for"),
    (lambda seg, path: replace(seg, positions=(seg.batch_table()[0] + np.r_[0, [7] * (
        seg.batches - 1)]).tobytes()), "do not tile the file"),
    (lambda seg, path: replace(seg, offsets=(seg.batch_table()[1] + 1).tobytes()),
     "another base offset"),
    (lambda seg, path: _set_producer(path, seg), "a batch has a producer id"),
])
def test_a_staged_segment_unlike_its_description_fails_before_the_log_dir_changes(
        tmp_path: Path, damage, reason: str) -> None:
    log_dir = tmp_path / "logs"
    kl.write_log(records(100), log_dir, codec="zstd")
    before = files(log_dir)
    staging, staged = stage_two_outputs(log_dir)
    victim = staged[1].segments[1]
    path = Path(staged[1].directory) / N.segment_file_name(victim.base_offset, N.LOG)
    segs = list(staged[1].segments)
    segs[1] = damage(victim, path)
    staged[1] = replace(staged[1], segments=tuple(segs))
    with hold_lock(log_dir), pytest.raises(CorruptRecordError, match=reason) as err:
        publish(log_dir, staged, mode="append", leader_epoch=0, staging=staging)
    assert err.value.file == str(path)
    assert files(log_dir) == before


def _set_producer(path: Path, seg):
    """A producer id in the second batch's header (what the stager never writes)."""
    data = bytearray(path.read_bytes())
    at = int(seg.batch_table()[0][1]) + 43
    data[at:at + 8] = (7).to_bytes(8, "big")
    path.write_bytes(bytes(data))
    return seg


def test_write_log_drops_producer_ids_of_its_input(tmp_path: Path) -> None:
    """The snapshot shortcut rests on this: rows read with their producer metadata are written
    without producer ids, so the write leaves the producer state as it was."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    kl.write_log(records(30), src)
    add_idempotent_batch(src / "orders-0")
    table = kl.read_log(src, include_headers=True, include_metadata=True)
    assert PRODUCER in table["producerId"].to_pylist()
    kl.write_log(table.drop_columns(["offset"]), dst, max_batch_records=4)
    kl.write_log(table.drop_columns(["offset"]), dst, max_batch_records=5)  # shifted
    got = kl.read_log(dst, include_metadata=True)
    assert set(got["producerId"].to_pylist()) == {-1} and got.num_rows == 2 * table.num_rows
    pdir = dst / "orders-0"
    assert max(pdir.glob("*.snapshot")).read_bytes() == replayed_snapshot(pdir)
    assert verify(dst, deep=True).ok


# --- SIGKILL at every step of a commit with several outputs per partition ----------------------


def op_publish_outputs(step, log_dir: str) -> None:
    """Three writers' outputs for the existing orders-0 and two for a new orders-1, several
    segments each, published like a Spark commit."""
    log_dir = Path(log_dir)
    staging = create_staging_dir(log_dir)
    settings = WriteSettings(codec="lz4", segment_bytes=2048, max_batch_records=9)
    staged = []
    for order, (partition, seed) in enumerate(((0, 3), (1, 4), (0, 5), (1, 6), (0, 7))):
        st = PartitionStager(staging / f"t{order}", "orders", partition, order=order,
                             settings=settings)
        st.add(records(60, seed=seed))
        staged.append(st.finish())
    with hold_lock(log_dir):
        publish(log_dir, staged, mode="append", leader_epoch=0, staging=staging, step=step)
    shutil.rmtree(staging)


def make_crash_base(log_dir: Path) -> Path:
    kl.write_log(records(100), log_dir, segment_bytes=4096, max_batch_records=20)
    return log_dir


def test_sigkill_at_every_step_of_a_multi_output_commit(tmp_path: Path) -> None:
    ref = make_crash_base(tmp_path / "ref" / "logs")
    before = rows(ref)
    labels: list[str] = []
    op_publish_outputs(labels.append, str(ref))
    after = rows(ref)
    assert sum(label.startswith("shift ") for label in labels) > 6
    for k in range(1, len(labels) + 1):
        log_dir = make_crash_base(tmp_path / f"k{k}" / "logs")
        out = run_forked(op_publish_outputs, kill_at=k, log_dir=str(log_dir))
        assert out.killed and same_step(out.steps[-1], labels[k - 1]), (k, out)
        settle(log_dir)
        got = rows(log_dir)
        old = [r for r in got if r["partition"] == 0]
        new = [r for r in got if r["partition"] == 1]
        # orders-0: a prefix of complete new segments after the old records; orders-1: all or none
        assert old[:len(before)] == before and old == [r for r in after if r["partition"] == 0][
            :len(old)], k
        assert new in ([], [r for r in after if r["partition"] == 1]), k
        shutil.rmtree(tmp_path / f"k{k}")


# --- through Spark ----------------------------------------------------------------------------


@pytest.mark.spark
def test_spark_append_of_several_tasks_and_segments(spark, tmp_path: Path) -> None:
    """df.write appends from four tasks, several segments each, to a partition whose producer
    state must be carried forward and to a new one: the rows land in task order, the log
    verifies, each snapshot is what a replay gives."""
    log_dir = tmp_path / "logs"
    kl.write_log(records(100), log_dir, segment_bytes=4096)
    add_idempotent_batch(log_dir / "orders-0")
    start = log_end(log_dir / "orders-0")
    df = spark.range(0, 1600, numPartitions=4).selectExpr(
        "cast(id % 2 as int) as partition", "cast(concat('v', id) as binary) as value")
    df.write.format("kafkalog").mode("append").option("topic", "orders") \
        .option("segment.bytes", "1024").option("batch.records", "10").save(str(log_dir))
    for p, first in ((0, start), (1, 0)):
        pdir = log_dir / f"orders-{p}"
        got = kl.read_log(log_dir, partitions=[p], start_offset=first)
        assert got["offset"].to_pylist() == list(range(first, first + 800))
        assert got["value"].to_pylist() == [f"v{i}".encode() for i in range(p, 1600, 2)]
        assert len([f for f in pdir.glob("*.log") if int(f.name[:20]) >= first]) > 8
        assert max(pdir.glob("*.snapshot")).read_bytes() == replayed_snapshot(pdir)
    report = verify(log_dir, deep=True)
    assert report.ok, report.problems


def test_an_append_keeps_the_producers_in_the_order_a_broker_writes_them(tmp_path: Path) -> None:
    """The snapshot at the new log end holds the old one's producers in the order a broker's
    HashMap, filled from it, iterates (17, 1, 33 share a bucket of 16; 2 the next), not sorted
    by id."""
    from test_index import txn_batch

    log_dir = tmp_path / "logs"
    kl.write_log(records(50), log_dir, max_batch_records=10)
    pdir = log_dir / "orders-0"
    tracker = ProducerStateTracker()
    tracker.apply(b"".join(txn_batch(i, pid, 0, 1, transactional=False)
                           for i, pid in enumerate([17, 1, 33, 2])))
    old = pdir / N.segment_file_name(50, N.SNAPSHOT)
    old.write_bytes(tracker.snapshot(order="java_hashmap").to_bytes())
    kl.write_log(records(30, seed=2), log_dir, mode="append", max_batch_records=10)
    new = read_snapshot((pdir / N.segment_file_name(80, N.SNAPSHOT)).read_bytes())
    assert [e.producer_id for e in new.entries] == [17, 1, 33, 2]
    assert new.entries == read_snapshot(old.read_bytes()).entries
