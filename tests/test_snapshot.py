"""Producer snapshots: golden vectors, every real snapshot, damage, and state rebuilt from logs."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafkalog_spark.codec.files.snapshot import (ProducerEntry, ProducerSnapshot,
                                                 ProducerStateTracker, decrement_sequence,
                                                 increment_sequence, java_hashmap_order,
                                                 read_snapshot, rebuild_producer_snapshot)
from kafkalog_spark.errors import CorruptIndexError, InvalidOptionError
from test_index import ITUMELENG, marker, txn_batch

ONE_ENTRY_HEX = ("00015389a1130000000100000000000003e80002000000090000000000000096000000040000018bcfe568"
                 "7b00000007ffffffffffffffff")
EMPTY_HEX = "000148674bc700000000"


def test_golden_snapshots() -> None:
    snap = read_snapshot(bytes.fromhex(ONE_ENTRY_HEX))
    assert snap.entries == (ProducerEntry(1000, 2, 9, 150, 4, 1700000000123, 7, -1),)
    assert snap.entries[0].first_sequence == 5 and snap.entries[0].has_batch_metadata
    assert snap.to_bytes().hex() == ONE_ENTRY_HEX
    assert ProducerSnapshot(snap.entries).to_bytes().hex() == ONE_ENTRY_HEX
    assert len(read_snapshot(bytes.fromhex(EMPTY_HEX))) == 0
    assert ProducerSnapshot(()).to_bytes().hex() == EMPTY_HEX


@pytest.mark.fixtures
def test_every_real_snapshot_parses_and_round_trips(shared_fixtures: Path) -> None:
    files = sorted(shared_fixtures.glob("**/*.snapshot"))
    assert len(files) >= 20
    for f in files:
        raw = f.read_bytes()
        assert read_snapshot(raw, file=str(f)).to_bytes() == raw, f


@pytest.mark.fixtures
def test_three_producer_snapshot(shared_fixtures: Path) -> None:
    raw = (shared_fixtures / "DonaldY__kafka-2.7.1/kafka-logs/myTopic-0/00000000000000000038.snapshot").read_bytes()
    snap = read_snapshot(raw)
    assert [e.producer_id for e in snap.entries] == [4001, 4002, 4003]
    assert [(e.last_sequence, e.last_offset, e.offset_delta) for e in snap.entries] == [
        (11, 11, 2), (11, 23, 11), (13, 37, 13)]
    assert [e.first_sequence for e in snap.entries] == [9, 0, 0]
    assert all(e.coordinator_epoch == -1 and e.current_txn_first_offset == -1 for e in snap.entries)
    assert java_hashmap_order([4003, 4001, 4002]) == [4001, 4002, 4003]


@pytest.mark.fixtures
def test_rebuilt_snapshot_equals_broker_snapshot(shared_fixtures: Path) -> None:
    """A transactional batch (offset 0) + COMMIT (offset 1); the broker snapshotted at offset 2."""
    part = shared_fixtures / ITUMELENG / "_confluent-ksql-default__command_topic-0"
    log = (part / "00000000000000000000.log").read_bytes()
    expected = (part / "00000000000000000002.snapshot").read_bytes()
    assert len(expected) == 56
    rebuilt = rebuild_producer_snapshot([log], end_offset=2)
    assert rebuilt.to_bytes() == expected
    entry = rebuilt.entries[0]
    assert (entry.coordinator_epoch, entry.current_txn_first_offset, entry.last_offset) == (0, -1, 0)
    # stopping before the marker leaves the transaction open
    open_txn = rebuild_producer_snapshot([log], end_offset=1).entries[0]
    assert open_txn.current_txn_first_offset == 0 and open_txn.coordinator_epoch == -1


@pytest.mark.fixtures
def test_non_transactional_logs_rebuild_to_empty_snapshots(shared_fixtures: Path) -> None:
    part = shared_fixtures / ITUMELENG / "_schemas-0"
    rebuilt = rebuild_producer_snapshot([(part / "00000000000000000000.log").read_bytes()], end_offset=42)
    assert rebuilt.to_bytes() == (part / "00000000000000000042.snapshot").read_bytes()


def test_rebuild_from_hand_made_transactional_log() -> None:
    from test_index import _txn_log

    snap = rebuild_producer_snapshot([_txn_log()])
    by_pid = {e.producer_id: e for e in snap.entries}
    assert [e.producer_id for e in snap.entries] == [1000, 2000, 3000, 4000]
    assert by_pid[1000] == ProducerEntry(1000, 2, 2, 10, 0, 1700000000000, 7, 10)  # open again
    assert by_pid[2000] == ProducerEntry(2000, 0, 0, 2, 0, 1700000000000, 7, -1)
    assert by_pid[3000] == ProducerEntry(3000, 1, 2, 7, 2, 1700000000000, 9, -1)
    # seen only in a marker: no batch metadata, epoch and coordinator epoch from the marker
    assert by_pid[4000] == ProducerEntry(4000, 0, -1, -1, 0, 1700000000000, 9, -1)
    assert not by_pid[4000].has_batch_metadata
    # resuming from a snapshot taken in the middle gives the same end state
    log = _txn_log()
    middle = rebuild_producer_snapshot([log], end_offset=5)
    tracker = ProducerStateTracker()
    tracker.load_snapshot(middle)
    tail = log[sum(len(b) for b in [txn_batch(0, 1000, 2, 2), txn_batch(2, 2000, 0, 1),
                                    marker(3, 1000, 2, 0, 7), marker(4, 2000, 0, 1, 7)]):]
    tracker.apply(tail)
    assert tracker.snapshot().to_bytes() == snap.to_bytes()


def test_epoch_bump_drops_batch_metadata() -> None:
    log = txn_batch(0, 5, 0, 2, transactional=False) + marker(2, 5, 1, 0, 3)
    (entry,) = rebuild_producer_snapshot([log]).entries
    assert (entry.producer_epoch, entry.last_sequence, entry.last_offset, entry.offset_delta) == (1, -1, -1, 0)


def test_snapshot_order_options() -> None:
    tracker = ProducerStateTracker()
    tracker.apply(b"".join(txn_batch(i, pid, 0, 1, transactional=False)
                           for i, pid in enumerate([17, 1, 33, 2])))
    assert [e.producer_id for e in tracker.snapshot().entries] == [1, 2, 17, 33]
    # buckets (16 slots): 17 -> 1, 1 -> 1, 33 -> 1, 2 -> 2; first-seen order inside bucket 1
    assert [e.producer_id for e in tracker.snapshot(order="java_hashmap").entries] == [17, 1, 33, 2]
    with pytest.raises(InvalidOptionError, match="java_hashmap"):
        tracker.snapshot(order="hash")


def test_java_hashmap_resizes_and_spreads_high_bits() -> None:
    keys = list(range(13))[::-1]  # 13 > 0.75 * 16 -> 32 buckets, still one key per bucket
    assert java_hashmap_order(keys) == list(range(13))
    assert java_hashmap_order([1 << 32, 0]) == [0, 1 << 32]  # (hi ^ lo) puts 2^32 in bucket 1
    assert java_hashmap_order([-1]) == [-1]


def test_sequence_wrap() -> None:
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(2**31 - 2, 3) == 1
    assert decrement_sequence(1, 3) == 2**31 - 2
    assert decrement_sequence(10, 3) == 7


def _damaged(raw: bytes, pos: int, value: bytes) -> bytes:
    return raw[:pos] + value + raw[pos + len(value):]


@pytest.mark.parametrize("data, match, position", [
    (bytes.fromhex(ONE_ENTRY_HEX)[:8], "shorter", 0),
    (_damaged(bytes.fromhex(ONE_ENTRY_HEX), 0, b"\x00\x02"), "unknown version 2", 0),
    (_damaged(bytes.fromhex(ONE_ENTRY_HEX), 20, b"\xff"), "checksum mismatch", 2),
    (bytes.fromhex(ONE_ENTRY_HEX)[:-1], "checksum mismatch", 2),
])
def test_damaged_snapshots(data: bytes, match: str, position: int) -> None:
    with pytest.raises(CorruptIndexError, match=match) as err:
        read_snapshot(data, file="00000000000000000150.snapshot")
    assert err.value.position == position and err.value.file == "00000000000000000150.snapshot"


def test_count_mismatch_with_valid_crc() -> None:
    good = ProducerSnapshot((ProducerEntry(1, 0),)).to_bytes()
    for body in (good[6:-1], good[6:] + b"\x00"):  # entry cut short / bytes after the entries
        import crc32c

        data = good[:2] + struct.pack(">I", crc32c.crc32c(body)) + body
        with pytest.raises(CorruptIndexError, match="declares 1 entries"):
            read_snapshot(data)
    body = struct.pack(">i", -1)
    with pytest.raises(CorruptIndexError, match="negative"):
        read_snapshot(good[:2] + struct.pack(">I", crc32c.crc32c(body)) + body)
