"""Record-batch writer (codec layer): Arrow columns to Kafka v2 batches, as MemoryRecordsBuilder
writes them (KAFKA_FORMATS §4.6, §5, §6.4, §7.1).

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

Timestamps are milliseconds. Arrow ``timestamp`` columns are converted exactly (floor division,
so pre-1970 microseconds round down like Java's ``Math.floorDiv``); integer columns are taken as
milliseconds. A null timestamp, or a missing ``timestamp`` column, means "now" — what Kafka's
producer stamps on a record sent without a timestamp. ``-1`` (``NO_TIMESTAMP``, which Kafka
stores only for records converted from v0 data) is accepted as given; anything below is refused.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from . import _encode_kernels as K
from . import layout as L
from ..errors import InvalidOptionError

DEFAULT_MAX_BATCH_RECORDS = 1 << 16
# A broker refuses batches above max.message.bytes (default 1048588, counting the 12-byte log
# overhead); keeping the uncompressed records section below that minus the 61-byte header keeps
# every batch we write acceptable to a default broker and its consumers.
MAX_MESSAGE_BYTES = 1048588
DEFAULT_MAX_BATCH_BYTES = MAX_MESSAGE_BYTES - L.RECORD_BATCH_OVERHEAD
END_TXN_MARKER_BATCH_SIZE = 78  # RECORD_BATCH_OVERHEAD + CURRENT_END_TXN_SCHEMA_RECORD_SIZE
CONTROL_ABORT, CONTROL_COMMIT = 0, 1

_CRC = struct.Struct(">I")
_LENGTH = struct.Struct(">i")
_EMPTY_BITS = np.zeros(0, dtype=np.uint8)
_EMPTY_OFFSETS = np.zeros(1, dtype=np.int64)
_MS_PER_UNIT = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}
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
class BatchSpec:
    """Header fields of one batch written by :func:`encode_batch`.

    ``delete_horizon_ms`` sets attribute bit 6 and becomes the base timestamp (record deltas are
    rebased onto it). ``last_offset_delta`` overrides the last record's offset delta, as
    compaction does to keep a batch's original last offset. ``max_timestamp`` is used only by
    an empty batch (compaction keeps the emptied batch's value); a non-empty batch computes it.
    """

    base_offset: int
    partition_leader_epoch: int = L.NO_PARTITION_LEADER_EPOCH
    codec: int = L.CODEC_NONE
    timestamp_type: int = L.CREATE_TIME
    log_append_time: int | None = None
    producer_id: int = L.NO_PRODUCER_ID
    producer_epoch: int = L.NO_PRODUCER_EPOCH
    base_sequence: int = L.NO_SEQUENCE
    is_transactional: bool = False
    is_control: bool = False
    delete_horizon_ms: int | None = None
    last_offset_delta: int | None = None
    max_timestamp: int | None = None

    def attributes(self) -> int:
        """The attributes int16 of this batch."""
        return (self.codec | (self.timestamp_type << 3) | (int(self.is_transactional) << 4)
                | (int(self.is_control) << 5) | (int(self.delete_horizon_ms is not None) << 6))


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


# --- Arrow columns to kernel arguments ------------------------------------------------------


def _fail(message: str) -> InvalidOptionError:
    return InvalidOptionError(message)


def _single(col: Any) -> pa.Array:
    """One contiguous Arrow array from an Array or ChunkedArray (chunks are concatenated)."""
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            return col.chunk(0)
        return pa.concat_arrays(col.chunks) if col.num_chunks else pa.array([], col.type)
    return col


def _validity(arr: pa.Array) -> tuple[np.ndarray, int]:
    if arr.null_count == 0:
        return _EMPTY_BITS, 0
    return np.frombuffer(arr.buffers()[0], dtype=np.uint8), arr.offset


def _binary(arr: pa.Array, what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``(offsets int64[n+1], data uint8, validity bitmap, bit offset)`` of a bytes column."""
    t = arr.type
    if pa.types.is_null(t):
        arr = pa.nulls(len(arr), pa.binary())
    elif not (pa.types.is_binary(t) or pa.types.is_string(t) or pa.types.is_large_binary(t)
              or pa.types.is_large_string(t)):
        castable = (pa.types.is_binary_view(t) or pa.types.is_string_view(t)
                    or pa.types.is_fixed_size_binary(t) or pa.types.is_dictionary(t))
        if not castable:
            raise _fail(f"{what} has Arrow type {t}; expected binary or string")
        try:
            arr = arr.cast(pa.large_binary())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise _fail(f"{what} of Arrow type {t} cannot be read as bytes: {exc}") from exc
    n = len(arr)
    bufs = arr.buffers()
    if n == 0 or bufs[1] is None:
        return _EMPTY_OFFSETS if n == 0 else np.zeros(n + 1, np.int64), _EMPTY_BITS, *_validity(arr)
    wide = pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type)
    off = np.frombuffer(bufs[1], dtype=np.int64 if wide else np.int32)[arr.offset:arr.offset + n + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else _EMPTY_BITS
    return off.astype(np.int64, copy=False), data, *_validity(arr)


_NO_HEADERS = (_EMPTY_OFFSETS, _EMPTY_BITS, 0, _EMPTY_BITS, 0,
               _EMPTY_OFFSETS, _EMPTY_BITS, _EMPTY_BITS, 0, _EMPTY_OFFSETS, _EMPTY_BITS, _EMPTY_BITS, 0)


def _headers(arr: pa.Array | None) -> tuple[tuple, bool]:
    """Kernel arguments for a ``list<struct<key, value>>`` column; a null list = no headers."""
    if arr is None:
        return _NO_HEADERS, False
    t = arr.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)) or not pa.types.is_struct(t.value_type):
        raise _fail(f"headers column has Arrow type {t}; expected list<struct<key string, value binary>>")
    names = [t.value_type.field(i).name for i in range(t.value_type.num_fields)]
    if "key" not in names or "value" not in names:
        raise _fail(f"headers struct has fields {names}; expected 'key' and 'value'")
    h_off = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    if len(arr) == 0:
        h_off = _EMPTY_OFFSETS
    h_bits, h_bit0 = _validity(arr)
    structs = arr.values
    s_bits, s_bit0 = _validity(structs)
    hk = _binary(structs.field("key"), "header key")
    hv = _binary(structs.field("value"), "header value")
    return (h_off, h_bits, h_bit0, s_bits, s_bit0, *hk, *hv), True


