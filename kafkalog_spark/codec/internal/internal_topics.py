"""Group and transaction coordinator topics to plain dicts (codec layer): keys and values of
``__consumer_offsets`` and ``__transaction_state`` (KAFKA_FORMATS §17).

Encodings (generated messages, see :mod:`.generated_message`)::

    coordinator key    int16 record type | key struct at that version
    coordinator value  int16 value version | value struct        (null value = tombstone)

The KRaft ``__cluster_metadata`` records and control-record values are decoded by
:mod:`.kraft_records`.
"""

from __future__ import annotations

import base64
from typing import Any

from kafkalog_spark.errors import CorruptRecordError, Location

# Field is also re-exported for log/dump.py (it.Field)
from .generated_message import Field, _decode, _prefix, _unknown
# re-exported for log/dump.py (it.*), log/topic_config.py (decode_metadata_record),
# tests/fuzz/harness.py (I.decode_metadata_record, I.decode_end_txn_marker,
# I.decode_control_record_value)
from .kraft_records import (CONTROL_RECORD_NAMES, CONTROL_RECORD_VALUES,  # noqa: F401
                            METADATA_RECORDS, decode_control_record_value, decode_end_txn_marker,
                            decode_metadata_record)

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

