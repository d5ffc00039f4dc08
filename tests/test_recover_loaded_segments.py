"""recover and the segments a broker's load recovers (docs/kafka-oracle.md L3): below the
recovery point a segment keeps its index files as they are — the cleaner's ``.txnindex``
entries for transactions whose data it removed included — unless the load's sanity check fails
(a missing ``.index``, a ``.txnindex`` entry ending below the base offset: the broker then
recovers the segment) or the file is missing or inconsistent with the log (repaired, where the
broker would leave it). Checked against a real 4.1 broker in
tests/oracle/test_loader_oracle.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkalog_spark import verify
from kafkalog_spark.cli import cli
from kafkalog_spark.codec.files import checkpoints as C
from kafkalog_spark.codec.files import naming as N
from kafkalog_spark.codec.files.index import TxnIndex
from kafkalog_spark.codec.files.snapshot import ProducerStateTracker
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.codec.records.encode import encode_end_txn_marker
from kafkalog_spark.recovery.loader import loaded_snapshots, recovered_from_recovery_point
from kafkalog_spark.recovery.rebuild import rebuild_indexes
from kafkalog_spark.recovery.recover import recover as _recover

from test_compaction import D, T, build_partition, cmp, rec
from test_datasource_read import read
from test_recover import _crash_run

PID = 8


def recover(*args, **kwargs):
    """``recover`` as of the data's time: no producer of these tests expires (the expiry has a
    test of its own, test_recover.py)."""
    return _recover(*args, now_ms=T, **kwargs)


def _marker(offset: int, commit: bool) -> bytes:
    return encode_end_txn_marker(offset=offset, producer_id=PID, producer_epoch=1,
                                 coordinator_epoch=3, commit=commit, timestamp=T)


def _txn(offset: int, key: bytes, value: bytes, seq: int) -> bytes:
    return rec(offset, key, value, producer_id=PID, producer_epoch=1, base_sequence=seq,
               is_transactional=True)


def _partition(log_dir: Path) -> Path:
    """Segments 0 (an aborted transaction's data), 4 (its ABORT marker: ``.txnindex`` entry
    (8, 2, 5, 6); a committed transaction), 8 and 9 (the active one); log end offset 10."""
    return build_partition(log_dir, [
        [rec(0, b"k1", b"v0"), rec(1, b"k1", b"v1"), _txn(2, b"k2", b"a2", 0),
         _txn(3, b"k1", b"a3", 1)],
        [rec(4, b"k9", b"v4"), _marker(5, False), _txn(6, b"k3", b"t6", 2), _marker(7, True)],
        [rec(8, b"k1", b"v8")], [rec(9, b"k4", b"v9")]])


def _stopped(log_dir: Path, recovery_point: int | None, *, clean: bool = True) -> None:
    """As a stopped broker leaves its log dir: the recovery point (None: no entry) and the
    clean-shutdown marker."""
    entries = {} if recovery_point is None else {("t", 0): recovery_point}
    (log_dir / N.RECOVERY_POINT_CHECKPOINT).write_text(C.format_offset_checkpoint(entries))
    marker = log_dir / N.CLEAN_SHUTDOWN_FILE
    if clean:
        marker.write_text("")
    else:
        marker.unlink(missing_ok=True)


def _cleaned(tmp_path: Path) -> tuple[Path, Path]:
    """The partition after one cleaning: the aborted data is gone, its marker stays, and the
    cleaned segment 0's ``.txnindex`` lists the transaction as the source segment did (what
    Kafka's cleaner writes, tests/oracle/test_cleaner_oracle.py; a replay of the cleaned log
    gives no entry)."""
    log_dir = tmp_path / "logs"
    pdir = _partition(log_dir)
    cmp(log_dir, now_ms=T, execute=True, force=True,
        options={"delete.retention.ms": D, "segment.bytes": 1 << 20})
    assert (pdir / N.segment_file_name(0, N.TXN_INDEX)).read_bytes() == \
        TxnIndex.from_entries(0, [(PID, 2, 5, 6)]).to_bytes()
    return log_dir, pdir


def _files(log_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(log_dir)): p.read_bytes() for p in sorted(log_dir.rglob("*"))
            if p.is_file() and p.name != N.LOCK_FILE}


def _committed(log_dir: Path) -> list[dict]:
    return read({"path": str(log_dir), "kafka.isolation.level": "read_committed",
                 "includeMetadata": "true"})[0].to_pylist()


@pytest.mark.parametrize("recovery_point, clean", [(10, True), (10, False), (9, False)],
                         ids=["clean-shutdown", "crash-nothing-unflushed", "crash-active-unflushed"])
def test_a_healthy_cleaned_log_is_left_byte_for_byte(tmp_path, recovery_point, clean):
    """The cleaned segment lies below the recovery point: the broker's load does not recover
    it, so its .txnindex keeps the cleaner's entry; recover changes no byte, and reads at
    read_committed are the same."""
    log_dir, pdir = _cleaned(tmp_path)
    _stopped(log_dir, recovery_point, clean=clean)
    before, committed = _files(log_dir), _committed(log_dir)
    # the producer snapshots a broker's load takes (none was written offline)
    recover(log_dir, execute_plan=True)
    settled = _files(log_dir)
    assert {n: c for n, c in settled.items() if not n.endswith(N.SNAPSHOT)} == before
    plan = recover(log_dir)
    assert not plan.changed, [a.to_dict() for a in plan.actions]
    assert not recover(log_dir, execute_plan=True).changed and _files(log_dir) == settled
    assert _committed(log_dir) == committed
    assert verify(log_dir, deep=True).ok


def test_a_crash_with_every_segment_unflushed_rebuilds_it_as_kafka_does(tmp_path):
    """Recovery point 0 after a crash: the broker's load recovers every segment, and
    LogSegment.recover rebuilds the cleaned segment's .txnindex from the markers — the marker
    whose transaction's data the cleaner removed aborts nothing, so the file goes empty."""
    log_dir, pdir = _cleaned(tmp_path)
    _stopped(log_dir, 0, clean=False)
    committed = _committed(log_dir)
    done = recover(log_dir, execute_plan=True)
    txn = pdir / N.segment_file_name(0, N.TXN_INDEX)
    assert [a.reason for a in done.actions if a.path == str(txn)] == [
        "aborted transactions of the segment's markers (0 entries), as the segment's recovery "
        "rebuilds it"]
    assert txn.read_bytes() == b""
    assert _committed(log_dir) == committed and verify(log_dir, deep=True).ok