def _timestamps_ms(arr: pa.Array, now_ms: int | None) -> np.ndarray:
    """Millisecond int64 timestamps; nulls become ``now_ms`` (an error when it is ``None``)."""
    t = arr.type
    if pa.types.is_timestamp(t):
        mul, div = _MS_PER_UNIT[t.unit]
    elif pa.types.is_integer(t):
        mul, div = 1, 1
    else:
        raise _fail(f"timestamp column has Arrow type {t}; expected timestamp or int64 milliseconds")
    try:
        raw = arr.cast(pa.int64())
    except pa.ArrowInvalid as exc:
        raise _fail(f"timestamps do not fit in int64 milliseconds: {exc}") from exc
    values = raw.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    if mul != 1:
        limit = np.iinfo(np.int64).max // mul
        bad = np.flatnonzero(np.abs(values) > limit)
        if len(bad):
            raise _fail(f"timestamp at row {bad[0]} overflows int64 when converted to milliseconds")
        values = values * mul
    elif div != 1:
        values = np.floor_divide(values, div)
    if arr.null_count:
        if now_ms is None:
            raise _fail(f"timestamp at row {arr.is_null().to_numpy(zero_copy_only=False).argmax()} "
                        "is null")
        values = np.where(arr.is_null().to_numpy(zero_copy_only=False), now_ms, values)
    bad = np.flatnonzero(values < L.NO_TIMESTAMP)
    if len(bad):
        raise _fail(f"timestamp {values[bad[0]]} at row {bad[0]} is before the epoch; Kafka "
                    "timestamps are >= 0 (or -1 for none)")
    return np.ascontiguousarray(values, dtype=np.int64)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _check_codec(codec: Any) -> int:
    if isinstance(codec, str) and codec in L.CODEC_IDS:
        return L.CODEC_IDS[codec]
    if isinstance(codec, (int, np.integer)) and int(codec) in L.CODEC_NAMES:
        return int(codec)
    raise _fail(f"unknown codec {codec!r}; valid: "
                + ", ".join(f"{i} ({n})" for i, n in L.CODEC_NAMES.items()))


