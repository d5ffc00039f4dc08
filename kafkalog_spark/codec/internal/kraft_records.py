"""KRaft metadata records and control-record values to plain dicts (codec layer):
``__cluster_metadata`` values (also KRaft snapshot records) and the values of control batches
(transaction markers, KRaft control records), KAFKA_FORMATS §6, §16.8.

Encodings (generated messages, see :mod:`.generated_message`)::

    metadata value     uvarint frameVersion (1) | uvarint apiKey | uvarint version | struct
    control value      struct at version 0 (its first field is an int16 "Version")
"""

from __future__ import annotations

import struct
from typing import Any

from kafkalog_spark.errors import CorruptRecordError, Location

from .generated_message import Field, Struct, _decode, _Reader, _Short, _unknown

_F = Field


# --- KRaft __cluster_metadata (§16.8, metadata/src/main/resources/common/metadata) --------

METADATA_FRAME_VERSION = 1
METADATA_RECORD_NAMES = {
    0: "RegisterBrokerRecord", 1: "UnregisterBrokerRecord", 2: "TopicRecord",
    3: "PartitionRecord", 4: "ConfigRecord", 5: "PartitionChangeRecord",
    7: "FenceBrokerRecord", 8: "UnfenceBrokerRecord", 9: "RemoveTopicRecord",
    10: "DelegationTokenRecord", 11: "UserScramCredentialRecord", 12: "FeatureLevelRecord",
    14: "ClientQuotaRecord", 15: "ProducerIdsRecord", 17: "BrokerRegistrationChangeRecord",
    18: "AccessControlEntryRecord", 19: "RemoveAccessControlEntryRecord", 20: "NoOpRecord",
    21: "ZkMigrationStateRecord", 22: "RemoveUserScramCredentialRecord",
    23: "BeginTransactionRecord", 24: "EndTransactionRecord", 25: "AbortTransactionRecord",
    26: "RemoveDelegationTokenRecord", 27: "RegisterControllerRecord", 28: "ClearElrRecord",
}
_BROKER_ENDPOINT = (_F("name", "string"), _F("host", "string"), _F("port", "uint16"),
                    _F("securityProtocol", "int16"))
_BROKER_FEATURE = (_F("name", "string"), _F("minSupportedVersion", "int16"),
                   _F("maxSupportedVersion", "int16"))
