"""Benchmark (benchmarks layer): compaction throughput and retention planning time.

    .venv/bin/python benchmarks/bench_compaction.py [--records N] [--value-bytes B]
                                                    [--engine local|spark] [--segments S]
                                                    [--warm]

A generated log with 10% unique keys is compacted once (``--force``); the table gives MB/s and
records/s of the round, split into the key pass ("shuffle": key rows and retained offsets) and
the rewrite. ``--warm`` first compacts a 50,000-record log with the same engine (its own row):
the measured round then runs in warm Python workers (imports, numba caches, Spark session and
JVM code paths), which a long-running Spark application sees after its first job. Then retention is planned over a log dir of ``--segments`` (default 10,000) empty-
indexed small segments. Prints a markdown table with the machine, date and command.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import threading
import time
from datetime import date
from pathlib import Path

import numpy as np
import pyarrow as pa

from kafkalog_spark import write_log
from kafkalog_spark.compaction.compact import compact
from kafkalog_spark.retention.retain import plan_retention


def make_log(root: Path, records: int, value_bytes: int, segment_bytes: int = 16 << 20) -> Path:
    rng = np.random.default_rng(1)
    keys = rng.integers(0, max(1, records // 10), records)
    log_dir = root / "logs"
    step = 1_000_000
    for lo in range(0, records, step):
        hi = min(records, lo + step)
        table = pa.table({"key": pa.array([b"key-%08d" % k for k in keys[lo:hi]], pa.binary()),
                          "value": pa.array([b"v" * value_bytes] * (hi - lo), pa.binary())})
        write_log(table, log_dir, topic="bench", partition=0, segment_bytes=segment_bytes,
                  max_batch_records=500)
    return log_dir


def make_segments(root: Path, n: int) -> Path:
    log_dir = root / "many"
    table = pa.table({"value": pa.array([b"x"] * n, pa.binary())})
    write_log(table, log_dir, topic="r", partition=0, segment_bytes=100, max_batch_records=1)
    return log_dir


def rss_bytes() -> int:
    """This process's anonymous resident memory now (``RssAnon`` in /proc: heap and buffers,
    not the page cache of memory-mapped segment files, which the kernel can drop)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise OSError("no RssAnon in /proc/self/status")


class PeakRss:
    """Samples this process's anonymous RSS every 20 ms while in the ``with`` block; ``growth``
    is the peak above the value at entry (what the driver holds for the job, not what made
    the data)."""

    def __enter__(self) -> "PeakRss":
        self.base = self.peak = rss_bytes()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self) -> None:
        while not self.done.wait(0.02):
            self.peak = max(self.peak, rss_bytes())

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()
        self.peak = max(self.peak, rss_bytes())
        self.growth = self.peak - self.base


def compaction_row(log_dir: Path, records: int, engine: str, label: str) -> tuple[str, str, str]:
    """Compact ``log_dir`` once (forced) and describe the round as a table row."""
    size = sum(f.stat().st_size for f in (log_dir / "bench-0").glob("*.log"))
    t0 = time.perf_counter()
    with PeakRss() as rss:
        r = compact(log_dir, execute=True, force=True, engine=engine,
                    options={"cleanup.policy": "compact"})
    wall = time.perf_counter() - t0
    m = r.metrics
    return (f"{label}compaction ({engine}), {records:,} records, {size / 1e6:.0f} MB, "
            f"10% unique keys", f"{size / 1e6 / wall:.1f} MB/s, "
            f"{records / wall / 1e6:.2f} M records/s",
            f"wall {wall:.1f} s: key pass {m.get('shuffle_seconds', 0):.1f} s, "
            f"rewrite {m.get('rewrite_seconds', 0):.1f} s, kept {m['records_kept']:,}; "
            f"driver anonymous RSS +{rss.growth / 2**20:.0f} MiB")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=2_000_000)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--engine", choices=("local", "spark"), default="local")
    p.add_argument("--segments", type=int, default=10_000)
    p.add_argument("--warm", action="store_true",
                   help="compact a small log first (reported on its own row)")
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = [(root / "warm", 50_000, 1 << 20, "warm-up, ")] if args.warm else []
        for sub, n, seg, label in runs + [(root, args.records, 16 << 20, "")]:
            rows.append(compaction_row(make_log(sub, n, args.value_bytes, seg), n, args.engine,
                                       label))
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
