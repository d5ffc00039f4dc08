"""Listing a log dir (benchmarks): :func:`~kafkalog_spark.log.discovery.discover` timed.

Every driver-side job starts by listing its log dirs (verify, migrate, compaction twice), so
its time is part of each job's serial share (``bench_scaling.py``). Prints the min and median
of ``--repeat`` listings after one untimed; run it from two checkouts side by side::

    cd TREE && PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_discovery.py \\
        --log-dir W/data/kafka-logs-0 --label TREE

Nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time

from kafkalog_spark.log.discovery import discover


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log-dir", required=True, action="append")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    found = discover(args.log_dir)
    segments = sum(len(p.segments) for p in found.all_partition_dirs())
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        discover(args.log_dir)
        times.append(time.perf_counter() - t0)
    print(f"{args.label} discover {segments} segments: min {min(times) * 1e3:.0f} ms, "
          f"median {statistics.median(times) * 1e3:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
