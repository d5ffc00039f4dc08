"""Index files: golden entries, real broker indexes rebuilt byte for byte, zero tails, sanity
checks, and the transaction index built from hand-made transactional logs."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import numpy as np
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafkalog_spark.codec.files.index import (offset_index_bytes, read_offset_index,
                                              read_time_index, read_txn_index, time_index_bytes,
                                              TxnIndex)
from kafkalog_spark.codec.files.index_rebuild import build_indexes, build_txn_index
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.errors import CorruptIndexError, CorruptRecordError

ITUMELENG = "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data"

# §18.4 vectors
ABORTED_TXN_HEX = "000000000000000003e8000000000000003200000000000000780000000000000079"
COMMIT_MARKER_HEX = (
    "0000000000000064000000420000000502809c88c40030000000000000018bcfe568000000018bcfe568000000"
    "0000000003e80002ffffffff000000012000000008000000010c00000000000700")
# §18.3 v2 batch #1 (71 bytes, real broker output)
V2_BATCH_HEX = (
    "00000000000000000000003b00000001020318a2700000000000000000015dff7b063c0000015dff7b063cffff"
    "ffffffffffffffffffffffff0000000112000000010631323300")


def with_base_offset(batch: bytes, base_offset: int) -> bytes:
    """baseOffset lies outside the v2 CRC, so it can be patched freely."""
    return struct.pack(">q", base_offset) + batch[8:]


def restamp_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def marker(base_offset: int, producer_id: int, epoch: int, control_type: int, coordinator_epoch: int) -> bytes:
    """A transaction marker made from the §18.4 COMMIT bytes: patch pid/epoch/type/coordinator
    epoch, recompute the CRC32C."""
    b = bytearray(bytes.fromhex(COMMIT_MARKER_HEX))
    struct.pack_into(">qh", b, 43, producer_id, epoch)
    struct.pack_into(">h", b, 61 + 5 + 2, control_type)  # record: len, attrs, tsDelta, offDelta, keyLen
    struct.pack_into(">i", b, len(b) - 5, coordinator_epoch)
    return with_base_offset(restamp_crc(b), base_offset)


def txn_batch(base_offset: int, producer_id: int, epoch: int, n: int, ts: int = 1700000000000,
              transactional: bool = True, base_sequence: int = 0) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                  producer_id=producer_id, producer_epoch=epoch,
                                  base_sequence=base_sequence, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=ts + i, key=b"k%d" % i, value=b"v" * 10, headers=[])
    return with_base_offset(bytes(b.build()), base_offset)


def test_marker_helper_reproduces_golden_commit() -> None:
    assert marker(100, 1000, 2, 1, 7) == bytes.fromhex(COMMIT_MARKER_HEX)


# ------------------------------------------------------------------------------------------
# golden entries
# ------------------------------------------------------------------------------------------
def test_golden_index_entries() -> None:
    assert offset_index_bytes([5], [4168]).hex() == "0000000500001048"
    assert time_index_bytes([1700000000123], [5]).hex() == "0000018bcfe5687b00000005"
    oi = read_offset_index(bytes.fromhex("0000000500001048"), 1000)
    assert oi.lookup(1005) == (1005, 4168) and oi.lookup(1004) == (1000, 0)
    ti = read_time_index(bytes.fromhex("0000018bcfe5687b00000005"), 1000)
    assert ti.lookup(1700000000123) == (1700000000123, 1005)
    assert ti.lookup(1700000000122) == (-1, 1000)


def test_golden_aborted_txn() -> None:
    txn = read_txn_index(bytes.fromhex(ABORTED_TXN_HEX), 0)
    assert len(txn) == 1
    assert (int(txn.version[0]), int(txn.producer_id[0]), int(txn.first_offset[0]),
            int(txn.last_offset[0]), int(txn.last_stable_offset[0])) == (0, 1000, 50, 120, 121)
    assert txn.to_bytes().hex() == ABORTED_TXN_HEX
    assert TxnIndex.from_entries(0, [(1000, 50, 120, 121)]).to_bytes().hex() == ABORTED_TXN_HEX


def test_lookup_largest_lower_bound() -> None:
    oi = read_offset_index(offset_index_bytes([10, 20, 30], [100, 200, 300]), 500)
    assert oi.lookup(499) == (500, 0)
    assert oi.lookup(510) == (510, 100)
    assert oi.lookup(529) == (520, 200)
    assert oi.lookup(10**12) == (530, 300)
    ti = read_time_index(time_index_bytes([5, 9], [3, 7]), 500)
    assert ti.lookup(8) == (5, 503) and ti.lookup(100) == (9, 507) and ti.last_entry() == (9, 507)
    assert read_time_index(b"", 500).last_entry() == (-1, 500)


# ------------------------------------------------------------------------------------------
# real broker indexes
# ------------------------------------------------------------------------------------------
# Segments whose .index/.timeindex a broker wrote and trimmed, and whose index history is one
# the recovery rule reproduces (no restart in the middle of the segment, single-batch appends).
EXACT = [
    "DonaldY__kafka-2.7.1/kafka-logs/__consumer_offsets-17/00000000000000000000",  # rolled, compacted
    "DonaldY__kafka-2.7.1/kafka-logs/__consumer_offsets-28/00000000000000000000",
    "DonaldY__kafka-2.7.1/kafka-logs/__consumer_offsets-39/00000000000000000000",
    "yuanliubei__kafka-source-code/kafka-logs/__consumer_offsets-17/00000000000000000000",
    f"{ITUMELENG}/__transaction_state-44/00000000000000000000",
    f"{ITUMELENG}/_confluent-ksql-default__command_topic-0/00000000000000000000",  # 1 offset entry
]
# Active segments of a broker that was cleanly restarted while they were active (one producer
# snapshot per shutdown). Each close() appended the max-timestamp entry, and each restart reset
# bytesSinceLastIndexEntry, so the append-time files differ from what recovery builds; the
# ≤3.9 append path with those restarts reproduces them exactly.
RESTARTED = [
    f"{ITUMELENG}/__consumer_offsets-29/00000000000000000000",
    f"{ITUMELENG}/__consumer_offsets-37/00000000000000000000",
    f"{ITUMELENG}/_schemas-0/00000000000000000000",
    f"{ITUMELENG}/docker-connect-configs-0/00000000000000000000",
]


def _load(root: Path, stem: str) -> tuple[bytes, int, bytes, bytes]:
    p = root / stem
    return (p.with_suffix(".log").read_bytes(), int(p.name), p.with_suffix(".index").read_bytes(),
            p.with_suffix(".timeindex").read_bytes())


@pytest.mark.fixtures
@pytest.mark.parametrize("stem", EXACT)
def test_rebuilt_indexes_equal_broker_files(shared_fixtures: Path, stem: str) -> None:
    log, base, index, timeindex = _load(shared_fixtures, stem)
    built = build_indexes(log, base, file=stem)
    assert built.stop_reason is None and built.valid_bytes == len(log)
    assert built.offset_index.to_bytes() == index
    assert built.time_index.to_bytes() == timeindex
    assert read_offset_index(index, base).to_bytes() == index
    assert read_time_index(timeindex, base).to_bytes() == timeindex


@pytest.mark.fixtures
def test_empty_segments_have_empty_indexes(shared_fixtures: Path) -> None:
    empties = [p for p in (shared_fixtures / ITUMELENG).glob("*/00000000000000000000.log")
               if p.stat().st_size == 0 and p.with_suffix(".index").exists()]
    assert len(empties) > 40
    for p in empties:
        built = build_indexes(p.read_bytes(), 0)
        assert built.offset_index.to_bytes() == p.with_suffix(".index").read_bytes() == b""
        assert built.time_index.to_bytes() == p.with_suffix(".timeindex").read_bytes() == b""


def _append_path(log: bytes, base: int, restarts: set[int], interval: int = 4096) -> tuple[bytes, bytes]:
    """≤3.9 LogSegment.append, one batch per append, with clean restarts before the batches at
    ``restarts`` (close() appends the max-timestamp entry; loading resets the byte counter)."""
    t = scan_entries(log)
    idx: list[tuple[int, int]] = []
    ts: list[tuple[int, int]] = []
    since, max_ts, max_off = 0, -1, -1

    def time_append(stamp: int, off: int) -> None:
        if stamp > (ts[-1][0] if ts else -1):
            ts.append((stamp, off - base))

    for i in range(len(t)):
        if int(t.offset[i]) in restarts:
            time_append(max_ts, max_off)
            since = 0
        if t.max_timestamp[i] > max_ts:
            max_ts, max_off = int(t.max_timestamp[i]), int(t.last_offset[i])
        if since > interval:
            idx.append((int(t.last_offset[i]) - base, int(t.position[i])))
            time_append(max_ts, max_off)
            since = 0
        since += int(t.entry_size[i])
    time_append(max_ts, max_off)
    return (offset_index_bytes([a for a, _ in idx], [b for _, b in idx]),
            time_index_bytes([a for a, _ in ts], [b for _, b in ts]))


@pytest.mark.fixtures
@pytest.mark.parametrize("stem", RESTARTED)
def test_restarted_active_segments_differ_as_explained(shared_fixtures: Path, stem: str) -> None:
    log, base, index, timeindex = _load(shared_fixtures, stem)
    built = build_indexes(log, base)
    assert built.time_index.to_bytes() != timeindex  # extra entries from earlier shutdowns
    restarts = {int(s.name[:20]) for s in (shared_fixtures / stem).parent.glob("*.snapshot")}
    assert _append_path(log, base, restarts) == (index, timeindex)
    # both views agree on the segment's true max timestamp (the last entry)
    assert built.time_index.last_entry() == read_time_index(timeindex, base).last_entry()


@pytest.mark.fixtures
def test_kafka_2_1_append_recorded_the_record_offset(shared_fixtures: Path) -> None:
    """Kafka 2.1's append path put the offset of the *record* carrying the max timestamp (58) in
    the time index; recovery (and this build) uses the batch's last offset (59)."""
    stem = "yuanliubei__kafka-source-code/kafka-logs/__consumer_offsets-17/00000000000000000058"
    log, base, index, timeindex = _load(shared_fixtures, stem)
    built = build_indexes(log, base)
    stored = read_time_index(timeindex, base)
    assert built.offset_index.to_bytes() == index == b""
    assert built.time_index.timestamps.tolist() == stored.timestamps.tolist()
    assert stored.offsets.tolist() == [58] and built.time_index.offsets.tolist() == [59]


