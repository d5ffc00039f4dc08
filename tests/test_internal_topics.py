"""Tests for kafkalog_spark.codec.internal.internal_topics: real __consumer_offsets keys/values with their
expected decoded text (konsumer_offsets), records pulled from real broker log dirs and KRaft
snapshots with kafka-python's record reader, hand-built flexible/tagged encodings, and
malformed input."""

from __future__ import annotations

import base64
import json
import re
import struct
from pathlib import Path
from typing import Any, Iterator

import pytest
from kafka.record import MemoryRecords

from kafkalog_spark.codec.internal.internal_topics import (decode_consumer_offsets_key,
                                                           decode_consumer_offsets_value,
                                                           decode_transaction_log_key,
                                                           decode_transaction_log_value)
from kafkalog_spark.codec.internal.kraft_records import (decode_control_record_value,
                                                         decode_end_txn_marker,
                                                         decode_metadata_record)
from kafkalog_spark.errors import CorruptRecordError, Location

KRAFT = "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data"


def _records(path: Path) -> Iterator[tuple[bool, Any]]:
    """(is control batch, record) for every record of a .log / .checkpoint file."""
    batches = MemoryRecords(path.read_bytes())
    while (batch := batches.next_batch()) is not None:
        control = bool(getattr(batch, "is_control_batch", False))
        for record in batch:
            yield control, record


# --- konsumer_offsets golden text ----------------------------------------------------------

_TOKEN = re.compile(r'\s*(?:(?P<name>[A-Za-z_]\w*)\s*(?P<open>\{)|(?P<key>\w+):|(?P<str>"(?:[^"\\]|\\.)*")'
                    r'|(?P<num>-?\d+)|(?P<lb>\[)|(?P<rb>\])|(?P<rc>\})|(?P<comma>,)|(?P<bool>true|false))')


def _parse_debug(text: str) -> Any:
    """Parse Rust ``{:#?}`` output (structs, lists, strings, ints) into dicts/lists."""
    tokens = [m for m in _TOKEN.finditer(text) if m.group(0).strip()]
    pos = 0

    def value() -> Any:
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok.group("open"):
            out = {}
            while not tokens[pos].group("rc"):
                key = tokens[pos].group("key")
                pos += 1
                out[key] = value()
                if tokens[pos].group("comma"):
                    pos += 1
            pos += 1
            return out
        if tok.group("lb"):
            items = []
            while not tokens[pos].group("rb"):
                items.append(value())
                if tokens[pos].group("comma"):
                    pos += 1
            pos += 1
            return items
        if tok.group("str"):
            return json.loads(tok.group("str"))
        if tok.group("bool"):
            return tok.group("bool") == "true"
        return int(tok.group("num"))

    return value()


def _protocol_as_konsumer(decoded: Any, kind: str) -> dict[str, Any]:
    assert isinstance(decoded, dict), decoded
    user = list(base64.b64decode(decoded["userData"] or ""))
    partitions = [{"topic": tp["topic"], "partitions": tp["partitions"]}
                  for tp in decoded.get("assignedPartitions" if kind == "assignment"
                                        else "ownedPartitions", [])]
    if kind == "assignment":
        return {"schema_version": decoded["version"], "assigned_topic_partitions": partitions,
                "user_data": user}
    return {"schema_version": decoded["version"], "subscribed_topics": decoded["topics"],
            "user_data": user, "owned_topic_partitions": partitions,
            "generation_id": decoded.get("generationId", -1),
            "rack_id": decoded.get("rackId") or ""}


def _as_konsumer(key: dict[str, Any], value: dict[str, Any]) -> dict[str, Any]:
    """Our decoded key/value in konsumer_offsets' field names and null conventions."""
    k, v = key["data"], value["data"]
    common = {"message_version": key["type"], "group": k["group"], "is_tombstone": False,
              "schema_version": value["version"]}
    if key["name"] == "OffsetCommitKey":
        return {**common, "topic": k["topic"], "partition": k["partition"],
                "offset": v["offset"], "leader_epoch": v.get("leaderEpoch", -1),
                "metadata": v["metadata"], "commit_timestamp": v["commitTimestamp"],
                "expire_timestamp": v.get("expireTimestamp", -1)}
    members = [{
        "id": m["memberId"], "group_instance_id": m.get("groupInstanceId") or "",
        "client_id": m["clientId"], "client_host": m["clientHost"],
        "rebalance_timeout": m.get("rebalanceTimeout", 0), "session_timeout": m["sessionTimeout"],
        "subscription": _protocol_as_konsumer(m["subscription"], "subscription"),
        "assignment": _protocol_as_konsumer(m["assignment"], "assignment"),
    } for m in v["members"]]
    return {**common, "protocol_type": v["protocolType"], "generation": v["generation"],
            "protocol": v["protocol"] or "", "leader": v["leader"] or "",
            "current_state_timestamp": v.get("currentStateTimestamp", -1), "members": members}


