"""Benchmark (benchmarks layer): compaction throughput and retention planning time.

    .venv/bin/python benchmarks/bench_compaction.py [--records N] [--value-bytes B]
                                                    [--engine local|spark] [--segments S]

A generated log with 10% unique keys is compacted once (``--force``); the table gives MB/s and
records/s of the round, split into the key pass ("shuffle": key rows and retained offsets) and
the rewrite. Then retention is planned over a log dir of ``--segments`` (default 10,000) empty-
indexed small segments. Prints a markdown table with the machine, date and command.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np
import pyarrow as pa

from kafkalog_spark import write_log
from kafkalog_spark.compaction.compact import compact
from kafkalog_spark.retention.retain import plan_retention


def make_log(root: Path, records: int, value_bytes: int) -> Path:
    rng = np.random.default_rng(1)
    keys = rng.integers(0, max(1, records // 10), records)
    log_dir = root / "logs"
    step = 1_000_000
    for lo in range(0, records, step):
        hi = min(records, lo + step)
        table = pa.table({"key": pa.array([b"key-%08d" % k for k in keys[lo:hi]], pa.binary()),
                          "value": pa.array([b"v" * value_bytes] * (hi - lo), pa.binary())})
        write_log(table, log_dir, topic="bench", partition=0, segment_bytes=16 << 20,
                  max_batch_records=500)
    return log_dir


def make_segments(root: Path, n: int) -> Path:
    log_dir = root / "many"
    table = pa.table({"value": pa.array([b"x"] * n, pa.binary())})
    write_log(table, log_dir, topic="r", partition=0, segment_bytes=100, max_batch_records=1)
    return log_dir


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=2_000_000)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--engine", choices=("local", "spark"), default="local")
    p.add_argument("--segments", type=int, default=10_000)
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        log_dir = make_log(root, args.records, args.value_bytes)
        size = sum(f.stat().st_size for f in (log_dir / "bench-0").glob("*.log"))
        t0 = time.perf_counter()
        r = compact(log_dir, execute=True, force=True, engine=args.engine,
                    options={"cleanup.policy": "compact"})
        wall = time.perf_counter() - t0
        m = r.metrics
        rows.append((f"compaction ({args.engine}), {args.records:,} records, {size / 1e6:.0f} MB, "
                     f"10% unique keys", f"{size / 1e6 / wall:.1f} MB/s, "
                     f"{args.records / wall / 1e6:.2f} M records/s",
                     f"wall {wall:.1f} s: key pass {m.get('shuffle_seconds', 0):.1f} s, "
                     f"rewrite {m.get('rewrite_seconds', 0):.1f} s, kept {m['records_kept']:,}"))
        many = make_segments(root, args.segments)
        t0 = time.perf_counter()
        (plan,) = plan_retention(many, now_ms=2**62, options={"retention.ms": 1})
        t = time.perf_counter() - t0
        rows.append((f"retention planning, {args.segments:,} segments", f"{t:.2f} s",
                     f"{len(plan.deletions):,} segments deletable"))
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}; date: {date.today()}; "
          f"command: {' '.join([os.path.basename(sys.executable)] + sys.argv)}\n")
    print("| benchmark | result | detail |\n|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