# ------------------------------------------------------------------------------------------
# the entry rule
# ------------------------------------------------------------------------------------------
def test_interval_rule_worked_example() -> None:
    batch = bytes.fromhex(V2_BATCH_HEX)  # 71 bytes, one record, maxTimestamp constant
    log = b"".join(with_base_offset(batch, i) for i in range(5))  # positions 0, 71, 142, 213, 284
    built = build_indexes(log, 0, index_interval_bytes=100)
    assert built.offset_index.offsets.tolist() == [2, 4]
    assert built.offset_index.positions.tolist() == [142, 284]
    # equal timestamps: only the first batch carrying the max gets the (single) time entry
    assert built.time_index.timestamps.tolist() == [1503229838908]
    assert built.time_index.offsets.tolist() == [0]
    assert build_indexes(log, 0).offset_index.to_bytes() == b""  # default 4096


def test_time_entries_only_when_max_timestamp_increases() -> None:
    log = b"".join(txn_batch(i * 3, 7, 0, 3, ts=ts, transactional=False)
                   for i, ts in enumerate([1000, 5000, 3000, 9000]))
    built = build_indexes(log, 0, index_interval_bytes=1)
    # entries due at batches 2, 3, 4 (position > 1 byte past the last entry)
    assert built.offset_index.offsets.tolist() == [5, 8, 11]
    assert built.time_index.timestamps.tolist() == [5002, 9002]
    assert built.time_index.offsets.tolist() == [5, 11]


