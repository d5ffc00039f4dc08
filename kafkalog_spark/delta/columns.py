"""Table columns of a migration (Delta layer): the target schema and the Arrow transform.

A migrated row is a decoded record (:mod:`kafkalog_spark.codec.records.schema`) plus, on request, a
``date`` column (the UTC day of ``timestamp``, for partitioning) and two struct columns with the
typed decoding of Kafka's own topics (:mod:`kafkalog_spark.codec.internal.internal_topics`)::

    consumerOffsets   __consumer_offsets records: key type/name, group, member, committed
                      topic/partition/offset/leader epoch/metadata/timestamps, group metadata
                      summary, the full key and value as JSON, a decode error
    transactionState  __transaction_state records: transactional id and every value field
    remoteLogMetadata __remote_log_metadata records (tiered storage): :mod:`.remote_metadata_column`

Both are null for other topics and for fields a record type does not have; a record that does
not decode gets its ``decodeError`` set instead of stopping the migration. Every column of a
table is nullable (Delta's convention, and what Spark writes to Parquet), timestamps are
microseconds in UTC.

:func:`transform` is the one function both engines run on each Arrow batch (locally, or inside
Spark's ``mapInArrow``), so the two produce the same rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..codec.internal.internal_topics import (decode_consumer_offsets_key,
                                              decode_consumer_offsets_value,
                                              decode_transaction_log_key,
                                              decode_transaction_log_value)
from ..codec.records.schema import record_schema
from ..errors import KafkaLogError
from .options import MigrateOptions
from .remote_metadata_column import REMOTE_LOG_METADATA_TYPE, remote_log_metadata_row

_TS = pa.timestamp("us", tz="UTC")
CONSUMER_OFFSETS_TYPE = pa.struct([
    ("keyType", pa.int16()), ("keyName", pa.string()), ("group", pa.string()),
    ("memberId", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
    ("valueVersion", pa.int16()), ("valueName", pa.string()),
    ("committedOffset", pa.int64()), ("committedLeaderEpoch", pa.int32()),
    ("committedMetadata", pa.string()), ("commitTimestamp", _TS), ("expireTimestamp", _TS),
    ("protocolType", pa.string()), ("generation", pa.int32()), ("protocol", pa.string()),
    ("leader", pa.string()), ("memberCount", pa.int32()),
    ("keyJson", pa.string()), ("valueJson", pa.string()), ("decodeError", pa.string()),
])
TXN_PARTITIONS_TYPE = pa.list_(pa.struct([("topic", pa.string()),
                                          ("partitionIds", pa.list_(pa.int32()))]))
TRANSACTION_STATE_TYPE = pa.struct([
    ("transactionalId", pa.string()), ("valueVersion", pa.int16()),
    ("producerId", pa.int64()), ("previousProducerId", pa.int64()),
    ("nextProducerId", pa.int64()), ("producerEpoch", pa.int16()),
    ("transactionTimeoutMs", pa.int32()), ("transactionStatus", pa.int8()),
    ("transactionStatusName", pa.string()), ("transactionPartitions", TXN_PARTITIONS_TYPE),
    ("transactionLastUpdateTimestamp", _TS), ("transactionStartTimestamp", _TS),
    ("clientTransactionVersion", pa.int16()), ("decodeError", pa.string()),
])
# column -> (topic it decodes, struct type, per-record decoder)
INTERNAL_COLUMNS: dict[str, tuple[str, pa.DataType]] = {
    "consumerOffsets": ("__consumer_offsets", CONSUMER_OFFSETS_TYPE),
    "transactionState": ("__transaction_state", TRANSACTION_STATE_TYPE),
    "remoteLogMetadata": ("__remote_log_metadata", REMOTE_LOG_METADATA_TYPE),
}


def table_schema(opts: MigrateOptions, topics: set[str] | frozenset[str]) -> pa.Schema:
    """The (all-nullable) schema of the rows migrated into a table holding ``topics``."""
    base = record_schema(opts.include_headers, opts.include_metadata)
    fields = [pa.field(f.name, f.type, nullable=True, metadata=f.metadata) for f in base]
    if "date" in opts.partition_by:
        fields.append(pa.field("date", pa.date32(), nullable=True,
                               metadata={"doc": "UTC day of timestamp (partition column)"}))
    if opts.decode_internal:
        for name, (topic, typ) in INTERNAL_COLUMNS.items():
            if topic in topics:
                fields.append(pa.field(name, typ, nullable=True,
                                       metadata={"doc": f"typed decoding of {topic} records"}))
    return pa.schema(fields)


def transform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """A decoded batch as rows of ``schema`` (see :func:`table_schema`): derived columns added,
    columns in the schema's order, types cast to the (nullable) table types."""
    n = batch.num_rows
    columns = []
    for field in schema:
        if field.name in batch.schema.names:
            col = batch.column(field.name)
        elif field.name == "date":
            col = _date(batch.column("timestamp"))
        elif field.name in INTERNAL_COLUMNS:
            col = _internal(batch, *INTERNAL_COLUMNS[field.name])
        else:
            col = pa.nulls(n, field.type)
        columns.append(col.cast(field.type) if col.type != field.type else col)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _date(ts: pa.Array) -> pa.Array:
    # days since the epoch by floor division: pc.cast to date32 would need a tz-aware kernel
    micros = ts.cast(pa.int64())
    days = pc.floor(pc.divide(micros.cast(pa.float64()), 86_400_000_000.0)).cast(pa.int32())
    return days.cast(pa.date32())