def _konsumer_cases(shared: Path) -> list[Path]:
    root = shared / "kafkesc__konsumer_offsets" / "fixtures" / "tests"
    return sorted(root.glob("*/*.key"))


def test_konsumer_offsets_golden(shared_fixtures: Path) -> None:
    cases = _konsumer_cases(shared_fixtures)
    assert len(cases) == 10
    for key_file in cases:
        key = decode_consumer_offsets_key(key_file.read_bytes())
        value = decode_consumer_offsets_value(key, key_file.with_suffix(".payload").read_bytes())
        assert value is not None
        expected = _parse_debug(key_file.with_suffix(".ts_int.fmt").read_text())
        ours = _as_konsumer(key, value)
        for field, want in expected.items():
            assert ours[field] == want, (key_file.name, field)
        assert set(expected) == set(ours), key_file
        json.dumps(key), json.dumps(value)  # plain JSON-serialisable dicts


def test_group_metadata_members_decoded(shared_fixtures: Path) -> None:
    key_file = shared_fixtures / "kafkesc__konsumer_offsets/fixtures/tests/group_metadata/03.key"
    key = decode_consumer_offsets_key(key_file.read_bytes())
    value = decode_consumer_offsets_value(key, key_file.with_suffix(".payload").read_bytes())
    assert value is not None and value["name"] == "GroupMetadataValue"
    member = value["data"]["members"][0]
    assert member["subscription"]["topics"] == ["__consumer_offsets"]
    assert member["assignment"]["assignedPartitions"][0]["partitions"] == list(range(50))


# --- real broker log dirs ------------------------------------------------------------------


@pytest.mark.parametrize("pattern", [
    "anchor123__kafka/tmp/kafka-logs/__consumer_offsets-*/*.log",
    "tuyen-nnt__kafka_2.13-3.0.0/data/kafka/__consumer_offsets-*/*.log",
    "yuanliubei__kafka-source-code/kafka-logs/__consumer_offsets-*/*.log",
    "DonaldY__kafka-2.7.1/kafka-logs/__consumer_offsets-*/*.log",
    f"{KRAFT}/__consumer_offsets-*/*.log",
])
def test_real_consumer_offsets_logs(shared_fixtures: Path, pattern: str) -> None:
    logs = sorted(shared_fixtures.glob(pattern))
    seen: dict[str, int] = {}
    for log in logs:
        for control, record in _records(log):
            if control:
                continue
            key = decode_consumer_offsets_key(record.key)
            value = decode_consumer_offsets_value(key, record.value)
            seen[key["name"]] = seen.get(key["name"], 0) + 1
            if value is None:
                continue
            assert value["data"] is not None
            if key["name"] == "OffsetCommitKey":
                assert value["data"]["offset"] >= 0 and value["data"]["commitTimestamp"] > 0
            json.dumps(value)
    assert seen.get("OffsetCommitKey", 0) + seen.get("GroupMetadataKey", 0) > 0, seen


def test_real_transaction_state(shared_fixtures: Path) -> None:
    log = shared_fixtures / KRAFT / "__transaction_state-44" / "00000000000000000000.log"
    statuses = []
    for control, record in _records(log):
        assert not control
        key = decode_transaction_log_key(record.key)
        assert key["name"] == "TransactionLogKey" and key["data"]["transactionalId"]
        value = decode_transaction_log_value(record.value)
        assert value is not None
        data = value["data"]
        assert data["producerId"] >= 0 and data["transactionTimeoutMs"] > 0
        statuses.append(data["transactionStatusName"])
    assert "CompleteCommit" in statuses and "Ongoing" in statuses, statuses


