"""The main job on a built-in example: write a log dir, then inspect, verify and read it.

Run with ``./dev example`` (or ``.venv/bin/python examples/main_job.py [OUT_DIR]``). It writes
an example Kafka log dir (a topic per codec, keys, headers, tombstones), runs ``kafkalog info``
and ``kafkalog verify`` on it, reads it back with ``read_log`` checking that every record
written is read back unchanged, then reads it as a DataFrame with a local Spark session.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import kafkalog_spark as kl
from kafkalog_spark.cli import main as kafkalog
from kafkalog_spark.codec.records.schema import HEADERS_TYPE

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def example_table(topic: str, partitions: int, rows: int) -> pa.Table:
    """Deterministic records: keys with repeats, a tombstone every 50th, headers every 7th."""
    start_ms = 1_700_000_000_000
    keys = [f"customer-{i % 97}".encode() for i in range(rows)]
    values = [None if i % 50 == 49 else f'{{"order": {i}, "amount": {i * 3 % 1000}}}'.encode()
              for i in range(rows)]
    headers = [[{"key": "source", "value": b"example"}] if i % 7 == 0 else [] for i in range(rows)]
    return pa.table({
        "topic": pa.array([topic] * rows, pa.string()),
        "partition": pa.array([i % partitions for i in range(rows)], pa.int32()),
        "key": pa.array(keys, pa.binary()),
        "value": pa.array(values, pa.binary()),
        "timestamp": pa.array([(start_ms + i * 250) * 1000 for i in range(rows)],
                              pa.timestamp("us", tz="UTC")),
        "headers": pa.array(headers, HEADERS_TYPE),
    })


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else Path(tempfile.mkdtemp(prefix="kafkalog-example-"))
    log_dir = out / "kafka-logs"
    if log_dir.exists():
        shutil.rmtree(log_dir)
    written = []
    for i, codec in enumerate(CODECS):
        table = example_table(f"orders-{codec}", partitions=1 + i % 3, rows=5_000)
        kl.write_log(table, log_dir, codec=codec, segment_bytes=64 * 1024, max_batch_records=200)
        written.append(table)
    print(f"== wrote an example log dir: {log_dir}\n")

    print("== kafkalog info")
    if kafkalog(["info", str(log_dir)]) != 0:
        return 1
    print("\n== kafkalog verify")
    if kafkalog(["verify", str(log_dir)]) != 0:
        return 1

    print("\n== read_log")
    table = kl.read_log(log_dir, include_headers=True)
    expected = pa.concat_tables(written)
    print(f"read {table.num_rows} records from {len(pc.unique(table['topic']))} topics")
    summary = (table.group_by(["topic", "partition"])
               .aggregate([("offset", "count"), ("offset", "max"), ("value", "count")])
               .sort_by([("topic", "ascending"), ("partition", "ascending")]))
    print(f"{'TOPIC':<16}{'PARTITION':>10}{'RECORDS':>9}{'TOMBSTONES':>11}{'LAST OFFSET':>12}")
    for row in summary.to_pylist():
        tombstones = row["offset_count"] - row["value_count"]
        print(f"{row['topic']:<16}{row['partition']:>10}{row['offset_count']:>9}"
              f"{tombstones:>11}{row['offset_max']:>12}")
    mismatches = _compare(expected, table)
    if mismatches:
        print(f"MISMATCH: {mismatches}")
        return 1
    print("every record written was read back unchanged")

    print("\n== spark.read.format('kafkalog') (local Spark)")
    spark = kl.session("local[2]", app_name="kafkalog-example")
    df = (spark.read.format("kafkalog").option("includeHeaders", "true").load(str(log_dir)))
    per_topic = (df.groupBy("topic").count().orderBy("topic").collect())
    for row in per_topic:
        print(f"{row['topic']:<16}{row['count']:>8}")
    spark_rows = sum(r["count"] for r in per_topic)
    # Spark's filters stay with Spark (docs/datasource.md); the read options choose what the
    # source plans and reads: here only the batches holding offsets 2490 on of orders-zstd
    latest = (spark.read.format("kafkalog").option("subscribe", "orders-zstd")
              .option("startingOffsets", '{"orders-zstd": {"0": 2490, "1": 2490}}')
              .load(str(log_dir))
              .selectExpr("partition", "offset", "cast(key as string) as key")
              .orderBy("partition", "offset").collect())
    print(f"orders-zstd offsets >= 2490 (read options prune the scan): {len(latest)} rows")
    if spark_rows != expected.num_rows:
        print(f"MISMATCH: Spark read {spark_rows} records, {expected.num_rows} were written")
        return 1
    print("Spark read every record")
    return 0


def _compare(expected: pa.Table, actual: pa.Table) -> str | None:
    cols = ["topic", "partition", "key", "value", "timestamp", "headers"]
    order = [("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")]
    exp = expected.append_column("offset", _offsets(expected)).sort_by(order).select(cols)
    act = actual.sort_by(order).select(cols)
    if exp.num_rows != act.num_rows:
        return f"{exp.num_rows} written, {act.num_rows} read"
    for name in cols:
        if not exp[name].combine_chunks().equals(act[name].combine_chunks()):
            return f"column {name} differs"
    return None


def _offsets(table: pa.Table) -> pa.Array:
    """Offsets a fresh log assigns: 0, 1, 2, ... per (topic, partition) in input order."""
    seen: dict[tuple[str, int], int] = {}
    out = []
    for t, p in zip(table["topic"].to_pylist(), table["partition"].to_pylist()):
        out.append(seen.get((t, p), 0))
        seen[(t, p)] = out[-1] + 1
    return pa.array(out, pa.int64())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
