"""Record decoding: golden vectors, other implementations' batches, round trips, damaged input."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog_spark.codec import layout as L
from kafkalog_spark.codec.records.crc import compute_crcs, verify_crcs
from kafkalog_spark.codec.records.decode import (BadRange, DecodeOptions, DecodeResult,
                                                 decode_entries, decode_to_table)
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.codec.records.schema import record_schema
from kafkalog_spark.errors import (CompressionError, CorruptRecordError, InvalidOptionError,
                                   TruncatedDataError, UnsupportedFormatError)

from golden import (COMMIT_MARKER, DELETE_HORIZON, EMPTY_BATCH, TWO_RECORDS, V0_MSGS,
                    V1_MSGS, V2_1, V2_2, V2_3, V2_4)

# kafka-python's synthetic control batch: stored CRC 0x6597FFD0 does not match its content
BAD_CRC_CONTROL = ("000000000000000000000052000000000" "26597ffd0" "0020" "00000000"
                   "000000000098967f" "000000000098967f" "ffffffffffffffff" "ffff" "ffffffff"
                   "00000001" "40000000" "0800000000" "2c" + b"opaque-control-message".hex() + "00")

ALL = DecodeOptions(include_headers=True, include_metadata=True, include_control=True)


def rows(data, options=ALL, **kw):
    return decode_to_table(data, topic="t", partition=3, options=options, **kw).to_pylist()


def ms(row):
    ts = row["timestamp"]
    return None if ts is None else int(ts.timestamp() * 1000)


def test_v2_golden_batches():
    r = rows(bytes.fromhex(V2_1 + V2_2 + V2_3 + V2_4))
    assert [x["offset"] for x in r] == [0, 1, 2, 3, 0]
    assert [x["value"] for x in r] == [b"123", b"", b"", b"123", b"hdr"]
    assert all(x["key"] is None for x in r)
    assert [ms(x) for x in r] == [1503229838908, 1503229959532, 1503229959700, 1503229962141,
                                  1535546684353]
    assert [x["leaderEpoch"] for x in r] == [1, 2, 2, 2, 0]
    assert [x["batchBaseOffset"] for x in r] == [0, 1, 1, 3, 0]
    assert [x["batchLastOffset"] for x in r] == [0, 2, 2, 3, 0]
    assert r[4]["headers"] == [{"key": "hkey", "value": b"hval"}]
    assert r[0]["headers"] == []
    assert all(x["timestampType"] == 0 and x["magic"] == 2 and x["compression"] == "none"
               and x["sequence"] == -1 and x["producerId"] == -1 and x["topic"] == "t"
               and x["partition"] == 3 for x in r)


def test_legacy_golden_messages():
    r = rows(bytes.fromhex("".join(V1_MSGS)))
    assert [x["offset"] for x in r] == [0, 1, 2, 3]
    assert [x["value"] for x in r] == [b"123", b"", b"", b"123"]
    assert [ms(x) for x in r] == [1503648000942, 1503648001984, 1503648002162, 1503648004099]
    assert all(x["timestampType"] == 0 and x["headers"] is None and x["magic"] == 1
               and x["leaderEpoch"] == -1 for x in r)
    r0 = rows(bytes.fromhex("".join(V0_MSGS)))
    assert [(x["offset"], x["value"], x["timestamp"], x["timestampType"]) for x in r0] == [
        (0, b"123", None, -1), (1, b"", None, -1)]


def test_computed_examples():
    marker = bytes.fromhex(COMMIT_MARKER)
    assert rows(marker, DecodeOptions()) == []  # hidden like a consumer does
    (m,) = rows(marker)
    assert (m["offset"], m["key"], m["value"], m["isControl"], m["isTransactional"]) == (
        100, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x07", True, True)
    assert (m["producerId"], m["producerEpoch"], m["sequence"], m["leaderEpoch"]) == (1000, 2, -1, 5)
    assert rows(bytes.fromhex(EMPTY_BATCH)) == []
    two = rows(bytes.fromhex(TWO_RECORDS))
    assert [(x["key"], x["value"], ms(x)) for x in two] == [
        (b"k1", b"v1", 1700000000000), (b"k2", None, 1700000000005)]
    assert two[1]["headers"] == [{"key": "h", "value": b"x"}]
    # delete horizon: deltas rebased, timestamps unchanged
    assert rows(bytes.fromhex(DELETE_HORIZON)) == two


def test_synthetic_bad_crc_control_batch():
    data = bytes.fromhex(BAD_CRC_CONTROL)
    assert not verify_crcs(data, scan_entries(data))[0]
    with pytest.raises(CorruptRecordError, match="CRC-32C mismatch") as info:
        rows(data)
    assert info.value.position == 0 and info.value.base_offset == 0
    (r,) = rows(data, DecodeOptions(verify_crc=False, include_control=True))
    assert r["value"] == b"opaque-control-message"


def test_crc_values():
    data = bytes.fromhex(V2_1 + V1_MSGS[0] + V0_MSGS[0])
    assert compute_crcs(data, scan_entries(data)).tolist() == [0x0318A270, 0x478628C2, 0xFEB01DBF]
    big = _kp_v2([(b"k", b"x" * 5000, [])])  # above the library threshold
    assert verify_crcs(big, scan_entries(big)).all()


# --- builders of other implementations ----------------------------------------------------
def _kp_v2(records, codec=0, base_offset=0, ts=1700000000000, producer=(-1, -1, -1),
           transactional=False, builder="kafka"):
    if builder == "kafka":
        from kafka.record.default_records import DefaultRecordBatchBuilder
    else:
        from aiokafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(2, codec, transactional, producer[0], producer[1],
                                  producer[2], 10**8)
    for i, (k, v, h) in enumerate(records):
        b.append(i, timestamp=ts + i, key=k, value=v, headers=h)
    out = bytearray(b.build())
    out[0:8] = struct.pack(">q", base_offset)
    return bytes(out)


def _kp_legacy(records, magic, codec=0, base_offset=0, ts=1700000000000, builder="kafka"):
    if builder == "kafka":
        from kafka.record.legacy_records import LegacyRecordBatchBuilder
    else:
        from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
    b = LegacyRecordBatchBuilder(magic, codec, 10**8)
    for i, (k, v) in enumerate(records):
        b.append(base_offset + i, timestamp=None if magic == 0 else ts + i, key=k, value=v)
    return bytes(b.build())


def _reference(data):
    """Records as kafka-python's reader sees them (offset, key, value, headers, ts, type)."""
    from kafka.record.memory_records import MemoryRecords

    out = []
    m = MemoryRecords(data)
    while (batch := m.next_batch()) is not None:
        if getattr(batch, "is_control_batch", False):
            continue
        for r in batch:
            hdrs = [(k, v) for k, v in r.headers] if batch.magic == 2 else None
            out.append((r.offset, r.key, r.value, hdrs,
                        -1 if r.timestamp is None else r.timestamp,
                        -1 if r.timestamp_type is None else r.timestamp_type))
    return out


