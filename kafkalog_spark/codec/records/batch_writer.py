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

from .. import layout as L
from . import _encode_kernels as K
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


@dataclass(frozen=True)
class FixedBatches:
    """Caller-defined batches, each with its own header (compaction rebuilds many batches of
    different producers, codecs and horizons at once): int64 arrays, one entry per batch but
    ``start`` (one more: batch ``b`` holds records ``start[b]..start[b+1]``, at least one).

    ``base_timestamp`` is used where ``has_base_timestamp`` (a delete horizon; else the first
    record's timestamp); ``last_offset_delta`` -1 means the last record's;
    ``log_append_time`` is the max timestamp of the batches whose attributes say LogAppendTime.
    """

    start: np.ndarray
    base_offset: np.ndarray
    base_timestamp: np.ndarray
    has_base_timestamp: np.ndarray  # bool
    last_offset_delta: np.ndarray
    attributes: np.ndarray
    partition_leader_epoch: np.ndarray
    producer_id: np.ndarray
    producer_epoch: np.ndarray
    base_sequence: np.ndarray
    log_append_time: np.ndarray


def _raise_status(status: int, index: int, rec: _Records) -> None:
    if status == K.OK:
        return
    where = f"record {index}, offset {int(rec.offsets[index])}" if 0 <= index < rec.n else f"record {index}"
    raise _fail(f"{_STATUS_MESSAGES[status]} ({where})")


def _plan(rec: _Records, *, max_records: int, max_bytes: int, fixed: FixedBatches | None
          ) -> tuple:
    n = rec.n
    payload = np.empty(n, dtype=np.int64)
    status, index = K.payload_sizes(n, rec.key[0], rec.key[2], rec.key[3], rec.value[0], rec.value[2],
                                    rec.value[3], *_headers_size_args(rec), rec.has_headers, payload)
    _raise_status(status, index, rec)
    body = np.empty(n, dtype=np.int64)
    start = np.zeros(n + 2, dtype=np.int64)
    section, base_off, base_ts, max_ts, max_ts_off = (np.zeros(max(n, 1), dtype=np.int64) for _ in range(5))
    none = np.zeros(0, np.int64)
    bounds = ((none, none, none, np.zeros(0, np.bool_)) if fixed is None else
              (fixed.start, fixed.base_offset, fixed.base_timestamp, fixed.has_base_timestamp))
    nb, status, index = K.plan_batches(
        n, payload, rec.ts, rec.offsets, max_records, max_bytes, fixed is None, *bounds, body,
        start, section, base_off, base_ts, max_ts, max_ts_off)
    _raise_status(status, index, rec)
    return nb, body, start[:nb + 1], section[:nb], base_off[:nb], base_ts[:nb], max_ts[:nb], max_ts_off[:nb]


def _headers_size_args(rec: _Records) -> tuple:
    h_off, h_bits, h_bit0, s_bits, s_bit0, hk_off, _, hk_bits, hk_bit0, hv_off, _, hv_bits, hv_bit0 = rec.headers
    return h_off, h_bits, h_bit0, s_bits, s_bit0, hk_off, hk_bits, hk_bit0, hv_off, hv_bits, hv_bit0


def _encode(rec: _Records, head: _Header, *, codec: int, level: int | None, max_records: int,
            max_bytes: int) -> EncodedBatches:
    """Records cut into batches by count and size, every batch with the header ``head``."""
    nb, body, start, section, base_off, base_ts, max_ts, max_ts_off = _plan(
        rec, max_records=max_records, max_bytes=max_bytes, fixed=None)
    if head.base_sequence >= 0:  # sequences run on with offsets: lastSequence + 1 starts the next
        base_seq = (head.base_sequence + (base_off - base_off[0])) % (L.INT32_MAX + 1)
    else:
        base_seq = np.full(nb, head.base_sequence, np.int64)
    each = (lambda v: np.full(nb, v, np.int64))
    log_append = head.log_append_time is not None
    return _write(rec, nb, body, start, section, base_off, base_ts, max_ts, max_ts_off,
                  lod=rec.offsets[start[1:] - 1] - base_off, base_seq=base_seq,
                  attributes=each(head.attributes), epoch=each(head.partition_leader_epoch),
                  producer_id=each(head.producer_id), producer_epoch=each(head.producer_epoch),
                  log_append=np.full(nb, log_append), log_append_time=each(
                      head.log_append_time if log_append else 0),
                  codec=each(codec), level=level)


