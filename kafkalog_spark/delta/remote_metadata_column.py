"""The ``remoteLogMetadata`` column of a migration (Delta layer): tiered storage's
``__remote_log_metadata`` records typed, beside ``consumerOffsets`` and ``transactionState``.

One struct per record: the record type and version, the topic-partition (id, name, number) and
remote segment it is about, the segment's offsets, size, timestamps (Kafka's milliseconds) and leader epochs (copy
records), the state (id and Kafka's name), the RSM's custom metadata, the whole record as JSON,
and ``decodeError`` for a value that does not decode (the migration goes on). Fields a record
type does not have are null. Decoding is
:mod:`kafkalog_spark.codec.internal.remote_log_metadata`.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pyarrow as pa

from ..codec.internal import remote_log_metadata as rlm
from ..errors import KafkaLogError

REMOTE_LOG_METADATA_TYPE = pa.struct([
    ("recordType", pa.int16()), ("recordName", pa.string()), ("version", pa.int16()),
    ("topicId", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
    ("segmentId", pa.string()), ("startOffset", pa.int64()), ("endOffset", pa.int64()),
    ("brokerId", pa.int32()), ("maxTimestampMs", pa.int64()), ("eventTimestampMs", pa.int64()),
    ("segmentSizeInBytes", pa.int32()),
    ("segmentLeaderEpochs", pa.list_(pa.struct([("leaderEpoch", pa.int32()),
                                                ("offset", pa.int64())]))),
    ("state", pa.int8()), ("stateName", pa.string()), ("customMetadata", pa.binary()),
    ("txnIndexEmpty", pa.bool_()), ("recordJson", pa.string()), ("decodeError", pa.string()),
])


def remote_log_metadata_row(key: bytes | None, value: bytes | None) -> dict[str, Any]:
    """One ``__remote_log_metadata`` record (its key is always null) as a
    :data:`REMOTE_LOG_METADATA_TYPE` row."""
    try:
        rec = rlm.decode_remote_log_metadata(value)
    except KafkaLogError as exc:  # reported in the row, the migration goes on
        return {"decodeError": str(exc)}
    d = rec["data"]
    row: dict[str, Any] = {"recordType": rec["type"], "recordName": rec["name"],
                           "version": rec["version"], "recordJson": json.dumps(rec)}
    tip = rlm.topic_id_partition_of(rec)
    if tip is not None:
        row.update(topicId=tip[0], topic=tip[1], partition=tip[2])
    row["segmentId"] = rlm.segment_id_of(rec) or d.get("segmentId")
    names = rlm.PARTITION_DELETE_STATES if rec["type"] == rlm.PARTITION_DELETE \
        else rlm.SEGMENT_STATES
    state = d.get("remoteLogSegmentState", d.get("remotePartitionDeleteState"))
    custom = d.get("customMetadata")
    row.update(startOffset=d.get("startOffset"), endOffset=d.get("endOffset"),
               brokerId=d.get("brokerId"), maxTimestampMs=d.get("maxTimestampMs"),
               eventTimestampMs=d.get("eventTimestampMs"),
               segmentSizeInBytes=d.get("segmentSizeInBytes"),
               segmentLeaderEpochs=d.get("segmentLeaderEpochs"), state=state,
               stateName=names.get(state) if state is not None else None,
               customMetadata=None if custom is None else base64.b64decode(custom),
               txnIndexEmpty=d.get("txnIndexEmpty"))
    return row