def _ours(data, **kw):
    out = []
    for r in rows(data, DecodeOptions(include_headers=True), **kw):
        hdrs = None if r["headers"] is None else [(h["key"], h["value"]) for h in r["headers"]]
        out.append((r["offset"], r["key"], r["value"], hdrs,
                    -1 if r["timestamp"] is None else ms(r), r["timestampType"]))
    return out


RECS = [(None, b"v0", []), (b"", b"", [("h", b"1"), ("e", None)]), (b"key", None, []),
        (b"k" * 300, b"\x00" * 70000, [("big", b"x" * 200)])]


@pytest.mark.parametrize("builder", ["kafka", "aiokafka"])
@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_v2_every_codec_matches_reference(codec, builder):
    data = _kp_v2(RECS, codec, base_offset=10, builder=builder) + _kp_v2(RECS[:2], codec,
                                                                         base_offset=14)
    assert _ours(data) == _reference(data)
    assert [r[0] for r in _ours(data)] == [10, 11, 12, 13, 14, 15]
    # a builder stores a batch uncompressed when compression would not shrink it
    written = {L.CODEC_NAMES[c] for c in scan_entries(data).codec.tolist()}
    assert codec == 0 or L.CODEC_NAMES[codec] in written
    assert {r["compression"] for r in rows(data)} == written