_BROKER_ID_EPOCH = (_F("brokerId", "int32"), _F("brokerEpoch", "int64"))
_SCRAM_NAME = (_F("name", "string"), _F("mechanism", "int8"))
# every metadata record is flexible in all versions: (fields, highest known version); Kafka
# 4.1's metadata/src/main/resources/common/metadata/*.json, every record type it has
METADATA_RECORDS: dict[int, tuple[tuple[Field, ...], int]] = {
    0: ((_F("brokerId", "int32"), _F("isMigratingZkBroker", "bool", first=2, default=False),
         _F("incarnationId", "uuid"), _F("brokerEpoch", "int64"),
         _F("endPoints", _BROKER_ENDPOINT), _F("features", _BROKER_FEATURE),
         _F("rack", "string", nullable=True), _F("fenced", "bool"),
         _F("inControlledShutdown", "bool", first=1, default=False),
         _F("logDirs", "[]uuid", first=3, tag=0, default=[])), 3),
    2: ((_F("name", "string"), _F("topicId", "uuid")), 0),
    3: ((_F("partitionId", "int32"), _F("topicId", "uuid"), _F("replicas", "[]int32"),
         _F("isr", "[]int32"), _F("removingReplicas", "[]int32"),
         _F("addingReplicas", "[]int32"), _F("leader", "int32"),
         _F("leaderRecoveryState", "int8", tag=0, default=0), _F("leaderEpoch", "int32"),
         _F("partitionEpoch", "int32"), _F("directories", "[]uuid", first=1),
         _F("eligibleLeaderReplicas", "[]int32", first=2, nullable=True, tag=1),
         _F("lastKnownElr", "[]int32", first=2, nullable=True, tag=2)), 2),
    4: ((_F("resourceType", "int8"), _F("resourceName", "string"), _F("name", "string"),
         _F("value", "string", nullable=True)), 0),
    5: ((_F("partitionId", "int32"), _F("topicId", "uuid"),
         _F("isr", "[]int32", nullable=True, tag=0),
         _F("leader", "int32", tag=1, default=-2),
         _F("replicas", "[]int32", nullable=True, tag=2),
         _F("removingReplicas", "[]int32", nullable=True, tag=3),
         _F("addingReplicas", "[]int32", nullable=True, tag=4),
         _F("leaderRecoveryState", "int8", tag=5, default=-1),
         _F("directories", "[]uuid", first=1, nullable=True, tag=8),
         _F("eligibleLeaderReplicas", "[]int32", first=2, nullable=True, tag=6),
         _F("lastKnownElr", "[]int32", first=2, nullable=True, tag=7)), 2),
    7: ((_F("id", "int32"), _F("epoch", "int64")), 0),
    8: ((_F("id", "int32"), _F("epoch", "int64")), 0),
    9: ((_F("topicId", "uuid"),), 0),
    12: ((_F("name", "string"), _F("featureLevel", "int16")), 0),
    1: (_BROKER_ID_EPOCH, 0),
    10: ((_F("owner", "string"), _F("requester", "string"), _F("renewers", "[]string"),
          _F("issueTimestamp", "int64"), _F("maxTimestamp", "int64"),
          _F("expirationTimestamp", "int64"), _F("tokenId", "string")), 0),
    11: ((*_SCRAM_NAME, _F("salt", "bytes"), _F("storedKey", "bytes"), _F("serverKey", "bytes"),
          _F("iterations", "int32")), 0),
    14: ((_F("entity", (_F("entityType", "string"), _F("entityName", "string", nullable=True))),
          _F("key", "string"), _F("value", "float64"), _F("remove", "bool")), 0),
    15: ((*_BROKER_ID_EPOCH, _F("nextProducerId", "int64")), 0),
    17: ((*_BROKER_ID_EPOCH, _F("fenced", "int8", tag=0, default=0),
          _F("inControlledShutdown", "int8", first=1, tag=1, default=0),
          _F("logDirs", "[]uuid", first=2, tag=2, default=[])), 2),
    18: ((_F("id", "uuid"), _F("resourceType", "int8"), _F("resourceName", "string"),
          _F("patternType", "int8"), _F("principal", "string"), _F("host", "string"),
          _F("operation", "int8"), _F("permissionType", "int8")), 0),
    19: ((_F("id", "uuid"),), 0),
    20: ((), 0),
    21: ((_F("zkMigrationState", "int8"),), 0),
    22: (_SCRAM_NAME, 0),
    23: ((_F("name", "string", nullable=True, tag=0),), 0),
    24: ((), 0),
    25: ((_F("reason", "string", nullable=True, tag=0),), 0),
    26: ((_F("tokenId", "string"),), 0),
    27: ((_F("controllerId", "int32"), _F("incarnationId", "uuid"),
          _F("zkMigrationReady", "bool"), _F("endPoints", _BROKER_ENDPOINT),
          _F("features", _BROKER_FEATURE)), 0),
    28: ((_F("topicName", "string"),), 0),
}


def decode_metadata_record(value: bytes, *, location: Location | None = None) -> dict[str, Any]:
    """Decode one ``__cluster_metadata`` record value (also KRaft snapshot records).

    Parameters
    ----------
    value : bytes
        ``uvarint frameVersion | uvarint apiKey | uvarint version | message``.
    location : Location, optional
        Where the record sits, carried by errors.

    Returns
    -------
    dict
        ``{"type": apiKey, "name": str | None, "version": int, "data": dict | None}``. Record
        types or versions without a field table here get ``data`` ``None`` and ``"raw"`` (hex
        of the message bytes) instead; they never fail.

    Raises
    ------
    CorruptRecordError
        Null/truncated frame, an unknown frame version, or a malformed known record.
    """
    if value is None:
        raise CorruptRecordError("metadata record has a null value", location)
    r = _Reader(bytes(value), 0, True)
    try:
        frame_version, api_key, version = r.uvarint(), r.uvarint(), r.uvarint()
    except (_Short, ValueError) as exc:
        raise CorruptRecordError(f"metadata record frame is malformed: {exc}", location) from exc
    if frame_version != METADATA_FRAME_VERSION:
        raise CorruptRecordError(f"metadata record has unknown frame version {frame_version}",
                                 location)
    name = METADATA_RECORD_NAMES.get(api_key)
    out: dict[str, Any] = {"type": api_key, "name": name, "version": version}
    schema = METADATA_RECORDS.get(api_key)
    if schema is None or version > schema[1]:
        out.update(data=None, raw=r.buf[r.pos:].hex())
        return out
    out["data"] = _decode(r.buf, r.pos, schema[0], version, True, name or str(api_key), location)
    return out


