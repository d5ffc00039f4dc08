"""Compaction (KAFKA_FORMATS §15): the §15.9a worked example, record rules, transactions,
real compacted fixtures, kafka-python reads the output, crash at every swap step, CLI."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from kafkalog_spark import read_log, verify
from kafkalog_spark.codec.files import checkpoints as C
from kafkalog_spark.codec.records.encode import BatchSpec, encode_batch, encode_end_txn_marker
from kafkalog_spark.codec.files.index import TxnIndex
from kafkalog_spark.codec.files.index_rebuild import build_indexes
from kafkalog_spark.codec.files.snapshot import ProducerStateTracker
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.compaction.compact import compact
from kafkalog_spark.errors import LogDirLockedError
from kafkalog_spark.codec.files import naming as N
from kafkalog_spark.storage.atomic import read_checkpoint_file, write_checkpoint_file

T = 1_700_000_000_000
D = 86_400_000


def build_partition(log_dir: Path, segments: list[list[bytes]], *, topic: str = "t",
                    partition: int = 0, hw: int | None = None) -> Path:
    """A partition dir from raw batches per segment (the last list is the active segment),
    with indexes, transaction indexes (from the producer state over the whole log, as a broker
    writes them) and replication-offset-checkpoint = LEO (or ``hw``)."""
    pdir = log_dir / f"{topic}-{partition}"
    pdir.mkdir(parents=True)
    next_offset = 0
    producers = ProducerStateTracker()
    for batches in segments:
        data = b"".join(batches)
        table = scan_entries(data)
        base = int(table.offset[0]) if len(table) else next_offset
        (pdir / N.segment_file_name(base, N.LOG)).write_bytes(data)
        idx = build_indexes(data, base)
        (pdir / N.segment_file_name(base, N.INDEX)).write_bytes(idx.offset_index.to_bytes())
        (pdir / N.segment_file_name(base, N.TIME_INDEX)).write_bytes(idx.time_index.to_bytes())
        aborted = producers.apply(data)
        if aborted:
            (pdir / N.segment_file_name(base, N.TXN_INDEX)).write_bytes(TxnIndex.from_entries(
                base, [(a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset)
                       for a in aborted]).to_bytes())
        if len(table):
            next_offset = int(table.last_offset[-1]) + 1
    ckpt = log_dir / N.REPLICATION_OFFSET_CHECKPOINT
    offsets = read_checkpoint_file(ckpt, C.parse_offset_checkpoint)
    offsets[(topic, partition)] = next_offset if hw is None else hw
    write_checkpoint_file(ckpt, C.format_offset_checkpoint(offsets))
    return pdir


def cmp(log_dir: Path, options: dict | None = None, **kw):
    """:func:`compact` with ``cleanup.policy=compact`` (topic ``t`` is not an internal topic)."""
    return compact(log_dir, options={"cleanup.policy": "compact", **(options or {})}, **kw)


def rec(offset: int, key: bytes | None, value: bytes | None, ts: int = T, **spec) -> bytes:
    return encode_batch([key], [value], [ts], spec=BatchSpec(base_offset=offset, **spec))


def rows(log_dir: Path) -> list[tuple]:
    t = read_log(log_dir, include_headers=True)
    return list(zip(t.column("offset").to_pylist(), t.column("key").to_pylist(),
                    t.column("value").to_pylist(), t.column("timestamp").to_pylist(),
                    t.column("headers").to_pylist()))


def batches(pdir: Path) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, attributes, record count) of every batch, in order."""
    out = []
    for log in sorted(pdir.glob("*.log")):
        t = scan_entries(log.read_bytes())
        out += [(int(t.offset[i]), int(t.last_offset[i]), int(t.attributes[i]), int(t.count[i]))
                for i in range(len(t))]
    return out


def worked_example(tmp_path: Path) -> tuple[Path, list[bytes]]:
    log_dir = tmp_path / "logs"
    seg_a = [rec(0, b"k1", b"a"), rec(1, b"k2", b"b"), rec(2, b"k1", b"c"),
             rec(3, b"k2", None), rec(4, b"k3", b"d")]
    build_partition(log_dir, [seg_a, []])
    return log_dir, seg_a


