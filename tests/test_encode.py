"""Tests of the v2 record batch writer: golden vectors, kafka-python/aiokafka cross checks,
Arrow layouts, batch splitting, round trips and bad input."""

from __future__ import annotations

import struct

import crc32c
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaPythonBuilder
from kafka.record.memory_records import MemoryRecords

from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from kafkalog_spark.codec import layout as L
from kafkalog_spark.codec.compression.codecs import decompress
from kafkalog_spark.codec.records.encode import (BatchSpec, EncodedBatches, encode_batch,
                                                 encode_batches, encode_end_txn_marker,
                                                 encode_record_batches)
from kafkalog_spark.codec.records.scan import scan_entries
from kafkalog_spark.codec.records.schema import HEADERS_TYPE
from kafkalog_spark.errors import InvalidOptionError, KafkaLogError

CODECS = [L.CODEC_NONE, L.CODEC_GZIP, L.CODEC_SNAPPY, L.CODEC_LZ4, L.CODEC_ZSTD]
TS = 1700000000000

# --- KAFKA_FORMATS §18.3 (real broker dumps) and §18.4 (computed) ---------------------------

GOLDEN = {
    "v2 #1": (
        "00000000000000000000003b00000001020318a2700000000000000000015dff7b063c0000015dff7b063c"
        "ffffffffffffffffffffffffffff0000000112000000010631323300",
        dict(keys=[None], values=[b"123"], timestamps=[1503229838908],
             spec=BatchSpec(base_offset=0, partition_leader_epoch=1))),
    "v2 #2": (
        "0000000000000001000000400000000202c85cbd230000000000010000015dff7cdd6c0000015dff7cde14"
        "ffffffffffffffffffffffffffff000000020c0000000100000e00d00202010000",
        dict(keys=[None, None], values=[b"", b""], timestamps=[1503229959532, 1503229959700],
             spec=BatchSpec(base_offset=1, partition_leader_epoch=2))),
    "v2 #3": (
        "00000000000000030000003b00000002022e0b85b70000000000000000015dff7ce79d0000015dff7ce79d"
        "ffffffffffffffffffffffffffff0000000112000000010631323300",
        dict(keys=[None], values=[b"123"], timestamps=[1503229962141],
             spec=BatchSpec(base_offset=3, partition_leader_epoch=2))),
    "v2 #4 header": (
        "00000000000000000000004500000000025cd8ef520000000000000000016585b6f3c10000016585b6f3c1"
        "ffffffffffffffffffffffffffff000000012600000001066864720208686b6579086876616c",
        dict(keys=[None], values=[b"hdr"], timestamps=[1535546684353], headers=[[("hkey", b"hval")]],
             spec=BatchSpec(base_offset=0, partition_leader_epoch=0))),
    "empty batch after compaction": (
        "00000000000000c800000031000000050298191d73000000000004ffffffffffffffff0000018bcfe5687b"
        "00000000000003e800020000000a00000000",
        dict(keys=[], values=[], timestamps=[],
             spec=BatchSpec(base_offset=200, partition_leader_epoch=5, last_offset_delta=4,
                            producer_id=1000, producer_epoch=2, base_sequence=10,
                            max_timestamp=1700000000123))),
    "data batch": (
        "00000000000000000000004900000000024109046f0000000000010000018bcfe568000000018bcfe56805"
        "ffffffffffffffffffffffffffff0000000214000000046b310476310018000a02046b32010202680278",
        dict(keys=[b"k1", b"k2"], values=[b"v1", None], timestamps=[TS, TS + 5],
             headers=[[], [("h", b"x")]], spec=BatchSpec(base_offset=0, partition_leader_epoch=0))),
    "delete horizon": (
        "00000000000000000000004f0000000002016d0d640040000000010000018bd50bc4000000018bcfe56805"
        "ffffffffffffffffffffffffffff000000021a00ffefb25200046b31047631001e00f5efb25202046b3201"
        "0202680278",
        dict(keys=[b"k1", b"k2"], values=[b"v1", None], timestamps=[TS, TS + 5],
             headers=[[], [("h", b"x")]],
             spec=BatchSpec(base_offset=0, partition_leader_epoch=0, delete_horizon_ms=1700086400000))),
}
COMMIT_MARKER = ("0000000000000064000000420000000502809c88c40030000000000000018bcfe568000000018bcfe568"
                 "0000000000000003e80002ffffffff000000012000000008000000010c00000000000700")


