"""File and directory naming rules (KAFKA_FORMATS §8)."""

from __future__ import annotations

import pytest

from kafkalog_spark.errors import LogDirError
from kafkalog_spark.codec.files import naming as N


def test_offset_prefix_is_twenty_digits() -> None:
    assert N.format_offset(147001) == "00000000000000147001"
    assert N.format_offset(2**63 - 1) == "9223372036854775807".rjust(20, "0")
    with pytest.raises(LogDirError):
        N.format_offset(-1)
    with pytest.raises(LogDirError):
        N.format_offset(2**63)


@pytest.mark.parametrize("kind", N.SEGMENT_FILE_KINDS)
@pytest.mark.parametrize("transient", [None, *N.TRANSIENT_SUFFIXES])
def test_segment_names_round_trip(kind: str, transient: str | None) -> None:
    name = N.segment_file_name(58, kind, transient)
    parsed = N.parse_segment_file_name(name)
    assert (parsed.offset, parsed.kind, parsed.transient, parsed.canonical) == (
        58, kind, transient, True)
    assert parsed.name == name
    assert name.startswith("00000000000000000058.")


def test_offset_is_text_before_first_dot() -> None:
    # Kafka parses any decimal prefix (Long.parseLong), not only 20 digits
    parsed = N.parse_segment_file_name("42.log")
    assert (parsed.offset, parsed.canonical) == (42, False)
    assert N.offset_from_file_name("00000000000000000007.snapshot.deleted") == 7


@pytest.mark.parametrize("name", [
    "leader-epoch-checkpoint", "partition.metadata", "abc.log", ".log", "12.log.bak",
    "00000000000000000000.tmp", "00000000000000000000.log.deleted.swap",
    "00000000000000007364-0000000001.checkpoint", "99999999999999999999.log",
])
def test_bad_segment_names_raise(name: str) -> None:
    with pytest.raises(LogDirError) as info:
        N.parse_segment_file_name(name)
    assert info.value.file == name


def test_kraft_snapshot_names() -> None:
    s = N.parse_kraft_snapshot_name("00000000000000007364-0000000001.checkpoint")
    assert (s.end_offset, s.epoch, s.state) == (7364, 1, "complete")
    assert s.name == "00000000000000007364-0000000001.checkpoint"
    part = N.parse_kraft_snapshot_name("00000000000000060500-0000000025.checkpoint.part")
    assert part.state == "part" and part.name.endswith(".checkpoint.part")
    assert N.parse_kraft_snapshot_name("00000000000000000001-0000000002.checkpoint.deleted"
                                       ).state == "deleted"
    with pytest.raises(LogDirError):
        N.parse_kraft_snapshot_name("bootstrap.checkpoint")


@pytest.mark.parametrize("name, expected", [
    ("orders-2", ("orders", 2, None, None)),
    ("my-first-topic-0", ("my-first-topic", 0, None, None)),
    ("__consumer_offsets-49", ("__consumer_offsets", 49, None, None)),
    ("a.b.c-7", ("a.b.c", 7, None, None)),
    ("kafka-logs-1", ("kafka-logs", 1, None, None)),
    ("orders-2.0123456789abcdef0123456789abcdef-delete",
     ("orders", 2, "delete", "0123456789abcdef0123456789abcdef")),
    ("my.topic-11.fedcba9876543210fedcba9876543210-future",
     ("my.topic", 11, "future", "fedcba9876543210fedcba9876543210")),
    ("t-x-3.00112233445566778899aabbccddeeff-stray",
     ("t-x", 3, "stray", "00112233445566778899aabbccddeeff")),
])
def test_partition_dir_names(name: str, expected: tuple) -> None:
    parsed = N.parse_partition_dir_name(name)
    assert (parsed.topic, parsed.partition, parsed.kind, parsed.uuid) == expected
    assert N.partition_dir_name(*expected) == name


@pytest.mark.parametrize("name", [
    "orders", "orders-", "-3", "orders-x", "kafka-logs", "orders-2-delete",
    "orders-2.abc.def-delet", "orders-2.-future", "orders-99999999999",
    "remote-log-index-cache",
])
def test_bad_partition_dir_names_raise(name: str) -> None:
    with pytest.raises(LogDirError) as info:
        N.parse_partition_dir_name(name)
    assert "topic-partition" in str(info.value)


def test_metadata_log_is_recognised() -> None:
    assert N.parse_partition_dir_name("__cluster_metadata-0").is_metadata_log
    assert not N.parse_partition_dir_name("__consumer_offsets-0").is_metadata_log


def test_delete_and_stray_names_are_capped_future_names_are_not() -> None:
    uuid = "0" * 32
    topic = "t" * 249  # the longest legal topic name
    for kind in ("delete", "stray"):
        name = N.partition_dir_name(topic, 12, kind, uuid)
        assert len(name) == 255
        assert name.endswith(f"-12.{uuid}-{kind}")
        assert N.parse_partition_dir_name(name).partition == 12
    future = N.partition_dir_name(topic, 12, "future", uuid)
    assert len(future) > 255 and future.startswith(topic)


def test_partition_dir_name_rejects_bad_parts() -> None:
    with pytest.raises(LogDirError):
        N.partition_dir_name("", 0)
    with pytest.raises(LogDirError):
        N.partition_dir_name("t", 0, "delete")  # no uuid
    with pytest.raises(LogDirError):
        N.partition_dir_name("t", 0, "moved", "0" * 32)


def test_transient_and_tmp_classification() -> None:
    assert N.is_transient("00000000000000000000.log.swap")
    assert N.is_transient("00000000000000000000.snapshot.deleted")
    assert not N.is_transient("00000000000000000000.log")
    assert N.is_tmp("recovery-point-offset-checkpoint.tmp")
    assert not N.is_tmp("meta.properties")