def test_v0_segment_has_empty_time_index() -> None:
    b = LegacyRecordBatchBuilder(magic=0, compression_type=0, batch_size=1 << 20)
    for i in range(200):
        b.append(i, timestamp=None, key=b"k", value=b"x" * 40)
    log = bytes(b.build())
    built = build_indexes(log, 0, index_interval_bytes=512)
    assert len(built.offset_index.offsets) > 5
    assert built.time_index.to_bytes() == b""


def test_bad_crc_and_partial_tail_stop_like_recovery() -> None:
    batches = [txn_batch(i * 2, 1, 0, 2, transactional=False) for i in range(4)]
    log = bytearray(b"".join(batches))
    good = build_indexes(bytes(log), 0, index_interval_bytes=1)
    assert good.stop_reason is None and good.entries == 4
    partial = build_indexes(bytes(log[:-5]), 0, index_interval_bytes=1)
    assert partial.valid_bytes == 3 * len(batches[0]) and partial.stop_reason
    log[2 * len(batches[0]) + 70] ^= 0xFF  # corrupt batch 3's records
    bad = build_indexes(bytes(log), 0, index_interval_bytes=1)
    assert bad.stop_reason == "checksum mismatch" and bad.entries == 2
    assert bad.valid_bytes == 2 * len(batches[0])
    assert bad.offset_index.offsets.tolist() == [3]
    assert build_indexes(bytes(log), 0, verify_crc=False).entries == 4


