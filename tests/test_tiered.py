"""Tiered storage (issue 32) without a broker: ``__remote_log_metadata`` records decoded (codec),
dumped as Kafka's DumpLogSegments prints them and migrated as a typed column; a partition's
history read from a LocalTieredStorage tier plus its log dir (offloaded by
``tests/tiered_fixtures.py`` the way the broker does it). The real broker's tier is checked in
``tests/oracle/test_tiered_broker.py``."""

from __future__ import annotations

import json

import pytest
from tiered_fixtures import (new_uuid, partition_delete_record, segment_record, update_record,
                             write_metadata_log)

from kafkalog_spark.codec.internal import remote_log_metadata as rlm
from kafkalog_spark.errors import CorruptRecordError
from kafkalog_spark.inspect.dump_remote import remote_metadata_json, remote_metadata_text

TOPIC_ID = "kXafZSMqSUW_9coAKgXGRA"


# --- the records -----------------------------------------------------------------------------

def test_segment_record_decodes_every_field():
    seg = new_uuid()
    rec = rlm.decode_remote_log_metadata(segment_record(
        TOPIC_ID, "orders", 3, seg, 100, 149, 4096, epochs=((0, 100), (2, 120)), max_ts=7,
        event_ts=9))
    assert rec["type"] == rlm.SEGMENT and rec["version"] == 0
    assert rec["name"] == "RemoteLogSegmentMetadataRecord"
    d = rec["data"]
    assert d["remoteLogSegmentId"] == {"topicIdPartition": {"name": "orders", "id": TOPIC_ID,
                                                            "partition": 3}, "id": seg}
    assert (d["startOffset"], d["endOffset"], d["segmentSizeInBytes"]) == (100, 149, 4096)
    assert (d["maxTimestampMs"], d["eventTimestampMs"], d["brokerId"]) == (7, 9, 1)
    assert d["segmentLeaderEpochs"] == [{"leaderEpoch": 0, "offset": 100},
                                        {"leaderEpoch": 2, "offset": 120}]
    assert d["customMetadata"] is None and d["txnIndexEmpty"] is True
    assert d["remoteLogSegmentState"] == rlm.COPY_SEGMENT_STARTED
    assert rlm.segment_id_of(rec) == seg
    assert rlm.topic_id_partition_of(rec) == (TOPIC_ID, "orders", 3)


def test_update_and_partition_delete_records():
    seg = new_uuid()
    upd = rlm.decode_remote_log_metadata(update_record(TOPIC_ID, "t", 0, seg, 1,
                                                       custom=b"\x01\x02\x03"))
    assert upd["data"]["remoteLogSegmentState"] == rlm.COPY_SEGMENT_FINISHED
    assert upd["data"]["customMetadata"] == "AQID"
    delete = rlm.decode_remote_log_metadata(partition_delete_record(TOPIC_ID, "t", 0, 2))
    assert delete["type"] == rlm.PARTITION_DELETE and rlm.segment_id_of(delete) is None
    assert delete["data"]["remotePartitionDeleteState"] == 2
    assert rlm.topic_id_partition_of(delete) == (TOPIC_ID, "t", 0)


@pytest.mark.parametrize("mutate, message", [
    (lambda v: b"\x02" + v[1:], "unknown frame version 2(only frame version 1 is supported)"),
    (lambda v: b"\x00" + v[1:], "frame version 0"),
    (lambda v: v[:1] + b"\x09" + v[2:], "Unknown metadata id 9"),
    (lambda v: v + b"\x00", "Found 1 byte(s) of garbage after 0"),
    (lambda v: v[:30], "Failed to deserialize record with type 0: "),
    (lambda v: v[:2] + b"\x05" + v[3:], "version 5 is above the highest known"),
    (lambda v: b"", "frame is malformed"),
])
def test_damaged_values_raise_kafkas_messages(mutate, message):
    value = segment_record(TOPIC_ID, "t", 0, new_uuid(), 0, 9, 100)
    with pytest.raises(CorruptRecordError) as info:
        rlm.decode_remote_log_metadata(mutate(value))
    assert message in info.value.reason


