"""Queries whose tasks stop reading early (benchmarks): each kills its Python worker, and Spark
forks a fresh one for the next task; what a fresh worker pays before its first row.

``df.limit(n)`` written to a sink (or joined, or aggregated) runs every scan task, and each task
stops once it has its ``n`` rows: Spark then kills the task's Python worker instead of taking it
back, and the next task waits for a new one, forked by the session's worker daemon. Measured,
in one local session per checkout (after an untimed warm-up scan), on a log of ``--partitions``
partitions (``--records`` each, lz4 and uncompressed alternating, 500-record batches) read with
``minPartitions`` = partitions:

* ``full scan``: every column into Spark's ``noop`` sink (workers reused: the baseline);
* ``limit(1000)``: ``df.limit(1000)`` into the ``noop`` sink: one fresh worker per task;
* ``full scan again``: the first query once more, after the churn.

Each checkout of ``--trees`` runs in a child process with it first on ``PYTHONPATH``; the
children alternate, ``--runs`` each; printed: each query's median (min–max) seconds per
checkout. Timings are printed, never asserted.

    .venv/bin/python benchmarks/bench_churn.py --trees /tmp/before,/work/main --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUERIES = ("full scan", "limit(1000)", "full scan again")


def make_log(folder: Path, partitions: int, records: int) -> None:
    import pyarrow as pa

    from kafkalog_spark import write_log

    rng = random.Random(7)
    values = [bytes(rng.getrandbits(8) for _ in range(50)) + b"text " * 10 for _ in range(997)]
    table = pa.table({"key": [b"k%d" % (i % 5000) for i in range(records)],
                      "value": [values[i % 997] for i in range(records)]})
    for p in range(partitions):
        write_log(table, folder, topic="churn", partition=p, codec="lz4" if p % 2 else "none",
                  max_batch_records=500)


def child(log_dir: str, partitions: int) -> None:
    """One session: the queries, timed; prints ``RESULT {query: seconds}``."""
    from kafkalog_spark.spark import session

    spark = session("local[1]")
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.format("kafkalog").option("minPartitions", str(partitions)).load(log_dir)
    df.write.format("noop").mode("overwrite").save()  # warm-up: workers started, kernels loaded
    shapes = {"full scan": df, "limit(1000)": df.limit(1000), "full scan again": df}
    out = {}
    for name in QUERIES:
        t0 = time.perf_counter()
        shapes[name].write.format("noop").mode("overwrite").save()
        out[name] = time.perf_counter() - t0
    spark.stop()
    print("RESULT " + json.dumps(out), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=32)
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.partitions)
        return 0
    trees = args.trees.split(",")
    with tempfile.TemporaryDirectory(prefix="bench-churn-") as folder:
        make_log(Path(folder), args.partitions, args.records)
        print(f"# bench_churn: {platform.machine()}, {os.cpu_count()} CPUs, "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
              f"{os.getloadavg()[0]:.1f}; {args.partitions} partitions x {args.records:,} "
              f"records\n# command: {' '.join(sys.argv)}", flush=True)
        times: dict[str, dict[str, list[float]]] = {t: {q: [] for q in QUERIES} for t in trees}
        for _ in range(args.runs):
            for tree in trees:
                env = dict(os.environ, PYTHONPATH=tree)
                env.pop("PYSPARK_GATEWAY_PORT", None)
                done = subprocess.run([sys.executable, __file__, "--child", folder,
                                       "--partitions", str(args.partitions)], env=env,
                                      capture_output=True, text=True, cwd=tree)
                if done.returncode:
                    raise SystemExit(f"{tree}: exit {done.returncode}\n{done.stderr[-3000:]}")
                got = json.loads(done.stdout.split("RESULT ", 1)[1].splitlines()[0])
                for q in QUERIES:
                    times[tree][q].append(got[q])
        print(f"# done, load average {os.getloadavg()[0]:.1f}\n")
        print("| checkout | " + " | ".join(f"{q} s" for q in QUERIES) + " |")
        print("|---|" + "---|" * len(QUERIES))
        for tree in trees:
            cells = [f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f})"
                     for v in (times[tree][q] for q in QUERIES)]
            print(f"| {tree} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
