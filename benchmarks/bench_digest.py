"""Key digests for compaction (benchmarks layer): the numba MurmurHash3 x64_128 kernel against MD5
(what Kafka's cleaner uses) and against the ``mmh3`` C extension, on the same keys, one process.

    .venv/bin/python benchmarks/bench_digest.py [--keys N] [--repeat R]

Two key sets: ``key-%08d`` (12 bytes, the compaction benchmark's keys) and 100-byte random
keys. Contenders per set, best of ``--repeat``, interleaved:

* ``murmur3 (numba)``: :func:`kafkalog_spark.codec.records.digest.key_digests` over the Arrow column —
  what the compaction key pass runs;
* ``md5 (hashlib)``: ``hashlib.md5(key).digest()`` per key (a Python loop over the column's
  values, which is how Python code would compute Kafka's digest; no vectorised MD5 exists in
  numpy, Arrow or numba);
* ``murmur3 (mmh3, C)``: ``mmh3.hash128`` per key, the same loop — the reference
  implementation, to separate the hash's cost from the loop's.

Prints ns per key and each contender's time as a multiple of the numba kernel's. Timings are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import sys
import time
from datetime import datetime, timezone

import numpy as np
import pyarrow as pa

from kafkalog_spark.codec.records.digest import key_digests


def _md5(keys: pa.Array) -> None:
    for k in keys.to_pylist():
        hashlib.md5(k).digest()


def _mmh3(keys: pa.Array) -> None:
    import mmh3

    for k in keys.to_pylist():
        mmh3.hash128(k, 0, True)


CONTENDERS = {"murmur3 (numba)": key_digests, "md5 (hashlib)": _md5,
              "murmur3 (mmh3, C)": _mmh3}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--keys", type=int, default=2_000_000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    rng = np.random.default_rng(1)
    sets = {
        "12-byte keys": pa.array([b"key-%08d" % i for i in range(args.keys)], pa.binary()),
        "100-byte keys": pa.array([bytes(rng.integers(0, 256, 100, dtype=np.uint8))
                                   for _ in range(args.keys)], pa.binary()),
    }
    key_digests(sets["12-byte keys"].slice(0, 10))  # compiled or loaded from the cache
    lines = ["| keys | contender | ns per key | × numba |", "|---|---|---:|---:|"]
    for label, keys in sets.items():
        best = {name: float("inf") for name in CONTENDERS}
        for _ in range(args.repeat):
            for name, fn in CONTENDERS.items():
                t0 = time.perf_counter()
                fn(keys)
                best[name] = min(best[name], time.perf_counter() - t0)
        base = best["murmur3 (numba)"]
        for name, t in best.items():
            lines.append(f"| {label} | {name} | {t / len(keys) * 1e9:.1f} | {t / base:.1f} |")
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    print(f"# bench_digest: {platform.machine()} {cpu}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, "
          f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}")
    print(f"# {' '.join([os.path.basename(sys.executable)] + sys.argv)}; "
          f"{args.keys:,} keys per set, best of {args.repeat}\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
