"""Record details in a dump (inspect layer): control record lines and the key/value printed by the
string, offsets, transaction-log, cluster-metadata and remote-log-metadata decoders
(DumpLogSegments' MessageParsers).

Decoder JSON comes from :mod:`kafkalog_spark.codec.internal.internal_topics`; record types (or
versions) it has no field table for print their bytes as ``"data":null,"raw":"<hex>"`` where
Kafka would print the fields. Strings and doubles come out as the JVM makes them
(:func:`java_string`, :func:`java_double`).
"""

from __future__ import annotations

import codecs
import math
import re
from decimal import Decimal
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


def _java_replace(exc: UnicodeError) -> tuple[str, int]:
    """Decode error handler: one U+FFFD for the bytes Java's UTF-8 decoder (``new String(bytes,
    UTF_8)``, what Kafka's StringDecoder calls) takes as one malformed sequence.

    Python replaces each maximal valid prefix (Unicode's "maximal subpart" practice); so does
    Java, except for a three-byte lead: Java reads the lead and up to two continuation bytes
    before it judges, so ``ED A0..BF`` (a UTF-16 surrogate's encoding) with its continuation
    byte or none is one replacement where Python makes one per byte. Checked against the JVM
    over every sequence of 1-4 bytes drawn from 30 boundary byte values, and 200,000 longer
    random ones.
    """
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    data, i = exc.object, exc.start
    n = exc.end - i
    if 0xE0 <= data[i] <= 0xEF and i + 1 < len(data):
        b2 = data[i + 1]
        if not 0x80 <= b2 <= 0xBF or (data[i] == 0xE0 and b2 < 0xA0):
            n = 1
        elif i + 2 < len(data) and not 0x80 <= data[i + 2] <= 0xBF:
            n = 2
        else:
            n = min(3, len(data) - i)
    return "\ufffd", i + n


codecs.register_error("kafkalog-java-replace", _java_replace)


def java_string(raw: bytes | None) -> str | None:
    """Bytes as Kafka's StringDecoder turns them into a string (``None`` stays ``None``)."""
    return None if raw is None else raw.decode("utf-8", "kafkalog-java-replace")


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
        return java_string(key), java_string(value)
    if d == "cluster-metadata":
        return None, _metadata_value(run, value, offset)
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
            if v is not None and v["name"] == "GroupMetadataValue":
                v = {**v, "data": _without_protocol_versions(v["data"])}
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


def _without_protocol_versions(data: dict[str, Any]) -> dict[str, Any]:
    """A consumer group's members as Kafka's dump prints them: their decoded subscription and
    assignment without the embedded protocol version the codec keeps
    (``ConsumerProtocol{Subscription,Assignment}JsonConverter.write`` writes the fields only)."""
    def fields_only(protocol: Any) -> Any:
        if not isinstance(protocol, dict):  # left as base64: did not parse
            return protocol
        return {k: v for k, v in protocol.items() if k != "version"}

    return {**data, "members": [{**m, "subscription": fields_only(m["subscription"]),
                                 "assignment": fields_only(m["assignment"])}
                                for m in data["members"]]}


def _metadata_value(run: DumpRun, value: bytes | None, offset: int) -> Any:
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
    quota = rec["data"].get("value") if rec["name"] == "ClientQuotaRecord" and rec["data"] else None
    if isinstance(quota, float) and not run.jsonl:  # its float64 as Java prints it: as text
        stand_in = "\0kafkalog-double\0"
        text = compact_json({**out, "data": {**out["data"], "value": stand_in}})
        head, _, tail = text.rpartition(compact_json(stand_in))  # "value" follows the strings
        return head + java_double(quota) + tail
    return out


def java_double(x: float) -> str:
    """A double as Jackson writes it: Java's ``Double.toString`` (shortest digits that read
    back; plain from 10^-3 to 10^7, else ``d.dddE<n>``) and non-numbers as strings. JDK 19+
    prints exactly this; JDK 17 prints some values needing 16-17 digits with one more digit
    (``1.9999999999999998E23`` for ``2.0E23``)."""
    if math.isnan(x) or math.isinf(x):
        return '"NaN"' if math.isnan(x) else '"Infinity"' if x > 0 else '"-Infinity"'
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    shortest = Decimal(repr(abs(x))).normalize().as_tuple()
    digits = "".join(map(str, shortest.digits))
    n = len(digits) + int(shortest.exponent) - 1  # the decimal exponent of the first digit
    sign = "-" if x < 0 else ""
    if n >= 7 or n < -3:
        return f"{sign}{digits[0]}.{digits[1:] or '0'}E{n}"
    if n < 0:
        return f"{sign}0.{'0' * (-n - 1)}{digits}"
    return f"{sign}{digits[:n + 1].ljust(n + 1, '0')}.{digits[n + 1:] or '0'}"
