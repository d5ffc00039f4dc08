"""End-to-end df.write.format("kafkalog"): round trips, kafka-python cross-read, failures."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import kafkalog_spark as kl
from kafkalog_spark.codec.records.schema import HEADERS_TYPE
from kafkalog_spark.inspect.verify import verify

pytestmark = pytest.mark.spark
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
COLS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]


def source_log(path: Path) -> pa.Table:
    n = 600
    rng = np.random.default_rng(3)
    table = pa.table({
        "topic": ["src"] * n,
        "partition": pa.array([i % 3 for i in range(n)], pa.int32()),
        "key": pa.array([None if i % 7 == 0 else f"k{i}".encode() for i in range(n)]),
        "value": pa.array([None if i % 11 == 0 else bytes(rng.integers(0, 256, 20, np.uint8))
                           for i in range(n)]),
        "timestamp": pa.array([1_700_000_000_000_000 + 1000 * i for i in range(n)],
                              pa.timestamp("us", tz="UTC")),
        "headers": pa.array([[{"key": "h", "value": b"v"}] if i % 3 == 0 else [] for i in range(n)],
                            HEADERS_TYPE),
    })
    kl.write_log(table, path, codec="gzip", segment_bytes=4096, max_batch_records=25)
    return kl.read_log(path, include_headers=True).select(COLS)


def rows(table: pa.Table) -> list[dict]:
    return sorted(table.select(COLS).to_pylist(), key=lambda r: (r["partition"], r["offset"]))


def staging(log_dir: Path) -> list[Path]:
    return list(log_dir.parent.glob(f".{log_dir.name}.kafkalog-staging-*"))


@pytest.mark.parametrize("codec", CODECS)
def test_read_write_read_round_trip(spark, tmp_path: Path, codec: str) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    expected = source_log(src)
    df = spark.read.format("kafkalog").option("includeHeaders", "true").load(str(src))
    df.write.format("kafkalog").mode("append").option("compression", codec) \
        .option("segment.bytes", "8192").save(str(dst))
    assert rows(kl.read_log(dst, include_headers=True)) == rows(expected)
    report = verify(dst, deep=True)
    assert report.ok, report.problems
    assert staging(dst) == []
    if codec == "none":
        from kafka.record import MemoryRecords

        seen = []
        for log in sorted(dst.glob("src-*/*.log")):
            mr = MemoryRecords(log.read_bytes())
            while mr.has_next():
                seen += [(int(log.parent.name.rsplit("-", 1)[1]), r.offset, r.key, r.value)
                         for r in mr.next_batch()]
        assert sorted(seen) == sorted((r["partition"], r["offset"], r["key"], r["value"])
                                      for r in expected.to_pylist())


def test_default_partitioner_and_append(spark, tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    df = spark.range(0, 300, numPartitions=3).selectExpr(
        "cast(id as string) as key", "cast(concat('v', id) as binary) as value")
    df.write.format("kafkalog").mode("append").option("topic", "t").option("numPartitions", "4").save(str(log_dir))
    df.write.format("kafkalog").mode("append").option("topic", "t").save(str(log_dir))
    got = kl.read_log(log_dir).to_pylist()
    assert len(got) == 600
    from kafka.partitioner.default import murmur2

    assert all(r["partition"] == (murmur2(r["key"]) & 0x7FFFFFFF) % 4 for r in got)
    for p in range(4):
        offs = [r["offset"] for r in got if r["partition"] == p]
        assert offs == list(range(len(offs)))
    assert verify(log_dir, deep=True).ok


def snapshot(log_dir: Path) -> dict:
    return {str(p.relative_to(log_dir)): p.read_bytes() for p in log_dir.rglob("*") if p.is_file()}


def test_exception_in_one_task_leaves_the_target_unchanged(spark, tmp_path: Path) -> None:
    from pyspark.sql.functions import udf

    log_dir = tmp_path / "logs"
    kl.write_log(pa.table({"value": [b"old"]}), log_dir, topic="t")
    before = snapshot(log_dir)

    @udf("binary")
    def explode(v):
        if v == b"150":
            raise ValueError("boom")
        return v

    df = spark.range(0, 200, numPartitions=2).selectExpr("cast(cast(id as string) as binary) as v")
    df = df.select(explode("v").alias("value"))
    with pytest.raises(Exception, match="boom"):
        df.write.format("kafkalog").mode("overwrite").option("topic", "t") \
            .option("numPartitions", "1").save(str(log_dir))
    assert snapshot(log_dir) == before and staging(log_dir) == []


def test_killed_task_leaves_no_trace(spark, tmp_path: Path) -> None:
    from pyspark.sql.functions import udf

    log_dir = tmp_path / "logs"
    kl.write_log(pa.table({"value": [b"old"]}), log_dir, topic="t")
    before = snapshot(log_dir)

    @udf("binary")
    def die(v):
        from pyspark import TaskContext

        if v == b"120" and TaskContext.get().attemptNumber() == 0:
            os._exit(3)
        return v

    df = spark.range(0, 200, numPartitions=2).selectExpr("cast(cast(id as string) as binary) as v")
    df = df.select(die("v").alias("value"))
    try:  # local[2] does not retry tasks: the job fails and aborts
        df.write.format("kafkalog").mode("append").option("topic", "t").save(str(log_dir))
    except Exception:
        assert snapshot(log_dir) == before
    else:  # a retrying master: the retry's output is published exactly once
        assert len(kl.read_log(log_dir)) == 201
        assert verify(log_dir, deep=True).ok
    assert staging(log_dir) == []


def test_bad_options_and_locked_dir(spark, tmp_path: Path, lock_holder) -> None:
    log_dir = tmp_path / "logs"
    df = spark.range(3).selectExpr("cast(cast(id as string) as binary) as value")
    with pytest.raises(Exception, match="compression must be one of none, gzip"):
        df.write.format("kafkalog").mode("append").option("topic", "t").option("numPartitions", "1") \
            .option("compression", "brotli").save(str(log_dir))
    with pytest.raises(Exception, match="unknown write option"):
        df.write.format("kafkalog").mode("append").option("topic", "t").option("bogus", "1").save(str(log_dir))
    holder = lock_holder(log_dir)
    with pytest.raises(Exception, match="locked by process"):
        df.write.format("kafkalog").mode("append").option("topic", "t").option("numPartitions", "1") \
            .save(str(log_dir))
    holder.release()
    assert sorted(p.name for p in log_dir.iterdir()) == [".lock"] and staging(log_dir) == []