def test_offset_overflow_and_non_increasing_offsets_raise() -> None:
    batch = bytes.fromhex(V2_BATCH_HEX)
    with pytest.raises(CorruptIndexError, match="overflow") as err:
        build_indexes(batch + with_base_offset(batch, 2**31), 0, file="x.log")
    assert err.value.position == 71 and err.value.file == "x.log"
    with pytest.raises(CorruptIndexError, match="base offset"):
        build_indexes(batch, 5)
    log = b"".join(with_base_offset(batch, o) for o in [0, 5, 9, 3])
    with pytest.raises(CorruptIndexError, match="does not increase") as err:
        build_indexes(log, 0, index_interval_bytes=10)
    assert err.value.position == 213


# ------------------------------------------------------------------------------------------
# zero tails and sanity checks
# ------------------------------------------------------------------------------------------
def test_zero_tail_offset_index() -> None:
    trimmed = offset_index_bytes([12, 26], [4395, 8556])
    oi = read_offset_index(trimmed + bytes(8 * 1000), 0)
    assert oi.entries_in_file == 1002 and oi.valid_entries == 2 and oi.has_zero_tail
    assert oi.dump_entries == 2
    assert oi.to_bytes() == trimmed
    assert oi.lookup(10**9) == (26, 8556)
    oi.sanity_check()  # Kafka's offset check does not notice a zero tail (last offset == base)
    empty = read_offset_index(bytes(10 * 1024 * 1024), 0)
    assert empty.entries_in_file == 1310720 and empty.valid_entries == 0


def test_zero_tail_time_index_fails_kafka_sanity_check() -> None:
    trimmed = time_index_bytes([1728561448970, 1728596416496], [0, 41])
    ti = read_time_index(trimmed + bytes(12 * 50), 0, file="t.timeindex")
    assert ti.valid_entries == 2 and ti.entries_in_file == 52 and ti.to_bytes() == trimmed
    with pytest.raises(CorruptIndexError, match="less than the first timestamp") as err:
        ti.sanity_check(file="t.timeindex")
    assert err.value.position == 51 * 12
    read_time_index(trimmed, 0).sanity_check()
    assert read_time_index(bytes(10485756), 0).valid_entries == 0


def test_robust_view_stops_at_non_increasing_entries() -> None:
    oi = read_offset_index(offset_index_bytes([3, 9, 9, 12], [10, 20, 30, 40]), 0)
    assert oi.valid_entries == 2 and oi.entries_in_file == 4
    ti = read_time_index(time_index_bytes([5, 7, 6], [1, 2, 3]), 0)
    assert ti.valid_entries == 2


def test_sanity_checks_flag_corruption() -> None:
    with pytest.raises(CorruptIndexError, match="multiple of 8"):
        read_offset_index(offset_index_bytes([1], [2]) + b"\x00\x01", 0).sanity_check()
    with pytest.raises(CorruptIndexError, match="multiple of 8"):
        read_offset_index(b"\x00" * 9, 0, strict=True)
    with pytest.raises(CorruptIndexError, match="below the base offset"):
        read_offset_index(offset_index_bytes([-3], [2]), 100).sanity_check()
    with pytest.raises(CorruptIndexError, match="multiple of 12"):
        read_time_index(time_index_bytes([1], [1]) + b"\x01", 0).sanity_check()
    with pytest.raises(CorruptIndexError, match="below the base offset"):
        read_time_index(time_index_bytes([1, 2], [0, -1]), 0).sanity_check()
    with pytest.raises(CorruptIndexError, match="below the base offset") as err:
        TxnIndex.from_entries(100, [(1, 100, 150, 151), (1, 20, 50, 51)]).sanity_check(file="a.txnindex")
    assert err.value.position == 34 and err.value.base_offset == 100


