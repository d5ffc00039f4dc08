"""Internal topic decoders (codec layer): record keys/values of Kafka's own topics to plain dicts.

Covers ``__consumer_offsets``, ``__transaction_state``, the KRaft ``__cluster_metadata`` log and
the values of control records (KAFKA_FORMATS §6, §16.8, §17). All are Kafka "generated message"
encodings (§1.2), described here by field tables taken from Kafka's JSON schemas::

    coordinator key    int16 record type | key struct at that version
    coordinator value  int16 value version | value struct        (null value = tombstone)
    metadata value     uvarint frameVersion (1) | uvarint apiKey | uvarint version | struct
    control value      struct at version 0 (its first field is an int16 "Version")

    non-flexible  string int16 len (-1 null), bytes int32 len, array int32 count (-1 null)
    flexible      lengths/counts are uvarint(n + 1) (0 null); every struct ends with
                  uvarint count, then per tagged field: uvarint tag, uvarint size, payload

Output dicts are JSON-serialisable and follow DumpLogSegments' decoders: field names in
Kafka's JSON spelling (lower camel case), ``bytes`` as base64, ``uuid`` in Kafka's text form
(URL-safe base64 without padding). Unknown record types are reported, never fatal.
"""

from __future__ import annotations

import base64
import struct
from typing import Any, Callable, NamedTuple

from kafkalog_spark.errors import CorruptRecordError, Location

_I8, _I16, _U16, _I32, _I64 = (struct.Struct(f) for f in (">b", ">h", ">H", ">i", ">q"))


class _Short(Exception):
    """Internal: a read past the end of the buffer."""


class _Reader:
    """Cursor over one encoded message; ``flexible`` selects compact lengths + tagged fields."""

    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes, pos: int = 0, flexible: bool = False) -> None:
        self.buf, self.pos, self.flexible = buf, pos, flexible

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise _Short(f"needs {n} bytes at {self.pos}, {len(self.buf) - self.pos} left")
        out = self.buf[self.pos:end]
        self.pos = end
        return out

    def fixed(self, fmt: struct.Struct) -> Any:
        if self.pos + fmt.size > len(self.buf):
            raise _Short(f"needs {fmt.size} bytes at {self.pos}, {len(self.buf) - self.pos} left")
        value = fmt.unpack_from(self.buf, self.pos)[0]
        self.pos += fmt.size
        return value

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
            shift += 7
            if shift > 28:
                raise ValueError(f"unsigned varint longer than 5 bytes before {self.pos}")

    def length(self, nullable: bool, fixed: struct.Struct) -> int:
        n = self.uvarint() - 1 if self.flexible else self.fixed(fixed)
        if n < 0:
            if nullable:  # non-flexible readers treat any negative length as null
                return -1
            raise ValueError(f"negative length {n} for a non-nullable field before {self.pos}")
        return n

    def string(self, nullable: bool = False) -> str | None:
        n = self.length(nullable, _I16)
        return None if n < 0 else self.take(n).decode("utf-8")

    def blob(self, nullable: bool = False) -> bytes | None:
        n = self.length(nullable, _I32)
        return None if n < 0 else self.take(n)

    def array(self, element: Callable[[], Any], nullable: bool = False) -> list[Any] | None:
        n = self.length(nullable, _I32)
        if n < 0:
            return None
        if n > len(self.buf) - self.pos:  # every element takes >= 1 byte: bounds the list
            raise _Short(f"array of {n} elements at {self.pos} exceeds the remaining bytes")
        return [element() for _ in range(n)]


