"""Checkpoint and metadata text files: every real file parses and re-formats identically, Kafka's
reader rules, leader epoch cache rules, and the atomic write protocol."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafkalog_spark.codec.files.checkpoints import (EpochEntry, assign_leader_epoch,
                                                    format_leader_epoch_checkpoint,
                                                    format_offset_checkpoint, load_leader_epochs,
                                                    parse_checkpoint, parse_leader_epoch_checkpoint,
                                                    parse_offset_checkpoint,
                                                    truncate_epochs_from_end,
                                                    truncate_epochs_from_start)
from kafkalog_spark.codec.files.properties import (MetaProperties, format_clean_shutdown,
                                                   format_java_properties, format_meta_properties,
                                                   format_partition_metadata, java_date_string,
                                                   parse_clean_shutdown, parse_java_properties,
                                                   parse_meta_properties, parse_partition_metadata,
                                                   random_uuid, uuid_from_string, uuid_to_string)
from kafkalog_spark.errors import CorruptCheckpointError, InvalidOptionError, KafkaLogError
from kafkalog_spark.storage.atomic import (atomic_write_bytes, fsync_dir, read_checkpoint_file,
                                           write_checkpoint_file)

OFFSET_FILES = ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                "replication-offset-checkpoint", "cleaner-offset-checkpoint"]


@pytest.mark.fixtures
@pytest.mark.parametrize("name", OFFSET_FILES)
def test_real_offset_checkpoints(shared_fixtures: Path, name: str) -> None:
    files = sorted(shared_fixtures.glob(f"**/{name}"))
    assert len(files) >= 5
    for f in files:
        offsets = read_checkpoint_file(f, parse_offset_checkpoint)
        text = f.read_text()
        if text:  # a never-written file is empty; Kafka's writer would emit "0\n0\n"
            assert format_offset_checkpoint(offsets) == text, f
        else:
            assert offsets == {}


@pytest.mark.fixtures
def test_real_offset_checkpoint_values(shared_fixtures: Path) -> None:
    d = shared_fixtures / "DonaldY__kafka-2.7.1/kafka-logs"
    cleaner = read_checkpoint_file(d / "cleaner-offset-checkpoint", parse_offset_checkpoint)
    assert cleaner == {("__consumer_offsets", 28): 2, ("__consumer_offsets", 17): 1,
                       ("__consumer_offsets", 39): 18}


@pytest.mark.fixtures
def test_real_leader_epoch_checkpoints(shared_fixtures: Path) -> None:
    files = sorted(shared_fixtures.glob("**/leader-epoch-checkpoint"))
    assert len(files) > 300
    nonempty = 0
    for f in files:
        entries = read_checkpoint_file(f, parse_leader_epoch_checkpoint)
        text = f.read_text()
        if text:
            nonempty += 1
            assert format_leader_epoch_checkpoint(entries) == text, f
        assert load_leader_epochs(entries) == entries  # what brokers write is already monotone
    assert nonempty > 250
    metadata = shared_fixtures / ("ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/"
                                  "kafka-data/__cluster_metadata-0/leader-epoch-checkpoint")
    entries = read_checkpoint_file(metadata, parse_leader_epoch_checkpoint)
    assert entries[0] == EpochEntry(1, 0) and entries[-1] == EpochEntry(25, 53298) and len(entries) == 25


@pytest.mark.fixtures
def test_real_partition_metadata(shared_fixtures: Path) -> None:
    files = sorted(shared_fixtures.glob("**/partition.metadata"))
    assert len(files) > 100
    for f in files:
        meta = read_checkpoint_file(f, parse_partition_metadata)
        assert format_partition_metadata(meta.topic_id, meta.version) == f.read_text()
    cluster = shared_fixtures.glob("**/__cluster_metadata-0/partition.metadata")
    meta = read_checkpoint_file(next(cluster), parse_partition_metadata)
    assert meta.topic_id == bytes(15) + b"\x01" and meta.topic_id_text == "AAAAAAAAAAAAAAAAAAAAAQ"


@pytest.mark.fixtures
def test_real_meta_properties(shared_fixtures: Path) -> None:
    files = sorted(shared_fixtures.glob("**/meta.properties"))
    assert len(files) >= 6
    versions = set()
    for f in files:
        text = f.read_text()
        meta = read_checkpoint_file(f, parse_meta_properties)
        versions.add(meta.version)
        date = text.splitlines()[1][1:]
        assert format_meta_properties(meta, date=date) == text, f
    assert versions == {0, 1}
    kraft = next(shared_fixtures.glob("ItumelengMogase*/kafka-data/meta.properties"))
    meta = read_checkpoint_file(kraft, parse_meta_properties)
    assert (meta.version, meta.node_id, meta.cluster_id) == (1, 1, "MkU3OEVBNTcwNTJENDM2Qk")
    assert meta.directory_id is not None and uuid_to_string(meta.directory_id) == "ROP8qUaSlk7r55i85yz4Cg"


@pytest.mark.fixtures
def test_real_clean_shutdown_markers(shared_fixtures: Path) -> None:
    kraft = next(shared_fixtures.glob("ItumelengMogase*/kafka-data/.kafka_cleanshutdown"))
    assert parse_clean_shutdown(kraft.read_text()) == 53326
    assert format_clean_shutdown(53326) == kraft.read_text()
    old = next(shared_fixtures.glob("yuanliubei*/kafka-logs/.kafka_cleanshutdown"))
    assert parse_clean_shutdown(old.read_text()) is None


# ------------------------------------------------------------------------------------------
# reader rules
# ------------------------------------------------------------------------------------------
def test_generic_reader_rules() -> None:
    assert parse_offset_checkpoint("") == {}
    assert parse_offset_checkpoint("0\n") == {}
    assert parse_offset_checkpoint("0\n0\n") == {}
    assert parse_offset_checkpoint("0\r\n1\r\nt 0 5\r\n") == {("t", 0): 5}
    assert parse_offset_checkpoint("0\n1\nt\t0   5  \n") == {("t", 0): 5}  # trailing parts dropped
    assert parse_offset_checkpoint("0\n2\nt 0 5\nt 0 7\n") == {("t", 0): 7}
    assert format_offset_checkpoint({}) == "0\n0\n"


@pytest.mark.parametrize("text, match, line", [
    ("1\n0\n", "unrecognised version 1", 1),
    ("x\n", "malformed version", 1),
    ("0\nnope\n", "malformed entry count", 2),
    ("0\n2\nt 0 5\n", "expected 2 entries but found 1", None),
    ("0\n1\nt 0\n", "malformed line", 3),
    ("0\n1\n t 0 5\n", "malformed line", 3),  # leading whitespace: String.split keeps an empty part
    ("0\n1\nt 0 5\n\n", "malformed line", 4),
    ("0\n1\nt 0 1_0\n", "malformed line", 3),
    ("0\n1\nt 2147483648 5\n", "malformed line", 3),
])
def test_malformed_offset_checkpoints(text: str, match: str, line: int | None) -> None:
    with pytest.raises(CorruptCheckpointError, match=match) as err:
        parse_offset_checkpoint(text, file="/d/recovery-point-offset-checkpoint")
    assert err.value.file == "/d/recovery-point-offset-checkpoint"
    if line is not None:
        assert f"at line {line}" in str(err.value)
        assert err.value.position == len("".join(text.splitlines(keepends=True)[: line - 1]).encode())


def test_format_rejects_topic_with_space() -> None:
    with pytest.raises(InvalidOptionError):
        format_offset_checkpoint({("my topic", 0): 1})


def test_generic_checkpoint_with_custom_entries() -> None:
    assert parse_checkpoint("3\n2\na\nb\n", 3, lambda s: s.upper()) == ["A", "B"]


# ------------------------------------------------------------------------------------------
# leader epoch cache
# ------------------------------------------------------------------------------------------
def test_leader_epoch_assign_rules() -> None:
    cache = assign_leader_epoch([], 1, 0)
    cache = assign_leader_epoch(cache, 2, 10)
    assert cache == [EpochEntry(1, 0), EpochEntry(2, 10)]
    assert assign_leader_epoch(cache, 2, 15) == cache  # same epoch, higher offset: no change
    assert assign_leader_epoch(cache, 2, 5) == [EpochEntry(1, 0), EpochEntry(2, 5)]
    assert assign_leader_epoch(cache, 3, 10) == [EpochEntry(1, 0), EpochEntry(3, 10)]
    assert assign_leader_epoch(cache, 1, 20) == [EpochEntry(1, 20)]  # lower epoch wipes higher ones
    with pytest.raises(InvalidOptionError):
        assign_leader_epoch(cache, -1, 0)
    assert load_leader_epochs([EpochEntry(1, 0), EpochEntry(3, 5), EpochEntry(2, 7)]) == [
        EpochEntry(1, 0), EpochEntry(2, 7)]


def test_leader_epoch_truncation() -> None:
    cache = [EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(4, 20)]
    assert truncate_epochs_from_end(cache, 20) == cache[:2]
    assert truncate_epochs_from_end(cache, 21) == cache
    assert truncate_epochs_from_end(cache, 5) == cache[:1]
    assert truncate_epochs_from_start(cache, 15) == [EpochEntry(2, 15), EpochEntry(4, 20)]
    assert truncate_epochs_from_start(cache, 10) == [EpochEntry(2, 10), EpochEntry(4, 20)]
    assert truncate_epochs_from_start(cache, 0) == cache
    assert truncate_epochs_from_start(cache, 99) == [EpochEntry(4, 99)]


# ------------------------------------------------------------------------------------------
# partition.metadata and Uuid
# ------------------------------------------------------------------------------------------
def test_uuid_text_and_bytes() -> None:
    raw = bytes(range(16))
    text = uuid_to_string(raw)
    assert len(text) == 22 and uuid_from_string(text) == raw and uuid_from_string(text + "==") == raw
    for bad in ["A" * 25, "AAAA", "AAAAAAAAAAAAAAAAAAAAA+", "AAAAAAAAAAAAAAAAAAAAAAAA"]:
        with pytest.raises(ValueError):
            uuid_from_string(bad)


def test_random_uuids_are_safe_on_kafka_command_lines() -> None:
    """New topic and cluster ids never hold a ``-`` (``kafka-storage format -t -x...`` reads an
    id with a leading one as an option; about 30% of plain uuid4 strings hold one) and are
    version-4 UUIDs, none reserved."""
    ids = {random_uuid() for _ in range(2000)}
    assert len(ids) == 2000
    for text in ids:
        raw = uuid_from_string(text)
        assert "-" not in text and len(text) == 22 and raw[6] >> 4 == 4 and raw[8] >> 6 == 2
        assert raw not in (bytes(16), bytes(15) + b"\x01")


def test_partition_metadata_rules() -> None:
    text = format_partition_metadata("ROP8qUaSlk7r55i85yz4Cg")
    assert text == "version: 0\ntopic_id: ROP8qUaSlk7r55i85yz4Cg"
    assert parse_partition_metadata(text + "\n").topic_id_text == "ROP8qUaSlk7r55i85yz4Cg"
    assert parse_partition_metadata("version:   3\nx:\tROP8qUaSlk7r55i85yz4Cg").version == 3
    with pytest.raises(InvalidOptionError):
        format_partition_metadata(bytes(16))
    for bad, match in [("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "zero UUID"),
                       ("version: -1\ntopic_id: ROP8qUaSlk7r55i85yz4Cg", "version -1"),
                       ("version 0\ntopic_id: ROP8qUaSlk7r55i85yz4Cg", "malformed"),
                       ("version: 0\ntopic_id:ROP8qUaSlk7r55i85yz4Cg", "malformed"),
                       ("version: 0\ntopic_id: short", "bad topic id"),
                       ("version: 0", "missing topic_id"), ("", "empty")]:
        with pytest.raises(CorruptCheckpointError, match=match):
            parse_partition_metadata(bad, file="p/partition.metadata")


# ------------------------------------------------------------------------------------------
# Java properties and meta.properties
# ------------------------------------------------------------------------------------------
def test_java_properties_reader() -> None:
    text = ("# comment\n! also comment\n  a=1\nb : 2\nc 3\nd=\\\n   ef\nx\\\n  yz\ne\\=q=x\\ty\n"
            "f=\\u0041\\\\\ng=\n\\#h=#not comment\n i =  lead\n")
    assert parse_java_properties(text) == {
        "a": "1", "b": "2", "c": "3", "d": "ef", "xyz": "", "e=q": "x\ty", "f": "A\\", "g": "", "#h": "#not comment",
        "i": "lead"}
    with pytest.raises(CorruptCheckpointError, match="uxxxx"):
        parse_java_properties("a=\\u12", file="meta.properties")


def test_java_properties_writer_round_trips() -> None:
    props = {"k y": " v=a:b#!\\", "t": "a\tb\nc"}
    text = format_java_properties(props, date="Thu Oct 10 11:57:10 GMT 2024")
    assert text.startswith("#\n#Thu Oct 10 11:57:10 GMT 2024\nk\\ y=\\ v\\=a\\:b\\#\\!\\\\\n")
    assert parse_java_properties(text) == props
    assert java_date_string(0) == "Thu Jan 01 00:00:00 UTC 1970"


def test_meta_properties_validation() -> None:
    v1 = MetaProperties(1, "MkU3OEVBNTcwNTJENDM2Qk", 3, None)
    assert parse_meta_properties(format_meta_properties(v1)) == v1
    assert parse_meta_properties("").version == 0
    for bad, match in [("version=1\ncluster.id=x\n", "node.id"), ("version=1\nnode.id=2\n", "cluster.id"),
                       ("version=2\n", "unknown meta.properties version"),
                       ("version=0\nbroker.id=x\n", "base-10"),
                       ("version=0\ndirectory.id=abc\n", "directory.id")]:
        with pytest.raises(CorruptCheckpointError, match=match):
            parse_meta_properties(bad, file="meta.properties")


def test_clean_shutdown_marker() -> None:
    assert format_clean_shutdown(7) == '{"version":0,"brokerEpoch":7}'
    assert parse_clean_shutdown("") is None and parse_clean_shutdown("{") is None
    assert parse_clean_shutdown('{"version":0}') is None


# ------------------------------------------------------------------------------------------
# atomic writes and file helpers
# ------------------------------------------------------------------------------------------
def test_atomic_write_replaces_and_leaves_no_tmp(tmp_path: Path) -> None:
    target = tmp_path / "replication-offset-checkpoint"
    (tmp_path / "replication-offset-checkpoint.tmp").write_text("stale leftover of a crash")
    write_checkpoint_file(target, format_offset_checkpoint({("t", 0): 5}))
    assert target.read_text() == "0\n1\nt 0 5\n"
    write_checkpoint_file(target, format_offset_checkpoint({("t", 0): 6}))
    assert read_checkpoint_file(target, parse_offset_checkpoint) == {("t", 0): 6}
    assert sorted(os.listdir(tmp_path)) == ["replication-offset-checkpoint"]
    fsync_dir(tmp_path)


def test_atomic_write_failure_is_typed(tmp_path: Path) -> None:
    with pytest.raises(KafkaLogError, match="atomic write failed") as err:
        atomic_write_bytes(tmp_path / "missing-dir" / "f", b"x")
    assert err.value.file and err.value.file.endswith("f")


def test_read_checkpoint_file_missing_and_bad_encoding(tmp_path: Path) -> None:
    assert read_checkpoint_file(tmp_path / "absent", parse_offset_checkpoint) == {}
    with pytest.raises(CorruptCheckpointError, match="does not exist"):
        read_checkpoint_file(tmp_path / "absent", parse_offset_checkpoint, missing_ok=False)
    bad = tmp_path / "leader-epoch-checkpoint"
    bad.write_bytes(b"0\n1\n\xff 0\n")
    with pytest.raises(CorruptCheckpointError, match="UTF-8") as err:
        read_checkpoint_file(bad, parse_leader_epoch_checkpoint)
    assert err.value.position == 4
    bad.write_bytes(b"0\n1\n1 x\n")
    with pytest.raises(CorruptCheckpointError, match="line 3") as err:
        read_checkpoint_file(bad, parse_leader_epoch_checkpoint)
    assert err.value.file == str(bad)
