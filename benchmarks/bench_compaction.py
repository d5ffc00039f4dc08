"""Benchmark (benchmarks layer): compaction engines side by side, key-map memory as data grows,
retention planning.

    .venv/bin/python benchmarks/bench_compaction.py [--records N] [--repeat R]
                                                    [--warmup W] [--variants local,spark,...]
    .venv/bin/python benchmarks/bench_compaction.py --memory [--records N] [--dedupe-mib M]
    .venv/bin/python benchmarks/bench_compaction.py --passes 128,16,4 [--records N]

Throughput (default): one generated single-partition log (100-byte values, 10% unique keys,
16 MiB segments) is compacted with ``--force`` by every variant — the local engine with key
digests (the default) or exact keys, the Spark engine (``local[*]``: this machine's cores) with
digests or exact keys — each on a fresh copy of the same data (copies are not timed), in one
process, round-robin ``--repeat`` times after ``--warmup`` rounds of every variant (Python
workers, numba caches and the JVM's compiled code paths warm: the JVM needs about two rounds at
this size). Prints the best and median wall time, MB/s, the
key pass ("shuffle") and rewrite seconds of the best run, and each variant's speed as a ratio
to the local engine's (same data, same process, alternating).

Memory (``--memory``): the local engine compacts logs of N/8, N/4, N/2 and N records (keys
10% unique, so distinct keys grow with the data), each run in a fresh child process on a fresh
copy, with the key map bounded to ``--dedupe-mib`` MiB (default 16), with the default 128 MiB,
and, for contrast, with exact keys (one in-memory aggregation, no bound); prints each child's
anonymous memory (``RssAnon``, sampled every 5 ms) before and at its peak during the
compaction, its ``VmHWM`` (which also counts the mapped segment files' page cache), and the
passes taken.

Passes (``--passes``): the local engine compacts fresh copies of one log (``--records``, keys
10% unique) with each key-map budget given (MiB), each in a fresh child process; a budget
smaller than the distinct keys takes several passes (Kafka's cleaner rounds, each cleaning up to
where its map filled). Prints passes, records and bytes read, seconds and each run's time as a
multiple of the first budget's.

Then retention is planned over a log dir of ``--segments`` small segments. Prints markdown
tables headed by machine, date and command. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa

from kafkalog_spark import write_log
from kafkalog_spark.compaction.compact import compact
from kafkalog_spark.retention.retain import plan_retention

VARIANTS = {  # name: (engine, exact_keys)
    "local": ("local", False), "local-exact": ("local", True),
    "spark": ("spark", False), "spark-exact": ("spark", True),
}
OPTIONS = {"cleanup.policy": "compact"}


def make_log(root: Path, records: int, value_bytes: int = 100,
             segment_bytes: int = 16 << 20) -> Path:
    """A one-partition log dir of ``records`` records with 10% unique keys."""
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


def log_bytes(log_dir: Path) -> int:
    return sum(f.stat().st_size for f in log_dir.rglob("*.log"))


def run_variant(name: str, src: Path, scratch: Path, spark) -> dict:
    """Compact a fresh copy of ``src`` with variant ``name``; wall time and the round's
    metrics."""
    copy = scratch / name
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(src, copy)
    engine, exact = VARIANTS[name]
    t0 = time.perf_counter()
    r = compact(copy, execute=True, force=True, engine=engine, exact_keys=exact,
                spark=spark if engine == "spark" else None, options=OPTIONS)
    wall = time.perf_counter() - t0
    m = r.metrics
    shutil.rmtree(copy)
    return {"wall": wall, "shuffle": m.get("shuffle_seconds", 0.0),
            "rewrite": m.get("rewrite_seconds", 0.0), "kept": m["records_kept"]}


def throughput(args, root: Path) -> list[str]:
    names = args.variants.split(",")
    src = make_log(root / "src", args.records)
    size = log_bytes(src)
    spark = None
    if any(VARIANTS[n][0] == "spark" for n in names):
        from kafkalog_spark.spark import session

        spark = session()
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for rnd in range(args.warmup + args.repeat):
        for n in names:
            got = run_variant(n, src, root / "scratch", spark)
            if rnd >= args.warmup:
                runs[n].append(got)
    kept = {runs[n][0]["kept"] for n in names}
    assert len(kept) == 1, f"variants kept different record counts: {kept}"
    base = min(r["wall"] for r in runs[names[0]])
    lines = [f"{args.records:,} records, {size / 1e6:.0f} MB, 10% unique keys, "
             f"best and median of {args.repeat}; ratio = the first variant's best time / "
             f"this variant's\n",
             "| variant | best s | median s | MB/s (best) | key pass s | rewrite s | ratio |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for n in names:
        best = min(runs[n], key=lambda r: r["wall"])
        med = statistics.median(r["wall"] for r in runs[n])
        lines.append(f"| {n} | {best['wall']:.2f} | {med:.2f} | {size / 1e6 / best['wall']:.1f} "
                     f"| {best['shuffle']:.2f} | {best['rewrite']:.2f} | "
                     f"{base / best['wall']:.2f} |")
    return lines


def _status_kib(field: str) -> int:
    """A ``/proc/self/status`` memory figure in KiB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


