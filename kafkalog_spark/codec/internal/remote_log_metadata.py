"""Tiered storage's ``__remote_log_metadata`` records to plain dicts (codec layer): what the
broker's TopicBasedRemoteLogMetadataManager writes about each remote segment (KIP-405).

Encoding (a generated message, see :mod:`.generated_message`; record key null)::

    value   uvarint frameVersion (1) | uvarint apiKey | uvarint version | struct (flexible)

    apiKey 0  RemoteLogSegmentMetadataRecord        a copy started: the segment's offsets,
              sizes, leader epochs (state 0, written once)
    apiKey 1  RemoteLogSegmentMetadataUpdateRecord  a later state of that segment (copy
              finished, delete started, delete finished) and the RSM's custom metadata
    apiKey 2  RemotePartitionDeleteMetadataRecord   the partition's remote data is deleted
    apiKey 3  RemoteLogSegmentMetadataSnapshotRecord  (only in the broker's snapshot files)

Field tables from Kafka's ``storage/src/main/resources/message/*.json`` (4.1: version 0 with
the tagged ``TxnIndexEmpty``; trunk adds version 1 with tagged ``BrokerLeaderEpoch`` and
``EndOffset``).
"""

from __future__ import annotations

from typing import Any

from kafkalog_spark.errors import CorruptRecordError, Location

from .generated_message import Field, Struct, _decode_struct, _Reader, _Short

_F = Field

FRAME_VERSION = 1
RECORD_NAMES = {0: "RemoteLogSegmentMetadataRecord", 1: "RemoteLogSegmentMetadataUpdateRecord",
                2: "RemotePartitionDeleteMetadataRecord",
                3: "RemoteLogSegmentMetadataSnapshotRecord"}
SEGMENT, SEGMENT_UPDATE, PARTITION_DELETE, SEGMENT_SNAPSHOT = 0, 1, 2, 3
HIGHEST_VERSION = 1
# Kafka's own error texts (AbstractApiMessageSerde.read), which DumpLogSegments prints
FRAME_VERSION_0 = ("Could not deserialize metadata record with frame version 0. Note that "
                   "upgrades from the preview release of KRaft in 2.8 to newer versions are not "
                   "supported.")
UNKNOWN_API_KEY = ("org.apache.kafka.common.errors.UnsupportedVersionException: Unknown "
                   "metadata id ")
MALFORMED = "Failed to deserialize record with type "
# RemoteLogSegmentState / RemotePartitionDeleteState ids (storage/api)
SEGMENT_STATES = {0: "COPY_SEGMENT_STARTED", 1: "COPY_SEGMENT_FINISHED",
                  2: "DELETE_SEGMENT_STARTED", 3: "DELETE_SEGMENT_FINISHED"}
COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED = 0, 1
DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED = 2, 3
PARTITION_DELETE_STATES = {0: "DELETE_PARTITION_MARKED", 1: "DELETE_PARTITION_STARTED",
                           2: "DELETE_PARTITION_FINISHED"}

TOPIC_ID_PARTITION = Struct((_F("name", "string"), _F("id", "uuid"), _F("partition", "int32")))
SEGMENT_ID = Struct((_F("topicIdPartition", TOPIC_ID_PARTITION), _F("id", "uuid")))
LEADER_EPOCHS = (_F("leaderEpoch", "int32"), _F("offset", "int64"))
_SEGMENT_BODY = (
    _F("startOffset", "int64"), _F("endOffset", "int64"), _F("brokerId", "int32"),
    _F("maxTimestampMs", "int64"), _F("eventTimestampMs", "int64"),
    _F("segmentLeaderEpochs", LEADER_EPOCHS), _F("segmentSizeInBytes", "int32"),
    _F("customMetadata", "bytes", nullable=True), _F("remoteLogSegmentState", "int8"),
    _F("txnIndexEmpty", "bool", tag=0, default=False),
    _F("brokerLeaderEpoch", "int32", first=1, tag=1, default=0),
)
RECORDS: dict[int, tuple[Field, ...]] = {
    SEGMENT: (_F("remoteLogSegmentId", SEGMENT_ID),) + _SEGMENT_BODY,
    SEGMENT_UPDATE: (
        _F("remoteLogSegmentId", SEGMENT_ID), _F("brokerId", "int32"),
        _F("eventTimestampMs", "int64"), _F("customMetadata", "bytes", nullable=True),
        _F("remoteLogSegmentState", "int8"),
        _F("brokerLeaderEpoch", "int32", first=1, tag=0, default=-1),
        _F("endOffset", "int64", first=1, tag=1, default=-1)),
    PARTITION_DELETE: (
        _F("topicIdPartition", TOPIC_ID_PARTITION), _F("brokerId", "int32"),
        _F("eventTimestampMs", "int64"), _F("remotePartitionDeleteState", "int8"),
        _F("brokerLeaderEpoch", "int32", first=1, tag=0, default=0),
        _F("endOffset", "int64", first=1, tag=1, default=0)),
    SEGMENT_SNAPSHOT: (_F("segmentId", "uuid"),) + _SEGMENT_BODY,
}


