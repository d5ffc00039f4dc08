"""Record-batch writer (codec layer): kernel-ready record columns planned into v2 batches,
filled, compressed and checksummed as MemoryRecordsBuilder writes them (KAFKA_FORMATS §4.6, §5,
§7.1).

Batch v2 layout written (offsets from :mod:`kafkalog_spark.codec.layout`)::

    0  int64  baseOffset            first offset (or the kept base offset of a compacted batch)
    8  int32  batchLength           bytes after this field
    12 int32  partitionLeaderEpoch  not covered by the CRC
    16 int8   magic = 2
    17 uint32 crc                   CRC-32C over [21, end), computed last
    21 int16  attributes            codec | ts type << 3 | txn << 4 | control << 5 | horizon << 6
    23 int32  lastOffsetDelta       last record's offset delta, unless overridden (compaction)
    27 int64  baseTimestamp         first record's timestamp; delete horizon if bit 6; -1 if empty
    35 int64  maxTimestamp          max record timestamp (CreateTime) or the log append time
    43 int64  producerId
    51 int16  producerEpoch
    53 int32  baseSequence
    57 int32  recordsCount
    61        records, one compressed stream when the codec is not none

Records are written by two kernel calls over the Arrow buffers of all records at once
(:mod:`._encode_kernels`); Python touches each *batch* only to compress it and set its CRC.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from . import _encode_kernels as K
from . import layout as L
from .encode_columns import _fail

_CRC = struct.Struct(">I")
_LENGTH = struct.Struct(">i")
_STATUS_MESSAGES = {
    K.OFFSET_NOT_INCREASING: "record offsets must strictly increase (an offset goes backwards "
                             "or repeats)",
    K.OFFSET_DELTA_TOO_LARGE: "offset delta outside 0..2^31-1 for the batch's base offset",
    K.TIMESTAMP_DELTA_OVERFLOW: "timestamp minus the batch base timestamp overflows int64",
    K.FIELD_TOO_LARGE: "a key, value, header or record is longer than 2^31-1 bytes",
    K.BATCH_TOO_LARGE: "the batch would exceed the 2^31-1 byte batch length limit",
    K.NULL_HEADER: "a header entry or header key is null (only header values may be null)",
}


@dataclass(frozen=True)
class EncodedBatches:
    """Concatenated batches plus one row per batch of what a segment/index writer needs.

    ``offset_of_max_timestamp`` is the offset of the first record holding the batch's max
    timestamp (the base offset for LogAppendTime, the last offset for an empty batch); Kafka's
    time index stores the batch's *last* offset instead (KAFKA_FORMATS §9.5).
    """

    data: np.ndarray  # uint8
    position: np.ndarray  # int64, start of each batch in data
    size: np.ndarray  # int64, bytes of each batch (12 + batchLength)
    base_offset: np.ndarray  # int64
    last_offset: np.ndarray  # int64, base offset + lastOffsetDelta
    max_timestamp: np.ndarray  # int64, as in the header
    offset_of_max_timestamp: np.ndarray  # int64
    record_count: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.position)

    def tobytes(self) -> bytes:
        """All batches as one ``bytes`` object."""
        return self.data.tobytes()

    def batch(self, i: int) -> memoryview:
        """A view of batch ``i``'s bytes."""
        p = int(self.position[i])
        return memoryview(self.data)[p:p + int(self.size[i])]


# --- the one encoding path ------------------------------------------------------------------


@dataclass(frozen=True)
class _Records:
    """Kernel-ready columns of the records to write."""

    key: tuple
    value: tuple
    headers: tuple
    has_headers: bool
    ts: np.ndarray  # int64 milliseconds
    offsets: np.ndarray  # int64 absolute offsets

    @property
    def n(self) -> int:
        return len(self.ts)


@dataclass(frozen=True)
class _Header:
    """Batch header values shared by every batch of one write."""

    attributes: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    log_append_time: int | None  # set iff LogAppendTime


def _raise_status(status: int, index: int, rec: _Records) -> None:
    if status == K.OK:
        return
    where = f"record {index}, offset {int(rec.offsets[index])}" if 0 <= index < rec.n else f"record {index}"
    raise _fail(f"{_STATUS_MESSAGES[status]} ({where})")


def _plan(rec: _Records, *, may_split: bool, max_records: int, max_bytes: int, fixed_base_off: int,
          fixed_base_ts: int | None) -> tuple:
    n = rec.n
    payload = np.empty(n, dtype=np.int64)
    status, index = K.payload_sizes(n, rec.key[0], rec.key[2], rec.key[3], rec.value[0], rec.value[2],
                                    rec.value[3], *_headers_size_args(rec), rec.has_headers, payload)
    _raise_status(status, index, rec)
    body = np.empty(n, dtype=np.int64)
    start = np.zeros(n + 2, dtype=np.int64)
    section, base_off, base_ts, max_ts, max_ts_off = (np.zeros(max(n, 1), dtype=np.int64) for _ in range(5))
    nb, status, index = K.plan_batches(
        n, payload, rec.ts, rec.offsets, max_records, max_bytes, may_split, fixed_base_off,
        0 if fixed_base_ts is None else fixed_base_ts, fixed_base_ts is not None, body, start,
        section, base_off, base_ts, max_ts, max_ts_off)
    _raise_status(status, index, rec)
    return nb, body, start[:nb + 1], section[:nb], base_off[:nb], base_ts[:nb], max_ts[:nb], max_ts_off[:nb]