# aiokafka refuses lz4 for magic 0 (pre-KIP-57 framing); kafka-python writes it
LEGACY_CASES = [(b, m, c) for b in ("kafka", "aiokafka") for m in (0, 1) for c in (0, 1, 2, 3)
                if (b, m, c) != ("aiokafka", 0, 3)]


@pytest.mark.parametrize(("builder", "magic", "codec"), LEGACY_CASES)
def test_legacy_every_codec_matches_reference(codec, magic, builder):
    recs = [(k, v) for k, v, _ in RECS]
    data = _kp_legacy(recs, magic, codec, base_offset=0, builder=builder)
    ours = _ours(data)
    assert ours == _reference(data)
    assert [r[1:3] for r in ours] == recs


def _patch_offset(entry: bytes, offset: int) -> bytes:
    return struct.pack(">q", offset) + entry[8:]  # the offset is outside every CRC


def test_v1_wrapper_relative_offsets():
    recs = [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]
    wrapper = _kp_legacy(recs, 1, codec=1)
    # the broker writes the last absolute offset into the wrapper: inner 0,1,2 -> 40,41,42
    r = rows(_patch_offset(wrapper, 42))
    assert [x["offset"] for x in r] == [40, 41, 42]
    assert {(x["batchBaseOffset"], x["batchLastOffset"]) for x in r} == {(40, 42)}
    assert [x["offset"] for x in rows(wrapper)] == [0, 1, 2]  # wrapper offset 0: as written
    with pytest.raises(CorruptRecordError, match="wrapper offset is smaller") as info:
        rows(_patch_offset(wrapper, 1))
    assert info.value.position == 0
    assert rows(_patch_offset(wrapper, 1), DecodeOptions(on_error="skip")) == []


def _legacy_message(offset, magic, key, value, attributes=0, ts=None):
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", ts)
    for b in (key, value):
        body += struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


def test_v0_wrapper_absolute_offsets_and_inner_rules():
    inner = _legacy_message(7, 0, None, b"x") + _legacy_message(9, 0, b"k", b"y")
    import gzip

    wrapper = _legacy_message(9, 0, None, gzip.compress(inner), attributes=L.CODEC_GZIP)
    r = rows(wrapper)
    assert [(x["offset"], x["key"], x["value"], x["timestamp"], x["timestampType"]) for x in r] == [
        (7, None, b"x", None, -1), (9, b"k", b"y", None, -1)]
    nested = _legacy_message(5, 0, None, gzip.compress(wrapper), attributes=L.CODEC_GZIP)
    with pytest.raises(CorruptRecordError, match="itself compressed"):
        rows(nested)
    bad_inner = bytearray(inner)
    bad_inner[-1] ^= 1
    bad = _legacy_message(9, 0, None, gzip.compress(bytes(bad_inner)), attributes=L.CODEC_GZIP)
    with pytest.raises(CorruptRecordError, match="inner message CRC-32"):
        rows(bad)
    assert len(rows(bad, DecodeOptions(verify_crc=False))) == 2
    empty = _legacy_message(0, 0, None, gzip.compress(b""), attributes=L.CODEC_GZIP)
    with pytest.raises(CorruptRecordError, match="no inner messages"):
        rows(empty)
    null_value = _legacy_message(0, 1, None, None, attributes=L.CODEC_GZIP, ts=0)
    with pytest.raises(CorruptRecordError, match="null value"):
        rows(null_value)


def test_v1_log_append_time_wrapper():
    import gzip

    inner = (_legacy_message(0, 1, None, b"a", ts=111) + _legacy_message(1, 1, None, b"b", ts=222))
    create = _legacy_message(11, 1, None, gzip.compress(inner), attributes=L.CODEC_GZIP, ts=222)
    assert [(x["offset"], ms(x), x["timestampType"]) for x in rows(create)] == [
        (10, 111, 0), (11, 222, 0)]
    append = _legacy_message(11, 1, None, gzip.compress(inner),
                             attributes=L.CODEC_GZIP | L.LEGACY_TIMESTAMP_TYPE_MASK, ts=999)
    assert [(ms(x), x["timestampType"]) for x in rows(append)] == [(999, 1), (999, 1)]