def test_kraft_snapshots(shared_fixtures: Path) -> None:
    root = shared_fixtures / KRAFT
    topic_dirs = {p.name.rsplit("-", 1)[0] for p in root.iterdir() if p.is_dir()}
    snapshot = root / "__cluster_metadata-0" / "00000000000000060500-0000000025.checkpoint"
    topics: dict[str, str] = {}
    partitions = []
    control_names = []
    for control, record in _records(snapshot):
        if control:
            type_id = struct.unpack(">h", record.key[2:4])[0]
            control_names.append(decode_control_record_value(type_id, record.value)["name"])
            continue
        rec = decode_metadata_record(record.value)
        if rec["name"] == "TopicRecord":
            topics[rec["data"]["topicId"]] = rec["data"]["name"]
        elif rec["name"] == "PartitionRecord":
            partitions.append(rec["data"])
        elif rec["name"] == "ConfigRecord":
            assert rec["data"]["name"] and rec["data"]["resourceType"] in (2, 4, 8, 16)
        else:  # every record type of Kafka 4.1 decodes (RegisterControllerRecord, ...)
            assert rec["data"] is not None, rec
    assert control_names == ["SNAPSHOT_HEADER", "SNAPSHOT_FOOTER"]
    assert {"__consumer_offsets", "__transaction_state", "patient_admissions"} <= set(topics.values())
    assert set(topics.values()) <= topic_dirs | {"__cluster_metadata"}
    assert len(partitions) > 100
    for p in partitions:
        assert p["topicId"] in topics and len(p["topicId"]) == 22
        assert p["leader"] in p["replicas"] and set(p["isr"]) <= set(p["replicas"])
        assert f"{topics[p['topicId']]}-{p['partitionId']}" in {d.name for d in root.iterdir()}


def test_kraft_bootstrap_checkpoint(shared_fixtures: Path) -> None:
    path = shared_fixtures / KRAFT / "bootstrap.checkpoint"
    records = [decode_metadata_record(r.value) for c, r in _records(path) if not c]
    assert records[0]["name"] == "FeatureLevelRecord"
    assert records[0]["data"]["name"] == "metadata.version" and records[0]["data"]["featureLevel"] > 0


# --- hand-built encodings (flexible versions, tags, control values) ------------------------