def _headers_size_args(rec: _Records) -> tuple:
    h_off, h_bits, h_bit0, s_bits, s_bit0, hk_off, _, hk_bits, hk_bit0, hv_off, _, hv_bits, hv_bit0 = rec.headers
    return h_off, h_bits, h_bit0, s_bits, s_bit0, hk_off, hk_bits, hk_bit0, hv_off, hv_bits, hv_bit0


def _encode(rec: _Records, head: _Header, *, codec: int, level: int | None, may_split: bool,
            max_records: int, max_bytes: int, fixed_base_off: int = 0,
            fixed_base_ts: int | None = None, last_offset_delta: int | None = None,
            empty_max_timestamp: int = L.NO_TIMESTAMP) -> EncodedBatches:
    if rec.n == 0:  # only encode_batch asks for an empty batch: Kafka's writeEmptyHeader
        nb, body = 1, np.zeros(0, np.int64)
        start, section = np.zeros(2, np.int64), np.zeros(1, np.int64)
        base_off = np.array([fixed_base_off], np.int64)
        base_ts = np.array([L.NO_TIMESTAMP], np.int64)
        max_ts = np.array([empty_max_timestamp], np.int64)
        lod = np.array([last_offset_delta or 0], np.int64)
        max_ts_off = base_off + lod
    else:
        nb, body, start, section, base_off, base_ts, max_ts, max_ts_off = _plan(
            rec, may_split=may_split, max_records=max_records, max_bytes=max_bytes,
            fixed_base_off=fixed_base_off, fixed_base_ts=fixed_base_ts)
        lod = rec.offsets[start[1:] - 1] - base_off
        if last_offset_delta is not None:
            if last_offset_delta < lod[0]:
                raise _fail(f"last_offset_delta {last_offset_delta} is below the last record's "
                            f"offset delta {int(lod[0])}")
            lod = np.array([last_offset_delta], np.int64)
    if head.log_append_time is not None:
        max_ts = np.full(nb, head.log_append_time, np.int64)
        if rec.n:
            max_ts_off = rec.offsets[start[:-1]]
    if head.base_sequence >= 0:  # sequences run on with offsets: lastSequence + 1 starts the next
        base_seq = (head.base_sequence + (base_off - base_off[0])) % (L.INT32_MAX + 1)
    else:
        base_seq = np.full(nb, head.base_sequence, np.int64)
    size = section + L.RECORD_BATCH_OVERHEAD
    position = np.zeros(nb, np.int64)
    np.cumsum(size[:-1], out=position[1:])
    out = np.empty(int(size.sum()), dtype=np.uint8)
    h_off, h_bits, h_bit0, s_bits, s_bit0, *hk_hv = rec.headers
    K.fill_batches(out, nb, position, start, section, base_off, base_ts, max_ts, lod, base_seq, body,
                   rec.ts, rec.offsets, head.partition_leader_epoch, head.attributes,
                   head.producer_id, head.producer_epoch, *rec.key, *rec.value,
                   h_off, h_bits, h_bit0, *hk_hv, rec.has_headers)
    if codec != L.CODEC_NONE:
        out, position, size = _compress_batches(out, position, size, codec, level, base_off)
    view = memoryview(out)
    for p, s in zip(position.tolist(), size.tolist()):
        _CRC.pack_into(view, p + L.CRC_OFFSET, _crc32c(view[p + L.ATTRIBUTES_OFFSET:p + s]))
    return EncodedBatches(out, position, size, base_off, base_off + lod, max_ts, max_ts_off,
                          np.diff(start))


def _crc32c(data: memoryview) -> int:
    import crc32c  # the hardware-accelerated CRC; a declared dependency, imported when writing

    return crc32c.crc32c(data)


def _compress_batches(out: np.ndarray, position: np.ndarray, size: np.ndarray, codec: int,
                      level: int | None, base_off: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Replace every batch's records section by its compressed stream (header fields stay)."""
    from .compression import compress

    compressed = []
    for p, s in zip(position.tolist(), size.tolist()):
        compressed.append(compress(codec, out[p + L.RECORDS_OFFSET:p + s], level=level))
    new_size = np.array([L.RECORD_BATCH_OVERHEAD + len(c) for c in compressed], np.int64)
    too_big = np.flatnonzero(new_size - L.LOG_OVERHEAD > L.INT32_MAX)
    if len(too_big):
        raise _fail(f"compressed batch at base offset {int(base_off[too_big[0]])} exceeds the "
                    "2^31-1 byte batch length limit")
    new_position = np.zeros(len(new_size), np.int64)
    np.cumsum(new_size[:-1], out=new_position[1:])
    result = np.empty(int(new_size.sum()), dtype=np.uint8)
    view = memoryview(result)
    for p, q, s, c in zip(position.tolist(), new_position.tolist(), new_size.tolist(), compressed):
        result[q:q + L.RECORDS_OFFSET] = out[p:p + L.RECORDS_OFFSET]
        view[q + L.RECORDS_OFFSET:q + s] = c
        _LENGTH.pack_into(view, q + L.BATCH_LENGTH_OFFSET, s - L.LOG_OVERHEAD)
    return result, new_position, new_size