def _uuid_text(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


class Field(NamedTuple):
    """One schema field: ``kind`` is a primitive name, ``"[]" + primitive``, a tuple of
    Fields (array of structs) or a :class:`Struct`; ``first``/``last`` bound the versions that carry it; ``tag`` makes
    it a tagged field (flexible versions only)."""

    name: str
    kind: Any
    first: int = 0
    last: int | None = None
    nullable: bool = False
    tag: int | None = None
    default: Any = None


_PRIMITIVES: dict[str, Callable[[_Reader], Any]] = {
    "int8": lambda r: r.fixed(_I8),
    "int16": lambda r: r.fixed(_I16),
    "uint16": lambda r: r.fixed(_U16),
    "int32": lambda r: r.fixed(_I32),
    "int64": lambda r: r.fixed(_I64),
    "bool": lambda r: r.fixed(_I8) != 0,
    "uuid": lambda r: _uuid_text(r.take(16)),
    "string": lambda r: r.string(),
    "bytes": lambda r: base64.b64encode(r.blob()).decode("ascii"),  # type: ignore[arg-type]
}


class Struct(NamedTuple):
    """Field kind of a single nested struct (not an array); flexible ones end in tagged fields."""

    fields: tuple[Field, ...]


def _read_value(r: _Reader, f: Field, version: int) -> Any:
    kind = f.kind
    if isinstance(kind, Struct):
        return _read_struct(r, kind.fields, version)
    if isinstance(kind, tuple):
        return r.array(lambda: _read_struct(r, kind, version), f.nullable)
    if kind.startswith("[]"):
        element = _PRIMITIVES[kind[2:]]
        return r.array(lambda: element(r), f.nullable)
    if f.nullable and kind == "string":
        return r.string(True)
    if f.nullable and kind == "bytes":
        raw = r.blob(True)
        return None if raw is None else base64.b64encode(raw).decode("ascii")
    return _PRIMITIVES[kind](r)


def _read_struct(r: _Reader, fields: tuple[Field, ...], version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tagged = {}
    for f in fields:
        if version < f.first or (f.last is not None and version > f.last):
            continue
        if f.tag is not None:
            tagged[f.tag] = f
            out[f.name] = f.default
        else:
            out[f.name] = _read_value(r, f, version)
    if r.flexible:
        unknown = {}
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            end = r.pos + size
            if tag in tagged:
                out[tagged[tag].name] = _read_value(r, tagged[tag], version)
                if r.pos != end:
                    raise ValueError(f"tagged field {tag} is {size} bytes, read {r.pos - end + size}")
            else:
                unknown[str(tag)] = base64.b64encode(r.take(size)).decode("ascii")
        if unknown:
            out["unknownTaggedFields"] = unknown
    return out


def _decode(buf: Any, pos: int, fields: tuple[Field, ...], version: int, flexible: bool,
            what: str, location: Location | None, exact: bool = True) -> dict[str, Any]:
    """Decode one struct and map every low-level failure to CorruptRecordError."""
    r = _Reader(bytes(buf), pos, flexible)
    try:
        out = _read_struct(r, fields, version)
    except (_Short, ValueError, UnicodeDecodeError, struct.error) as exc:
        raise CorruptRecordError(f"{what} v{version} is malformed: {exc}", location) from exc
    if exact and r.pos != len(r.buf):
        raise CorruptRecordError(
            f"{what} v{version} has {len(r.buf) - r.pos} unread trailing bytes", location)
    return out


def _prefix(buf: Any, what: str, location: Location | None) -> int:
    if buf is None or len(buf) < 2:
        raise CorruptRecordError(f"{what} is shorter than its 2-byte version", location)
    return int(_I16.unpack_from(bytes(buf[:2]))[0])


def _unknown(kind_key: str, kind: int, buf: Any, pos: int) -> dict[str, Any]:
    return {kind_key: kind, "name": None, "data": None, "raw": bytes(buf[pos:]).hex()}


# --- __consumer_offsets (§17.1) ------------------------------------------------------------

_F = Field
_GROUP_KEY = (_F("groupId", "string"),)
_GROUP_MEMBER_KEY = (_F("groupId", "string"), _F("memberId", "string"))
CONSUMER_OFFSETS_KEYS: dict[int, tuple[str, tuple[Field, ...]]] = {
    0: ("OffsetCommitKey", (_F("group", "string"), _F("topic", "string"), _F("partition", "int32"))),
    1: ("OffsetCommitKey", (_F("group", "string"), _F("topic", "string"), _F("partition", "int32"))),
    2: ("GroupMetadataKey", (_F("group", "string"),)),
    3: ("ConsumerGroupMetadataKey", _GROUP_KEY),
    4: ("ConsumerGroupPartitionMetadataKey", _GROUP_KEY),
    5: ("ConsumerGroupMemberMetadataKey", _GROUP_MEMBER_KEY),
    6: ("ConsumerGroupTargetAssignmentMetadataKey", _GROUP_KEY),
    7: ("ConsumerGroupTargetAssignmentMemberKey", _GROUP_MEMBER_KEY),
    8: ("ConsumerGroupCurrentMemberAssignmentKey", _GROUP_MEMBER_KEY),
    9: ("ShareGroupPartitionMetadataKey", _GROUP_KEY),
    10: ("ShareGroupMemberMetadataKey", _GROUP_MEMBER_KEY),
    11: ("ShareGroupMetadataKey", _GROUP_KEY),
    12: ("ShareGroupTargetAssignmentMetadataKey", _GROUP_KEY),
    13: ("ShareGroupTargetAssignmentMemberKey", _GROUP_MEMBER_KEY),
    14: ("ShareGroupCurrentMemberAssignmentKey", _GROUP_MEMBER_KEY),
    15: ("ShareGroupStatePartitionMetadataKey", _GROUP_KEY),
}

OFFSET_COMMIT_VALUE = (
    _F("offset", "int64"),
    _F("leaderEpoch", "int32", first=3, default=-1),
    _F("metadata", "string"),
    _F("commitTimestamp", "int64"),
    _F("expireTimestamp", "int64", first=1, last=1, default=-1),
)
_MEMBER_METADATA = (
    _F("memberId", "string"),
    _F("groupInstanceId", "string", first=3, nullable=True),
    _F("clientId", "string"),
    _F("clientHost", "string"),
    _F("rebalanceTimeout", "int32", first=1),
    _F("sessionTimeout", "int32"),
    _F("subscription", "bytes"),
    _F("assignment", "bytes"),
)
GROUP_METADATA_VALUE = (
    _F("protocolType", "string"),
    _F("generation", "int32"),
    _F("protocol", "string", nullable=True),
    _F("leader", "string", nullable=True),
    _F("currentStateTimestamp", "int64", first=2, default=-1),
    _F("members", _MEMBER_METADATA),
)
# value schemas: (name, fields, highest known version, first flexible version)
_CONSUMER_OFFSETS_VALUES = {
    0: ("OffsetCommitValue", OFFSET_COMMIT_VALUE, 4, 4),
    1: ("OffsetCommitValue", OFFSET_COMMIT_VALUE, 4, 4),
    2: ("GroupMetadataValue", GROUP_METADATA_VALUE, 4, 4),
}

_TOPIC_PARTITION = (_F("topic", "string"), _F("partitions", "[]int32"))
CONSUMER_PROTOCOL_SUBSCRIPTION = (
    _F("topics", "[]string"),
    _F("userData", "bytes", nullable=True),
    _F("ownedPartitions", _TOPIC_PARTITION, first=1),
    _F("generationId", "int32", first=2, default=-1),
    _F("rackId", "string", first=3, nullable=True),
)
CONSUMER_PROTOCOL_ASSIGNMENT = (
    _F("assignedPartitions", _TOPIC_PARTITION),
    _F("userData", "bytes", nullable=True),
)


def decode_consumer_offsets_key(key: bytes, *, location: Location | None = None) -> dict[str, Any]:
    """Decode a ``__consumer_offsets`` record key.

    Parameters
    ----------
    key : bytes
        The record key: int16 record type, then the key struct.
    location : Location, optional
        Where the record sits, carried by errors.

    Returns
    -------
    dict
        ``{"type": int, "name": str | None, "data": dict | None}``; unknown types carry
        ``"raw"`` (hex of the struct bytes) and ``name``/``data`` ``None``.

    Raises
    ------
    CorruptRecordError
        Missing, truncated or malformed key.
    """
    record_type = _prefix(key, "__consumer_offsets key", location)
    if record_type not in CONSUMER_OFFSETS_KEYS:
        return _unknown("type", record_type, key, 2)
    name, fields = CONSUMER_OFFSETS_KEYS[record_type]
    data = _decode(key, 2, fields, record_type, False, name, location)
    return {"type": record_type, "name": name, "data": data}


def decode_consumer_offsets_value(key: dict[str, Any], value: bytes | None, *,
                                  location: Location | None = None) -> dict[str, Any] | None:
    """Decode a ``__consumer_offsets`` record value, given its decoded key.

    Parameters
    ----------
    key : dict
        The result of :func:`decode_consumer_offsets_key` for the same record.
    value : bytes or None
        The record value; ``None`` is a tombstone.
    location : Location, optional
        Where the record sits, carried by errors.

    Returns
    -------
    dict or None
        ``None`` for a tombstone, else ``{"version": int, "name": str | None, "data": dict |
        None}``. A ``consumer`` group's member subscription/assignment are decoded as
        ConsumerProtocolSubscription/Assignment (left base64 when they do not parse, as
        DumpLogSegments does). Value types other than offset commits and classic group metadata
        carry ``"raw"`` hex instead of ``data``.

    Raises
    ------
    CorruptRecordError
        Truncated or malformed value.
    """
    if value is None:
        return None
    version = _prefix(value, "__consumer_offsets value", location)
    schema = _CONSUMER_OFFSETS_VALUES.get(key.get("type"))  # type: ignore[arg-type]
    if schema is None:
        return _unknown("version", version, value, 2)
    name, fields, highest, first_flexible = schema
    if version < 0:
        raise CorruptRecordError(f"{name} has negative version {version}", location)
    # KIP-915: later versions only add tagged fields, so they read as the highest known one
    read_as = min(version, highest)
    data = _decode(value, 2, fields, read_as, read_as >= first_flexible, name, location,
                   exact=version <= highest)
    if name == "GroupMetadataValue" and data["protocolType"] == "consumer":
        for member in data["members"]:
            member["subscription"] = _consumer_protocol(
                member["subscription"], CONSUMER_PROTOCOL_SUBSCRIPTION, 3)
            member["assignment"] = _consumer_protocol(
                member["assignment"], CONSUMER_PROTOCOL_ASSIGNMENT, 3)
    return {"version": version, "name": name, "data": data}


def _consumer_protocol(b64: str, fields: tuple[Field, ...], highest: int) -> Any:
    raw = base64.b64decode(b64)
    try:
        version = _prefix(raw, "consumer protocol", None)
        if version < 0:
            return b64
        # newer versions only append fields: Kafka reads them with its current format
        data = _decode(raw, 2, fields, min(version, highest), False, "consumer protocol", None,
                       exact=version <= highest)
    except CorruptRecordError:
        return b64
    return {"version": version, **data}


# --- __transaction_state (§17.2) -----------------------------------------------------------

TRANSACTION_STATUS_NAMES = {
    0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
    5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence",
}
TRANSACTION_LOG_KEY = (_F("transactionalId", "string"),)
TRANSACTION_LOG_VALUE = (
    _F("producerId", "int64"),
    _F("previousProducerId", "int64", first=1, tag=0, default=-1),
    _F("nextProducerId", "int64", first=1, tag=1, default=-1),
    _F("producerEpoch", "int16"),
    _F("transactionTimeoutMs", "int32"),
    _F("transactionStatus", "int8"),
    _F("transactionPartitions", (_F("topic", "string"), _F("partitionIds", "[]int32")),
       nullable=True),
    _F("transactionLastUpdateTimestampMs", "int64"),
    _F("transactionStartTimestampMs", "int64"),
    _F("clientTransactionVersion", "int16", first=1, tag=2, default=0),
)


def decode_transaction_log_key(key: bytes, *, location: Location | None = None) -> dict[str, Any]:
    """Decode a ``__transaction_state`` key: ``{"version", "name", "data": {"transactionalId"}}``
    (unknown versions carry ``"raw"`` hex). Raises CorruptRecordError when malformed."""
    version = _prefix(key, "__transaction_state key", location)
    if version != 0:
        return _unknown("version", version, key, 2)
    data = _decode(key, 2, TRANSACTION_LOG_KEY, 0, False, "TransactionLogKey", location)
    return {"version": 0, "name": "TransactionLogKey", "data": data}


def decode_transaction_log_value(value: bytes | None, *,
                                 location: Location | None = None) -> dict[str, Any] | None:
    """Decode a ``__transaction_state`` value (v0, flexible v1 with tagged fields 0-2).

    Parameters
    ----------
    value : bytes or None
        The record value; ``None`` is a tombstone (expired transactional id).
    location : Location, optional
        Where the record sits, carried by errors.

    Returns
    -------
    dict or None
        ``{"version", "name", "data"}``; ``data`` adds ``transactionStatusName``.

    Raises
    ------
    CorruptRecordError
        Negative version, truncated or malformed value.
    """
    if value is None:
        return None
    version = _prefix(value, "__transaction_state value", location)
    if version < 0:
        raise CorruptRecordError(f"TransactionLogValue has negative version {version}", location)
    read_as = min(version, 1)
    data = _decode(value, 2, TRANSACTION_LOG_VALUE, read_as, read_as >= 1, "TransactionLogValue",
                   location, exact=version <= 1)
    data["transactionStatusName"] = TRANSACTION_STATUS_NAMES.get(data["transactionStatus"])
    return {"version": version, "name": "TransactionLogValue", "data": data}


# --- KRaft __cluster_metadata (§16.8, metadata/src/main/resources/common/metadata) --------

METADATA_FRAME_VERSION = 1
METADATA_RECORD_NAMES = {
    0: "RegisterBrokerRecord", 1: "UnregisterBrokerRecord", 2: "TopicRecord",
    3: "PartitionRecord", 4: "ConfigRecord", 5: "PartitionChangeRecord",
    7: "FenceBrokerRecord", 8: "UnfenceBrokerRecord", 9: "RemoveTopicRecord",
    10: "DelegationTokenRecord", 11: "UserScramCredentialRecord", 12: "FeatureLevelRecord",
    14: "ClientQuotaRecord", 15: "ProducerIdsRecord", 17: "BrokerRegistrationChangeRecord",
    18: "AccessControlEntryRecord", 19: "RemoveAccessControlEntryRecord", 20: "NoOpRecord",
    21: "ZkMigrationRecord", 22: "RemoveUserScramCredentialRecord",
    23: "BeginTransactionRecord", 24: "EndTransactionRecord", 25: "AbortTransactionRecord",
    26: "RemoveDelegationTokenRecord", 27: "RegisterControllerRecord",
}
_BROKER_ENDPOINT = (_F("name", "string"), _F("host", "string"), _F("port", "uint16"),
                    _F("securityProtocol", "int16"))
_BROKER_FEATURE = (_F("name", "string"), _F("minSupportedVersion", "int16"),
                   _F("maxSupportedVersion", "int16"))
# every metadata record is flexible in all versions: (fields, highest known version)
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
    15: ((_F("brokerId", "int32"), _F("brokerEpoch", "int64"), _F("nextProducerId", "int64")), 0),
    20: ((), 0),
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