class PeakAnon:
    """Samples this process's anonymous resident memory (``RssAnon``: heap and buffers — not
    the page cache of the segment files it maps, which ``VmHWM`` would count and the kernel
    can drop) every 5 ms while in the ``with`` block."""

    def __enter__(self) -> "PeakAnon":
        import threading

        self.before = self.peak = _status_kib("RssAnon")
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self) -> None:
        while not self.done.wait(0.005):
            self.peak = max(self.peak, _status_kib("RssAnon"))

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()
        self.peak = max(self.peak, _status_kib("RssAnon"))


def child_rss(args) -> None:
    """``--child LOG_DIR``: compact it (a fresh copy), print peak memory before and during."""
    log_dir = Path(args.child)
    size = log_bytes(log_dir)
    t0 = time.perf_counter()
    with PeakAnon() as anon:
        r = compact(log_dir, execute=True, force=True, options=OPTIONS, exact_keys=args.exact,
                    dedupe_buffer_bytes=args.dedupe_mib << 20)
    wall = time.perf_counter() - t0
    print("RESULT " + json.dumps({"bytes": size, "peak_kib": anon.peak, "before_kib": anon.before,
                                  "hwm_kib": _status_kib("VmHWM"),
                                  "passes": r.metrics["passes"], "wall": wall,
                                  "kept": r.metrics["records_kept"],
                                  "records_read": r.metrics.get("records_read", 0),
                                  "bytes_read": r.metrics.get("bytes_read", 0)}))


def run_child(copy: Path, mib: int, exact: bool = False) -> dict:
    """Compact ``copy`` in a fresh process (:func:`child_rss`) and return its result."""
    cmd = [sys.executable, __file__, "--child", str(copy), "--dedupe-mib", str(mib)]
    out = subprocess.run(cmd + (["--exact"] if exact else []), capture_output=True,
                         text=True, check=True).stdout
    return json.loads([x for x in out.splitlines() if x.startswith("RESULT ")][-1][7:])


def passes(args, root: Path) -> list[str]:
    src = make_log(root / "src", args.records)
    lines = [f"{args.records:,} records, {log_bytes(src) / 1e9:.2f} GB, {args.records // 10:,} "
             "distinct keys; local engine, each budget in a fresh process on a fresh copy\n",
             "| dedupe buffer MiB | passes | records read | bytes read GB | seconds | x first |",
             "|---:|---:|---:|---:|---:|---:|"]
    first = None
    for mib in (int(m) for m in args.passes.split(",")):
        copy = root / "copy"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(src, copy)
        r = run_child(copy, mib)
        first = first or r["wall"]
        lines.append(f"| {mib} | {r['passes']} | {r['records_read'] / 1e6:.1f} M | "
                     f"{r['bytes_read'] / 1e9:.2f} | {r['wall']:.2f} | {r['wall'] / first:.1f} |")
    shutil.rmtree(root / "copy", ignore_errors=True)
    return lines


def memory(args, root: Path) -> list[str]:
    lines = [f"local engine, each compaction in a fresh process on a fresh copy of the log (made "
             f"by the parent); anonymous RSS (RssAnon) before and at its peak during the "
             f"compaction, and VmHWM (peak RSS including mapped segment files) at the end\n",
             "| records | log MB | distinct keys | keys | map bound MiB | passes | anon before MiB "
             "| anon peak MiB | anon growth MiB | VmHWM MiB | s |",
             "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for k in (8, 4, 2, 1):
        n = args.records // k
        src = make_log(root / f"src-{n}", n)
        for exact, mib in ((False, args.dedupe_mib), (False, 128), (True, args.dedupe_mib)):
            copy = root / "copy"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(src, copy)
            r = run_child(copy, mib, exact)
            lines.append(f"| {n:,} | {r['bytes'] / 1e6:.0f} | {n // 10:,} | "
                         f"{'exact (no bound)' if exact else 'digest map'} | "
                         f"{'-' if exact else mib} | {r['passes']} | "
                         f"{r['before_kib'] / 1024:.0f} | {r['peak_kib'] / 1024:.0f} | "
                         f"{(r['peak_kib'] - r['before_kib']) / 1024:.0f} | "
                         f"{r['hwm_kib'] / 1024:.0f} | {r['wall']:.1f} |")
        shutil.rmtree(src.parent)
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=8_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--variants", default="local,spark,local-exact,spark-exact")
    p.add_argument("--memory", action="store_true", help="key-map memory as data grows")
    p.add_argument("--dedupe-mib", type=int, default=16)
    p.add_argument("--passes", default=None, help="key-map budgets in MiB, e.g. 128,16,4")
    p.add_argument("--segments", type=int, default=10_000)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--exact", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child_rss(args)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        lines = (memory(args, root) if args.memory else passes(args, root) if args.passes
                 else throughput(args, root))
        many = make_segments(root, args.segments)
        t0 = time.perf_counter()
        (plan,) = plan_retention(many, now_ms=2**62, options={"retention.ms": 1})
        lines.append(f"\nretention planning, {args.segments:,} segments: "
                     f"{time.perf_counter() - t0:.2f} s ({len(plan.deletions):,} deletable)")
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    print(f"# bench_compaction: {platform.machine()} {cpu}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, "
          f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}")
    print(f"# {' '.join([os.path.basename(sys.executable)] + sys.argv)}\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
