"""Migrate a log dir to Delta, then keep the tables up to date: the platform team's journey.

``.venv/bin/python examples/migrate_to_delta.py [WORK_DIR] [--spark]`` writes an example log dir
(an ``orders`` topic and a ``__consumer_offsets`` partition with real commit records), then:

1. migrates it into one Delta table per topic, partitioned by Kafka partition and day;
2. reads the tables back with ``deltalake`` — no Spark needed to use them — including the typed
   ``consumerOffsets`` column;
3. produces more records (the kafkalog writer stands in for the broker) and migrates again: only
   the new records are added, in one commit, and a run with nothing new commits nothing;
4. shows where the offsets reached are kept: the tables' application transactions.

``--spark`` runs the Spark engine (Spark tasks write the Parquet). The same from the command
line: ``kafkalog migrate LOG_DIR DEST --partition-by partition,date``. See docs/delta.md.
"""

from __future__ import annotations

import struct
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

import kafkalog_spark as kl
from kafkalog_spark.delta import migrate


def orders(start: int, n: int) -> pa.Table:
    return pa.table({
        "partition": pa.array([i % 2 for i in range(start, start + n)], pa.int32()),
        "key": [f"customer-{i % 20}".encode() for i in range(start, start + n)],
        "value": [f'{{"order": {i}}}'.encode() for i in range(start, start + n)],
        "timestamp": pa.array([(1_700_000_000_000 + i * 3_600_000) * 1000
                               for i in range(start, start + n)], pa.timestamp("us", tz="UTC")),
    })


def offset_commit(group: str, topic: str, partition: int, offset: int) -> tuple[bytes, bytes]:
    """An OffsetCommitKey (v1) / OffsetCommitValue (v1) pair, as a group coordinator writes."""
    def s(text: str) -> bytes:
        return struct.pack(">h", len(text)) + text.encode()

    key = struct.pack(">h", 1) + s(group) + s(topic) + struct.pack(">i", partition)
    value = (struct.pack(">h", 1) + struct.pack(">q", offset) + s("")
             + struct.pack(">qq", 1_700_000_000_000, -1))
    return key, value


def example_log_dir(root: Path) -> Path:
    kl.write_log(orders(0, 200), root, topic="orders", codec="zstd")
    commits = [offset_commit("billing", "orders", p, o) for p in (0, 1) for o in (10, 50, 100)]
    kl.write_log(pa.table({"key": [k for k, _ in commits], "value": [v for _, v in commits]}),
                 root, topic="__consumer_offsets", partition=7)
    return root


def main(argv: list[str] | None = None) -> dict:
    args = sys.argv[1:] if argv is None else argv
    use_spark = "--spark" in args
    paths = [a for a in args if a != "--spark"]
    work = Path(paths[0]) if paths else Path(tempfile.mkdtemp())
    log_dir, dest = example_log_dir(work / "logs"), work / "delta"
    spark = None
    if use_spark:
        from kafkalog_spark.spark import session

        spark = session(app_name="kafkalog-migrate-example")

    first = migrate(log_dir, dest, spark=spark, partition_by=["partition", "date"])
    print(f"first run: {first['records']} records, {first['commits']} commits")

    table = DeltaTable(str(dest / "orders"))
    rows = table.to_pyarrow_table()
    print(f"orders: version {table.version()}, {rows.num_rows} rows, partitioned by "
          f"{table.metadata().partition_columns}")
    commits = DeltaTable(str(dest / "__consumer_offsets")).to_pyarrow_table()
    latest = {}
    for c in commits["consumerOffsets"].to_pylist():
        latest[(c["group"], c["topic"], c["partition"])] = c["committedOffset"]
    print(f"committed offsets from __consumer_offsets: {latest}")
    assert latest == {("billing", "orders", 0): 100, ("billing", "orders", 1): 100}

    kl.write_log(orders(200, 50), log_dir, topic="orders", codec="zstd")
    second = migrate(log_dir, dest, spark=spark, partition_by=["partition", "date"])
    print(f"second run: {second['records']} new records, {second['commits']} commit "
          f"({second['tables'][1]['partitions']})")
    third = migrate(log_dir, dest, spark=spark, partition_by=["partition", "date"])
    print(f"third run: {third['records']} records, {third['commits']} commits (nothing new)")

    table = DeltaTable(str(dest / "orders"))
    reached = {p: table.transaction_version(f"kafkalog:orders:{p}") for p in (0, 1)}
    print(f"offsets reached, kept in the table's txn actions: {reached}")
    assert table.to_pyarrow_table().num_rows == kl.read_log(log_dir, topics=["orders"]).num_rows
    assert (second["records"], third["commits"]) == (50, 0) and reached == {0: 125, 1: 125}
    return {"first": first["records"], "second": second["records"], "third": third["commits"],
            "version": table.version()}


if __name__ == "__main__":
    print(main())
