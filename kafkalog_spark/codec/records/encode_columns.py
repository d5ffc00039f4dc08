"""Arrow columns and write options checked and turned into encoding-kernel arguments
(codec layer), for :mod:`.encode` and :mod:`.batch_writer`.

Timestamps are milliseconds. Arrow ``timestamp`` columns are converted exactly (floor division,
so pre-1970 microseconds round down like Java's ``Math.floorDiv``); integer columns are taken as
milliseconds. A null timestamp, or a missing ``timestamp`` column, means "now" — what Kafka's
producer stamps on a record sent without a timestamp. ``-1`` (``NO_TIMESTAMP``, which Kafka
stores only for records converted from v0 data) is accepted as given; anything below is refused.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow as pa

from ...errors import InvalidOptionError
from .. import layout as L

_EMPTY_BITS = np.zeros(0, dtype=np.uint8)
_EMPTY_OFFSETS = np.zeros(1, dtype=np.int64)
_MS_PER_UNIT = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}


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



# --- Python values and table columns to Arrow arrays ------------------------------------------


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

