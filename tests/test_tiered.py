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


# --- a partition's history: remote segments, then local ones -------------------------------

import shutil  # noqa: E402

import pyarrow as pa  # noqa: E402
from tiered_fixtures import (offload, set_log_start, tier_folder,  # noqa: E402
                             topic_id_of)

import kafkalog_spark as kl  # noqa: E402
from kafkalog_spark.errors import InvalidOptionError, RemoteTierError  # noqa: E402

TOPIC = "events"


def _log(tmp_path, partitions=1, n=600):
    """A log dir of ``partitions`` partitions of ``n`` records each, in segments of ~8 KiB;
    returns it and what it holds."""
    log_dir = tmp_path / "logs"
    rows = [{"partition": p, "key": f"k{i % 7}".encode(), "value": (b"v%05d" % i) * 20}
            for p in range(partitions) for i in range(n)]
    kl.write_log(pa.Table.from_pylist(rows), log_dir, topic=TOPIC, segment_bytes=8 << 10,
                 max_batch_records=20, index_interval_bytes=1024)
    return log_dir, kl.read_log(log_dir)


def _offsets(table, partition=0):
    return [o for o, p in zip(table.column("offset").to_pylist(),
                              table.column("partition").to_pylist()) if p == partition]


@pytest.mark.parametrize("metadata", [True, False], ids=["metadata", "listing"])
def test_history_is_remote_then_local_each_offset_once(tmp_path, metadata):
    log_dir, before = _log(tmp_path)
    off = offload(log_dir, TOPIC, 0, tmp_path / "tier", 4, metadata=metadata)
    local = kl.read_log(log_dir, topics=[TOPIC])
    assert _offsets(local)[0] == off.segments[-1][2] + 1  # the log dir alone: only its tail
    whole = kl.read_log(log_dir, topics=[TOPIC], remote_tier=tmp_path / "tier")
    assert whole.equals(before.select(whole.column_names))
    # the kafka-tiered-storage folder itself names the tier too
    again = kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.folder.parent,
                        remote_tier_layout="local-tiered-storage")
    assert again.equals(whole)


def test_history_windows_and_columns(tmp_path):
    log_dir, before = _log(tmp_path)
    off = offload(log_dir, TOPIC, 0, tmp_path / "tier", 3)
    cut = off.segments[1][1] + 5  # inside the second remote segment
    t = kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier, start_offset=cut,
                    end_offset=off.segments[2][2] + 10, columns=["offset", "value"])
    assert t.column("offset").to_pylist() == list(range(cut, off.segments[2][2] + 10))
    assert t.column("value").to_pylist() == before.column("value").to_pylist()[
        cut:off.segments[2][2] + 10]


def test_a_segment_held_locally_too_is_read_once(tmp_path):
    log_dir, before = _log(tmp_path)
    # the broker copied four segments and deleted only three locally so far
    off = offload(log_dir, TOPIC, 0, tmp_path / "tier", 4, keep_local=1)
    whole = kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier)
    assert _offsets(whole) == list(range(before.num_rows))
    [part] = [p for p in _parts(log_dir, off.tier) if p.topic == TOPIC]
    assert part.remote.remote_segments == 3 and len(part.remote.held_locally) == 1
    assert part.remote.gaps == () and part.remote.overlaps == ()


def _parts(log_dir, tier):
    from kafkalog_spark.log.discovery import discover
    from kafkalog_spark.log.history import with_remote_tier
    from kafkalog_spark.tiered.tier import remote_tier

    found = discover(log_dir)
    return with_remote_tier(list(found.log_dirs[0].partitions), remote_tier(tier), found)


def test_a_remote_segment_running_into_the_local_log_is_cut_there(tmp_path):
    """A remote copy of offsets 0..N whose later part the local log holds in another
    segmentation (a leader that rolled elsewhere): offsets before the local log from the
    tier, the rest from the log dir, each once, and the overlap reported."""
    log_dir, before = _log(tmp_path)
    pdir = log_dir / f"{TOPIC}-0"
    logs = sorted(pdir.glob("*.log"))
    off = offload(log_dir, TOPIC, 0, tmp_path / "tier", 1, metadata=False)
    seg_id, start, _, _ = off.segments[0]
    remote = off.folder / f"{start:020d}-{seg_id}.log"
    remote.write_bytes(remote.read_bytes() + logs[1].read_bytes())  # runs into the local log
    whole = kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier)
    assert _offsets(whole) == list(range(before.num_rows))
    [part] = [p for p in _parts(log_dir, off.tier) if p.topic == TOPIC]
    assert len(part.remote.overlaps) == 1 and f"{logs[1].stem.lstrip('0')}" in \
        part.remote.overlaps[0]
    assert part.segments[0].last_offset == int(logs[1].stem) - 1