def _check_range(name: str, value: int, lo: int, hi: int) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not lo <= value <= hi:
        raise _fail(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
    return int(value)


def _check_header_fields(partition_leader_epoch: int, producer_id: int, producer_epoch: int,
                         base_sequence: int, timestamp_type: int,
                         log_append_time: int | None) -> None:
    _check_range("partition_leader_epoch", partition_leader_epoch, -(2**31), L.INT32_MAX)
    _check_range("producer_id", producer_id, -(2**63), 2**63 - 1)
    _check_range("producer_epoch", producer_epoch, -(2**15), 2**15 - 1)
    _check_range("base_sequence", base_sequence, -(2**31), L.INT32_MAX)
    if timestamp_type not in (L.CREATE_TIME, L.LOG_APPEND_TIME):
        raise _fail(f"timestamp_type must be 0 (CreateTime) or 1 (LogAppendTime), got {timestamp_type!r}")
    if timestamp_type == L.LOG_APPEND_TIME:
        if log_append_time is None:
            raise _fail("timestamp_type LogAppendTime needs log_append_time (milliseconds)")
        _check_range("log_append_time", log_append_time, L.NO_TIMESTAMP, 2**63 - 1)
    elif log_append_time is not None:
        raise _fail("log_append_time is only valid with timestamp_type 1 (LogAppendTime)")


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


# --- public API -----------------------------------------------------------------------------


def _as_binary_array(values: Any, what: str) -> pa.Array:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return _single(values)
    try:
        return pa.array(list(values), type=pa.binary())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
        raise _fail(f"{what} must be bytes, str or None: {exc}") from exc


def _as_int64_array(values: Any) -> pa.Array:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return _single(values)
    try:
        return pa.array(values if isinstance(values, np.ndarray) else list(values), type=pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
        raise _fail(f"timestamps must be integer milliseconds: {exc}") from exc


def _as_headers_array(headers: Any, n: int) -> pa.Array | None:
    from .schema import HEADERS_TYPE

    if headers is None:
        return None
    if isinstance(headers, (pa.Array, pa.ChunkedArray)):
        arr = _single(headers)
    else:
        rows = [None if hs is None else [{"key": k, "value": v} for k, v in hs] for hs in headers]
        try:
            arr = pa.array(rows, type=HEADERS_TYPE)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
            raise _fail(f"headers must be lists of (str key, bytes-or-None value): {exc}") from exc
    if len(arr) != n:
        raise _fail(f"headers has {len(arr)} rows for {n} records")
    return arr


def encode_batch(keys: Any, values: Any, timestamps: Any, *, spec: BatchSpec,
                 offset_deltas: Any = None, headers: Any = None) -> bytes:
    """Encode one v2 record batch with caller-chosen header fields (compaction, markers, tests).

    Parameters
    ----------
    keys, values : Arrow array or sequence of bytes/str/None
        One entry per record; ``None`` is a null key / tombstone value (distinct from ``b""``).
    timestamps : Arrow array or sequence of int
        Record timestamps in milliseconds (Arrow timestamps are converted); no nulls.
    spec : BatchSpec
        Header fields. The batch is never split: it must fit Kafka's int32 limits.
    offset_deltas : sequence of int, optional
        Each record's ``offset - spec.base_offset``, strictly increasing from >= 0 (gaps allowed,
        as compaction leaves them); default ``0, 1, ..., n-1``.
    headers : Arrow list<struct<key, value>> array or sequence, optional
        Per record a list of ``(key str, value bytes or None)`` pairs, or ``None`` for none.

    Returns
    -------
    bytes
        The batch, CRC included. No records gives Kafka's empty batch (baseTimestamp -1,
        ``spec.max_timestamp`` as maxTimestamp, codec none required).

    Raises
    ------
    InvalidOptionError
        A bad header field, mismatched column lengths, offsets not increasing or out of int32
        delta range, timestamps below -1 or whose delta overflows, null header keys.
    """
    codec = _check_codec(spec.codec)
    _check_header_fields(spec.partition_leader_epoch, spec.producer_id, spec.producer_epoch,
                         spec.base_sequence, spec.timestamp_type, spec.log_append_time)
    base = _check_range("base_offset", spec.base_offset, 0, 2**63 - 1)
    key_arr = _as_binary_array(keys, "keys")
    value_arr = _as_binary_array(values, "values")
    ts_arr = _as_int64_array(timestamps)
    n = len(value_arr)
    if len(key_arr) != n or len(ts_arr) != n:
        raise _fail(f"keys, values and timestamps differ in length: {len(key_arr)}, {n}, {len(ts_arr)}")
    deltas = np.arange(n, dtype=np.int64) if offset_deltas is None else np.asarray(offset_deltas, np.int64)
    if len(deltas) != n:
        raise _fail(f"offset_deltas has {len(deltas)} entries for {n} records")
    if n and deltas[0] < 0:
        raise _fail(f"offset_deltas must be >= 0, got {int(deltas[0])}")
    if spec.delete_horizon_ms is not None:
        _check_range("delete_horizon_ms", spec.delete_horizon_ms, 0, 2**63 - 1)
    if spec.last_offset_delta is not None:
        _check_range("last_offset_delta", spec.last_offset_delta, 0, L.INT32_MAX)
    if n == 0:
        if codec != L.CODEC_NONE or spec.delete_horizon_ms is not None:
            raise _fail("an empty batch is written as Kafka's writeEmptyHeader does: codec none, "
                        "no delete horizon")
        if spec.max_timestamp is not None:
            _check_range("max_timestamp", spec.max_timestamp, L.NO_TIMESTAMP, 2**63 - 1)
    elif spec.max_timestamp is not None:
        raise _fail("max_timestamp is only for empty batches; a batch with records computes it")
    rec = _Records(_binary(key_arr, "keys"), _binary(value_arr, "values"),
                   *_headers(_as_headers_array(headers, n)),
                   _timestamps_ms(_single(ts_arr), None), base + deltas)
    head = _Header(spec.attributes(), spec.partition_leader_epoch, spec.producer_id,
                   spec.producer_epoch, spec.base_sequence,
                   spec.log_append_time if spec.timestamp_type == L.LOG_APPEND_TIME else None)
    encoded = _encode(rec, head, codec=codec, level=None, may_split=False, max_records=max(n, 1),
                      max_bytes=2**62, fixed_base_off=base, fixed_base_ts=spec.delete_horizon_ms,
                      last_offset_delta=spec.last_offset_delta,
                      empty_max_timestamp=L.NO_TIMESTAMP if spec.max_timestamp is None else spec.max_timestamp)
    return encoded.tobytes()


def encode_record_batches(
    table: pa.Table | pa.RecordBatch,
    *,
    codec: int | str = L.CODEC_NONE,
    max_batch_records: int = DEFAULT_MAX_BATCH_RECORDS,
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    base_offset: int = 0,
    partition_leader_epoch: int = L.NO_PARTITION_LEADER_EPOCH,
    producer_id: int = L.NO_PRODUCER_ID,
    producer_epoch: int = L.NO_PRODUCER_EPOCH,
    base_sequence: int = L.NO_SEQUENCE,
    is_transactional: bool = False,
    timestamp_type: int = L.CREATE_TIME,
    log_append_time: int | None = None,
    compression_level: int | None = None,
) -> EncodedBatches:
    """Encode a table of records into consecutive v2 batches.

    Parameters
    ----------
    table : pyarrow.Table or RecordBatch
        Columns as in :mod:`kafkalog_spark.codec.schema`: ``value`` (required) and ``key``
        binary or string, null allowed; ``timestamp`` Arrow timestamp or integer milliseconds
        (missing or null: now); ``headers`` list<struct<key string, value binary>> (null list:
        no headers); ``offset`` int64 (records keep these offsets; they must strictly
        increase; gaps are kept as offset-delta gaps). Other columns are ignored.
    codec : int or str
        0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (or the name). Each batch's records section is
        compressed as a whole.
    max_batch_records : int
        Most records per batch.
    max_batch_bytes : int
        Most uncompressed records-section bytes per batch; a larger single record gets a batch
        of its own.
    base_offset : int
        Offset of the first record when there is no ``offset`` column.
    partition_leader_epoch, producer_id, producer_epoch, base_sequence, is_transactional
        Header fields of every batch; with ``base_sequence >= 0`` each batch's base sequence
        is ``base_sequence + (its base offset - the first base offset)`` wrapped at 2^31.
    timestamp_type, log_append_time : int
        0 CreateTime, or 1 LogAppendTime with ``log_append_time`` as every maxTimestamp.
    compression_level : int, optional
        Codec level; ``None`` is Kafka's default.

    Returns
    -------
    EncodedBatches
        The bytes and per-batch positions, sizes, offsets, timestamps and record counts. An
        empty table gives no batches.

    Raises
    ------
    InvalidOptionError
        Bad options or columns, offsets not strictly increasing, timestamps out of range.
    """
    codec = _check_codec(codec)
    _check_header_fields(partition_leader_epoch, producer_id, producer_epoch, base_sequence,
                         timestamp_type, log_append_time)
    max_batch_records = _check_range("max_batch_records", max_batch_records, 1, L.INT32_MAX)
    max_batch_bytes = _check_range("max_batch_bytes", max_batch_bytes, 1, 2**62)
    base_offset = _check_range("base_offset", base_offset, 0, 2**63 - 1)
    if is_transactional and producer_id < 0:
        raise _fail("is_transactional needs a producer_id >= 0")
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    names = set(table.column_names)
    if "value" not in names:
        raise _fail(f"table has no 'value' column (columns: {sorted(names)})")
    n = table.num_rows
    column = (lambda name: _single(table.column(name)) if name in names else None)
    key_arr = column("key")
    rec = _Records(
        _binary(pa.nulls(n, pa.binary()) if key_arr is None else key_arr, "key column"),
        _binary(column("value"), "value column"),
        *_headers(column("headers")),
        _table_timestamps(column("timestamp"), n),
        _table_offsets(column("offset"), n, base_offset),
    )
    head = _Header(codec | (timestamp_type << 3) | (int(is_transactional) << 4), partition_leader_epoch,
                   producer_id, producer_epoch, base_sequence,
                   log_append_time if timestamp_type == L.LOG_APPEND_TIME else None)
    if n == 0:
        empty = np.zeros(0, np.int64)
        return EncodedBatches(np.zeros(0, np.uint8), *(empty for _ in range(7)))
    return _encode(rec, head, codec=codec, level=compression_level, may_split=True,
                   max_records=max_batch_records, max_bytes=max_batch_bytes)


def _table_timestamps(arr: pa.Array | None, n: int) -> np.ndarray:
    now = _now_ms()
    if arr is None:
        return np.full(n, now, dtype=np.int64)
    return _timestamps_ms(arr, now)


def _table_offsets(arr: pa.Array | None, n: int, base_offset: int) -> np.ndarray:
    if arr is None:
        return base_offset + np.arange(n, dtype=np.int64)
    if base_offset != 0:
        raise _fail("base_offset conflicts with the table's 'offset' column; give one of them")
    if not pa.types.is_integer(arr.type):
        raise _fail(f"offset column has Arrow type {arr.type}; expected int64")
    if arr.null_count:
        raise _fail(f"offset at row {arr.is_null().to_numpy(zero_copy_only=False).argmax()} is null")
    offsets = arr.to_numpy(zero_copy_only=False).astype(np.int64)
    bad = np.flatnonzero(offsets < 0)
    if len(bad):
        raise _fail(f"offset {int(offsets[bad[0]])} at row {bad[0]} is negative")
    return offsets


def encode_end_txn_marker(*, offset: int, producer_id: int, producer_epoch: int,
                          coordinator_epoch: int, commit: bool, timestamp: int,
                          partition_leader_epoch: int = L.NO_PARTITION_LEADER_EPOCH) -> bytes:
    """The 78-byte COMMIT/ABORT control batch a broker appends to end a transaction (§6.4).

    Parameters
    ----------
    offset : int
        The marker's offset (its batch's base offset).
    producer_id, producer_epoch : int
        The transaction's producer.
    coordinator_epoch : int
        Epoch of the transaction coordinator, stored in the marker value.
    commit : bool
        COMMIT (control type 1) or ABORT (type 0).
    timestamp : int
        Marker timestamp in milliseconds (CreateTime).
    partition_leader_epoch : int
        Leader epoch of the partition when the marker was written.

    Returns
    -------
    bytes
        The batch: attributes 0x30, baseSequence -1, one record (key version 0 + type, value
        version 0 + coordinator epoch), CRC included.
    """
    _check_range("coordinator_epoch", coordinator_epoch, -(2**31), L.INT32_MAX)
    key = struct.pack(">hh", 0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = struct.pack(">hi", 0, coordinator_epoch)
    spec = BatchSpec(base_offset=offset, partition_leader_epoch=partition_leader_epoch,
                     producer_id=producer_id, producer_epoch=producer_epoch,
                     is_transactional=True, is_control=True)
    return encode_batch([key], [value], [timestamp], spec=spec)
