"""Arrow schema of decoded records (codec layer): Spark-compatible column names and types.

The base columns match Spark's Kafka source (``key, value, topic, partition, offset, timestamp,
timestampType``, ``headers`` on request). Kafka metadata columns are opt-in. One table here is
the source of truth for names, types and their documentation.
"""

from __future__ import annotations

import pyarrow as pa

HEADER_TYPE = pa.struct([pa.field("key", pa.string(), nullable=False),
                         pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_TYPE, nullable=False))

# name -> (arrow type, nullable, description)
BASE_COLUMNS: dict[str, tuple[pa.DataType, bool, str]] = {
    "key": (pa.binary(), True, "record key; null when the record has none"),
    "value": (pa.binary(), True, "record value; null for a tombstone"),
    "topic": (pa.string(), False, "topic name (from the partition directory)"),
    "partition": (pa.int32(), False, "partition number"),
    "offset": (pa.int64(), False, "record offset"),
    "timestamp": (pa.timestamp("us", tz="UTC"), True,
                  "record timestamp (LogAppendTime batches: the batch's); null for v0 / -1"),
    "timestampType": (pa.int32(), False, "-1 none (v0), 0 CreateTime, 1 LogAppendTime"),
}
HEADERS_COLUMN: dict[str, tuple[pa.DataType, bool, str]] = {
    "headers": (HEADERS_TYPE, True, "record headers in order (empty list when none; null for v0/v1)"),
}
METADATA_COLUMNS: dict[str, tuple[pa.DataType, bool, str]] = {
    "leaderEpoch": (pa.int32(), False, "partition leader epoch of the batch (-1 for v0/v1)"),
    "producerId": (pa.int64(), False, "producer id (-1 when none)"),
    "producerEpoch": (pa.int16(), False, "producer epoch (-1 when none)"),
    "sequence": (pa.int32(), False, "record sequence: baseSequence + offsetDelta (-1 when none)"),
    "isTransactional": (pa.bool_(), False, "batch belongs to a transaction"),
    "isControl": (pa.bool_(), False, "control record (transaction marker, KRaft control)"),
    "batchBaseOffset": (pa.int64(), False, "base offset of the batch holding the record"),
    "batchLastOffset": (pa.int64(), False, "last offset of the batch holding the record"),
    "magic": (pa.int8(), False, "message format version of the batch: 0, 1 or 2"),
    "compression": (pa.string(), False, "codec of the batch: none, gzip, snappy, lz4, zstd"),
}
# Column order of Spark's Kafka source
BASE_ORDER = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def record_schema(include_headers: bool = False, include_metadata: bool = False) -> pa.Schema:
    """The schema of decoded records for the given column options."""
    cols = dict(BASE_COLUMNS)
    if include_headers:
        cols.update(HEADERS_COLUMN)
    if include_metadata:
        cols.update(METADATA_COLUMNS)
    return pa.schema([pa.field(name, typ, nullable=nullable, metadata={"doc": doc})
                      for name, (typ, nullable, doc) in cols.items()])