def test_unfinished_copy_is_not_read_and_its_gap_refused(tmp_path):
    log_dir, before = _log(tmp_path)
    off = offload(log_dir, TOPIC, 0, tmp_path / "tier", 3, finish=False)
    with pytest.raises(RemoteTierError, match=r"offsets 0\.\.\d+ are in no segment"):
        kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier)
    [part] = [p for p in _parts(log_dir, off.tier) if p.topic == TOPIC]
    assert all("COPY_SEGMENT_STARTED" in line for line in part.remote.not_read)
    assert part.remote.gaps == ((0, off.segments[-1][2]),)
    # after the gap the history reads (what a consumer could still fetch)
    tail = kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier,
                       start_offset=off.segments[-1][2] + 1)
    assert _offsets(tail)[0] == off.segments[-1][2] + 1


@pytest.mark.parametrize("state", [2, 3], ids=["delete-started", "delete-finished"])
def test_deleted_remote_segment_is_not_read(tmp_path, state):
    log_dir, before = _log(tmp_path)
    off = offload(log_dir, TOPIC, 0, tmp_path / "tier", 3)
    tid = topic_id_of(log_dir / f"{TOPIC}-0")
    first = off.segments[0]
    write_metadata_log(log_dir, [update_record(tid, TOPIC, 0, first[0], state)])
    with pytest.raises(RemoteTierError, match=rf"offsets 0\.\.{first[2]} are in no segment"):
        kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier)
    # retention moved the log start past it: the history starts there, no gap
    set_log_start(log_dir, TOPIC, 0, first[2] + 1)
    t = kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier)
    assert _offsets(t) == list(range(first[2] + 1, before.num_rows))


def test_a_deleted_partition_has_no_remote_segments(tmp_path):
    log_dir, _ = _log(tmp_path)
    off = offload(log_dir, TOPIC, 0, tmp_path / "tier", 2)
    tid = topic_id_of(log_dir / f"{TOPIC}-0")
    write_metadata_log(log_dir, [partition_delete_record(tid, TOPIC, 0, 0)])
    [part] = [p for p in _parts(log_dir, off.tier) if p.topic == TOPIC]
    assert part.remote.remote_segments == 0
    assert all("DELETE_PARTITION_MARKED" in line for line in part.remote.not_read)


def test_overlapping_remote_segments_are_refused(tmp_path):
    log_dir, _ = _log(tmp_path)
    off = offload(log_dir, TOPIC, 0, tmp_path / "tier", 2)
    tid = topic_id_of(log_dir / f"{TOPIC}-0")
    seg_id, start, end, size = off.segments[1]
    other = new_uuid()  # a second copy of the same offsets (divergent leaders)
    for f in off.folder.glob(f"*-{seg_id}.*"):
        shutil.copyfile(f, off.folder / f.name.replace(seg_id, other))
    write_metadata_log(log_dir, [segment_record(tid, TOPIC, 0, other, start, end, size),
                                 update_record(tid, TOPIC, 0, other, 1)])
    with pytest.raises(RemoteTierError, match="remote segments overlap each other"):
        kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier)


def test_a_copied_segment_missing_from_the_tier_is_an_error(tmp_path):
    log_dir, _ = _log(tmp_path)
    off = offload(log_dir, TOPIC, 0, tmp_path / "tier", 2)
    seg_id, start = off.segments[1][:2]
    (off.folder / f"{start:020d}-{seg_id}.index").unlink()
    with pytest.raises(RemoteTierError, match=r"has no \.index in the tier"):
        kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier)
    (off.folder / f"{start:020d}-{seg_id}.log").write_bytes(b"")
    (off.folder / f"{start:020d}-{seg_id}.index").write_bytes(b"")
    with pytest.raises(RemoteTierError, match="recorded"):
        kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier)