def _set_v2_attributes(batch: bytes, attributes: int, max_ts: int | None = None) -> bytes:
    import crc32c

    b = bytearray(batch)
    struct.pack_into(">h", b, L.ATTRIBUTES_OFFSET, attributes)
    if max_ts is not None:
        struct.pack_into(">q", b, L.MAX_TIMESTAMP_OFFSET, max_ts)
    struct.pack_into(">I", b, L.CRC_OFFSET, crc32c.crc32c(bytes(b[L.ATTRIBUTES_OFFSET:])))
    return bytes(b)


def test_v2_log_append_time_uses_max_timestamp():
    batch = _set_v2_attributes(_kp_v2(RECS[:3]), L.TIMESTAMP_TYPE_MASK, max_ts=1234)
    assert [(ms(x), x["timestampType"]) for x in rows(batch)] == [(1234, 1)] * 3


def test_sequence_wraps_like_kafka():
    batch = _kp_v2([(None, b"a", [])] * 3, producer=(77, 1, 2**31 - 2))
    r = rows(batch)
    assert [x["sequence"] for x in r] == [2**31 - 2, 2**31 - 1, 0]
    assert {x["producerId"] for x in r} == {77}


def test_transactional_flags_and_control_filter():
    data = _kp_v2([(None, b"a", [])], producer=(5, 0, 0), transactional=True) + bytes.fromhex(
        COMMIT_MARKER)
    assert [(x["isTransactional"], x["isControl"]) for x in rows(data)] == [(True, False),
                                                                           (True, True)]
    assert len(rows(data, DecodeOptions())) == 1


def test_offset_window_and_row_limit():
    data = b"".join(_kp_v2([(None, b"v", [])] * 10, base_offset=b * 10) for b in range(5))
    r = rows(data, min_offset=15, max_offset=31)
    assert [x["offset"] for x in r] == list(range(15, 32))
    batches = list(decode_entries(data, topic="t", partition=0,
                                  options=DecodeOptions(max_rows=7)))
    assert max(b.num_rows for b in batches) == 7
    assert sum(b.num_rows for b in batches) == 50
    assert all(b.schema == record_schema() for b in batches)


def test_result_object_and_empty_output():
    res = decode_entries(b"", topic="t", partition=0)
    assert isinstance(res, DecodeResult) and list(res) == [] and res.bad_ranges == []
    t = decode_to_table(b"", topic="t", partition=0, options=ALL)
    assert t.num_rows == 0 and t.schema == record_schema(True, True)


def test_options_are_validated():
    with pytest.raises(InvalidOptionError, match="fail, skip"):
        DecodeOptions(on_error="ignore")
    with pytest.raises(InvalidOptionError):
        DecodeOptions(max_rows=0)
    with pytest.raises(InvalidOptionError):
        DecodeOptions(max_decompressed=2**40)
    with pytest.raises(InvalidOptionError):
        DecodeOptions(verify_crc="yes")


def test_numpy_input_and_positions_with_start():
    data = bytes.fromhex(V2_1 + V2_4)
    arr = np.frombuffer(b"\x00" * 5 + data, np.uint8)
    r = rows(arr, start=5)
    assert [x["value"] for x in r] == [b"123", b"hdr"]


# --- damaged input --------------------------------------------------------------------------
def _good():
    return _kp_v2(RECS[:3], base_offset=0), _kp_v2(RECS[:3], base_offset=3)


def _resign(batch: bytearray) -> bytes:
    import crc32c

    struct.pack_into(">I", batch, L.CRC_OFFSET, crc32c.crc32c(bytes(batch[L.ATTRIBUTES_OFFSET:])))
    return bytes(batch)