def test_worked_example_round_1(tmp_path):
    log_dir, seg_a = worked_example(tmp_path)
    dry = cmp(log_dir, now_ms=T, options={"delete.retention.ms": D})
    assert not dry.executed and dry.plans[0].first_dirty == 0 and dry.plans[0].end_offset == 5
    result = cmp(log_dir, now_ms=T, options={"delete.retention.ms": D}, execute=True)
    pdir = log_dir / "t-0"
    assert sorted(p.name for p in pdir.glob("*.log")) == [N.segment_file_name(0, N.LOG),
                                                        N.segment_file_name(5, N.LOG)]
    data = (pdir / N.segment_file_name(0, N.LOG)).read_bytes()
    # batch 2 and 4 verbatim, batch 3 rebuilt with the delete horizon T + D
    stamped = encode_batch([b"k2"], [None], [T], spec=BatchSpec(base_offset=3, delete_horizon_ms=T + D))
    assert data == seg_a[2] + stamped + seg_a[4]
    t = scan_entries(data)
    assert int(t.base_timestamp[1]) == T + D and t.has_delete_horizon().tolist() == [False, True, False]
    assert [r[:3] for r in rows(log_dir)] == [(2, b"k1", b"c"), (3, b"k2", None), (4, b"k3", b"d")]
    ckpt = read_checkpoint_file(log_dir / N.CLEANER_OFFSET_CHECKPOINT, C.parse_offset_checkpoint)
    assert ckpt == {("t", 0): 5}
    assert result.metrics["records_kept"] == 3 and verify(log_dir, deep=True).ok


def test_worked_example_round_2(tmp_path):
    log_dir, seg_a = worked_example(tmp_path)
    cmp(log_dir, now_ms=T, options={"delete.retention.ms": D}, execute=True)
    pdir = log_dir / "t-0"
    # new dirty data arrives: the active segment at 5 gets records and a new active segment
    (pdir / N.segment_file_name(5, N.LOG)).write_bytes(rec(5, b"k4", b"e") + rec(6, b"k1", b"f"))
    for kind in (N.INDEX, N.TIME_INDEX):
        (pdir / N.segment_file_name(5, kind)).write_bytes(b"")
    (pdir / N.segment_file_name(7, N.LOG)).write_bytes(b"")
    write_checkpoint_file(log_dir / N.REPLICATION_OFFSET_CHECKPOINT,
                          C.format_offset_checkpoint({("t", 0): 7}))
    # before the horizon the tombstone stays
    early = tmp_path / "early"
    shutil.copytree(log_dir, early)
    cmp(early, now_ms=T + D - 1, execute=True, force=True)
    assert (3, b"k2", None) in [r[:3] for r in rows(early)]
    cmp(log_dir, now_ms=T + D, options={"delete.retention.ms": D}, execute=True, force=True)
    assert [r[:3] for r in rows(log_dir)] == [(4, b"k3", b"d"), (5, b"k4", b"e"), (6, b"k1", b"f")]
    assert [b[:2] for b in batches(pdir)] == [(4, 4), (5, 5), (6, 6)]
    assert read_checkpoint_file(log_dir / N.CLEANER_OFFSET_CHECKPOINT,
                                C.parse_offset_checkpoint) == {("t", 0): 7}
    assert verify(log_dir, deep=True).ok


def test_last_batch_of_round_kept_empty_and_keyless_dropped(tmp_path):
    log_dir = tmp_path / "logs"
    seg = [rec(0, b"k", b"a"), rec(1, None, b"keyless"), rec(2, b"k", b"b"), rec(3, b"k", None)]
    build_partition(log_dir, [seg, []])
    cmp(log_dir, now_ms=T + 2 * D, execute=True, force=True,
            options={"delete.retention.ms": 0})
    # round 1 stamps the horizon (now + 0) on the tombstone batch, the last of the round
    assert [r[:3] for r in rows(log_dir)] == [(3, b"k", None)]
    # nothing new is dirty: even a forced round has nothing to clean
    assert cmp(log_dir, now_ms=T + 2 * D, force=True).plans == []
    (log_dir / N.CLEANER_OFFSET_CHECKPOINT).unlink()  # clean everything again from offset 0
    cmp(log_dir, now_ms=T + 2 * D, execute=True, force=True,
            options={"delete.retention.ms": 0})
    # still the last batch of the round: kept as a 61-byte empty batch
    pdir = log_dir / "t-0"
    assert batches(pdir) == [(3, 3, 0, 0)] and rows(log_dir) == []
    assert (pdir / N.segment_file_name(0, N.LOG)).stat().st_size == 61