def _uv(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _cstr(s: str | None) -> bytes:
    return b"\x00" if s is None else _uv(len(s.encode()) + 1) + s.encode()


def test_offset_commit_value_v4_flexible_and_v1() -> None:
    key = decode_consumer_offsets_key(b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x07")
    v4 = struct.pack(">hqi", 4, 42, 5) + _cstr("meta") + struct.pack(">q", 1000) + _uv(0)
    assert decode_consumer_offsets_value(key, v4)["data"] == {
        "offset": 42, "leaderEpoch": 5, "metadata": "meta", "commitTimestamp": 1000}
    v1 = struct.pack(">hqh", 1, 9, 0) + struct.pack(">qq", 11, 22)
    assert decode_consumer_offsets_value(key, v1)["data"] == {
        "offset": 9, "metadata": "", "commitTimestamp": 11, "expireTimestamp": 22}
    assert decode_consumer_offsets_value(key, None) is None


def test_transaction_value_v1_tagged_fields() -> None:
    tags = (_uv(3) + _uv(0) + _uv(8) + struct.pack(">q", 77) + _uv(2) + _uv(2)
            + struct.pack(">h", 2) + _uv(9) + _uv(1) + b"\x05")
    body = (struct.pack(">hqhib", 1, 100, 3, 60000, 1)
            + _uv(2) + _cstr("orders") + _uv(3) + struct.pack(">ii", 0, 4) + _uv(0)
            + struct.pack(">qq", 123, 456) + tags)
    data = decode_transaction_log_value(body)["data"]
    assert data["transactionPartitions"] == [{"topic": "orders", "partitionIds": [0, 4]}]
    assert data["previousProducerId"] == 77 and data["nextProducerId"] == -1
    assert data["clientTransactionVersion"] == 2 and data["unknownTaggedFields"] == {"9": "BQ=="}
    assert data["transactionStatusName"] == "Ongoing"
    v0 = struct.pack(">hqhib", 0, 100, 3, 60000, 4) + struct.pack(">i", -1) + struct.pack(">qq", 1, 2)
    assert decode_transaction_log_value(v0)["data"]["transactionPartitions"] is None
    assert decode_transaction_log_key(b"\x00\x00\x00\x02tx")["data"] == {"transactionalId": "tx"}


def test_control_record_values() -> None:
    assert decode_end_txn_marker(b"\x00\x00\x00\x00\x00\x07") == {"version": 0, "coordinatorEpoch": 7}
    assert decode_control_record_value(1, b"\x00\x00\x00\x00\x00\x07")["name"] == "COMMIT"
    leader = struct.pack(">hi", 0, 1) + _uv(2) + struct.pack(">i", 1) + _uv(0) + _uv(2) \
        + struct.pack(">i", 1) + _uv(0) + _uv(0)
    assert decode_control_record_value(2, leader)["data"] == {
        "version": 0, "leaderId": 1, "voters": [{"voterId": 1}], "grantingVoters": [{"voterId": 1}]}
    voters = (struct.pack(">h", 0) + _uv(2) + struct.pack(">i", 3) + bytes(range(16))
              + _uv(2) + _cstr("CONTROLLER") + _cstr("host") + struct.pack(">H", 9093) + _uv(0)
              + struct.pack(">hh", 0, 1) + _uv(0) + _uv(0) + _uv(0))
    data = decode_control_record_value(6, voters)["data"]
    assert data["voters"][0]["endpoints"] == [{"name": "CONTROLLER", "host": "host", "port": 9093}]
    assert data["voters"][0]["kRaftVersionFeature"] == {"minSupportedVersion": 0,
                                                       "maxSupportedVersion": 1}
    assert decode_control_record_value(5, struct.pack(">hh", 0, 1) + _uv(0))["data"] == {
        "version": 0, "kRaftVersion": 1}
    assert decode_control_record_value(99, b"\xab") == {"type": 99, "name": None, "data": None,
                                                        "raw": "ab"}


def test_unknown_types_are_reported_not_fatal() -> None:
    rec = decode_metadata_record(_uv(1) + _uv(200) + _uv(0) + b"\x01\x02")
    assert rec == {"type": 200, "name": None, "version": 0, "data": None, "raw": "0102"}
    newer = decode_metadata_record(_uv(1) + _uv(2) + _uv(9) + b"\x00")
    assert newer["name"] == "TopicRecord" and newer["data"] is None
    key = decode_consumer_offsets_key(b"\x00\x63abc")
    assert key["name"] is None and decode_consumer_offsets_value(key, b"\x00\x00x")["raw"] == "78"
    key5 = decode_consumer_offsets_key(b"\x00\x05\x00\x01g\x00\x01m")
    assert key5["data"] == {"groupId": "g", "memberId": "m"}


# --- malformed input -----------------------------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda: decode_consumer_offsets_key(b"\x00"),
    lambda: decode_consumer_offsets_key(b"\x00\x01\x00\x05ab"),
    lambda: decode_consumer_offsets_key(b"\x00\x02\x00\x01gX"),  # trailing byte
    lambda: decode_consumer_offsets_key(b"\x00\x02\xff\xff"),  # null non-nullable string
    lambda: decode_consumer_offsets_value({"type": 1}, b"\x00\x03\x00"),
    lambda: decode_consumer_offsets_value({"type": 2}, b"\x00\x00\x00\x01c\x00\x00\x00\x01"
                                          b"\xff\xff\xff\xff\x7f\xff\xff\xff"),  # huge array
    lambda: decode_consumer_offsets_value({"type": 1}, b"\xff\xff"),
    lambda: decode_transaction_log_value(b"\x00\x01\x00"),
    lambda: decode_transaction_log_key(b"\x00\x00\x00\x02\xff\xfe"),  # bad UTF-8
    lambda: decode_metadata_record(b""),
    lambda: decode_metadata_record(b"\x02\x02\x00"),  # frame version 2
    lambda: decode_metadata_record(b"\x01\x02\x00\x05ab"),
    lambda: decode_metadata_record(b"\x01\x02\x00\xff\xff\xff\xff\xff\xff"),
    lambda: decode_end_txn_marker(b"\x00\x00\x00"),
    lambda: decode_end_txn_marker(b"\xff\xff\x00\x00\x00\x00"),
    lambda: decode_control_record_value(3, b"\x00\x00\x00"),
])
def test_malformed_input_raises_corrupt_record_error(call: Any) -> None:
    with pytest.raises(CorruptRecordError):
        call()


def test_errors_carry_location() -> None:
    where = Location("00000000000000000000.log", 4096, 17)
    with pytest.raises(CorruptRecordError) as info:
        decode_transaction_log_value(b"\x00\x00\x01", location=where)
    assert info.value.location == where and info.value.__cause__ is not None


def test_truncations_of_real_values_never_escape(shared_fixtures: Path) -> None:
    for key_file in _konsumer_cases(shared_fixtures):
        raw_key = key_file.read_bytes()
        key = decode_consumer_offsets_key(raw_key)
        value = key_file.with_suffix(".payload").read_bytes()
        for cut in range(len(value)):
            with pytest.raises(CorruptRecordError):
                decode_consumer_offsets_value(key, value[:cut])
        for cut in range(len(raw_key)):
            with pytest.raises(CorruptRecordError):
                decode_consumer_offsets_key(raw_key[:cut])