def test_dump_text_is_kafkas_to_string():
    seg = new_uuid()
    text = remote_metadata_text(segment_record(TOPIC_ID, "t", 1, seg, 0, 49, 11073,
                                               epochs=((3, 20), (0, 0)), max_ts=5, event_ts=6), 0)
    assert text == (
        f"RemoteLogSegmentMetadata{{remoteLogSegmentId=RemoteLogSegmentId{{topicIdPartition="
        f"{TOPIC_ID}:t-1, id={seg}}}, startOffset=0, endOffset=49, brokerId=1, "
        f"maxTimestampMs=5, eventTimestampMs=6, segmentLeaderEpochs={{0=0, 3=20}}, "
        f"segmentSizeInBytes=11073, customMetadata=Optional.empty, state=COPY_SEGMENT_STARTED, "
        f"txnIdxEmpty=true}}")
    upd = remote_metadata_text(update_record(TOPIC_ID, "t", 1, seg, 3, custom=b"xy"), 4)
    assert "customMetadata=Optional[CustomMetadata{2 bytes}], state=DELETE_SEGMENT_FINISHED" in upd
    gone = remote_metadata_text(partition_delete_record(TOPIC_ID, "t", 1, 1), 5)
    assert gone.startswith(f"RemotePartitionDeleteMetadata{{topicPartition={TOPIC_ID}:t-1, "
                           "state=DELETE_PARTITION_STARTED")


@pytest.mark.parametrize("kwargs, message", [
    ({"start": -1, "end": 5}, "Unexpected start offset = -1. StartOffset for a remote segment "
                              "cannot be negative"),
    ({"start": 9, "end": 5}, "Unexpected end offset = 5. EndOffset for a remote segment cannot "
                             "be less than startOffset = 9"),
    ({"epochs": ()}, "segmentLeaderEpochs can not be null or empty"),
    ({"state": 7}, "state can not be null"),
])
def test_dump_text_of_values_kafka_refuses_to_build(kwargs, message):
    args = {"start": 0, "end": 9, **kwargs}
    value = segment_record(TOPIC_ID, "t", 0, new_uuid(), args.pop("start"), args.pop("end"),
                           10, **args)
    assert remote_metadata_text(value, 12) == f"Error at offset 12, skipping. {message}"


def test_dump_jsonl_value_carries_state_names():
    rec = remote_metadata_json(update_record(TOPIC_ID, "t", 0, new_uuid(), 2), 0)
    assert rec["data"]["remoteLogSegmentStateName"] == "DELETE_SEGMENT_STARTED"
    json.dumps(rec)


def test_cli_dump_remote_log_metadata_decoder(tmp_path):
    from click.testing import CliRunner

    from kafkalog_spark.cli import cli

    seg = new_uuid()
    write_metadata_log(tmp_path, [segment_record(TOPIC_ID, "t", 0, seg, 0, 9, 100),
                                  update_record(TOPIC_ID, "t", 0, seg, 1), b"\x01\x07\x00"])
    log = next((tmp_path / "__remote_log_metadata-0").glob("*.log"))
    res = CliRunner().invoke(cli, ["dump", "--remote-log-metadata-decoder", "--files", str(log)])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if "payload:" in ln]
    assert len(lines) == 3 and "keySize: -1" in lines[0] and " key: " not in lines[0]
    assert lines[0].endswith("state=COPY_SEGMENT_STARTED, txnIdxEmpty=true}")
    assert "state=COPY_SEGMENT_FINISHED" in lines[1]
    assert lines[2].endswith("payload: Error at offset 2, skipping. org.apache.kafka.common."
                             "errors.UnsupportedVersionException: Unknown metadata id 7")
    res = CliRunner().invoke(cli, ["dump", "--remote-log-metadata-decoder", "--format", "jsonl",
                                    "--files", str(log)])
    values = [json.loads(ln)["value"] for ln in res.output.splitlines()
              if json.loads(ln)["type"] == "record"]
    assert values[1]["data"]["remoteLogSegmentStateName"] == "COPY_SEGMENT_FINISHED"


def test_migrate_column_types_remote_log_metadata(tmp_path):
    import kafkalog_spark as kl
    from kafkalog_spark.delta.columns import INTERNAL_COLUMNS, _internal

    seg = new_uuid()
    write_metadata_log(tmp_path, [segment_record(TOPIC_ID, "t", 2, seg, 50, 99, 777),
                                  update_record(TOPIC_ID, "t", 2, seg, 1, custom=b"z"),
                                  b"\x02\x00\x00"])
    batch = kl.read_log(tmp_path).to_batches()[0]
    rows = _internal(batch, *INTERNAL_COLUMNS["remoteLogMetadata"]).to_pylist()
    assert rows[0]["segmentId"] == seg and rows[0]["topic"] == "t" and rows[0]["partition"] == 2
    assert (rows[0]["startOffset"], rows[0]["endOffset"], rows[0]["segmentSizeInBytes"]) == \
        (50, 99, 777)
    assert rows[0]["stateName"] == "COPY_SEGMENT_STARTED"
    assert rows[1]["stateName"] == "COPY_SEGMENT_FINISHED" and rows[1]["customMetadata"] == b"z"
    assert rows[1]["startOffset"] is None
    assert "unknown frame version 2" in rows[2]["decodeError"]
