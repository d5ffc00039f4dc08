"""Record details in a dump (inspect layer): control record lines and the key/value printed by the
string, offsets, transaction-log, cluster-metadata and remote-log-metadata decoders
(DumpLogSegments' MessageParsers).

Decoder JSON comes from :mod:`kafkalog_spark.codec.internal.internal_topics`; record types it has no
field table for print their bytes as ``"data":null,"raw":"<hex>"`` where Kafka would print the
fields.
"""

from __future__ import annotations

import re
from typing import Any

from ..codec.internal import internal_topics as it
from ..errors import KafkaLogError, Location
from .dump_output import DumpRun, compact_json
from .dump_remote import remote_metadata_json, remote_metadata_text

_CONTROL_LABELS = {2: " LeaderChange: ", 3: " SnapshotHeader ", 4: " SnapshotFooter ",
                   5: " KRaftVersion ", 6: " KRaftVoters "}


def _kafka_json(data: Any, fields: tuple[it.Field, ...] | None, version: int) -> Any:
    """A decoded struct as Kafka's JsonConverter writes it: tagged fields at their default and
    unknown tagged fields left out, and our own additions removed."""
    if not isinstance(data, dict):
        return data
    data = {k: v for k, v in data.items()
            if k not in ("unknownTaggedFields", "transactionStatusName")}
    for f in fields or ():
        if f.tag is not None and f.name in data and data[f.name] == f.default:
            del data[f.name]
    return data


def _upper_snake(name: str) -> str:
    """``TopicRecord`` -> ``TOPIC_RECORD`` (MetadataRecordType's enum names)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


def control_info(run: DumpRun, key: bytes | None, value: bytes | None,
                 offset: int) -> tuple[str, dict[str, Any]] | None:
    """Text and JSON-lines form of a control record's details (``printControlRecord``)."""
    loc = Location(run.arg, None, offset)
    if key is None or len(key) < 4:
        run.error(f"Invalid control record key at offset {offset}: needs 4 bytes, "
                  f"found {0 if key is None else len(key)} ({loc.describe()})")
        return None
    version = int.from_bytes(key[:2], "big", signed=True)
    type_id = int.from_bytes(key[2:4], "big", signed=True)
    if version < 0:
        run.error(f"Invalid version found for control record: {version}. May indicate data "
                  f"corruption ({loc.describe()})")
        return None
    name = it.CONTROL_RECORD_NAMES.get(type_id)
    if name is None:
        return f" controlType: UNKNOWN({type_id})", {"type": "UNKNOWN", "type_id": type_id}
    try:
        decoded = it.decode_control_record_value(type_id, value, location=loc)
    except KafkaLogError as exc:
        run.error(f"Cannot decode {name} control record: {exc}")
        return None
    data = _kafka_json(decoded["data"], it.CONTROL_RECORD_VALUES.get(type_id), 0)
    obj = {"type": name, "type_id": type_id, "data": data}
    if type_id in (0, 1):
        return f" endTxnMarker: {name} coordinatorEpoch: {data['coordinatorEpoch']}", obj
    return _CONTROL_LABELS[type_id] + compact_json(data), obj


def parse(run: DumpRun, key: bytes | None, value: bytes | None, offset: int) -> tuple[Any, Any]:
    """The (key, value) a DumpLogSegments MessageParser returns; ``None`` prints nothing."""
    d = run.options.decoder
    if d == "string":
        return (None if key is None else key.decode("utf-8", "replace"),
                None if value is None else value.decode("utf-8", "replace"))
    if d == "cluster-metadata":
        return None, _metadata_value(value, offset)
    if d == "remote-log-metadata":  # no keys for metadata records
        return None, (remote_metadata_json if run.jsonl else remote_metadata_text)(value, offset)
    if key is None:
        run.error(f"Failed to decode message at offset {offset} using the specified decoder "
                  f"(message had a missing key) ({Location(run.arg, None, offset).describe()})")
        return None, None
    try:
        if d == "offsets":
            k = it.decode_consumer_offsets_key(key)
            if k["name"] is None:
                return f"Unknown record type {k['type']} at offset {offset}, skipping.", None
            v = it.decode_consumer_offsets_value(k, value)
            # offset commit and group metadata values have no tagged fields
            key_type, fields = k["type"], None
        else:
            k = it.decode_transaction_log_key(key)
            if k["name"] is None:
                return f"Unknown record type {k['version']} at offset {offset}, skipping.", None
            v = it.decode_transaction_log_value(value)
            key_type, fields = k["version"], it.TRANSACTION_LOG_VALUE
    except KafkaLogError as exc:
        return f"Error at offset {offset}, skipping. {exc.reason}", None
    key_json = {"type": str(key_type), "data": k["data"]}
    if v is None:
        return key_json, "<DELETE>"
    value_json: dict[str, Any] = {"version": str(v["version"]),
                                  "data": _kafka_json(v["data"], fields, v["version"])}
    if v["data"] is None:
        value_json["raw"] = v.get("raw")
    return key_json, value_json


def _metadata_value(value: bytes | None, offset: int) -> Any:
    try:
        rec = it.decode_metadata_record(value)  # type: ignore[arg-type]
    except KafkaLogError as exc:
        return f"Error at {offset}, skipping. {exc.reason}"
    if rec["name"] is None:
        return f"Error at {offset}, skipping. Unknown metadata id {rec['type']}"
    schema = it.METADATA_RECORDS.get(rec["type"])
    out: dict[str, Any] = {"type": _upper_snake(rec["name"]), "version": rec["version"],
                           "data": _kafka_json(rec["data"], schema[0] if schema else None,
                                               rec["version"])}
    if rec["data"] is None:
        out["raw"] = rec.get("raw")
    return out