def test_a_listed_tier_with_an_incomplete_copy_is_a_gap_not_a_skip(tmp_path):
    log_dir, _ = _log(tmp_path)
    off = offload(log_dir, TOPIC, 0, tmp_path / "tier", 3, metadata=False)
    seg_id, start, end = off.segments[1][:3]
    (off.folder / f"{start:020d}-{seg_id}.index").unlink()  # a copy the RSM did not finish
    # the segment before it ends where it began, so its offsets are a gap, refused by name
    with pytest.raises(RemoteTierError, match=f"offsets {start}..{end} are in no segment"):
        kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier)
    around = kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier, end_offset=start)
    assert around.column("offset").to_pylist() == list(range(start))


def test_a_wrong_tier_is_an_error_not_the_local_tail(tmp_path):
    log_dir, _ = _log(tmp_path)
    off = offload(log_dir, TOPIC, 0, tmp_path / "tier", 2)
    with pytest.raises(RemoteTierError, match="remote tier not found"):
        kl.read_log(log_dir, remote_tier=tmp_path / "no-such-tier")
    with pytest.raises(RemoteTierError, match="no kafka-tiered-storage/ folder"):
        kl.read_log(log_dir, remote_tier=log_dir)
    empty = tmp_path / "empty" / "kafka-tiered-storage"
    empty.mkdir(parents=True)
    # a tier without this partition's folder: the copies the metadata lists are missing...
    with pytest.raises(RemoteTierError, match="copied remote segment.* but no folder in the tier"):
        kl.read_log(log_dir, topics=[TOPIC], remote_tier=empty.parent)
    # ... and without the metadata, the offsets below the log dir are
    shutil.rmtree(log_dir / "__remote_log_metadata-0")
    with pytest.raises(RemoteTierError, match=rf"offsets 0\.\.{off.segments[-1][2]} are in no"):
        kl.read_log(log_dir, topics=[TOPIC], remote_tier=empty.parent)


def test_options_refused(tmp_path):
    log_dir, _ = _log(tmp_path)
    with pytest.raises(InvalidOptionError, match="without a remote tier"):
        kl.read_log(log_dir, remote_tier_layout="local-tiered-storage")
    with pytest.raises(InvalidOptionError, match="must be one of local-tiered-storage, aiven"):
        kl.read_log(log_dir, remote_tier=tmp_path, remote_tier_layout="s3-tiered")


def test_the_folder_of_an_earlier_topic_with_that_name_is_not_read(tmp_path):
    log_dir, before = _log(tmp_path)
    off = offload(log_dir, TOPIC, 0, tmp_path / "tier", 2)
    stale = tier_folder(off.tier, TOPIC, 0, new_uuid())
    shutil.copytree(off.folder, stale)
    for f in off.folder.iterdir():  # the real one empty: the stale copy must not stand in
        f.unlink()
    with pytest.raises(RemoteTierError, match="no .log, .index, .timeindex in the tier|folder"):
        kl.read_log(log_dir, topics=[TOPIC], remote_tier=off.tier)


def test_metadata_of_a_partition_dir_named_directly_comes_from_its_log_dir(tmp_path):
    log_dir, before = _log(tmp_path)
    off = offload(log_dir, TOPIC, 0, tmp_path / "tier", 3, finish=False)
    # the copies never finished: with the metadata at hand none is read
    with pytest.raises(RemoteTierError, match="in no segment"):
        kl.read_log(log_dir / f"{TOPIC}-0", remote_tier=off.tier)


# --- the commands ------------------------------------------------------------------------------

