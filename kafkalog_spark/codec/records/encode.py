"""Record-batch encoding API (codec layer): Arrow columns to Kafka v2 batches, as
MemoryRecordsBuilder writes them (KAFKA_FORMATS §4.6, §5, §6.4, §7.1).

The batch layout and the writing path (kernels, compression, CRC) are in :mod:`.batch_writer`;
column conversion, timestamp rules and option checks in :mod:`.encode_columns`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from .. import layout as L
from .batch_writer import (EncodedBatches, FixedBatches, _encode, _Header, _Records, encode_empty,
                           encode_fixed)
from .encode_columns import (_as_binary_array, _as_headers_array, _as_int64_array, _binary,
                             _check_codec, _check_header_fields, _check_range, _fail, _headers,
                             _single, _table_offsets, _table_timestamps, _timestamps_ms)

DEFAULT_MAX_BATCH_RECORDS = 1 << 16
# A broker refuses batches above max.message.bytes (default 1048588, counting the 12-byte log
# overhead); keeping the uncompressed records section below that minus the 61-byte header keeps
# every batch we write acceptable to a default broker and its consumers.
MAX_MESSAGE_BYTES = 1048588
DEFAULT_MAX_BATCH_BYTES = MAX_MESSAGE_BYTES - L.RECORD_BATCH_OVERHEAD
END_TXN_MARKER_BATCH_SIZE = 78  # RECORD_BATCH_OVERHEAD + CURRENT_END_TXN_SCHEMA_RECORD_SIZE
CONTROL_ABORT, CONTROL_COMMIT = 0, 1


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


# --- public API -----------------------------------------------------------------------------


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
    if n == 0:
        codec = _check_spec(spec)
        if codec != L.CODEC_NONE or spec.delete_horizon_ms is not None:
            raise _fail("an empty batch is written as Kafka's writeEmptyHeader does: codec none, "
                        "no delete horizon")
        if spec.max_timestamp is not None:
            _check_range("max_timestamp", spec.max_timestamp, L.NO_TIMESTAMP, 2**63 - 1)
        rec = _Records(_binary(key_arr, "keys"), _binary(value_arr, "values"),
                       *_headers(_as_headers_array(headers, 0)),
                       _timestamps_ms(_single(ts_arr), None), spec.base_offset + deltas)
        lat = spec.timestamp_type == L.LOG_APPEND_TIME
        max_ts = spec.log_append_time if lat else spec.max_timestamp
        return encode_empty(rec, _header(spec), base_offset=spec.base_offset,
                            last_offset_delta=spec.last_offset_delta or 0,
                            max_timestamp=L.NO_TIMESTAMP if max_ts is None else max_ts).tobytes()
    return encode_batches(key_arr, value_arr, ts_arr, spec.base_offset + deltas, specs=[spec],
                          counts=[n], headers=headers).tobytes()


def encode_batches(keys: Any, values: Any, timestamps: Any, offsets: Any, *,
                   specs: Sequence[BatchSpec], counts: Sequence[int] | np.ndarray,
                   headers: Any = None) -> EncodedBatches:
    """Encode consecutive v2 batches, each with its own caller-chosen header, in one call.

    What :func:`encode_batch` does for one batch, for many (compaction rebuilds thousands of
    batches per segment; the per-call cost of :func:`encode_batch` would dominate).

    Parameters
    ----------
    keys, values, timestamps, headers
        The records of all batches, in order (as in :func:`encode_batch`).
    offsets : sequence of int
        Each record's absolute offset, strictly increasing; batch ``b``'s must lie in
        ``[specs[b].base_offset, specs[b].base_offset + 2^31 - 1]``.
    specs : sequence of BatchSpec
        One header per batch (``max_timestamp`` must be unset: no empty batches here).
    counts : sequence of int
        Records of each batch, each at least one, adding up to the records given.

    Returns
    -------
    EncodedBatches
        The batches, CRCs included, each compressed with its spec's codec.
    """
    key_arr = _as_binary_array(keys, "keys")
    value_arr = _as_binary_array(values, "values")
    ts_arr = _as_int64_array(timestamps)
    offs = np.asarray(offsets, np.int64)
    n = len(value_arr)
    if len(key_arr) != n or len(ts_arr) != n or len(offs) != n:
        raise _fail(f"keys, values, timestamps and offsets differ in length: {len(key_arr)}, "
                    f"{n}, {len(ts_arr)}, {len(offs)}")
    counts = np.asarray(counts, np.int64)
    if len(counts) != len(specs) or (counts < 1).any() or int(counts.sum()) != n:
        raise _fail(f"counts must give each of the {len(specs)} batches at least one record and "
                    f"add up to the {n} records")
    for spec in specs:
        _check_spec(spec)
        if spec.max_timestamp is not None:
            raise _fail("max_timestamp is only for empty batches; a batch with records "
                        "computes it")
    start = np.zeros(len(specs) + 1, np.int64)
    np.cumsum(counts, out=start[1:])
    field = (lambda get: np.fromiter((get(sp) for sp in specs), np.int64, len(specs)))
    fixed = FixedBatches(
        start=start, base_offset=field(lambda sp: sp.base_offset),
        base_timestamp=field(lambda sp: sp.delete_horizon_ms or 0),
        has_base_timestamp=np.fromiter((sp.delete_horizon_ms is not None for sp in specs), bool,
                                       len(specs)),
        last_offset_delta=field(lambda sp: -1 if sp.last_offset_delta is None
                                else sp.last_offset_delta),
        attributes=field(BatchSpec.attributes),
        partition_leader_epoch=field(lambda sp: sp.partition_leader_epoch),
        producer_id=field(lambda sp: sp.producer_id),
        producer_epoch=field(lambda sp: sp.producer_epoch),
        base_sequence=field(lambda sp: sp.base_sequence),
        log_append_time=field(lambda sp: sp.log_append_time or 0))
    rec = _Records(_binary(key_arr, "keys"), _binary(value_arr, "values"),
                   *_headers(_as_headers_array(headers, n)),
                   _timestamps_ms(_single(ts_arr), None), offs)
    return encode_fixed(rec, fixed)


def _check_spec(spec: BatchSpec) -> int:
    """Check one batch header's fields (:func:`encode_batch`'s errors); returns its codec."""
    codec = _check_codec(spec.codec)
    _check_header_fields(spec.partition_leader_epoch, spec.producer_id, spec.producer_epoch,
                         spec.base_sequence, spec.timestamp_type, spec.log_append_time)
    _check_range("base_offset", spec.base_offset, 0, 2**63 - 1)
    if spec.delete_horizon_ms is not None:
        _check_range("delete_horizon_ms", spec.delete_horizon_ms, 0, 2**63 - 1)
    if spec.last_offset_delta is not None:
        _check_range("last_offset_delta", spec.last_offset_delta, 0, L.INT32_MAX)
    return codec


def _header(spec: BatchSpec) -> _Header:
    return _Header(spec.attributes(), spec.partition_leader_epoch, spec.producer_id,
                   spec.producer_epoch, spec.base_sequence,
                   spec.log_append_time if spec.timestamp_type == L.LOG_APPEND_TIME else None)


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
        Columns as in :mod:`kafkalog_spark.codec.records.schema`: ``value`` (required) and ``key``
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
    return _encode(rec, head, codec=codec, level=compression_level,
                   max_records=max_batch_records, max_bytes=max_batch_bytes)


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