def _damage(kind):
    """(damaged bytes, expected error class, position of the bad part, rows in skip mode)."""
    a, b = _good()
    first = L.RECORDS_OFFSET
    if kind == "truncated":
        return a + b[:-5], TruncatedDataError, len(a), 3
    if kind == "garbage_tail":
        return a + b + b"\xff" * 30, CorruptRecordError, len(a) + len(b), 6
    if kind == "short_tail":
        return a + b + b"\x00" * 5, TruncatedDataError, len(a) + len(b), 6
    if kind == "bad_crc":
        x = bytearray(b)
        x[-1] ^= 0xFF
        return a + bytes(x) + a, CorruptRecordError, len(a), 6
    if kind == "size_too_small":
        x = bytearray(b)
        struct.pack_into(">i", x, L.SIZE_OFFSET, 3)
        return a + bytes(x), CorruptRecordError, len(a), 3
    if kind == "absurd_length":
        x = bytearray(b)
        struct.pack_into(">i", x, L.SIZE_OFFSET, 2**31 - 1)
        return a + bytes(x), TruncatedDataError, len(a), 3
    if kind == "unknown_magic":
        x = bytearray(b)
        x[L.MAGIC_OFFSET] = 7
        return a + bytes(x), UnsupportedFormatError, len(a), 3
    if kind == "unknown_codec":
        x = bytearray(b)
        struct.pack_into(">h", x, L.ATTRIBUTES_OFFSET, 6)
        return a + _resign(x) + a, UnsupportedFormatError, len(a), 6
    if kind == "negative_count":
        x = bytearray(b)
        struct.pack_into(">i", x, L.RECORDS_COUNT_OFFSET, -1)
        return a + _resign(x), CorruptRecordError, len(a), 3
    if kind == "count_too_high":
        x = bytearray(b)
        struct.pack_into(">i", x, L.RECORDS_COUNT_OFFSET, 4)
        return a + _resign(x), CorruptRecordError, len(a) + len(b), 3
    if kind == "count_too_low":
        x = bytearray(b)
        struct.pack_into(">i", x, L.RECORDS_COUNT_OFFSET, 2)
        return _resign(x) + a, CorruptRecordError, None, 3
    if kind == "varint_too_long":
        x = bytearray(b)
        x[first:first + 6] = b"\xff" * 6  # record length varint of 6+ bytes
        return a + _resign(x), CorruptRecordError, len(a) + first, 3
    if kind == "record_length_mismatch":
        x = bytearray(b)
        x[first] += 2  # first record claims 1 more byte (zig-zag)
        return a + _resign(x), CorruptRecordError, len(a) + first, 3
    if kind == "negative_header_key":
        batch = bytearray(_kp_v2([(None, b"v", [("k", b"1")])]))
        # record: len attrs tsd offd keylen(01) vlen(02) 'v' hcount(02) hklen(02) ...
        pos = first + 7
        assert batch[pos] == 2
        batch[pos] = 1  # -1
        return a + _resign(batch), CorruptRecordError, len(a) + first, 3
    raise AssertionError(kind)


KINDS = ["truncated", "garbage_tail", "short_tail", "bad_crc", "size_too_small", "absurd_length",
         "unknown_magic", "unknown_codec", "negative_count", "count_too_high", "count_too_low",
         "varint_too_long", "record_length_mismatch", "negative_header_key"]


@pytest.mark.parametrize("kind", KINDS)
def test_damaged_input_raises_typed_error_and_skip_keeps_the_rest(kind):
    data, cls, position, good_rows = _damage(kind)
    with pytest.raises(cls) as info:
        rows(data, file="seg.log")
    assert info.value.file == "seg.log"
    assert "seg.log" in str(info.value) and "byte position" in str(info.value)
    if position is not None:
        assert info.value.position == position
    res = decode_entries(data, topic="t", partition=0, file="seg.log",
                         options=DecodeOptions(on_error="skip"))
    assert sum(b.num_rows for b in res) == good_rows
    assert res.bad_ranges and all(isinstance(r, BadRange) and r.file == "seg.log"
                                  and r.start < r.end <= len(data) for r in res.bad_ranges)


def test_partial_tail_allowed_on_request():
    data, _, _, _ = _damage("truncated")
    assert len(rows(data, DecodeOptions(allow_partial_tail=True))) == 3


