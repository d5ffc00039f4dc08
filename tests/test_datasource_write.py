"""The kafkalog writer without a Spark session: options, write() in-process, commit, abort."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType,
                               StructField, StructType, TimestampType)

import kafkalog_spark as kl
from kafkalog_spark.codec.records.partitioner import default_partitions
from kafkalog_spark.codec.records.schema import HEADERS_TYPE
from kafkalog_spark.datasource.write_options import parse_write_options, write_options_doc
from kafkalog_spark.datasource.writer import KafkaLogWriter
from kafkalog_spark.errors import InvalidOptionError, LogDirLockedError
from kafkalog_spark.inspect.verify import verify

HEADERS = ArrayType(StructType([StructField("key", StringType(), False),
                                StructField("value", BinaryType())]), False)


def schema(*names: str) -> StructType:
    types = {"key": BinaryType(), "value": BinaryType(), "topic": StringType(),
             "partition": IntegerType(), "offset": LongType(), "timestamp": TimestampType(),
             "headers": HEADERS}
    return StructType([StructField(n, types.get(n, StringType())) for n in names])


def batch(n: int, start: int = 0, **extra) -> pa.RecordBatch:
    cols = {"key": pa.array([None if i % 5 == 0 else f"k{i}".encode() for i in range(start, start + n)]),
            "value": pa.array([f"v{i}".encode() for i in range(start, start + n)]),
            "timestamp": pa.array([1_700_000_000_000_000 + i for i in range(start, start + n)],
                                  pa.timestamp("us", tz="UTC")),
            "headers": pa.array([[{"key": "h", "value": b"1"}] if i % 2 else []
                                 for i in range(start, start + n)], HEADERS_TYPE)}
    cols.update(extra)
    return pa.RecordBatch.from_pydict(cols)


def staging_of(log_dir: Path) -> list[Path]:
    return list(log_dir.parent.glob(f".{log_dir.name}.kafkalog-staging-*"))


def test_options_parse_case_insensitively_and_strictly() -> None:
    o = parse_write_options({"path": "/x", "COMPRESSION": "ZSTD", "segment.bytes": "2048",
                             "numpartitions": "3", "topic": "t", "topicid": "Nq2ZD3ATRUu4vhRG2pcSzQ",
                             "leaderEpoch": "-1"})
    assert (o.settings.codec, o.settings.segment_bytes, o.num_partitions) == ("zstd", 2048, 3)
    assert o.settings.leader_epoch == -1 and o.topic_id == "Nq2ZD3ATRUu4vhRG2pcSzQ"
    bad = [({"path": "/x", "compresion": "gzip"}, "unknown write option 'compresion' \\(did you mean 'compression'\\?\\); valid options: path"),
           ({"path": "/x", "compression": "brotli"}, "none, gzip, snappy, lz4, zstd"),
           ({"path": "/x", "segment.bytes": "10"}, r"segment.bytes must be an integer in \[61,"),
           ({"path": "/x", "batch.records": "many"}, "batch.records must be an integer"),
           ({"path": "/x", "topicId": "abc"}, "needs the topic option"),
           ({"path": "/x", "topic": "t", "topicId": "abc"}, "not a base64url topic id"),
           ({"path": "/x", "topic": "a/b"}, "illegal topic name"),
           ({}, "no path")]
    for options, message in bad:
        with pytest.raises(InvalidOptionError, match=message):
            parse_write_options(options)
    assert "| `segment.bytes` |" in write_options_doc()


def test_bad_columns(tmp_path: Path) -> None:
    opts = {"path": str(tmp_path / "logs"), "topic": "t", "numPartitions": "2"}
    with pytest.raises(InvalidOptionError, match="unknown column"):
        KafkaLogWriter(opts, schema("value", "colour"), False)
    with pytest.raises(InvalidOptionError, match="exactly one of them"):
        KafkaLogWriter(opts, schema("value", "topic"), False)
    with pytest.raises(InvalidOptionError, match="no 'value' column"):
        KafkaLogWriter(opts, schema("key"), False)
    with pytest.raises(InvalidOptionError, match="give the numPartitions option"):
        KafkaLogWriter({"path": str(tmp_path / "logs"), "topic": "t"}, schema("value"), False)


def test_tasks_stage_and_commit_publishes_with_the_default_partitioner(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    w = KafkaLogWriter({"path": str(log_dir), "topic": "orders", "numPartitions": "3",
                        "compression": "lz4", "segment.bytes": "1024"},
                       schema("key", "value", "timestamp", "headers"), False)
    messages = [w.write(iter([batch(100, 0), batch(50, 100)])), w.write(iter([batch(80, 150)]))]
    assert not log_dir.exists() and staging_of(log_dir)  # staged only
    w.commit(messages)
    assert staging_of(log_dir) == [] and w.last_metrics["records"] == 230
    got = kl.read_log(log_dir, include_headers=True).to_pylist()
    keys = pa.array([r["key"] for r in got], pa.binary())
    non_null = [i for i, r in enumerate(got) if r["key"] is not None]
    want = default_partitions(keys, 3)[0]
    assert all(got[i]["partition"] == want[i] for i in non_null)  # murmur2 placement
    for p in range(3):
        rows = [r for r in got if r["partition"] == p]
        assert [r["offset"] for r in rows] == list(range(len(rows)))
    assert sorted(r["value"] for r in got) == sorted(f"v{i}".encode() for i in range(230))
    report = verify(log_dir, deep=True)
    assert report.ok, report.problems


def test_offset_column_keeps_offsets_and_append_continues(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    cols = ("key", "value", "topic", "partition", "offset")
    w = KafkaLogWriter({"path": str(log_dir)}, schema(*cols), False)
    b = batch(20, topic=pa.array(["t"] * 20), partition=pa.array([0] * 20, pa.int32()),
              offset=pa.array([100 + 3 * i for i in range(20)], pa.int64()))
    w.commit([w.write(iter([b.select(list(cols))]))])
    assert kl.read_log(log_dir)["offset"].to_pylist() == [100 + 3 * i for i in range(20)]
    w2 = KafkaLogWriter({"path": str(log_dir), "topic": "t"}, schema("value", "partition"), False)
    more = pa.RecordBatch.from_pydict({"value": pa.array([b"x", b"y"]),
                                       "partition": pa.array([0, 0], pa.int32())})
    w2.commit([w2.write(iter([more]))])
    assert kl.read_log(log_dir)["offset"].to_pylist()[-3:] == [157, 158, 159]


def test_abort_and_failing_task_leave_the_target_unchanged(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    kl.write_log(pa.Table.from_batches([batch(10)]), log_dir, topic="t")
    before = {p: p.read_bytes() for p in log_dir.rglob("*") if p.is_file()}
    w = KafkaLogWriter({"path": str(log_dir), "topic": "t"}, schema("key", "value"), True)
    ok = w.write(iter([batch(30).select(["key", "value"])]))

    def failing():
        yield batch(30).select(["key", "value"])
        raise RuntimeError("boom in a UDF")

    with pytest.raises(RuntimeError, match="boom"):
        w.write(failing())
    w.abort([ok, None])
    after = {p: p.read_bytes() for p in log_dir.rglob("*") if p.is_file()}
    assert after == before and staging_of(log_dir) == []


def test_overwrite_replaces_written_partitions(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    w = KafkaLogWriter({"path": str(log_dir), "topic": "t", "numPartitions": "2"},
                       schema("key", "value"), False)
    w.commit([w.write(iter([batch(40).select(["key", "value"])]))])
    w = KafkaLogWriter({"path": str(log_dir), "topic": "t"}, schema("value", "partition"), True)
    new = pa.RecordBatch.from_pydict({"value": pa.array([b"a", b"b"]),
                                      "partition": pa.array([1, 1], pa.int32())})
    w.commit([w.write(iter([new]))])
    table = kl.read_log(log_dir)
    assert [r["value"] for r in table.to_pylist() if r["partition"] == 1] == [b"a", b"b"]
    assert len([r for r in table.to_pylist() if r["partition"] == 0]) > 0
    assert verify(log_dir, deep=True).ok


def test_refuses_a_locked_log_dir(tmp_path: Path, lock_holder) -> None:
    log_dir = tmp_path / "logs"
    holder = lock_holder(log_dir)
    with pytest.raises(LogDirLockedError, match=str(holder.pid)):
        KafkaLogWriter({"path": str(log_dir), "topic": "t", "numPartitions": "1"},
                       schema("value"), False)
        holder.wait()