def encode_fixed(rec: _Records, fixed: FixedBatches, level: int | None = None) -> EncodedBatches:
    """Records in the caller's batches (:class:`FixedBatches`), each batch compressed with the
    codec its attributes name."""
    nb, body, start, section, base_off, base_ts, max_ts, max_ts_off = _plan(
        rec, max_records=L.INT32_MAX, max_bytes=2**62, fixed=fixed)
    lod = rec.offsets[start[1:] - 1] - base_off
    given = fixed.last_offset_delta >= 0
    low = np.flatnonzero(given & (fixed.last_offset_delta < lod))
    if len(low):
        b = int(low[0])
        raise _fail(f"last_offset_delta {int(fixed.last_offset_delta[b])} is below the last "
                    f"record's offset delta {int(lod[b])} (batch at base offset "
                    f"{int(base_off[b])})")
    return _write(rec, nb, body, start, section, base_off, base_ts, max_ts, max_ts_off,
                  lod=np.where(given, fixed.last_offset_delta, lod),
                  base_seq=fixed.base_sequence, attributes=fixed.attributes,
                  epoch=fixed.partition_leader_epoch, producer_id=fixed.producer_id,
                  producer_epoch=fixed.producer_epoch,
                  log_append=(fixed.attributes & L.TIMESTAMP_TYPE_MASK) != 0,
                  log_append_time=fixed.log_append_time,
                  codec=fixed.attributes & L.CODEC_MASK, level=level)


def encode_empty(rec: _Records, head: _Header, *, base_offset: int, last_offset_delta: int,
                 max_timestamp: int) -> EncodedBatches:
    """Kafka's empty batch (``writeEmptyHeader``) from no records (``rec``): base timestamp -1,
    codec none, the given last offset delta and max timestamp (compaction keeps an emptied
    batch's)."""
    one = (lambda v: np.array([v], np.int64))
    return _write(rec, 1, np.zeros(0, np.int64), np.zeros(2, np.int64), one(0), one(base_offset),
                  one(L.NO_TIMESTAMP), one(max_timestamp), one(base_offset + last_offset_delta),
                  lod=one(last_offset_delta), base_seq=one(head.base_sequence),
                  attributes=one(head.attributes), epoch=one(head.partition_leader_epoch),
                  producer_id=one(head.producer_id), producer_epoch=one(head.producer_epoch),
                  log_append=np.zeros(1, bool), log_append_time=one(0), codec=one(L.CODEC_NONE),
                  level=None)


def _write(rec: _Records, nb: int, body, start, section, base_off, base_ts, max_ts, max_ts_off, *,
           lod, base_seq, attributes, epoch, producer_id, producer_epoch, log_append,
           log_append_time, codec, level) -> EncodedBatches:
    """Fill, compress and checksum ``nb`` planned batches (per-batch header arrays)."""
    if log_append.any():  # LogAppendTime: the append time is the max timestamp
        max_ts = np.where(log_append, log_append_time, max_ts)
        if rec.n:
            max_ts_off = np.where(log_append, rec.offsets[start[:-1]], max_ts_off)
    size = section + L.RECORD_BATCH_OVERHEAD
    position = np.zeros(nb, np.int64)
    np.cumsum(size[:-1], out=position[1:])
    out = np.empty(int(size.sum()), dtype=np.uint8)
    h_off, h_bits, h_bit0, s_bits, s_bit0, *hk_hv = rec.headers
    K.fill_batches(out, nb, position, start, section, base_off, base_ts, max_ts, lod, base_seq, body,
                   rec.ts, rec.offsets, epoch, attributes, producer_id, producer_epoch,
                   *rec.key, *rec.value, h_off, h_bits, h_bit0, *hk_hv, rec.has_headers)
    if (codec != L.CODEC_NONE).any():
        out, position, size = _compress_batches(out, position, size, codec, level, base_off)
    view = memoryview(out)
    for p, s in zip(position.tolist(), size.tolist()):
        _CRC.pack_into(view, p + L.CRC_OFFSET, _crc32c(view[p + L.ATTRIBUTES_OFFSET:p + s]))
    return EncodedBatches(out, position, size, base_off, base_off + lod, max_ts, max_ts_off,
                          np.diff(start))


def _crc32c(data: memoryview) -> int:
    import crc32c  # the hardware-accelerated CRC; a declared dependency, imported when writing

    return crc32c.crc32c(data)


def _compress_batches(out: np.ndarray, position: np.ndarray, size: np.ndarray,
                      codec: np.ndarray, level: int | None, base_off: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Replace each batch's records section by its compressed stream with the batch's codec
    (``codec[b]``; none keeps the section; header fields stay)."""
    from ..compression.codecs import compress

    compressed = []
    for p, s, c in zip(position.tolist(), size.tolist(), codec.tolist()):
        section = out[p + L.RECORDS_OFFSET:p + s]
        compressed.append(compress(c, section, level=level) if c != L.CODEC_NONE
                          else memoryview(section))
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
