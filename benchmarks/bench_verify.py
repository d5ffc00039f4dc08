"""Verify and rebuild-index benchmark: GB/s per core, and Spark scaling from 1 to 2 cores.

Writes one log dir per codec with :func:`kafkalog_spark.write_log` (``--records`` records of
16-byte keys and ``--value-size``-byte values, producer-sized batches, ``--segment-mb``
segments over ``--partitions`` partitions), then
measures, best of ``--repeat``:

* ``verify`` (local, one core: structure, CRCs, offsets, indexes, producer state) — GB/s of
  ``.log`` bytes; ``--deep`` adds record decoding;
* ``rebuild-index --force`` planning (the index build over every segment) — GB/s;
* the Spark verify job with ``local[1]`` and ``local[2]`` (each in a fresh process, since a
  JVM's master is fixed for its lifetime), session start-up excluded; shallow and ``--deep``;
* the machine's own ceiling for a memory-bound pass over the same files: one process versus
  two processes at once summing them as 64-bit words (no parsing at all). Shallow verify runs
  near memory speed, so its 1→2 speed-up cannot exceed this one.

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
from kafkalog_spark.inspect.verify import verify
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


def spark_seconds(path: Path, cores: int, repeat: int, deep: bool = False) -> float:
    """Verify job time with local[cores], measured in a fresh process (session start excluded)."""
    code = (
        "import sys, time, json\n"
        "from kafkalog_spark.spark import session\n"
        "from kafkalog_spark.recovery.verify_job import verify_spark\n"
        f"s = session('local[{cores}]')\n"
        f"verify_spark(s, {str(path)!r}, deep={deep})\n"  # warm-up: workers start, numba caches load
        "best = 1e9\n"
        f"for _ in range({repeat}):\n"
        f"    t = time.perf_counter(); verify_spark(s, sys.argv[1], deep={deep})\n"
        "    best = min(best, time.perf_counter() - t)\n"
        "print(json.dumps(best))\n")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip().splitlines()[-1])


def scan_seconds(files: list[Path], procs: int) -> float:
    """The machine's ceiling for a memory-bound pass: ``procs`` processes at once each sum
    (as uint64 words) an equal share of the page-cached ``files`` — the same bytes verify reads.
    Processes start, import, then wait for one go signal; the slowest one's time counts."""
    code = (
        "import mmap, sys, time, numpy as np\n"
        "sys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.readline()\n"
        "t = time.perf_counter()\n"
        "for p in sys.argv[1:]:\n"
        "    with open(p, 'rb') as f:\n"
        "        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)\n"
        "        np.frombuffer(m, np.uint64, len(m) // 8).sum()\n"
        "print(time.perf_counter() - t)\n")
    shares = [[str(f) for f in files[i::procs]] for i in range(procs)]
    running = [subprocess.Popen([sys.executable, "-c", code, *share], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True) for share in shares]
    for r in running:
        r.stdout.readline()
    for r in running:
        r.stdin.write("go\n")
        r.stdin.flush()
    return max(float(r.communicate()[0]) for r in running)


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
                d1 = spark_seconds(path, 1, 1, deep=True)
                d2 = spark_seconds(path, 2, 1, deep=True)
                files = sorted(path.rglob("*.log"))
                m1 = min(scan_seconds(files, 1) for _ in range(args.repeat))
                m2 = min(scan_seconds(files, 2) for _ in range(args.repeat))
                row.update(spark1=size / s1 / 1e9, spark2=size / s2 / 1e9, scaling=s1 / s2,
                           deep_scaling=d1 / d2, deep2=size / d2 / 1e9, memory_scaling=m1 / m2)
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
        head += (" Spark local[1] GB/s | Spark local[2] GB/s | 1→2 speed-up | Spark --deep local[2]"
                 " GB/s | --deep 1→2 speed-up | memory-bound scan 1→2 speed-up (ceiling) |")
        sep += "---:|---:|---:|---:|---:|---:|"
    print(head)
    print(sep)
    for r in rows:
        line = (f"| {r['codec']} | {r['GB']:.2f} | {r['verify']:.2f} | {r['deep']:.2f} | "
                f"{r['rebuild']:.2f} |")
        if "spark1" in r:
            line += (f" {r['spark1']:.2f} | {r['spark2']:.2f} | {r['scaling']:.2f}× |"
                     f" {r['deep2']:.2f} | {r['deep_scaling']:.2f}× | {r['memory_scaling']:.2f}× |")
        print(line)
    print("\n" + json.dumps(rows))


if __name__ == "__main__":
    main()