def test_decompression_bomb_is_bounded():
    bomb = _kp_v2([(None, b"\x00" * 2_000_000, [])], codec=1)
    assert len(bomb) < 10_000
    with pytest.raises(CompressionError):
        rows(bomb, DecodeOptions(max_decompressed=1_000_000))
    res = decode_entries(bomb + _kp_v2([(None, b"ok", [])], base_offset=1), topic="t",
                         partition=0, options=DecodeOptions(max_decompressed=1_000_000,
                                                            on_error="skip"))
    assert [b.to_pylist()[0]["value"] for b in res] == [b"ok"]
    assert res.bad_ranges[0].start == 0 and res.bad_ranges[0].base_offset == 0


def test_invalid_utf8_header_key_is_replaced():
    batch = bytearray(_kp_v2([(None, b"v", [("k", b"1")])]))
    pos = batch.index(b"\x02k\x021") + 1
    batch[pos] = 0xFF
    (r,) = rows(_resign(batch))
    assert r["headers"] == [{"key": "\ufffd", "value": b"1"}]


# --- property tests -------------------------------------------------------------------------
blobs = st.one_of(st.none(), st.binary(max_size=40))
headers = st.lists(st.tuples(st.text(max_size=5), blobs), max_size=3)
records_v2 = st.lists(st.tuples(blobs, blobs, headers), min_size=1, max_size=30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.tuples(records_v2, st.sampled_from([0, 1, 2, 3, 4]),
                                  st.integers(-5000, 5000)), min_size=1, max_size=4),
       split=st.integers(0, 4))
def test_v2_round_trip_and_split_at_batch_boundary(batches, split):
    parts, offset = [], 0
    for recs, codec, ts in batches:
        parts.append(_kp_v2(recs, codec, base_offset=offset, ts=1_600_000_000_000 + ts))
        offset += len(recs)
    data = b"".join(parts)
    expected = _reference(data)
    assert _ours(data) == expected
    cut = sum(len(p) for p in parts[:min(split, len(parts))])
    assert _ours(data[:cut]) + _ours(data[cut:]) == expected
    assert _ours(data, end=cut) + _ours(data, start=cut) == expected


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=st.lists(st.tuples(blobs, blobs), min_size=1, max_size=20),
       magic=st.sampled_from([0, 1]), codec=st.sampled_from([0, 1, 2, 3]))
def test_legacy_round_trip(recs, magic, codec):
    data = _kp_legacy(recs, magic, codec)
    assert _ours(data) == _reference(data)


def test_large_batches_split_across_output_batches():
    recs = [(b"%d" % i, b"v" * 10, []) for i in range(5000)]
    data = _kp_v2(recs, 4) + _kp_v2(recs, 0, base_offset=5000)
    out = list(decode_entries(data, topic="t", partition=0, options=DecodeOptions(max_rows=3000)))
    assert [b.num_rows for b in out] == [3000, 2000, 3000, 2000]
    table = pa.Table.from_batches(out)
    assert table.column("offset").to_pylist() == list(range(10000))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=records_v2, legacy=st.lists(st.tuples(blobs, blobs), min_size=1, max_size=10),
       codec=st.sampled_from([0, 1]), lo=st.integers(0, 45), width=st.integers(0, 45))
def test_offset_window_inside_batches_matches_reference(recs, legacy, codec, lo, width):
    # the fill pass skips out-of-window records without reading their fields: the rows it keeps
    # (headers included) must still be exactly the reference's, with and without headers
    data = (_kp_v2(recs, codec) + _kp_legacy(legacy, 1, codec, base_offset=len(recs))
            + _kp_v2(recs, codec, base_offset=len(recs) + len(legacy)))
    hi = lo + width
    expected = [r for r in _reference(data) if lo <= r[0] <= hi]
    assert _ours(data, min_offset=lo, max_offset=hi) == expected
    plain = rows(data, DecodeOptions(), min_offset=lo, max_offset=hi)
    assert [(x["offset"], x["key"], x["value"]) for x in plain] == [e[:3] for e in expected]
