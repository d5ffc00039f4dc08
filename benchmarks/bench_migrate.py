"""Migration benchmark: Kafka log dirs -> Delta rows/s, against Parquet -> Delta of the same rows.

The same records (16-byte keys, 100-byte values, one header, every metadata column) are written
once as a Kafka log dir (``--partitions`` partitions, producer-sized batches, ``--codec``) and
once as Parquet (the columns a migration writes). Then, each best of ``--repeat`` into a fresh
destination:

* ``migrate (local)``: :func:`kafkalog_spark.delta.migrate` with the local engine;
* ``parquet -> delta (delta-rs)``: ``pyarrow.parquet.read_table`` + ``deltalake.write_deltalake``,
  what the rows would cost if they were Parquet already;
* with ``--spark``: ``migrate (spark)`` against ``spark.read.parquet -> write.parquet`` + the same
  delta-rs commit of the written files (Spark here has no Delta jars).

The ratio column is migrate / baseline (goal >= 0.7). Timings are printed, never asserted.

    .venv/bin/python benchmarks/bench_migrate.py                       # 1 M records, local
    .venv/bin/python benchmarks/bench_migrate.py --records 200000 --spark --repeat 1
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import kafkalog_spark as kl
from kafkalog_spark.delta import migrate


def make_records(n: int, partitions: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    alphabet = np.frombuffer(b'abcdefghijklmnopqrstuvwxyz0123456789 {}":,', np.uint8)
    values = alphabet[rng.integers(0, len(alphabet) // 3, size=n * 100)]
    keys = np.frombuffer(b"".join(b"key-%012d" % (i % 100_000) for i in range(n)), np.uint8)
    hdr = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string(), nullable=False),
                                                  pa.field("value", pa.binary())]),
                            nullable=False))
    return pa.table({
        "topic": pa.array(["events"] * n),
        "partition": pa.array(np.arange(n, dtype=np.int32) % partitions),
        "key": pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(
            np.arange(0, (n + 1) * 16, 16, dtype=np.int32)), pa.py_buffer(keys)]),
        "value": pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(
            np.arange(0, (n + 1) * 100, 100, dtype=np.int32)), pa.py_buffer(values)]),
        "timestamp": pa.array((1_700_000_000_000 + np.arange(n, dtype=np.int64)) * 1000,
                              pa.timestamp("us", tz="UTC")),
        "headers": pa.array([[{"key": "trace", "value": b"abc"}]] * n, hdr),
    })


def best(fn: Callable[[Path], object], repeat: int, scratch: Path) -> float:
    out = float("inf")
    for i in range(repeat):
        dest = scratch / f"run{i}"
        shutil.rmtree(dest, ignore_errors=True)
        t0 = time.perf_counter()
        fn(dest)
        out = min(out, time.perf_counter() - t0)
        shutil.rmtree(dest, ignore_errors=True)
    return out


def spark_parquet_to_delta(spark, parquet: Path, dest: Path) -> None:
    from kafkalog_spark.delta.commit import commit, data_file

    staging = dest / "_staging"
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    spark.read.parquet(str(parquet)).write.parquet(str(staging))
    files = [data_file(dest, str(p.relative_to(dest)), {}) for p in staging.glob("*.parquet")]
    schema = pq.read_schema(next(staging.glob("*.parquet")))
    commit(dest, schema, (), files, {"bench:0": 1}, {}, "bench")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--codec", default="lz4")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--spark", action="store_true", help="also measure the Spark engine")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="bench-migrate-"))
    try:
        table = make_records(args.records, args.partitions)
        kl.write_log(table, scratch / "logs", codec=args.codec, max_batch_records=150)
        rows = kl.read_log(scratch / "logs", include_headers=True, include_metadata=True)
        pq.write_table(rows, scratch / "rows.parquet", compression="snappy")
        results = [("migrate (local)", best(lambda d: migrate(scratch / "logs", d),
                                            args.repeat, scratch)),
                   ("parquet -> delta (delta-rs)", best(
                       lambda d: __import__("deltalake").write_deltalake(
                           str(d), pq.read_table(scratch / "rows.parquet")),
                       args.repeat, scratch))]
        if args.spark:
            from kafkalog_spark.spark import session

            spark = session(args.master, app_name="bench-migrate")
            results.append(("migrate (spark)", best(lambda d: migrate(scratch / "logs", d,
                                                                      spark=spark),
                                                    args.repeat, scratch)))
            results.append(("parquet -> delta (spark + delta-rs commit)", best(
                lambda d: spark_parquet_to_delta(spark, scratch / "rows.parquet", d),
                args.repeat, scratch)))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    n = args.records
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cpus, "
          f"Python {platform.python_version()}; date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"command: {' '.join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])])}")
    print(f"{n:,} records, {args.partitions} partitions, codec {args.codec}, headers + metadata "
          f"columns, best of {args.repeat}\n")
    print("| path | seconds | records/s | migrate / baseline |")
    print("|---|---:|---:|---:|")
    for i, (name, secs) in enumerate(results):
        ratio = ""
        if i % 2 == 0 and i + 1 < len(results):
            ratio = f"{results[i + 1][1] / secs:.2f}x"
        print(f"| {name} | {secs:.2f} | {n / secs:,.0f} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