@pytest.mark.parametrize("name", list(GOLDEN))
def test_golden_vectors(name):
    hex_bytes, kwargs = GOLDEN[name]
    kwargs = dict(kwargs)
    spec = kwargs.pop("spec")
    assert encode_batch(kwargs.pop("keys"), kwargs.pop("values"), kwargs.pop("timestamps"),
                        spec=spec, **kwargs).hex() == hex_bytes


def test_end_txn_marker_vector_and_readers():
    marker = encode_end_txn_marker(offset=100, producer_id=1000, producer_epoch=2,
                                   coordinator_epoch=7, commit=True, timestamp=TS,
                                   partition_leader_epoch=5)
    assert marker.hex() == COMMIT_MARKER and len(marker) == 78
    abort = encode_end_txn_marker(offset=7, producer_id=3, producer_epoch=1, coordinator_epoch=9,
                                  commit=False, timestamp=TS)
    batch = KafkaPythonBatch(abort)
    assert batch.validate_crc() and batch.is_control_batch and batch.is_transactional
    (rec,) = list(batch)
    assert (rec.offset, rec.abort, rec.commit) == (7, True, False)
    assert rec.value == struct.pack(">hi", 0, 9)
    assert AioBatch(abort).validate_crc()


# --- cross checks against kafka-python's builder --------------------------------------------


def _records(n, seed=0, compressible=False):
    rng = np.random.default_rng(seed)
    keys, values, timestamps, headers = [], [], [], []
    for i in range(n):
        keys.append(None if i % 5 == 0 else b"" if i % 7 == 0 else b"key-%d" % (i % 13))
        size = int(rng.integers(0, 300))
        values.append(None if i % 11 == 3 else
                      (b"v%d" % (i % 3)) * (size // 2) if compressible else rng.bytes(size))
        timestamps.append(TS + int(rng.integers(-5000, 5000)))
        headers.append([("h%d" % j, None if j == 1 else rng.bytes(j * 3)) for j in range(i % 4)])
    return keys, values, timestamps, headers


def _kafka_python_batch(keys, values, timestamps, headers, codec=0, producer=(-1, -1, -1, False)):
    builder = KafkaPythonBuilder(magic=2, compression_type=codec, is_transactional=producer[3],
                                 producer_id=producer[0], producer_epoch=producer[1],
                                 base_sequence=producer[2], batch_size=1 << 30)
    for i, (k, v, t, h) in enumerate(zip(keys, values, timestamps, headers)):
        assert builder.append(i, t, k, v, h) is not None
    return bytes(builder.build())


@pytest.mark.parametrize("producer", [(-1, -1, -1, False), (4242, 3, 17, False), (4242, 3, 2**31 - 5, True)])
def test_byte_identical_to_kafka_python_uncompressed(producer):
    keys, values, timestamps, headers = _records(300)
    theirs = _kafka_python_batch(keys, values, timestamps, headers, producer=producer)
    spec = BatchSpec(base_offset=0, partition_leader_epoch=0, producer_id=producer[0],
                     producer_epoch=producer[1], base_sequence=producer[2],
                     is_transactional=producer[3])
    assert encode_batch(keys, values, timestamps, spec=spec, headers=headers) == theirs
    table = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
                      "timestamp": pa.array(timestamps, pa.int64()),
                      "headers": pa.array([[{"key": k, "value": v} for k, v in h] for h in headers],
                                          HEADERS_TYPE)})
    encoded = encode_record_batches(table, partition_leader_epoch=0, producer_id=producer[0],
                                    producer_epoch=producer[1], base_sequence=producer[2],
                                    is_transactional=producer[3], max_batch_bytes=1 << 30)
    assert len(encoded) == 1 and encoded.tobytes() == theirs


