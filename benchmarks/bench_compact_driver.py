"""What ``compact --engine spark``'s driver does outside tasks (benchmarks): its phases timed and
the file operations of its swaps counted.

One ``compact --engine spark --execute --force`` (``cleanup.policy=compact``) in a ``local[1]``
session with ``spark.default.parallelism`` 128 (as ``bench_scaling.py`` runs it), on a copy of
``--log`` made before the clock starts. Printed: each driver phase's start and duration from the
call's start — ``discover``, ``plan_log_dir`` (with the Spark engine a job of planning tasks),
each Spark action (``collect``, ``foreach``), ``swap_all`` (every partition's swap, in the swap
threads), ``remove_replaced`` (the replaced files' removal, a Spark job) — and, for the
swaps, how many calls each file operation of the local storage got and their summed seconds
(over the threads). ``--swap-threads`` changes ``compact.SWAP_THREADS``. Timings are printed,
never asserted.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_compact_driver.py --log /tmp/s33/big/data/kafka-logs-0 --copy /tmp/cd/copy
"""

from __future__ import annotations

import argparse
import shutil
import threading
import time
from pathlib import Path

FILE_OPS = ("fsync_dir", "rename", "remove", "set_mtime", "write_whole", "is_file", "exists")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", type=Path, required=True, help="a log dir (not changed: copied)")
    ap.add_argument("--copy", type=Path, required=True, help="where the copy is compacted")
    ap.add_argument("--swap-threads", type=int, default=None)
    args = ap.parse_args()

    import pyspark

    from kafkalog_spark.compaction import compact as C
    from kafkalog_spark.compaction import spark_job as J
    from kafkalog_spark.spark import session
    from kafkalog_spark.storage.local import LocalStorage

    if args.swap_threads:
        C.SWAP_THREADS = args.swap_threads
    spark = session("local[1]", app_name="bench-compact-driver",
                    conf={"spark.default.parallelism": "128",
                          "spark.sql.shuffle.partitions": "128"})
    shutil.rmtree(args.copy, ignore_errors=True)
    shutil.copytree(args.log, args.copy)

    phases: list[tuple[str, float, float]] = []
    ops: dict[str, list[float]] = {}
    lock = threading.Lock()
    counting = threading.Event()

    def timed(owner, name: str, record) -> None:
        real = getattr(owner, name)

        def call(*a, **k):
            t = time.perf_counter()
            try:
                return real(*a, **k)
            finally:
                record(name, t, time.perf_counter())
        setattr(owner, name, call)

    def phase(name: str, t0: float, t1: float) -> None:
        phases.append((name, t0, t1))

    def op(name: str, t0: float, t1: float) -> None:
        if counting.is_set():
            with lock:
                n, s = ops.get(name, (0, 0.0))
                ops[name] = (n + 1, s + t1 - t0)

    for name in ("discover", "plan_log_dir"):
        timed(C, name, phase)
    for name in ("collect", "foreach"):
        timed(pyspark.RDD, name, phase)
    if hasattr(J, "remove_replaced"):  # the replaced files' removal job (a later checkout)
        timed(J, "remove_replaced", phase)
    for name in FILE_OPS:
        timed(LocalStorage, name, op)
    swap_all = C.swap_all

    def counted_swaps(*a, **k):
        t = time.perf_counter()
        counting.set()
        try:
            return swap_all(*a, **k)
        finally:
            counting.clear()
            phase("swap_all", t, time.perf_counter())
    C.swap_all = counted_swaps

    t0 = time.perf_counter()
    result = C.compact([str(args.copy)], execute=True, force=True, engine="spark", spark=spark,
                       options={"cleanup.policy": "compact"})
    total = time.perf_counter() - t0
    print(f"# compact --engine spark: {total:.2f} s, {result.metrics['partitions_cleaned']} "
          f"partitions, {result.metrics['segments_rewritten']} segments rewritten, swap threads "
          f"{C.SWAP_THREADS}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for name, a, b in sorted(phases, key=lambda p: p[1]):
        print(f"{name:14s} start {a - t0:8.2f} s  took {b - a:7.2f} s")
    print("swap file operations (calls, summed s):",
          ", ".join(f"{k} {n} {s:.2f}" for k, (n, s) in sorted(ops.items())))
    spark.stop()
    shutil.rmtree(args.copy, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