@pytest.mark.parametrize("clean", [True, False], ids=["clean-shutdown", "crash"])
def test_a_missing_txnindex_below_the_recovery_point(tmp_path, clean):
    """The broker's load does not notice it (LogSegment.sanityCheck looks for the .index
    only) and leaves segment 4's aborted records visible to read_committed consumers; recover
    leaves it missing too and says so, and rebuild-index writes the bytes the broker wrote."""
    log_dir = tmp_path / "logs"
    pdir = _partition(log_dir)
    _stopped(log_dir, 10, clean=clean)
    recover(log_dir, execute_plan=True)  # the producer snapshots a broker's load takes
    txn = pdir / N.segment_file_name(4, N.TXN_INDEX)
    written, committed = txn.read_bytes(), _committed(log_dir)
    assert [r["offset"] for r in committed] == [0, 1, 4, 6, 8, 9]
    state = _files(log_dir)
    txn.unlink()
    assert not verify(log_dir).ok
    done = recover(log_dir, execute_plan=True)
    assert not done.changed and not txn.exists()
    assert [line for p in done.partitions for line in p.left] == [
        f"{txn.name}: missing, left as the broker's load leaves a segment it does not recover "
        f"(it serves it as it is); `kafkalog rebuild-index --execute {txn.with_suffix('.log')}` "
        "rebuilds it"]
    printed = CliRunner().invoke(cli, ["recover", str(log_dir)])  # now: PID 8 (2023) expired
    assert f"  left: {txn.name}: missing" in printed.output
    # after a crash the load takes the log end's snapshot again from one it loaded, without
    # the expired producer; after a clean shutdown it takes none
    assert printed.exit_code == (0 if clean else 1), printed.output
    # read_committed goes by the .txnindex, as the broker's fetch does: the aborted records
    # of segment 4's marker show, as they do to the broker's consumers
    assert [r["offset"] for r in _committed(log_dir)] == [0, 1, 2, 3, 4, 6, 8, 9]
    rebuilt = rebuild_indexes(log_dir, execute_plan=True)
    assert [a.path for a in rebuilt.actions] == [str(txn)]
    assert txn.read_bytes() == written and _files(log_dir) == state
    assert _committed(log_dir) == committed and verify(log_dir).ok


def _with_segment_4_txnindex(tmp_path: Path, entry: tuple[int, int, int, int]):
    """The partition after a clean shutdown, segment 4's ``.txnindex`` replaced by one holding
    ``entry``: ``(log dir, partition dir, that file, the bytes the broker wrote)``."""
    log_dir = tmp_path / "logs"
    pdir = _partition(log_dir)
    _stopped(log_dir, 10)
    txn = pdir / N.segment_file_name(4, N.TXN_INDEX)
    written = txn.read_bytes()
    txn.write_bytes(TxnIndex.from_entries(4, [entry]).to_bytes())
    return log_dir, pdir, txn, written