def _run(capsys, *args):
    from kafkalog_spark.cli import main

    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:  # verify's exit 1, as the kafkalog script ends
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_info_lists_remote_segments_and_says_what_is_missing(tmp_path, capsys):
    log_dir, before = _log(tmp_path)
    off = offload(log_dir, TOPIC, 0, tmp_path / "tier", 3)
    code, out, _ = _run(capsys, "info", log_dir)
    assert code == 0
    row = next(line for line in out.splitlines() if line.strip().startswith(f"{TOPIC}-0"))
    first_local = off.segments[-1][2] + 1
    assert f"offsets 0..{first_local - 1} not here (tiered storage? --remote-tier)" in row
    code, out, _ = _run(capsys, "info", log_dir, "--remote-tier", off.tier)
    row = next(line for line in out.splitlines() if line.strip().startswith(f"{TOPIC}-0"))
    assert f"0..{before.num_rows - 1}" in row and "3 remote" in row and "not here" not in row
    assert "3 remote segment(s) from remote tier" in out and "listed by __remote_log_metadata" \
        in out
    code, out, _ = _run(capsys, "info", "--json", log_dir, "--remote-tier", off.tier)
    [part] = [p for p in json.loads(out)["log_dirs"][0]["partitions"] if p["topic"] == TOPIC]
    assert part["remote"]["remote_segments"] == 3 and part["start_offset"] == 0
    assert [s["remote_id"] for s in part["segments"][:3]] == [s[0] for s in off.segments]
    assert part["records"] == before.num_rows


def test_info_and_verify_report_unfinished_copies_and_gaps(tmp_path, capsys):
    log_dir, _ = _log(tmp_path)
    off = offload(log_dir, TOPIC, 0, tmp_path / "tier", 2, finish=False)
    code, out, _ = _run(capsys, "info", log_dir, "--remote-tier", off.tier)
    assert code == 0
    assert out.count("not read: ") == 2 and "COPY_SEGMENT_STARTED" in out
    assert f"GAP: offsets 0..{off.segments[-1][2]} are in no segment" in out
    code, out, _ = _run(capsys, "verify", "--local", log_dir, "--remote-tier", off.tier)
    assert code == 1
    assert f"offsets 0..{off.segments[-1][2]} are in no segment" in out
    assert "not read: " in out


def test_verify_checks_remote_segments_too(tmp_path, capsys):
    log_dir, _ = _log(tmp_path)
    off = offload(log_dir, TOPIC, 0, tmp_path / "tier", 3)
    code, out, _ = _run(capsys, "verify", "--local", "--json", log_dir, "--remote-tier", off.tier)
    rep = json.loads(out)
    assert code == 0 and rep["ok"]
    local = kl.discover(log_dir).log_dirs[0]
    segs = sum(len(p.segments) for p in local.partitions)
    assert rep["segments"] == segs + 3
    # a remote copy damaged: verify finds it, naming the tier's file
    seg_id, start = off.segments[1][:2]
    log = off.folder / f"{start:020d}-{seg_id}.log"
    raw = bytearray(log.read_bytes())
    raw[100] ^= 0xFF
    log.write_bytes(bytes(raw))
    code, out, _ = _run(capsys, "verify", "--local", "--json", log_dir, "--remote-tier", off.tier)
    rep = json.loads(out)
    assert code == 1 and any(p["file"] == str(log) for p in rep["problems"])


def test_dump_with_a_remote_tier(tmp_path, capsys):
    log_dir, _ = _log(tmp_path)
    off = offload(log_dir, TOPIC, 0, tmp_path / "tier", 2)
    seg_id, start = off.segments[1][:2]
    remote_log = off.folder / f"{start:020d}-{seg_id}.log"
    code, out, err = _run(capsys, "dump", remote_log)
    assert code == 2 and "a remote tier's copy of a segment; dump it with --remote-tier" in err
    code, out, _ = _run(capsys, "dump", "--remote-tier", off.tier, remote_log,
                        remote_log.with_suffix(".index"))
    assert code == 0 and f"Log starting offset: {start}" in out
    assert f"baseOffset: {start} " in out and "offset: " in out
    code, out, _ = _run(capsys, "dump", "--remote-tier", off.tier, log_dir / f"{TOPIC}-0")
    dumped = [line.split()[1] for line in out.splitlines() if line.startswith("Dumping ")]
    assert dumped[0].endswith(f"{0:020d}-{off.segments[0][0]}.log")
    assert any(d.startswith(str(log_dir)) for d in dumped)