def test_large_batch_byte_identical_and_read_back():
    keys, values, timestamps, headers = _records(20000, seed=7)
    theirs = _kafka_python_batch(keys, values, timestamps, headers)
    ours = encode_batch(keys, values, np.array(timestamps), headers=headers,
                        spec=BatchSpec(base_offset=0, partition_leader_epoch=0))
    assert ours == theirs
    got = _read_all(ours)
    assert got == [(i, t, k, v, h) for i, (k, v, t, h) in enumerate(zip(keys, values, timestamps, headers))]


def _masked_header(batch: bytes) -> bytes:
    """Header bytes that must agree whatever the compressor: all but length and CRC."""
    return batch[:8] + batch[12:17] + batch[21:61]


@pytest.mark.parametrize("codec", CODECS[1:])
def test_compressed_matches_kafka_python_after_decompression(codec):
    keys, values, timestamps, headers = _records(400, seed=1, compressible=True)
    theirs = _kafka_python_batch(keys, values, timestamps, headers, codec=codec)
    ours = encode_batch(keys, values, timestamps, headers=headers,
                        spec=BatchSpec(base_offset=0, partition_leader_epoch=0, codec=codec))
    assert theirs[21:23] == ours[21:23] == bytes([0, codec])  # kafka-python did compress
    assert _masked_header(ours) == _masked_header(theirs)
    assert decompress(codec, ours[61:]) == decompress(codec, theirs[61:])
    plain = _kafka_python_batch(keys, values, timestamps, headers)
    assert decompress(codec, ours[61:]) == plain[61:]
    if ours[61:] == theirs[61:]:  # same compressor output: then every byte must agree
        assert ours == theirs
    assert struct.unpack(">I", ours[17:21])[0] == crc32c.crc32c(ours[21:])


# --- readers: kafka-python and aiokafka read back every record ------------------------------


def _read_all(data: bytes):
    """Every record of concatenated batches via kafka-python's and aiokafka's readers."""
    out_kp, out_aio = [], []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        out_kp.extend((r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch)
    pos = 0
    while pos < len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0] + 12
        batch = AioBatch(data[pos:pos + size])
        assert batch.validate_crc()
        out_aio.extend((r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch)
        pos += size
    assert out_kp == out_aio
    return out_kp


@pytest.mark.parametrize("codec", CODECS)
def test_readers_read_every_record(codec):
    keys, values, timestamps, headers = _records(500, seed=2)
    offsets = np.cumsum(np.arange(1, 501)) + 1000  # gaps of growing size
    table = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
                      "timestamp": pa.array(timestamps, pa.int64()), "offset": offsets,
                      "headers": pa.array([[{"key": k, "value": v} for k, v in h] for h in headers],
                                          HEADERS_TYPE)})
    encoded = encode_record_batches(table, codec=codec, max_batch_bytes=8000)
    assert len(encoded) > 5
    expected = [(int(o), t, k, v, h) for o, t, k, v, h in zip(offsets, timestamps, keys, values, headers)]
    assert _read_all(encoded.tobytes()) == expected
    assert (encoded.data[encoded.position + L.ATTRIBUTES_OFFSET + 1] == codec).all()


def test_encoded_batches_arrays_agree_with_scan():
    n = 2000
    table = pa.table({"value": pa.array([b"x" * (i % 50) for i in range(n)], pa.binary()),
                      "timestamp": pa.array(TS + (np.arange(n) * 7919) % 1000, pa.int64())})
    enc = encode_record_batches(table, base_offset=500, max_batch_records=300, max_batch_bytes=20000)
    entries = scan_entries(enc.data)
    assert isinstance(enc, EncodedBatches)
    np.testing.assert_array_equal(entries.position, enc.position)
    np.testing.assert_array_equal(entries.entry_size, enc.size)
    np.testing.assert_array_equal(entries.offset, enc.base_offset)
    np.testing.assert_array_equal(entries.max_timestamp, enc.max_timestamp)
    np.testing.assert_array_equal(entries.count, enc.record_count)
    np.testing.assert_array_equal(entries.offset + entries.last_offset_delta, enc.last_offset)
    assert enc.record_count.max() <= 300 and enc.record_count.sum() == n
    assert (enc.size - 61 <= 20000).all()
    ts = TS + (np.arange(n) * 7919) % 1000
    for b in range(len(enc)):
        lo = int(enc.base_offset[b]) - 500
        hi = lo + int(enc.record_count[b])
        assert enc.max_timestamp[b] == ts[lo:hi].max()
        assert enc.offset_of_max_timestamp[b] == 500 + lo + int(np.argmax(ts[lo:hi]))
    np.testing.assert_array_equal(enc.base_offset[1:], enc.last_offset[:-1] + 1)