def test_a_txnindex_failing_the_loads_sanity_check_recovers_its_segment(tmp_path):
    """An entry ending below the segment's base offset: TransactionIndex.sanityCheck throws
    CorruptIndexException and the loader recovers the segment (recoverSegment), after a clean
    shutdown too — a .txnindex rebuilt from the markers, and producer snapshots where its
    producer-state rebuilds leave them."""
    log_dir, pdir, txn, written = _with_segment_4_txnindex(tmp_path, (PID, 2, 3, 6))
    done = recover(log_dir, execute_plan=True)
    assert [a.reason for a in done.actions if a.path == str(txn)] == [
        "aborted transactions of the segment's markers (1 entries), as the segment's recovery "
        "rebuilds it (its .txnindex fails the load's sanity check (corrupt transaction index: "
        "aborted transaction last offset 3 is below the base offset))"]
    assert txn.read_bytes() == written
    assert sorted(p.name for p in pdir.glob("*.snapshot")) == [
        N.segment_file_name(o, N.SNAPSHOT) for o in (4, 8, 9, 10)]
    assert verify(log_dir, deep=True).ok and not recover(log_dir).changed


def test_an_inconsistent_txnindex_below_the_recovery_point_is_left_as_the_broker_leaves_it(
        tmp_path):
    """An entry the load's sanity check passes but the markers contradict (a first offset
    after the transaction's data): the broker keeps it, so does recover (naming it); verify
    reports it and rebuild-index rebuilds it."""
    log_dir, _, txn, written = _with_segment_4_txnindex(tmp_path, (PID, 4, 5, 6))
    wrong = txn.read_bytes()
    done = recover(log_dir, execute_plan=True)
    assert txn.read_bytes() == wrong
    assert [line.split(",")[0] for p in done.partitions for line in p.left] == [
        f"{txn.name}: inconsistent with its .log"]
    assert not verify(log_dir, deep=True).ok
    rebuild_indexes(log_dir, execute_plan=True)
    assert txn.read_bytes() == written and verify(log_dir, deep=True).ok


def test_a_missing_index_below_the_recovery_point_recovers_its_segment(tmp_path):
    """LogSegment.sanityCheck's NoSuchFileException: the loader recovers the segment, and
    its producer-state rebuild deletes the snapshots above the segment's base (the one at the
    log end) before taking them again."""
    log_dir = tmp_path / "logs"
    pdir = _partition(log_dir)
    _stopped(log_dir, 10)
    recover(log_dir, execute_plan=True)
    assert sorted(p.name for p in pdir.glob("*.snapshot")) == [
        N.segment_file_name(o, N.SNAPSHOT) for o in (8, 9, 10)]
    index = pdir / N.segment_file_name(4, N.INDEX)
    good = index.read_bytes()
    index.unlink()
    recover(log_dir, execute_plan=True)
    assert index.read_bytes() == good
    assert sorted(p.name for p in pdir.glob("*.snapshot")) == [
        N.segment_file_name(o, N.SNAPSHOT) for o in (4, 8, 9, 10)]
    assert verify(log_dir, deep=True).ok and not recover(log_dir).changed


@pytest.mark.parametrize("damage", ["missing-index", "corrupt-txnindex"])
def test_killed_at_every_step_of_a_segments_recovery_then_completed(tmp_path, damage):
    """The files that make the load recover a segment below the recovery point are written
    last: a run killed before leaves the next one the same plan, so the same end."""
    log_dir = tmp_path / "logs"
    pdir = _partition(log_dir)
    _stopped(log_dir, 10)
    recover(log_dir, execute_plan=True)  # the snapshots of a broker's load
    if damage == "missing-index":
        (pdir / N.segment_file_name(4, N.INDEX)).unlink()
    else:
        (pdir / N.segment_file_name(4, N.TXN_INDEX)).write_bytes(
            TxnIndex.from_entries(4, [(PID, 2, 3, 6)]).to_bytes())
    reference = tmp_path / "reference" / "logs"
    shutil.copytree(log_dir, reference)
    labels: list[str] = []
    recover(reference, execute_plan=True, step=labels.append)
    expected = _files(reference)
    repaired = N.segment_file_name(4, N.INDEX if damage == "missing-index" else N.TXN_INDEX)
    writes = [label for label in labels if label.startswith("write ")]
    assert len(writes) >= 2 and writes[-1].endswith(repaired), labels
    for k in range(1, len(labels) + 1):
        work = tmp_path / f"run{k}" / "logs"
        shutil.copytree(log_dir, work)
        _crash_run(work, k)
        recover(work, execute_plan=True)
        assert _files(work) == expected, labels[k - 1]
        shutil.rmtree(work.parent)