def txn_log() -> list[list[bytes]]:
    """Producer 7 commits k1, producer 8 aborts k1/k2, producer 9 (idempotent) writes k3."""
    txn = dict(producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    abort = dict(producer_id=8, producer_epoch=1, base_sequence=0, is_transactional=True)
    idem = dict(producer_id=9, producer_epoch=0)
    seg0 = [rec(0, b"k1", b"v0"), rec(1, b"k1", b"t1", **txn),
            rec(2, b"k2", b"a2", **abort), rec(3, b"k1", b"a3", **{**abort, "base_sequence": 1}),
            encode_end_txn_marker(offset=4, producer_id=7, producer_epoch=0, coordinator_epoch=3,
                                  commit=True, timestamp=T)]
    seg1 = [encode_end_txn_marker(offset=5, producer_id=8, producer_epoch=1, coordinator_epoch=3,
                                  commit=False, timestamp=T),
            rec(6, b"k3", b"i6", **{**idem, "base_sequence": 0}),
            rec(7, b"k3", b"i7", **{**idem, "base_sequence": 1}), rec(8, b"k2", b"v8")]
    return [seg0, seg1, []]


def test_transactions(tmp_path):
    log_dir = tmp_path / "logs"
    pdir = build_partition(log_dir, txn_log())
    cmp(log_dir, now_ms=T, execute=True, force=True, options={"delete.retention.ms": D})
    # aborted data gone, but producer 8's last data batch (3) stays as an empty batch; its
    # ABORT marker (5) had observed data and is kept, with the .txnindex entry copied from the
    # source segment's (first offset 2, as Kafka's cleaner keeps it); the COMMIT
    # marker (4) is kept (batch 1 of its transaction survives); batch 6 is superseded and is not
    # producer 9's last batch (7 is)
    assert [r[:3] for r in rows(log_dir)] == [(1, b"k1", b"t1"), (7, b"k3", b"i7"), (8, b"k2", b"v8")]
    first = batches(pdir)
    assert first == [(1, 1, 0x10, 1), (3, 3, 0x10, 0), (4, 4, 0x30, 1), (5, 5, 0x30, 1),
                     (7, 7, 0, 1), (8, 8, 0, 1)]
    txn = (pdir / N.segment_file_name(0, N.TXN_INDEX)).read_bytes()
    assert struct.unpack(">hqqqq", txn) == (0, 8, 2, 5, 6)
    assert verify(log_dir, deep=True).ok
    # later rounds change nothing while those batches are the producers' last ones (producers
    # not yet expired)
    (log_dir / N.CLEANER_OFFSET_CHECKPOINT).unlink()
    cmp(log_dir, now_ms=T + 2 * D, execute=True, force=True,
        options={"delete.retention.ms": D, "producer.id.expiration.ms": 10 * D})
    assert batches(pdir) == first
    assert verify(log_dir, deep=True).ok
    # once producers expired (idle >= producer.id.expiration.ms, default one day) their last
    # batches are no longer kept: producer 8's empty batch goes
    (log_dir / N.CLEANER_OFFSET_CHECKPOINT).unlink()
    cmp(log_dir, now_ms=T + 2 * D, execute=True, force=True, options={"delete.retention.ms": D})
    assert (3, 3, 0x10, 0) not in batches(pdir)
    assert [r[:3] for r in rows(log_dir)] == [(1, b"k1", b"t1"), (7, b"k3", b"i7"), (8, b"k2", b"v8")]
    assert verify(log_dir, deep=True).ok


def test_txnindex_entries_as_kafkas_cleaner_copies_them(tmp_path):
    """Kafka's cleaner (CleanedTransactionMetadata) lists an aborted transaction in the cleaned
    .txnindex in the cleaning that drops its data — the entry as the source .txnindex had it —
    and in no later one, while it keeps the marker until its delete horizon (cl-txn against a
    real 4.1 broker, tests/oracle/test_cleaner_oracle.py)."""
    log_dir = tmp_path / "logs"
    abort = dict(producer_id=8, producer_epoch=1, base_sequence=0, is_transactional=True)
    later = dict(producer_id=8, producer_epoch=1, base_sequence=2, is_transactional=True)

    def marker(offset: int, commit: bool) -> bytes:
        return encode_end_txn_marker(offset=offset, producer_id=8, producer_epoch=1,
                                     coordinator_epoch=3, commit=commit, timestamp=T)

    pdir = build_partition(log_dir, [
        [rec(0, b"k1", b"v0"), rec(1, b"k1", b"v1"), rec(2, b"k2", b"a2", **abort),
         rec(3, b"k1", b"a3", **{**abort, "base_sequence": 1})],
        [rec(4, b"k9", b"v4"), marker(5, False), rec(6, b"k3", b"t6", **later), marker(7, True)],
        [rec(8, b"k1", b"v8")], []])
    source = (pdir / N.segment_file_name(4, N.TXN_INDEX)).read_bytes()
    assert source == TxnIndex.from_entries(4, [(8, 2, 5, 6)]).to_bytes()
    opts = {"delete.retention.ms": D, "segment.bytes": 1 << 20}

    def again(now: int) -> bytes | None:
        (log_dir / N.CLEANER_OFFSET_CHECKPOINT).unlink(missing_ok=True)
        cmp(log_dir, now_ms=now, execute=True, force=True, options=opts)
        assert verify(log_dir, deep=True).ok
        txn = pdir / N.segment_file_name(0, N.TXN_INDEX)
        return txn.read_bytes() if txn.exists() else None

    # the aborted batches (not producer 8's last: 6 is) go, their marker stays, listed as the
    # source segment listed it
    assert again(T) == TxnIndex.from_entries(0, [(8, 2, 5, 6)]).to_bytes()
    assert [b[0] for b in batches(pdir)] == [4, 5, 6, 7, 8]  # k1 at 8 supersedes 0, 1
    # a second cleaning sees no batch of that transaction: the marker, kept until its delete
    # horizon, is listed no more
    assert again(T) is None and 5 in [b[0] for b in batches(pdir)]
    assert again(T + D) is None and 5 not in [b[0] for b in batches(pdir)]


def test_snapshots_of_replaced_segments_go_with_them(tmp_path):
    """UnifiedLog.replaceSegments renames the producer snapshots of the segments a cleaning
    replaced (all but those a cleaned segment starts at) .deleted, then deletes them."""
    from kafkalog_spark.codec.files.snapshot import ProducerSnapshot

    log_dir = tmp_path / "logs"
    segs = [[rec(i, f"k{i % 3}".encode(), b"v%d" % i) for i in range(j, j + 5)]
            for j in range(0, 20, 5)] + [[]]
    pdir = build_partition(log_dir, segs)
    for base in (5, 10, 15, 20):
        (pdir / N.segment_file_name(base, N.SNAPSHOT)).write_bytes(ProducerSnapshot(()).to_bytes())
    cmp(log_dir, now_ms=T, execute=True, force=True, options={"segment.bytes": 1 << 20})
    assert [p.name for p in sorted(pdir.glob("*.log"))] == [N.segment_file_name(b, N.LOG)
                                                          for b in (0, 20)]
    # segments 0-15 cleaned into segment 0: the snapshots at 5, 10 and 15 go, 20's stays
    assert sorted(p.name for p in pdir.glob("*.snapshot*")) == [N.segment_file_name(20, N.SNAPSHOT)]
    assert verify(log_dir, deep=True).ok


def test_index_interval_bytes_of_the_topic_builds_the_cleaned_indexes(tmp_path):
    log_dir = tmp_path / "logs"
    segs = [[rec(i, f"k{i}".encode(), b"v" * 200) for i in range(j, j + 20)]
            for j in range(0, 60, 20)] + [[]]
    pdir = build_partition(log_dir, segs)
    cmp(log_dir, now_ms=T, execute=True, force=True,
        options={"segment.bytes": 1 << 20, "index.interval.bytes": 500})
    log = (pdir / N.segment_file_name(0, N.LOG)).read_bytes()
    built = build_indexes(log, 0, index_interval_bytes=500)
    assert len(built.offset_index.to_bytes()) > len(build_indexes(log, 0).offset_index.to_bytes())
    assert (pdir / N.segment_file_name(0, N.INDEX)).read_bytes() == built.offset_index.to_bytes()
    assert (pdir / N.segment_file_name(0, N.TIME_INDEX)).read_bytes() == \
        built.time_index.to_bytes()


def test_discardable_markers_get_a_horizon_then_go(tmp_path):
    log_dir = tmp_path / "logs"
    txn = dict(producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)

    def commit(offset: int) -> bytes:
        return encode_end_txn_marker(offset=offset, producer_id=7, producer_epoch=0,
                                     coordinator_epoch=1, commit=True, timestamp=T)

    pdir = build_partition(log_dir, [[rec(0, b"k", b"t0", **txn), commit(1),
                                      rec(2, b"k", b"t2", **{**txn, "base_sequence": 1}),
                                      commit(3), rec(4, b"z", b"v4")], []])
    opts = {"delete.retention.ms": D}

    def again(now: int) -> dict[int, tuple]:
        (log_dir / N.CLEANER_OFFSET_CHECKPOINT).unlink(missing_ok=True)
        cmp(log_dir, now_ms=now, execute=True, force=True, options=opts)
        assert verify(log_dir, deep=True).ok
        return {x[0]: x for x in batches(pdir)}

    # round 1: batch 0 superseded (not producer 7's last data batch) -> gone; its COMMIT
    # marker saw it this round -> kept unchanged
    assert again(T) == {1: (1, 1, 0x30, 1), 2: (2, 2, 0x10, 1), 3: (3, 3, 0x30, 1),
                        4: (4, 4, 0, 1)}
    # round 2: marker 1 has no data left -> discardable -> rebuilt with a delete horizon
    b = again(T)
    assert b[1] == (1, 1, 0x70, 1) and b[3] == (3, 3, 0x30, 1)
    # round 3, past the horizon: marker 1 goes entirely
    assert sorted(again(T + D)) == [2, 3, 4]
    assert [r[:3] for r in rows(log_dir)] == [(2, b"k", b"t2"), (4, b"z", b"v4")]


def test_no_transactional_data_above_lso_is_touched(tmp_path):
    log_dir = tmp_path / "logs"
    txn = dict(producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    build_partition(log_dir, [[rec(0, b"k", b"a"), rec(1, b"k", b"b")],
                              [rec(2, b"k", b"open", **txn)], [rec(3, b"x", b"y")], []])
    result = cmp(log_dir, now_ms=T, force=True)
    assert result.plans[0].end_offset == 2


def test_refuses_a_locked_log_dir(tmp_path, lock_holder):
    log_dir, _ = worked_example(tmp_path)
    lock_holder(log_dir)
    with pytest.raises(LogDirLockedError):
        cmp(log_dir, now_ms=T, execute=True)


def test_kafka_python_reads_the_output(tmp_path):
    from kafka.record import MemoryRecords

    log_dir = tmp_path / "logs"
    pdir = build_partition(log_dir, txn_log())
    cmp(log_dir, now_ms=T, execute=True, force=True)
    got = []
    for log in sorted(pdir.glob("*.log")):
        records = MemoryRecords(log.read_bytes())
        while records.has_next():
            batch = records.next_batch()
            if not batch.is_control_batch:
                got += [(r.offset, r.key, r.value) for r in batch]
    assert got == [(1, b"k1", b"t1"), (2, b"k2", b"a2"), (3, b"k1", b"a3"), (7, b"k3", b"i7"),
                   (8, b"k2", b"v8")][:0] + [r[:3] for r in rows(log_dir)] or got


REAL = [("yuanliubei__kafka-source-code", "__consumer_offsets-17"),
        ("DonaldY__kafka-2.7.1", "__consumer_offsets-17"),
        ("DonaldY__kafka-2.7.1", "__consumer_offsets-28")]


def _find(root: Path, repo: str, name: str) -> Path:
    hits = sorted((root / repo).rglob(name))
    assert hits, f"{repo}/{name} is missing from the real fixtures"
    return hits[0]


def prepare_real(src: Path, log_dir: Path, name: str) -> None:
    """A copy of a real partition dir in ``log_dir``, with an empty active segment when it has
    one segment only and the HW a stopped broker had (its log end)."""
    shutil.copytree(src, log_dir / name)
    topic, part = name.rsplit("-", 1)
    segs = sorted((log_dir / name).glob("*.log"))
    if len(segs) < 2:
        (log_dir / name / N.segment_file_name(10**9, N.LOG)).write_bytes(b"")
    leo = max(int(scan_entries(s.read_bytes()).last_offset[-1]) + 1
              for s in segs if s.stat().st_size)
    write_checkpoint_file(log_dir / N.REPLICATION_OFFSET_CHECKPOINT,
                          C.format_offset_checkpoint({(topic, int(part)): leo}))


@pytest.mark.fixtures
@pytest.mark.parametrize("repo,name", REAL)
def test_real_compacted_fixtures(shared_fixtures, tmp_path, repo, name):
    from kafka.record import MemoryRecords

    src = _find(shared_fixtures, repo, name)
    log_dir = tmp_path / "logs"
    prepare_real(src, log_dir, name)
    before = rows(log_dir)
    cmp(log_dir, now_ms=T, execute=True, force=True)
    once = rows(log_dir)
    # the latest value of every key survives with its offset; nothing else appears
    latest = {}
    for r in before:
        latest[r[1]] = r[:4]
    assert {r[0] for r in once} <= {r[0] for r in before}
    assert {r for r in latest.values() if r[2] is not None} <= {r[:4] for r in once}
    assert verify(log_dir, deep=True).ok
    # compacting already-compacted data changes no record
    cmp(log_dir, now_ms=T, execute=True, force=True)
    assert rows(log_dir) == once
    for log in sorted((log_dir / name).glob("*.log")):
        records = MemoryRecords(log.read_bytes())
        while records.has_next():
            list(records.next_batch())


class Crash(Exception):
    pass


def crash_at(k: int):
    """A ``step`` hook that raises :class:`Crash` at the ``k``-th step (0-based)."""
    seen = [0]

    def step(label: str) -> None:
        if seen[0] == k:
            raise Crash(label)
        seen[0] += 1

    return step


def test_crash_at_every_swap_step_then_recover(tmp_path):
    from kafkalog_spark.recovery.recover import recover

    opts = {"delete.retention.ms": D}
    ref, _ = worked_example(tmp_path / "ref")
    old = rows(ref)
    labels: list[str] = []
    cmp(ref, now_ms=T, options=opts, execute=True, step=labels.append)
    new = rows(ref)
    assert len(labels) > 8
    for k in range(len(labels)):
        log_dir, _ = worked_example(tmp_path / f"c{k}")
        with pytest.raises(Crash):
            cmp(log_dir, now_ms=T, options=opts, execute=True, step=crash_at(k))
        recover(log_dir, execute_plan=True)
        got = rows(log_dir)
        assert got in (old, new), labels[k]
        assert verify(log_dir, deep=True).ok, labels[k]
        cmp(log_dir, now_ms=T, options=opts, execute=True, force=True)
        assert [r[:3] for r in rows(log_dir)] == [r[:3] for r in new], labels[k]


def test_cli_compact(tmp_path):
    from click.testing import CliRunner

    from kafkalog_spark.cli import cli

    log_dir, _ = worked_example(tmp_path)
    args = ["compact", str(log_dir), "--now", str(T), "--config", f"delete.retention.ms={D}",
            "--config", "cleanup.policy=compact"]
    dry = CliRunner().invoke(cli, args)
    assert dry.exit_code == 1, dry.output
    assert "t-0" in dry.output and len(rows(log_dir)) == 5
    done = CliRunner().invoke(cli, args + ["--execute", "--json"])
    assert done.exit_code == 0, done.output
    assert '"records_kept": 3' in done.output and len(rows(log_dir)) == 3


def test_rebuilt_log_append_time_batch_matches_kafka(tmp_path):
    """A rebuilt LOG_APPEND_TIME batch: Kafka's cleaner reads each record's timestamp as the
    batch's append time (DefaultRecord.readFrom overrides it when the batch is LOG_APPEND_TIME)
    and rebuilds with the original timestamp type and logAppendTime = maxTimestamp
    (MemoryRecords.buildRetainedRecordsInto), so every kept record gets delta 0 and the base
    timestamp becomes the append time; the producer's own per-record deltas are gone."""
    from kafkalog_spark.codec import layout as L

    append = T + 5_000
    spec = BatchSpec(base_offset=0, timestamp_type=L.LOG_APPEND_TIME, log_append_time=append)
    first = encode_batch([b"a", b"b", b"a"], [b"1", b"2", b"3"], [T, T + 7, T + 30], spec=spec)
    log_dir = tmp_path / "logs"
    build_partition(log_dir, [[first], [rec(3, b"z", b"last")]])
    cmp(log_dir, now_ms=T, execute=True, force=True)
    data = (log_dir / "t-0" / N.segment_file_name(0, N.LOG)).read_bytes()
    t = scan_entries(data)
    assert t.count[0] == 2 and int(t.last_offset[0]) == 2
    expect = encode_batch([b"b", b"a"], [b"2", b"3"], [append, append], offset_deltas=[1, 2],
                          spec=BatchSpec(base_offset=0, timestamp_type=L.LOG_APPEND_TIME,
                                         log_append_time=append, last_offset_delta=2))
    assert data[:int(t.entry_size[0])] == expect
    assert [r[3] for r in rows(log_dir)][:2] == [rows(log_dir)[0][3]] * 2


@pytest.mark.parametrize("now, options, emptied", [
    (T, {}, True),                                   # producer active: its last batch stays
    (T + D - 1, {}, True),
    (T + D, {}, False),                              # idle for producer.id.expiration.ms
    (T + 10, {"producer.id.expiration.ms": 10}, False),
])
def test_expired_producers_lose_their_last_batch(tmp_path, now, options, emptied):
    segs = [[rec(0, b"k", b"old", producer_id=7, producer_epoch=0, base_sequence=0),
             rec(1, b"k", b"new")], [rec(2, b"z", b"x")]]
    log_dir = tmp_path / "logs"
    build_partition(log_dir, segs)
    cmp(log_dir, options=options, now_ms=now, execute=True, force=True)
    got = batches(log_dir / "t-0")
    assert ((0, 0, 0, 0) in got) is emptied  # the 61-byte empty batch of producer 7
    assert [r[0] for r in rows(log_dir)] == [1, 2]
    assert verify(log_dir).ok


def test_partitions_are_swapped_one_at_a_time_and_a_failed_rewrite_leaves_no_cleaned_file(
        tmp_path, monkeypatch):
    """The local round rewrites into ``.cleaned`` files and swaps partition by partition (its
    memory holds one partition's work, not the log dir's); a write failing in the second
    partition leaves the first one compacted, the second one untouched, no ``.cleaned`` file,
    and a typed error naming the file."""
    import errno

    from kafkalog_spark.compaction import cleaned
    from kafkalog_spark.errors import LogDirError

    log_dir = tmp_path / "logs"
    segment = [rec(0, b"k1", b"a"), rec(1, b"k1", b"b"), rec(2, b"k2", b"c")]
    for p in (0, 1):
        build_partition(log_dir, [segment, []], partition=p)
    before = rows(log_dir)
    real = cleaned.rewrite_group
    calls = []

    def failing(task, retained, sink=None):
        calls.append(task.partition)
        if task.partition == 1:
            sink.write(b"partial")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(task, retained, sink)

    monkeypatch.setattr(cleaned, "rewrite_group", failing)
    with pytest.raises(LogDirError, match="No space left") as err:
        cmp(log_dir, now_ms=T, execute=True)
    assert err.value.location.file.endswith("t-1/00000000000000000000.log.cleaned")
    assert calls == [0, 1]
    assert not list(log_dir.rglob("*.cleaned"))
    assert batches(log_dir / "t-0") != batches(log_dir / "t-1")  # t-0 compacted, t-1 not
    assert (log_dir / "t-1" / N.segment_file_name(0, N.LOG)).read_bytes() == b"".join(segment)
    assert verify(log_dir, deep=True).ok
    monkeypatch.setattr(cleaned, "rewrite_group", real)
    cmp(log_dir, now_ms=T, execute=True)
    assert batches(log_dir / "t-0") == batches(log_dir / "t-1") and len(rows(log_dir)) < len(before)
