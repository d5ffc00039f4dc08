"""What ``format("kafkalog")`` takes from Spark's own Kafka source (datasource layer) so that a
read written for ``format("kafka")`` runs by changing the format name alone.

Options: the Kafka source's batch options that mean nothing for files — the consumer's
``kafka.*`` properties (``kafka.bootstrap.servers``, security, group id, ...; not
``kafka.isolation.level``, which is honoured), ``failOnDataLoss``, ``groupIdPrefix``, the
consumer's poll and fetch retry settings, how it cuts tasks (``maxRecordsPerPartition``) and the
streaming-only rate limits — are accepted and ignored, each name logged once per process (a
warning, so it is seen), while every other unknown name stays an error. Rows: a record
without headers has ``headers`` null (the Kafka source's converter gives null, not an empty
list), and the declared schema is as nullable as the Kafka source's (:func:`nullable`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

log = logging.getLogger("kafkalog_spark.datasource")

HONOURED = "kafka.isolation.level"
IGNORED = ("failOnDataLoss", "groupIdPrefix", "kafkaConsumer.pollTimeoutMs",
           "fetchOffset.numRetries", "fetchOffset.retryIntervalMs", "maxRecordsPerPartition",
           "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay")
"""The Kafka source's options besides its ``kafka.*`` consumer properties that kafkalog ignores."""
_IGNORED = {name.lower() for name in IGNORED}
_logged: set[str] = set()


def is_ignored(key: str) -> bool:
    """Whether ``key`` (any case) is a Kafka source option kafkalog accepts and ignores."""
    low = key.lower()
    return low in _IGNORED or (low.startswith("kafka.") and low != HONOURED)


def without_ignored(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` without the ignored Kafka source options; the first time a name is met in
    this process, a warning names it."""
    ignored = sorted(str(k) for k in options if is_ignored(str(k)))
    new = [k for k in ignored if k.lower() not in _logged]
    if new:
        _logged.update(k.lower() for k in new)
        log.warning("format kafkalog ignores %s: options of Spark's Kafka source that mean "
                    "nothing for log dirs (reading files, not a broker)", ", ".join(new))
    return {k: v for k, v in options.items() if not is_ignored(str(k))}


def null_empty_headers(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with ``headers`` null where a record has none, as the Kafka source gives."""
    if "headers" not in batch.schema.names:
        return batch
    i = batch.schema.get_field_index("headers")
    col = batch.column(i)
    empty = pc.equal(pc.list_value_length(col), 0)
    if not pc.any(empty).as_py():
        return batch
    # the same values under a new validity bitmap (pc.if_else copies every header: ~30x slower);
    # offsets rebased to 0, as from_arrays takes no mask over a sliced array's offsets
    offsets, start = col.offsets, col.offsets[0].as_py()
    values = col.values.slice(start, offsets[-1].as_py() - start)
    null = pc.fill_null(pc.or_kleene(col.is_null(), empty), True)
    return batch.set_column(i, batch.schema.field(i), pa.ListArray.from_arrays(
        pc.subtract(offsets, start), values, type=col.type, mask=null))


def nullable(t: DataType) -> DataType:
    """``t`` with every field, nested field and element nullable: how the Kafka source declares
    its columns, whatever they hold (comments kept)."""
    if isinstance(t, StructType):
        return StructType([StructField(f.name, nullable(f.dataType), True, f.metadata)
                           for f in t.fields])
    if isinstance(t, ArrayType):
        return ArrayType(nullable(t.elementType), True)
    if isinstance(t, MapType):
        return MapType(nullable(t.keyType), nullable(t.valueType), True)
    return t