def test_a_snapshot_the_cleaner_left_ahead_of_the_log_is_kept(tmp_path):
    """A snapshot taken at a roll knows a producer's batch the cleaner later removed (it kept
    the producer's last one): the broker goes on from its state, verify accepts it, and
    recover keeps it byte for byte (seen on a 4.1 broker's cleaned log,
    tests/oracle/test_loader_cleaned_oracle.py)."""
    log_dir = tmp_path / "logs"
    idem = dict(producer_id=5, producer_epoch=0, partition_leader_epoch=0)
    plain = dict(partition_leader_epoch=0)
    first = [rec(0, b"k9", b"a", **plain), rec(1, b"k7", b"b", base_sequence=0, **idem),
             rec(2, b"k1", b"c", base_sequence=1, **idem)]
    pdir = build_partition(log_dir, [first, [rec(3, b"k2", b"d", **plain)],
                                     [rec(4, b"k1", b"e", base_sequence=2, **idem),
                                      rec(5, b"k9", b"f", **plain)],
                                     [rec(6, b"k3", b"g", **plain)]])
    tracker = ProducerStateTracker()
    tracker.apply(b"".join(first))
    snapshot = pdir / N.segment_file_name(3, N.SNAPSHOT)
    snapshot.write_bytes(tracker.snapshot().to_bytes())  # producer 5 last at offset 2
    # the broker's leader epochs: epoch 0 from offset 0, and the epoch it began at the log end
    epochs = pdir / N.LEADER_EPOCH_CHECKPOINT
    epochs.write_text(C.format_leader_epoch_checkpoint([C.EpochEntry(0, 0), C.EpochEntry(3, 7)]))
    cmp(log_dir, now_ms=T, execute=True, force=True,
        options={"delete.retention.ms": D, "segment.bytes": 120})
    assert segment_offsets(pdir, 0) == [1]  # offsets 0 and 2 cleaned away
    _stopped(log_dir, 7)
    held = snapshot.read_bytes()
    assert verify(log_dir, deep=True).ok
    recover(log_dir, execute_plan=True)
    assert snapshot.read_bytes() == held
    # the epoch at the log end goes (the loader's truncateFromEnd); epoch 0 still starts at 0
    assert C.parse_leader_epoch_checkpoint(epochs.read_text()) == [C.EpochEntry(0, 0)]
    assert verify(log_dir, deep=True).ok and not recover(log_dir).changed


def segment_offsets(pdir: Path, base: int) -> list[int]:
    return scan_entries((pdir / N.segment_file_name(base, N.LOG)).read_bytes()).offset.tolist()


def test_the_loaders_producer_snapshots():
    """The model of the load's snapshot files against what a 4.1 broker left
    (tests/oracle/test_loader_oracle.py) and its rules one by one."""
    bases, leo = [0, 150, 156, 306, 312, 468, 618], 624
    ends = [*bases[1:], leo]

    def load(existing, *, point=0, repaired=(), clean=False, start=0):
        return loaded_snapshots(bases, ends, leo, log_start_checkpoint=start, log_start=start,
                                repaired=repaired, clean_shutdown=clean, existing=existing,
                                recovered=recovered_from_recovery_point(
                                    bases, None if clean else point))

    # a crash with nothing flushed and no snapshot: one at every base above the log start
    assert load([]).offsets == [*bases[1:], leo]
    # recovery from the segment holding offset 400 (312): a snapshot at its base and above
    # (the one at the log end deleted and taken again); the strays go
    got = load([150, 200, 306, 624], point=400)
    assert got.offsets == [150, 306, 312, 468, 618, 624]
    assert got.deleted == {200: "at no segment's base offset (the loader's removeStraySnapshots "
                                "deletes it)"}
    # a clean shutdown recovers nothing; the largest stray above the last base stays
    assert load([156, 620], clean=True).offsets == [156, 620, 624]
    # a repaired segment (missing .index): snapshots above its base are deleted, and only
    # those its recovery and the final rebuild (the last two bases it passes) take come back
    got = load([150, 156, 306, 312, 624], clean=True, repaired=[2])
    assert got.offsets == [150, 156, 306, 468, 618, 624]
    assert set(got.deleted) == {312}
    # at or below the log start
    assert load([150, 306], clean=True, start=156).deleted == {
        150: "at or below the log start offset 156 (the loader's "
             "ProducerStateManager.truncateAndReload deletes it)"}


def test_rebuild_index_keeps_the_cleaners_txnindex(tmp_path):
    """kafkalog rebuild-index rewrites an index verify finds consistent only with --force."""
    from kafkalog_spark.recovery.rebuild import rebuild_indexes

    log_dir, pdir = _cleaned(tmp_path)
    before = _files(log_dir)
    assert not rebuild_indexes(log_dir, execute_plan=True).actions
    assert _files(log_dir) == before
    forced = rebuild_indexes(log_dir, execute_plan=True, force=True)
    assert [Path(a.path).name for a in forced.actions] == [N.segment_file_name(0, N.TXN_INDEX)]
    shutil.rmtree(log_dir.with_name("logs.kafkalog-quarantine"), ignore_errors=True)