def test_single_record_larger_than_max_batch_bytes_gets_its_own_batch():
    table = pa.table({"value": [b"a", b"b" * 5000, b"c"]})
    enc = encode_record_batches(table, max_batch_bytes=100)
    assert enc.record_count.tolist() == [1, 1, 1]
    assert [r[3] for r in _read_all(enc.tobytes())] == [b"a", b"b" * 5000, b"c"]


def test_offset_delta_beyond_int32_starts_a_new_batch():
    offsets = [0, 1, 2**31 - 1, 2**31, 2**32 + 5]
    enc = encode_record_batches(pa.table({"value": [b"v"] * 5, "offset": offsets}))
    assert enc.base_offset.tolist() == [0, 2**31, 2**32 + 5]
    assert enc.last_offset.tolist() == [2**31 - 1, 2**31, 2**32 + 5]
    assert [r[0] for r in _read_all(enc.tobytes())] == offsets


def test_base_sequence_runs_on_across_batches():
    enc = encode_record_batches(pa.table({"value": [b"v"] * 10}), max_batch_records=4,
                                producer_id=9, producer_epoch=1, base_sequence=2**31 - 6)
    seqs = [struct.unpack_from(">i", enc.data, int(p) + L.BASE_SEQUENCE_OFFSET)[0] for p in enc.position]
    assert seqs == [2**31 - 6, 2**31 - 2, 2]  # wraps past Integer.MAX_VALUE to 0


def test_log_append_time():
    table = pa.table({"value": [b"a", b"b"], "timestamp": pa.array([TS + 9, TS], pa.int64())})
    enc = encode_record_batches(table, timestamp_type=1, log_append_time=TS + 100)
    data = enc.tobytes()
    assert data[22] & 0x08 and enc.max_timestamp.tolist() == [TS + 100]
    assert struct.unpack_from(">q", data, L.BASE_TIMESTAMP_OFFSET)[0] == TS + 9
    assert [r[1] for r in _read_all(data)] == [TS + 100, TS + 100]


# --- Arrow input layouts --------------------------------------------------------------------


def _expected_bytes(keys, values, timestamps, headers=None, base=0):
    n = len(values)
    return encode_batch(keys, values, timestamps, headers=headers or [[] for _ in range(n)],
                        spec=BatchSpec(base_offset=base))


def test_sliced_chunked_and_large_columns():
    keys, values, timestamps, headers = _records(200, seed=3)
    header_rows = [[{"key": k, "value": v} for k, v in h] for h in headers]
    full = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
                     "timestamp": pa.array(timestamps, pa.int64()),
                     "headers": pa.array(header_rows, HEADERS_TYPE)})
    part = full.slice(37, 100)
    expected = _expected_bytes(keys[37:137], values[37:137], timestamps[37:137], headers[37:137], 0)
    got = encode_record_batches(part, max_batch_bytes=1 << 30).tobytes()
    assert got == expected
    chunked = pa.concat_tables([full.slice(37, 10), full.slice(47, 55), full.slice(102, 35)])
    assert encode_record_batches(chunked, max_batch_bytes=1 << 30).tobytes() == expected
    large = pa.table({
        "key": pa.array(keys[37:137], pa.large_binary()),
        "value": pa.array([None if v is None else v for v in values[37:137]], pa.large_binary()),
        "timestamp": pa.array(timestamps[37:137], pa.int64()),
        "headers": pa.array(header_rows[37:137], pa.large_list(pa.struct(
            [("key", pa.large_string()), ("value", pa.large_binary())]))),
    })
    assert encode_record_batches(large, max_batch_bytes=1 << 30).tobytes() == expected
    # a struct child sliced under the list: list offsets index the sliced struct array
    structs = pa.array([{"key": "pad", "value": b"pad"}] * 3 + [r for h in header_rows[37:137] for r in h],
                       HEADERS_TYPE.value_type).slice(3)
    lengths = np.cumsum([0] + [len(h) for h in header_rows[37:137]]).astype(np.int32)
    sliced_headers = pa.ListArray.from_arrays(pa.array(lengths), structs, type=HEADERS_TYPE)
    assert sliced_headers.values.offset == 3
    assert encode_record_batches(part.set_column(3, "headers", sliced_headers),
                                 max_batch_bytes=1 << 30).tobytes() == expected