# --- control record values (§6.2, §6.3) ----------------------------------------------------

CONTROL_RECORD_NAMES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                        4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
END_TXN_MARKER = struct.Struct(">hi")
_VOTER_V0 = (_F("voterId", "int32"), _F("voterDirectoryId", "uuid", first=1))
# KRaft control values are read at version 0 (ControlRecordUtils.*_CURRENT_VERSION)
CONTROL_RECORD_VALUES: dict[int, tuple[Field, ...]] = {
    2: (_F("version", "int16"), _F("leaderId", "int32"), _F("voters", _VOTER_V0),
        _F("grantingVoters", _VOTER_V0)),
    3: (_F("version", "int16"), _F("lastContainedLogTimestamp", "int64")),
    4: (_F("version", "int16"),),
    5: (_F("version", "int16"), _F("kRaftVersion", "int16")),
    6: (_F("version", "int16"),
        _F("voters", (_F("voterId", "int32"), _F("voterDirectoryId", "uuid"),
                      _F("endpoints", (_F("name", "string"), _F("host", "string"),
                                       _F("port", "uint16"))),
                      _F("kRaftVersionFeature", Struct((_F("minSupportedVersion", "int16"),
                                                        _F("maxSupportedVersion", "int16"))))))),
}


def decode_end_txn_marker(value: bytes, *, location: Location | None = None) -> dict[str, Any]:
    """Decode an EndTransactionMarker value (int16 version, int32 coordinatorEpoch).

    Versions above 0 are read as version 0 and trailing bytes ignored, as Kafka does.
    Raises CorruptRecordError for a value shorter than 6 bytes or a negative version.
    """
    if value is None or len(value) < END_TXN_MARKER.size:
        raise CorruptRecordError("end transaction marker value is shorter than 6 bytes", location)
    version, coordinator_epoch = END_TXN_MARKER.unpack_from(bytes(value[:6]))
    if version < 0:
        raise CorruptRecordError(f"end transaction marker has negative version {version}",
                                 location)
    return {"version": version, "coordinatorEpoch": coordinator_epoch}


def decode_control_record_value(type_id: int, value: bytes, *,
                                location: Location | None = None) -> dict[str, Any]:
    """Decode the value of a control record, given the type from its key.

    Parameters
    ----------
    type_id : int
        Control record type (key bytes 2-3): 0 ABORT, 1 COMMIT, 2-6 KRaft types.
    value : bytes
        The control record's value.
    location : Location, optional
        Where the record sits, carried by errors.

    Returns
    -------
    dict
        ``{"type": type_id, "name": str | None, "data": dict | None}``; unknown types get
        ``"raw"`` hex and ``data`` ``None``.

    Raises
    ------
    CorruptRecordError
        Truncated or malformed value of a known type.
    """
    name = CONTROL_RECORD_NAMES.get(type_id)
    if type_id in (0, 1):
        return {"type": type_id, "name": name, "data": decode_end_txn_marker(value,
                                                                             location=location)}
    fields = CONTROL_RECORD_VALUES.get(type_id)
    if fields is None:
        return _unknown("type", type_id, value, 0)
    data = _decode(value, 0, fields, 0, True, name or str(type_id), location)
    return {"type": type_id, "name": name, "data": data}