def decode_remote_log_metadata(value: bytes | None, *,
                               location: Location | None = None) -> dict[str, Any]:
    """Decode one ``__remote_log_metadata`` record value.

    Parameters
    ----------
    value : bytes
        ``uvarint frameVersion | uvarint apiKey | uvarint version | message``.
    location : Location, optional
        Where the record sits, carried by errors.

    Returns
    -------
    dict
        ``{"type": apiKey, "name": str, "version": int, "data": dict}``; ``data`` in Kafka's
        field names (lower camel case), uuids in Kafka's text form, ``customMetadata`` base64
        (or ``None``).

    Raises
    ------
    CorruptRecordError
        A null or truncated value, a frame version other than 1, an api key or version this
        table does not know (Kafka's serde refuses them too), or a malformed message with
        bytes left after it.
    """
    if value is None:
        raise CorruptRecordError("remote log metadata record has a null value", location)
    r = _Reader(bytes(value), 0, True)
    try:
        frame_version = r.uvarint()
        if frame_version == 0:
            raise CorruptRecordError(FRAME_VERSION_0, location)
        if frame_version != FRAME_VERSION:
            raise CorruptRecordError(f"Could not deserialize metadata record due to unknown frame "
                                     f"version {frame_version}(only frame version "
                                     f"{FRAME_VERSION} is supported)", location)
        api_key, version = r.uvarint(), r.uvarint()
    except (_Short, ValueError) as exc:
        raise CorruptRecordError(f"remote log metadata frame is malformed: {exc}",
                                 location) from exc
    name = RECORD_NAMES.get(api_key)
    if name is None:
        raise CorruptRecordError(f"{UNKNOWN_API_KEY}{api_key}", location)
    if version > HIGHEST_VERSION:
        raise CorruptRecordError(f"{MALFORMED}{api_key}: version {version} is above the highest "
                                 f"known, {HIGHEST_VERSION}", location)
    try:
        data, end = _decode_struct(r.buf, r.pos, RECORDS[api_key], version, True, name,
                                   location)
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"{MALFORMED}{api_key}: {exc.reason}", location) from exc
    if end != len(r.buf):
        raise CorruptRecordError(f"Found {len(r.buf) - end} byte(s) of garbage after {api_key}",
                                 location)
    return {"type": api_key, "name": name, "version": version, "data": data}


def segment_id_of(record: dict[str, Any]) -> str | None:
    """The remote segment's uuid of a decoded segment or update record (``None`` otherwise)."""
    if record["type"] in (SEGMENT, SEGMENT_UPDATE):
        return str(record["data"]["remoteLogSegmentId"]["id"])
    return None


def topic_id_partition_of(record: dict[str, Any]) -> tuple[str, str, int] | None:
    """``(topic id, topic, partition)`` a decoded record is about (``None`` for a snapshot
    record, which carries none)."""
    data = record["data"]
    if record["type"] in (SEGMENT, SEGMENT_UPDATE):
        tip = data["remoteLogSegmentId"]["topicIdPartition"]
    elif record["type"] == PARTITION_DELETE:
        tip = data["topicIdPartition"]
    else:
        return None
    return str(tip["id"]), str(tip["name"]), int(tip["partition"])