def test_string_keys_null_vs_empty_and_null_headers_list():
    table = pa.table({"key": pa.array(["é", "", None], pa.string()),
                      "value": pa.array(["", None, "x"], pa.large_string()),
                      "timestamp": pa.array([TS] * 3, pa.int64()),
                      "headers": pa.array([None, [], [{"key": "k", "value": None}]], HEADERS_TYPE)})
    got = _read_all(encode_record_batches(table).tobytes())
    assert [(r[2], r[3], r[4]) for r in got] == [("é".encode(), b"", []), (b"", None, []),
                                                 (None, b"x", [("k", None)])]


def test_timestamp_units_convert_exactly():
    us = pa.array([1700000000000999, -1000], pa.timestamp("us", tz="UTC"))
    table = pa.table({"value": [b"a", b"b"], "timestamp": us})
    got = [r[1] for r in _read_all(encode_record_batches(table).tobytes())]
    assert got == [1700000000000, -1]  # floor division: -1000 us is -1 ms
    for unit, value in [("s", 1700000000), ("ms", TS), ("ns", TS * 1_000_000 + 999_999)]:
        table = pa.table({"value": [b"a"], "timestamp": pa.array([value], pa.timestamp(unit))})
        assert _read_all(encode_record_batches(table).tobytes())[0][1] == TS
    now_table = pa.table({"value": [b"a", b"b"], "timestamp": pa.array([None, TS], pa.int64())})
    first = _read_all(encode_record_batches(now_table).tobytes())[0][1]
    assert first > TS  # a null timestamp means "now", as Kafka's producer stamps it


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("table, options, message", [
    (pa.table({"value": [b"a", b"b"], "offset": [5, 4]}), {}, "strictly increase"),
    (pa.table({"value": [b"a", b"b"], "offset": [5, 5]}), {}, "strictly increase"),
    (pa.table({"value": [b"a"], "offset": [-3]}), {}, "negative"),
    (pa.table({"value": [b"a"], "offset": [3]}), {"base_offset": 3}, "conflicts"),
    (pa.table({"value": [b"a"], "timestamp": pa.array([-2], pa.int64())}), {}, "before the epoch"),
    (pa.table({"value": [b"a"], "timestamp": pa.array([2**62], pa.timestamp("s"))}), {}, "overflows"),
    (pa.table({"value": [b"a", b"b"], "timestamp": pa.array([-1, 2**63 - 1], pa.int64())}), {},
     "overflows int64"),
    (pa.table({"value": [b"a"], "timestamp": pa.array([1.5])}), {}, "timestamp column"),
    (pa.table({"value": [1]}), {}, "expected binary or string"),
    (pa.table({"key": [b"a"]}), {}, "no 'value' column"),
    (pa.table({"value": [b"a"], "headers": pa.array([[{"key": None, "value": b"x"}]], pa.list_(
        pa.struct([("key", pa.string()), ("value", pa.binary())])))}), {}, "header key is null"),
    (pa.table({"value": [b"a"]}), {"codec": 9}, "unknown codec"),
    (pa.table({"value": [b"a"]}), {"timestamp_type": 1}, "needs log_append_time"),
    (pa.table({"value": [b"a"]}), {"log_append_time": TS}, "only valid with"),
    (pa.table({"value": [b"a"]}), {"max_batch_records": 0}, "max_batch_records"),
    (pa.table({"value": [b"a"]}), {"is_transactional": True}, "producer_id"),
])
def test_bad_table_input_raises(table, options, message):
    with pytest.raises(InvalidOptionError, match=message) as info:
        encode_record_batches(table, **options)
    assert isinstance(info.value, KafkaLogError)