@pytest.mark.parametrize("command", ["compact", "retain", "recover", "erase", "restore"])
def test_maintenance_commands_refuse_a_remote_tier(tmp_path, capsys, command):
    log_dir, _ = _log(tmp_path)
    before = sorted((p.name, p.stat().st_size) for p in log_dir.rglob("*"))
    extra = {"erase": ["--topic", TOPIC, "--where", "true"], "restore": []}.get(command, [])
    args = [command, log_dir, *extra, "--remote-tier", tmp_path / "tier"]
    if command == "restore":
        args = ["restore", tmp_path / "table", log_dir, "--remote-tier", tmp_path / "tier"]
    code, out, err = _run(capsys, *args)
    assert code == 2
    assert err.count("\n") == 1 and "does not change a remote tier: the broker owns it" in err
    assert sorted((p.name, p.stat().st_size) for p in log_dir.rglob("*")) == before


def test_migrate_with_and_without_the_remote_tier(tmp_path, capsys):
    log_dir, before = _log(tmp_path)
    off = offload(log_dir, TOPIC, 0, tmp_path / "tier", 3)
    dest = tmp_path / "lake"
    # without the tier the run would start at the first local offset: refused, saying why
    code, _, err = _run(capsys, "migrate", log_dir, dest, "--topic", TOPIC)
    assert code == 2 and "with tiered storage they are in the remote tier" in err
    code, out, _ = _run(capsys, "migrate", log_dir, dest, "--topic", TOPIC, "--json",
                        "--remote-tier", off.tier)
    assert code == 0 and json.loads(out)["records"] == before.num_rows
    import deltalake

    table = deltalake.DeltaTable(str(dest / TOPIC)).to_pyarrow_table()
    assert sorted(table.column("offset").to_pylist()) == list(range(before.num_rows))
    code, out, _ = _run(capsys, "migrate", log_dir, dest, "--topic", TOPIC, "--json",
                        "--remote-tier", off.tier)
    assert code == 0 and json.loads(out)["records"] == 0  # a second run: nothing new


def test_data_source_options_plan_remote_splits(tmp_path):
    from kafkalog_spark.datasource.options import parse_read_options
    from kafkalog_spark.datasource.plan import plan_scan
    from kafkalog_spark.datasource.reader import read_split

    log_dir, before = _log(tmp_path)
    off = offload(log_dir, TOPIC, 0, tmp_path / "tier", 3)
    opts = parse_read_options({"path": str(log_dir), "subscribe": TOPIC,
                               "remoteTier": str(off.tier), "maxBytesPerPartition": "4096"})
    splits = plan_scan(opts).splits
    remote = [s for s in splits if s.segment.remote_id is not None]
    # remote segments are cut like local ones: several byte ranges each
    assert {s.segment.remote_id for s in remote} == {s[0] for s in off.segments}
    assert len(remote) > 3
    rows = [o for s in splits for b in read_split(s, opts) for o in b.column("offset").to_pylist()]
    assert rows == list(range(before.num_rows))
    with pytest.raises(InvalidOptionError, match="without a remote tier"):
        parse_read_options({"path": str(log_dir), "remoteTierLayout": "local-tiered-storage"})
    with pytest.raises(RemoteTierError, match="remote tier not found"):
        parse_read_options({"path": str(log_dir), "remoteTier": str(tmp_path / "nope")})


@pytest.mark.spark
def test_spark_reads_the_history_with_executors_reading_the_tier(spark, tmp_path):
    log_dir, before = _log(tmp_path, partitions=2)
    off0 = offload(log_dir, TOPIC, 0, tmp_path / "tier", 3)
    offload(log_dir, TOPIC, 1, tmp_path / "tier", 2)
    df = (spark.read.format("kafkalog").option("remoteTier", str(off0.tier))
          .option("subscribe", TOPIC).option("maxBytesPerPartition", "4096").load(str(log_dir)))
    got = df.select("partition", "offset", "value").orderBy("partition", "offset").collect()
    want = sorted(zip(before.column("partition").to_pylist(), before.column("offset").to_pylist(),
                      before.column("value").to_pylist()))
    assert [(r.partition, r.offset, bytes(r.value)) for r in got] == want
    assert df.rdd.getNumPartitions() > 1
    window = (spark.read.format("kafkalog").option("remoteTier", str(off0.tier))
              .option("assign", json.dumps({TOPIC: [0]}))
              .option("startingOffsets", json.dumps({TOPIC: {"0": 30}}))
              .option("endingOffsets", json.dumps({TOPIC: {"0": 90}})).load(str(log_dir)))
    assert [r.offset for r in window.select("offset").orderBy("offset").collect()] == \
        list(range(30, 90))
