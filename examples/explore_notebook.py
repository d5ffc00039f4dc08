"""Explore a Kafka log dir in a notebook: ``spark.read.format("kafkalog")`` cell by cell.

Run as a script (``.venv/bin/python examples/explore_notebook.py [LOG_DIR]``) or open it in a
notebook (``# %%`` cells: VS Code, Jupyter via jupytext). Without LOG_DIR it writes a small
example log dir first. Each cell shows one thing the reader does: the schema, per-partition
counts and offset ranges, offset and timestamp windows (pushed down: only the segments needed
are read), headers, Kafka metadata, read_committed, and parsing JSON values.
"""

# %%
from __future__ import annotations

import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
from pyspark.sql import functions as F

import kafkalog_spark as kl
from kafkalog_spark.spark import session


def example_log_dir(root: Path) -> Path:
    """Orders in 3 partitions with JSON values, a header on every record, 1 s apart."""
    n = 3000
    hdr = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string(), nullable=False),
                                                  pa.field("value", pa.binary())]),
                            nullable=False))
    table = pa.table({
        "partition": pa.array([i % 3 for i in range(n)], pa.int32()),
        "key": [f"customer-{i % 50}".encode() for i in range(n)],
        "value": [f'{{"order": {i}, "amount": {i * 7 % 500}}}'.encode() for i in range(n)],
        "timestamp": pa.array([(1_700_000_000_000 + i * 1000) * 1000 for i in range(n)],
                              pa.timestamp("us", tz="UTC")),
        "headers": pa.array([[{"key": "source", "value": b"web" if i % 2 else b"app"}]
                             for i in range(n)], hdr),
    })
    kl.write_log(table, root, topic="orders", codec="zstd", segment_bytes=32 * 1024)
    return root


def main(argv: list[str] | None = None) -> dict:
    args = sys.argv[1:] if argv is None else argv
    log_dir = Path(args[0]) if args else example_log_dir(Path(tempfile.mkdtemp()) / "logs")
    spark = session(app_name="kafkalog-explore")
    out: dict = {}

    # %% The DataFrame has the columns of Spark's Kafka source
    df = spark.read.format("kafkalog").load(str(log_dir))
    df.printSchema()

    # %% Records, offsets and time range per partition
    per_partition = (df.groupBy("topic", "partition")
                     .agg(F.count("*").alias("records"), F.min("offset").alias("first"),
                          F.max("offset").alias("last"), F.min("timestamp").alias("since"),
                          F.max("timestamp").alias("until"))
                     .orderBy("topic", "partition"))
    per_partition.show(truncate=False)
    out["records"] = df.count()

    # %% An offset window as a filter: Spark filters what the read returns
    window = df.where((F.col("partition") == 1) & F.col("offset").between(100, 199))
    out["window"] = window.count()
    window.select("offset", F.col("value").cast("string")).show(3, truncate=False)

    # %% The same window with Spark Kafka-source options: only the segments holding it are read
    by_option = (spark.read.format("kafkalog").option("assign", '{"orders": [1]}')
                 .option("startingOffsets", '{"orders": {"1": 100}}')
                 .option("endingOffsets", '{"orders": {"1": 200}}').load(str(log_dir)))
    assert by_option.count() == out["window"]

    # %% A time window (timestamps are UTC)
    since = datetime.fromtimestamp(1_700_000_600, timezone.utc)
    out["last_10_minutes_of_first_hour"] = df.where(
        (F.col("timestamp") >= since)
        & (F.col("timestamp") < datetime.fromtimestamp(1_700_001_200, timezone.utc))).count()

    # %% Headers and Kafka metadata columns
    meta = (spark.read.format("kafkalog").option("includeHeaders", "true")
            .option("includeMetadata", "true").load(str(log_dir)))
    (meta.select("offset", "headers", "batchBaseOffset", "compression", "magic")
     .show(3, truncate=False))
    out["sources"] = {r["source"]: r["count"] for r in meta.select(
        F.col("headers")[0]["value"].cast("string").alias("source")).groupBy("source")
        .count().collect()}

    # %% read_committed leaves out aborted transactions (none here: the same count)
    committed = (spark.read.format("kafkalog").option("kafka.isolation.level", "read_committed")
                 .load(str(log_dir)))
    assert committed.count() == out["records"]

    # %% Parse JSON values and aggregate
    parsed = df.select(F.col("key").cast("string").alias("customer"),
                       F.from_json(F.col("value").cast("string"),
                                   "order INT, amount INT").alias("v"))
    top = (parsed.groupBy("customer").agg(F.sum("v.amount").alias("total"))
           .orderBy(F.desc("total")).limit(3))
    top.show()
    out["top_customer"] = top.first()["customer"]

    # %% Spark-free: the same records with read_log
    assert kl.read_log(log_dir).num_rows == out["records"]
    print(out)
    return out


if __name__ == "__main__":
    main()