def test_bad_encode_batch_input_raises():
    spec = BatchSpec(base_offset=10)
    with pytest.raises(InvalidOptionError, match="strictly increase"):
        encode_batch([None, None], [b"", b""], [TS, TS], spec=spec, offset_deltas=[1, 1])
    with pytest.raises(InvalidOptionError, match="offset delta"):
        encode_batch([None, None], [b"", b""], [TS, TS], spec=spec, offset_deltas=[0, 2**31])
    with pytest.raises(InvalidOptionError, match=">= 0"):
        encode_batch([None], [b""], [TS], spec=spec, offset_deltas=[-1])
    with pytest.raises(InvalidOptionError, match="below the last record"):
        encode_batch([None, None], [b"", b""], [TS, TS],
                     spec=BatchSpec(base_offset=0, last_offset_delta=0))
    with pytest.raises(InvalidOptionError, match="empty batch"):
        encode_batch([], [], [], spec=BatchSpec(base_offset=0, codec=1))
    with pytest.raises(InvalidOptionError, match="only for empty"):
        encode_batch([None], [b""], [TS], spec=BatchSpec(base_offset=0, max_timestamp=TS))
    with pytest.raises(InvalidOptionError, match="differ in length"):
        encode_batch([None], [b"", b""], [TS, TS], spec=spec)
    with pytest.raises(InvalidOptionError, match="is null"):
        encode_batch([None], [b""], pa.array([None], pa.int64()), spec=spec)
    with pytest.raises(InvalidOptionError, match="is null"):
        encode_batch([None], [b""], [None], spec=spec)
    with pytest.raises(InvalidOptionError, match="integer milliseconds"):
        encode_batch([None], [b""], ["soon"], spec=spec)
    with pytest.raises(InvalidOptionError, match="bytes, str or None"):
        encode_batch([3], [b""], [TS], spec=spec)
    with pytest.raises(InvalidOptionError, match="null"):
        encode_batch([None], [b""], [TS], spec=spec, headers=[[(None, b"x")]])
    # the most negative delta still fits: -1 - (2^63 - 1) == -2^63
    extreme = encode_batch([None], [b""], [-1], spec=BatchSpec(base_offset=0, delete_horizon_ms=2**63 - 1))
    assert [r.timestamp for r in KafkaPythonBatch(extreme)] == [-1]


def test_overridden_last_offset_delta_and_kept_base_offset():
    """Compaction's shape: the first record is gone, base and last offsets are kept."""
    data = encode_batch([b"k"], [b"v"], [TS], offset_deltas=[3],
                        spec=BatchSpec(base_offset=100, last_offset_delta=9))
    batch = KafkaPythonBatch(data)
    assert batch.validate_crc() and (batch.base_offset, batch.last_offset_delta) == (100, 9)
    assert [r.offset for r in batch] == [103]


def _many_specs() -> list[tuple[BatchSpec, list[int]]]:
    """Batches as compaction rebuilds them: each its own codec, producer, epoch, timestamp type,
    delete horizon and kept base/last offsets (offset deltas with gaps)."""
    out = []
    for b in range(12):
        base = 1000 + 100 * b
        lat = b % 4 == 3
        out.append((BatchSpec(
            base_offset=base, partition_leader_epoch=b, codec=b % 5,
            timestamp_type=L.LOG_APPEND_TIME if lat else L.CREATE_TIME,
            log_append_time=TS + b if lat else None,
            producer_id=7 + b if b % 2 else L.NO_PRODUCER_ID,
            producer_epoch=b if b % 2 else L.NO_PRODUCER_EPOCH,
            base_sequence=3 * b if b % 2 else L.NO_SEQUENCE, is_transactional=b % 6 == 1,
            delete_horizon_ms=TS + 10_000 if b % 3 == 0 else None,
            last_offset_delta=90 if b % 2 else None), [d for d in range(b % 3, 60, 1 + b % 4)]))
    return out