def _internal(batch: pa.RecordBatch, topic: str, typ: pa.DataType) -> pa.Array:
    topics = batch.column("topic").to_pylist()
    if topic not in topics:
        return pa.nulls(batch.num_rows, typ)
    keys = batch.column("key").to_pylist()
    values = batch.column("value").to_pylist()
    decode = _DECODERS[topic]
    rows = [decode(k, v) if t == topic else None for t, k, v in zip(topics, keys, values)]
    return pa.array(rows, type=typ)


def _ms(value: Any) -> Any:
    """Kafka's -1 'no timestamp' to null; milliseconds to microseconds."""
    return None if value is None or value < 0 else int(value) * 1000


def _consumer_offsets_row(key: bytes | None, value: bytes | None) -> dict[str, Any]:
    row: dict[str, Any] = {}
    try:
        if key is None:
            return {"decodeError": "record has no key"}
        k = decode_consumer_offsets_key(key)
        data = k.get("data") or {}
        row.update(keyType=k.get("type"), keyName=k.get("name"), group=data.get("group",
                   data.get("groupId")), memberId=data.get("memberId"), topic=data.get("topic"),
                   partition=data.get("partition"), keyJson=json.dumps(k))
        v = decode_consumer_offsets_value(k, value)
        if v is None:  # a tombstone: the group or the committed offset was deleted
            return row
        vd = v.get("data") or {}
        row.update(valueVersion=v.get("version"), valueName=v.get("name"),
                   valueJson=json.dumps(v))
        if v.get("name") == "OffsetCommitValue":
            row.update(committedOffset=vd.get("offset"),
                       committedLeaderEpoch=vd.get("leaderEpoch"),
                       committedMetadata=vd.get("metadata"),
                       commitTimestamp=_ms(vd.get("commitTimestamp")),
                       expireTimestamp=_ms(vd.get("expireTimestamp")))
        elif v.get("name") == "GroupMetadataValue":
            row.update(protocolType=vd.get("protocolType"), generation=vd.get("generation"),
                       protocol=vd.get("protocol"), leader=vd.get("leader"),
                       memberCount=len(vd.get("members") or ()))
    except (KafkaLogError, ValueError) as exc:  # reported in the row, the migration goes on
        row["decodeError"] = str(exc)
    return row


def _transaction_state_row(key: bytes | None, value: bytes | None) -> dict[str, Any]:
    row: dict[str, Any] = {}
    try:
        if key is None:
            return {"decodeError": "record has no key"}
        k = decode_transaction_log_key(key)
        row["transactionalId"] = (k.get("data") or {}).get("transactionalId")
        v = decode_transaction_log_value(value)
        if v is None:  # a tombstone: the transactional id expired
            return row
        d = v["data"]
        row.update(valueVersion=v["version"], producerId=d["producerId"],
                   previousProducerId=d.get("previousProducerId"),
                   nextProducerId=d.get("nextProducerId"), producerEpoch=d["producerEpoch"],
                   transactionTimeoutMs=d["transactionTimeoutMs"],
                   transactionStatus=d["transactionStatus"],
                   transactionStatusName=d.get("transactionStatusName"),
                   transactionPartitions=d.get("transactionPartitions"),
                   transactionLastUpdateTimestamp=_ms(d.get("transactionLastUpdateTimestampMs")),
                   transactionStartTimestamp=_ms(d.get("transactionStartTimestampMs")),
                   clientTransactionVersion=d.get("clientTransactionVersion"))
    except (KafkaLogError, ValueError) as exc:
        row["decodeError"] = str(exc)
    return row


_DECODERS: dict[str, Callable[[bytes | None, bytes | None], dict[str, Any]]] = {
    "__consumer_offsets": _consumer_offsets_row,
    "__transaction_state": _transaction_state_row,
    "__remote_log_metadata": remote_log_metadata_row,
}


def partition_values(batch: pa.RecordBatch, partition_by: tuple[str, ...]
                     ) -> list[tuple[tuple[str | None, ...], pa.RecordBatch]]:
    """Split ``batch`` by the values of the partition columns, as Delta's partition value
    strings (``None`` for null), in first-seen order."""
    if not partition_by or batch.num_rows == 0:
        return [((), batch)]
    keys = [_partition_strings(batch.column(c)) for c in partition_by]
    combined = list(zip(*keys))
    groups: dict[tuple[str | None, ...], list[int]] = {}
    for i, key in enumerate(combined):
        groups.setdefault(key, []).append(i)
    return [(key, batch.take(pa.array(np.asarray(rows, dtype=np.int64))))
            for key, rows in groups.items()]


def _partition_strings(col: pa.Array) -> list[str | None]:
    if pa.types.is_date32(col.type):
        return [None if d is None else d.isoformat() for d in col.to_pylist()]
    return [None if v is None else str(v) for v in col.to_pylist()]
