"""The ``--remote-log-metadata-decoder`` payload of a dump (inspect layer): a
``__remote_log_metadata`` record value as DumpLogSegments prints it — the ``toString()`` of the
object Kafka's ``RemoteLogMetadataSerde`` builds — or its error line.

Kafka builds ``RemoteLogSegmentMetadata`` (api key 0), ``RemoteLogSegmentMetadataUpdate`` (1),
``RemotePartitionDeleteMetadata`` (2) or ``RemoteLogSegmentMetadataSnapshot`` (3); their
constructors refuse a negative start offset, an end offset below it, no leader epochs and an
unknown state id, and the dump prints ``Error at offset N, skipping. <message>`` instead.
Decoding is :mod:`kafkalog_spark.codec.internal.remote_log_metadata`.
"""

from __future__ import annotations

import base64
from typing import Any

from ..codec.internal import remote_log_metadata as rlm
from ..errors import KafkaLogError
from .dump_output import java_bool


class _Refused(Exception):
    """Kafka's constructor threw: the message it carries."""


def remote_metadata_text(value: bytes | None, offset: int) -> str:
    """The payload DumpLogSegments prints for one record value (module docstring)."""
    try:
        rec = rlm.decode_remote_log_metadata(value)
        return _to_string(rec["type"], rec["data"])
    except KafkaLogError as exc:
        return f"Error at offset {offset}, skipping. {_kafka_reason(exc.reason)}"
    except _Refused as exc:
        return f"Error at offset {offset}, skipping. {exc}"


def remote_metadata_json(value: bytes | None, offset: int) -> Any:
    """The same record for ``--format jsonl``: the decoded dict (with state names added), or
    the error line."""
    try:
        rec = rlm.decode_remote_log_metadata(value)
    except KafkaLogError as exc:
        return f"Error at offset {offset}, skipping. {exc.reason}"
    data = rec["data"]
    if "remoteLogSegmentState" in data:
        data["remoteLogSegmentStateName"] = rlm.SEGMENT_STATES.get(data["remoteLogSegmentState"])
    if "remotePartitionDeleteState" in data:
        data["remotePartitionDeleteStateName"] = rlm.PARTITION_DELETE_STATES.get(
            data["remotePartitionDeleteState"])
    return rec


def _kafka_reason(reason: str) -> str:
    """Kafka's message for a value its serde refuses: a malformed message is only "Failed to
    deserialize record with type N" (the cause is in its stack trace, not printed)."""
    return reason.split(":")[0] if reason.startswith(rlm.MALFORMED) else reason


def _to_string(api_key: int, d: dict[str, Any]) -> str:
    if api_key == rlm.SEGMENT:
        _check_offsets(d)
        epochs = _epochs(d)
        state = _state(rlm.SEGMENT_STATES, d["remoteLogSegmentState"], "state can not be null")
        return (f"RemoteLogSegmentMetadata{{remoteLogSegmentId={_segment_id(d)}, "
                f"startOffset={d['startOffset']}, endOffset={d['endOffset']}, "
                f"brokerId={d['brokerId']}, maxTimestampMs={d['maxTimestampMs']}, "
                f"eventTimestampMs={d['eventTimestampMs']}, segmentLeaderEpochs={epochs}, "
                f"segmentSizeInBytes={d['segmentSizeInBytes']}, "
                f"customMetadata={_custom(d)}, state={state}, "
                f"txnIdxEmpty={java_bool(d['txnIndexEmpty'])}}}")
    if api_key == rlm.SEGMENT_UPDATE:
        state = _state(rlm.SEGMENT_STATES, d["remoteLogSegmentState"], "state can not be null")
        return (f"RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId={_segment_id(d)}, "
                f"customMetadata={_custom(d)}, state={state}, "
                f"eventTimestampMs={d['eventTimestampMs']}, brokerId={d['brokerId']}}}")
    if api_key == rlm.PARTITION_DELETE:
        # Objects.requireNonNull(state) without a message: the exception's message is null
        state = _state(rlm.PARTITION_DELETE_STATES, d["remotePartitionDeleteState"], "null")
        return (f"RemotePartitionDeleteMetadata{{topicPartition="
                f"{_topic_id_partition(d['topicIdPartition'])}, state={state}, "
                f"eventTimestampMs={d['eventTimestampMs']}, brokerId={d['brokerId']}}}")
    state = _state(rlm.SEGMENT_STATES, d["remoteLogSegmentState"], "state can not be null")
    epochs = _epochs(d)
    return (f"RemoteLogSegmentMetadataSnapshot{{segmentId={d['segmentId']}, "
            f"startOffset={d['startOffset']}, endOffset={d['endOffset']}, "
            f"maxTimestampMs={d['maxTimestampMs']}, segmentLeaderEpochs={epochs}, "
            f"segmentSizeInBytes={d['segmentSizeInBytes']}, customMetadata={_custom(d)}, "
            f"state={state}, txnIdxEmpty={java_bool(d['txnIndexEmpty'])}}}")


def _check_offsets(d: dict[str, Any]) -> None:
    start, end = d["startOffset"], d["endOffset"]
    if start < 0:
        raise _Refused(f"Unexpected start offset = {start}. StartOffset for a remote segment "
                       "cannot be negative")
    if end < start:
        raise _Refused(f"Unexpected end offset = {end}. EndOffset for a remote segment cannot "
                       f"be less than startOffset = {start}")


def _epochs(d: dict[str, Any]) -> str:
    """A Java ``TreeMap<Integer, Long>`` printed: ``{0=0, 3=120}`` (a repeated epoch keeps its
    last offset, as the HashMap it is built from)."""
    epochs = {e["leaderEpoch"]: e["offset"] for e in d["segmentLeaderEpochs"]}
    if not epochs:
        raise _Refused("segmentLeaderEpochs can not be null or empty")
    return "{" + ", ".join(f"{k}={epochs[k]}" for k in sorted(epochs)) + "}"


def _state(names: dict[int, str], state_id: int, refusal: str) -> str:
    if state_id not in names:
        raise _Refused(refusal)
    return names[state_id]


def _segment_id(d: dict[str, Any]) -> str:
    sid = d["remoteLogSegmentId"]
    return (f"RemoteLogSegmentId{{topicIdPartition={_topic_id_partition(sid['topicIdPartition'])}"
            f", id={sid['id']}}}")


def _topic_id_partition(tip: dict[str, Any]) -> str:
    return f"{tip['id']}:{tip['name']}-{tip['partition']}"


def _custom(d: dict[str, Any]) -> str:
    raw = d["customMetadata"]
    if raw is None:
        return "Optional.empty"
    return f"Optional[CustomMetadata{{{len(base64.b64decode(raw))} bytes}}]"