def test_encode_batches_equals_encode_batch_per_batch():
    """One encode_batches call gives exactly the bytes of encode_batch per batch, and the
    independent readers read every batch."""
    specs = _many_specs()
    keys, values, ts, offsets, headers, expected = [], [], [], [], [], b""
    for b, (spec, deltas) in enumerate(specs):
        k = [None if d % 7 == 0 else b"k%d" % d for d in deltas]
        v = [None if d % 5 == 0 else b"value-%d-%d" % (b, d) * (1 + d % 3) for d in deltas]
        t = [TS + 10 * d - (b % 2) * 3 for d in deltas]
        h = [[("h", None if d % 2 else b"x")] if d % 4 == 0 else [] for d in deltas]
        expected += encode_batch(k, v, t, spec=spec, offset_deltas=deltas, headers=h)
        keys += k
        values += v
        ts += t
        offsets += [spec.base_offset + d for d in deltas]
        headers += h
    got = encode_batches(keys, values, ts, offsets, specs=[s for s, _ in specs],
                         counts=[len(d) for _, d in specs], headers=headers)
    assert got.tobytes() == expected
    assert len(got) == len(specs)
    assert [int(c) for c in got.record_count] == [len(d) for _, d in specs]
    for i, (spec, deltas) in enumerate(specs):
        data = bytes(got.batch(i))
        batch = KafkaPythonBatch(data)
        assert batch.validate_crc() and batch.base_offset == spec.base_offset
        assert [r.offset - spec.base_offset for r in batch] == deltas
        assert AioBatch(data).validate_crc()


def test_encode_batches_refuses_bad_counts_and_offsets():
    spec = BatchSpec(base_offset=10)
    with pytest.raises(InvalidOptionError, match="at least one record"):
        encode_batches([b"k"], [b"v"], [TS], [10], specs=[spec, spec], counts=[1, 0])
    with pytest.raises(InvalidOptionError, match="add up"):
        encode_batches([b"k"], [b"v"], [TS], [10], specs=[spec], counts=[2])
    with pytest.raises(InvalidOptionError, match="offset delta"):  # below its batch's base
        encode_batches([b"a", b"b"], [b"v", b"v"], [TS, TS], [10, 11],
                       specs=[spec, BatchSpec(base_offset=20)], counts=[1, 1])
    with pytest.raises(InvalidOptionError, match="last_offset_delta 0 is below"):
        encode_batches([b"a", b"b"], [b"v", b"v"], [TS, TS], [10, 11],
                       specs=[BatchSpec(base_offset=10, last_offset_delta=0)], counts=[2])
    with pytest.raises(InvalidOptionError, match="max_timestamp is only for empty"):
        encode_batches([b"k"], [b"v"], [TS], [10],
                       specs=[BatchSpec(base_offset=10, max_timestamp=TS)], counts=[1])


# --- property tests -------------------------------------------------------------------------

_bytes_or_none = st.one_of(st.none(), st.binary(max_size=40))
_record = st.tuples(
    _bytes_or_none, _bytes_or_none,
    st.integers(min_value=-1, max_value=2**45),
    st.lists(st.tuples(st.text(max_size=8), _bytes_or_none), max_size=3),
    st.integers(min_value=1, max_value=2**33),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(_record, max_size=40), base=st.integers(min_value=0, max_value=2**40),
       max_records=st.integers(min_value=1, max_value=50), max_bytes=st.integers(min_value=1, max_value=600))
def test_round_trip_through_kafka_python(records, base, max_records, max_bytes):
    keys = [r[0] for r in records]
    values = [r[1] for r in records]
    timestamps = [r[2] for r in records]
    headers = [r[3] for r in records]
    offsets = (base + np.cumsum([r[4] for r in records])).tolist() if records else []
    table = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
                      "timestamp": pa.array(timestamps, pa.int64()),
                      "offset": pa.array(offsets, pa.int64()),
                      "headers": pa.array([[{"key": k, "value": v} for k, v in h] for h in headers],
                                          HEADERS_TYPE)})
    enc = encode_record_batches(table, max_batch_records=max_records, max_batch_bytes=max_bytes)
    assert enc.record_count.sum() == len(records)
    got = _read_all(enc.tobytes())
    assert got == list(zip(offsets, timestamps, keys, values, headers))
    if records and max(offsets) - offsets[0] <= 2**31 - 1:  # one caller-defined batch
        deltas = [o - offsets[0] for o in offsets]
        one = encode_batch(keys, values, timestamps, headers=headers, offset_deltas=deltas,
                           spec=BatchSpec(base_offset=offsets[0]))
        assert _read_all(one) == got
