"""Data source benchmark: ``format("kafkalog")`` against ``format("parquet")`` in one Spark session.

The same records (16-byte keys, 100-byte values, ``--partitions`` partitions) are written once
as a Kafka log dir (``--codec``) and once as Parquet (snappy, Spark's writer, the columns of
the Kafka source's schema). Then, in one ``local[N]`` session, contenders interleaved, best of
``--repeat``:

* **scan**: the same query over both — ``sum(length(key)), sum(length(value)), count(*)`` —
  so both read the key and value bytes (a bare ``count()`` lets Parquet skip every column);
* **write**: one DataFrame (cached in memory first, so only the write is timed) written with
  ``format("kafkalog")`` (codec ``--codec``) and with ``format("parquet")``;
* **task memory by segment size** (``--segment-mb``, each in a fresh session, same records):
  peak RSS of the Python workers and the JVM during a kafkalog scan — it must not grow with the
  segment size.

The issue's goals: scan ≥ 0.8× and write ≥ 0.5× of Parquet's rows/s. Timings are printed,
never asserted.

    .venv/bin/python benchmarks/bench_datasource.py                     # 2 M records, local[2]
    .venv/bin/python benchmarks/bench_datasource.py --records 500000 --repeat 2 --segment-mb 16
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import kafkalog_spark as kl  # noqa: E402
from bench_migrate import make_records  # noqa: E402
from bench_scale import PRELUDE, run_process  # noqa: E402

# a fresh session scanning DIR (a log dir); prints the peak RSS of its workers and the JVM
SCAN_ONE = r'''
from pyspark.sql import functions as F
from kafkalog_spark.spark import session
s = session(sys.argv[4], driver_memory="2g")
df = s.read.format("kafkalog").load(DIR)
t0 = time.perf_counter()
df.select(F.sum(F.length("key")), F.sum(F.length("value")), F.count("*")).collect()
report(time.perf_counter() - t0, tasks=df.rdd.getNumPartitions())
'''


def scan_query(df) -> list:
    from pyspark.sql import functions as F

    return df.select(F.sum(F.length("key")), F.sum(F.length("value")), F.count("*")).collect()


def interleaved(contenders: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Best wall seconds of each contender, run in turn ``repeat`` times."""
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(repeat):
        for name, fn in contenders.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--codec", default="lz4", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--segment-mb", default="16,128,1024",
                    help="segment sizes (MB) for the task-memory rows; empty to skip")
    a = ap.parse_args(argv)
    from kafkalog_spark.spark import session

    work = Path(tempfile.mkdtemp(prefix="bench-datasource-"))
    try:
        table = make_records(a.records, a.partitions).drop_columns(["headers"])
        logs = work / "logs"
        kl.write_log(table, logs, codec=a.codec)
        spark = session(a.master, app_name="bench-datasource", driver_memory="2g")
        kafka = spark.read.format("kafkalog").load(str(logs))
        parquet_dir = work / "parquet"
        kafka.write.parquet(str(parquet_dir))
        parquet = spark.read.parquet(str(parquet_dir))
        scan_query(kafka)  # workers started, numba caches loaded
        scan = interleaved({"kafkalog": lambda: scan_query(kafka),
                            "parquet": lambda: scan_query(parquet)}, a.repeat)
        rows = parquet.select("key", "value", "topic", "partition", "timestamp").cache()
        rows.count()
        n = [0]

        def write(fmt: str) -> Callable[[], None]:
            def run() -> None:
                n[0] += 1
                out = work / f"out-{fmt}-{n[0]}"
                writer = rows.write.format(fmt).mode("overwrite")
                if fmt == "kafkalog":
                    writer = writer.option("compression", a.codec)
                writer.save(str(out))
                shutil.rmtree(out)
            return run

        write("kafkalog")()  # warm-up
        written = interleaved({"kafkalog": write("kafkalog"), "parquet": write("parquet")},
                              a.repeat)
        spark.stop()
        memory = []
        for mb in [int(x) for x in a.segment_mb.split(",") if x]:
            seg_logs = work / f"logs-{mb}"
            kl.write_log(table, seg_logs, codec=a.codec, segment_bytes=mb << 20)
            _, _, text = run_process([sys.executable, "-c", PRELUDE + SCAN_ONE, str(seg_logs),
                                      str(work), str(work), a.master])
            r = json.loads(next(line[7:] for line in text.splitlines()
                                if line.startswith("RESULT ")))
            memory.append((mb, r))
            shutil.rmtree(seg_logs)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"Machine: {platform.machine()}, {platform.python_version()}  \n"
          f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  \n"
          f"Command: `{' '.join([Path(sys.executable).name, *sys.argv])}`  \n"
          f"Data: {a.records:,} records, 16-byte keys, 100-byte values, {a.partitions} "
          f"partitions, codec {a.codec}; Spark {a.master}; best of {a.repeat}, interleaved\n")
    print("| operation | kafkalog rows/s | parquet rows/s | kafkalog / parquet | goal |")
    print("|---|---:|---:|---:|---:|")
    for op, res, goal in (("scan (key, value)", scan, 0.8), ("write", written, 0.5)):
        k, p = a.records / res["kafkalog"], a.records / res["parquet"]
        print(f"| {op} | {k:,.0f} | {p:,.0f} | {k / p:.2f}x | {goal}x |")
    if memory:
        print("\n| segment MB | scan seconds | tasks | Python worker peak MB | JVM peak MB |")
        print("|---:|---:|---:|---:|---:|")
        for mb, r in memory:
            print(f"| {mb} | {r['seconds']:.2f} | {r.get('tasks')} | {r['tasks_mb']} | "
                  f"{r['jvm_mb']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
