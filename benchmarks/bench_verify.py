"""Verify and rebuild-index benchmark: GB/s per core, and Spark scaling from 1 to 2 cores.

Writes one log dir per codec with :func:`kafkalog_spark.write_log` (``--records`` records of
16-byte keys and ``--value-size``-byte values, producer-sized batches, ``--segment-mb``
segments over ``--partitions`` partitions), then
measures, best of ``--repeat``:

* ``verify`` (local, one core: structure, CRCs, offsets, indexes, producer state) — GB/s of
  ``.log`` bytes; ``--deep`` adds record decoding;
* ``rebuild-index --force`` planning (the index build over every segment) — GB/s;
* the Spark verify job with ``local[1]`` and ``local[2]`` (each in a fresh process, since a
  JVM's master is fixed for its lifetime), session start-up excluded.

    .venv/bin/python benchmarks/bench_verify.py                      # markdown table
    .venv/bin/python benchmarks/bench_verify.py --records 500000 --repeat 1 --no-spark

The page cache is warm after the first repeat; best-of reports what the code can do. Prints a
markdown table headed by machine, date and command.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

import kafkalog_spark as kl
from kafkalog_spark.log.verify import verify
from kafkalog_spark.recovery.rebuild import rebuild_indexes


def make_table(n: int, value_size: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    alphabet = np.frombuffer(b'abcdefghijklmnopqrstuvwxyz0123456789 {}":,', np.uint8)
    values = alphabet[rng.integers(0, len(alphabet) // 3, size=n * value_size)]
    keys = np.frombuffer(b"".join(b"key-%012d" % (i % 100_000) for i in range(n)), np.uint8)
    val_offsets = np.arange(0, (n + 1) * value_size, value_size, dtype=np.int32)
    key_offsets = np.arange(0, (n + 1) * 16, 16, dtype=np.int32)
    return pa.table({
        "key": pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(key_offsets), pa.py_buffer(keys)]),
        "value": pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(val_offsets), pa.py_buffer(values)]),
        "timestamp": pa.array((1_700_000_000_000 + np.arange(n, dtype=np.int64)) * 1000,
                              pa.timestamp("us", tz="UTC")),
    })


def best_of(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def log_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*.log"))


def spark_seconds(path: Path, cores: int, repeat: int) -> float:
    """Verify job time with local[cores], measured in a fresh process (session start excluded)."""
    code = (
        "import sys, time, json\n"
        "from kafkalog_spark.spark import session\n"
        "from kafkalog_spark.recovery.verify_job import verify_spark\n"
        f"s = session('local[{cores}]')\n"
        f"verify_spark(s, {str(path)!r})\n"  # warm-up: workers start, numba caches load
        "best = 1e9\n"
        f"for _ in range({repeat}):\n"
        "    t = time.perf_counter(); verify_spark(s, sys.argv[1]); best = min(best, time.perf_counter() - t)\n"
        "print(json.dumps(best))\n")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--batch-records", type=int, default=150)
    ap.add_argument("--codecs", default="none,zstd,lz4")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=4, help="spread over this many partitions")
    ap.add_argument("--segment-mb", type=int, default=64, help="segment.bytes in MiB")
    ap.add_argument("--no-spark", action="store_true")
    args = ap.parse_args()
    table = make_table(args.records, args.value_size)
    table = table.append_column("partition", pa.array(np.arange(args.records) % args.partitions, pa.int32()))
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp:
        for codec in args.codecs.split(","):
            path = Path(tmp) / codec
            kl.write_log(table, path, topic="bench", codec=codec, segment_bytes=args.segment_mb << 20,
                         max_batch_records=args.batch_records)
            size = log_bytes(path)
            assert verify(path).ok
            t_verify = best_of(lambda: verify(path), args.repeat)
            t_deep = best_of(lambda: verify(path, deep=True), 1 if args.repeat > 1 else args.repeat)
            t_rebuild = best_of(lambda: rebuild_indexes(path, force=True, kinds=("index", "timeindex")),
                                args.repeat)
            row = {"codec": codec, "GB": size / 1e9, "verify": size / t_verify / 1e9,
                   "deep": size / t_deep / 1e9, "rebuild": size / t_rebuild / 1e9}
            if not args.no_spark:
                s1 = spark_seconds(path, 1, args.repeat)
                s2 = spark_seconds(path, 2, args.repeat)
                row.update(spark1=size / s1 / 1e9, spark2=size / s2 / 1e9, scaling=s1 / s2)
            rows.append(row)
    print(f"machine: {platform.node()} · {platform.machine()} · {os.cpu_count()} cpus · "
          f"{platform.python_version()}")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"command: {' '.join(sys.argv)}")
    print(f"data: {args.records:,} records × {args.value_size} B values, {args.batch_records} "
          f"records/batch, {args.partitions} partitions, {args.segment_mb} MiB segments\n")
    head = "| codec | .log GB | verify GB/s/core | verify --deep GB/s/core | rebuild-index GB/s/core |"
    sep = "|---|---:|---:|---:|---:|"
    if not args.no_spark:
        head += " Spark local[1] GB/s | Spark local[2] GB/s | 1→2 speed-up |"
        sep += "---:|---:|---:|"
    print(head)
    print(sep)
    for r in rows:
        line = (f"| {r['codec']} | {r['GB']:.2f} | {r['verify']:.2f} | {r['deep']:.2f} | "
                f"{r['rebuild']:.2f} |")
        if "spark1" in r:
            line += f" {r['spark1']:.2f} | {r['spark2']:.2f} | {r['scaling']:.2f}× |"
        print(line)
    print("\n" + json.dumps(rows))


if __name__ == "__main__":
    main()