def test_txn_index_damage() -> None:
    good = bytes.fromhex(ABORTED_TXN_HEX)
    assert read_txn_index(good + b"\x00" * 10, 0).trailing_bytes == 10
    with pytest.raises(CorruptIndexError, match="multiple"):
        read_txn_index(good + b"\x00" * 10, 0, strict=True)
    with pytest.raises(CorruptIndexError, match="version 1") as err:
        read_txn_index(good + b"\x01" + good[1:], 0)
    assert err.value.position == 34


# ------------------------------------------------------------------------------------------
# transaction index build
# ------------------------------------------------------------------------------------------
def _txn_log() -> bytes:
    return b"".join([
        txn_batch(0, 1000, 2, 2),  # pid 1000 opens a txn at 0 (offsets 0-1)
        txn_batch(2, 2000, 0, 1),  # pid 2000 opens a txn at 2
        marker(3, 1000, 2, 0, 7),  # ABORT pid 1000: LSO = 2 (pid 2000 still open)
        marker(4, 2000, 0, 1, 7),  # COMMIT pid 2000
        txn_batch(5, 3000, 1, 3),  # pid 3000 opens at 5 (offsets 5-7)
        marker(8, 3000, 1, 0, 9),  # ABORT pid 3000: LSO = 9
        marker(9, 4000, 0, 0, 9),  # ABORT with no open txn: nothing to index
        txn_batch(10, 1000, 2, 1, base_sequence=2),  # pid 1000 opens again, left open
    ])


def test_build_txn_index_from_markers() -> None:
    log = _txn_log()
    txn = build_txn_index(log, 0)
    assert txn.to_bytes() == TxnIndex.from_entries(0, [(1000, 0, 3, 2), (3000, 5, 8, 9)]).to_bytes()
    assert txn.to_bytes()[:34].hex() == "0000" + "00000000000003e8" + "0" * 16 + "%016x" % 3 + "%016x" % 2
    txn.sanity_check()
    # recovery of the same log: every batch valid, indexes built
    built = build_indexes(log, 0, index_interval_bytes=50)
    assert built.stop_reason is None and built.valid_bytes == len(log)
    assert built.offset_index.offsets.tolist() == sorted(set(built.offset_index.offsets.tolist()))


def test_build_txn_index_with_transaction_open_at_segment_start() -> None:
    log = b"".join([txn_batch(20, 5, 0, 1), marker(21, 5, 0, 0, 1), marker(22, 6, 0, 0, 1)])
    txn = build_txn_index(log, 20, ongoing_txns={6: 10})
    assert txn.to_bytes() == TxnIndex.from_entries(20, [(5, 20, 21, 10), (6, 10, 22, 23)]).to_bytes()


def test_unparsable_marker_is_a_typed_error() -> None:
    b = bytearray(marker(3, 1000, 2, 0, 7))
    b[61 + 4] = 2  # key length varint 2 -> 1 byte: too short for a control key
    with pytest.raises(CorruptRecordError, match="key") as err:
        build_txn_index(txn_batch(0, 1000, 2, 1) + restamp_crc(b), 0, file="s.log")
    assert err.value.position == len(txn_batch(0, 1000, 2, 1)) and err.value.base_offset == 3
    b = bytearray(marker(3, 1000, 2, 0, 7))
    struct.pack_into(">h", b, 61 + 7, 2)  # LEADER_CHANGE type is not a transaction marker
    with pytest.raises(CorruptRecordError, match="not a transaction marker"):
        build_txn_index(txn_batch(0, 1000, 2, 1) + restamp_crc(b), 0)


def test_non_transactional_batch_inside_open_transaction_raises() -> None:
    log = txn_batch(0, 9, 0, 1) + txn_batch(1, 9, 0, 1, transactional=False, base_sequence=1)
    with pytest.raises(CorruptRecordError, match="InvalidTxnState"):
        build_txn_index(log, 0)


def test_build_arrays_are_numpy() -> None:
    built = build_indexes(_txn_log(), 0, index_interval_bytes=1)
    assert isinstance(built.offset_index.relative_offset, np.ndarray)
    assert built.offset_index.file_length == 8 * built.offset_index.valid_entries
