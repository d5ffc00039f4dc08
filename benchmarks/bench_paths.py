"""The library's main paths timed in one process — write, discover, scan (verify), decode
(read_log) — and the same paths compared between two checkouts of the project.

Run alone, it writes a log dir (``--records`` records, 16-byte keys, ``--value-size``-byte
values, producer-sized batches, ``--segment-mb`` segments over ``--partitions`` partitions)
once per codec into ``--data`` and prints, best of ``--repeat``, the seconds of:

* ``write``: :func:`kafkalog_spark.write_log` of the records (encode, stage, publish);
* ``discover``: listing the log dir (:func:`kafkalog_spark.log.discovery.discover`);
* ``scan``: :func:`kafkalog_spark.verify` (shallow: the entry walk, CRCs, indexes);
* ``decode``: :func:`kafkalog_spark.read_log` (every record into Arrow).

``--compare OLD NEW`` runs this script alternately under the two checkouts (``PYTHONPATH``
set to each; the installed venv provides the dependencies), ``--rounds`` times each, in fresh
processes, on the same data, and prints every figure's best time and the NEW/OLD ratio::

    .venv/bin/python benchmarks/bench_paths.py                       # this checkout
    git worktree add /tmp/before <commit>                            # a checkout to compare
    .venv/bin/python benchmarks/bench_paths.py --compare /tmp/before .

A ratio below 1 means NEW is faster. Single figures move ±10-30% on a shared machine; the
rounds alternate so that drift hits both sides alike.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

OPS = ("write", "discover", "scan", "decode")
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_codec's record generator


def make_table(n: int, value_size: int, partitions: int):
    """bench_codec's records, spread round-robin over ``partitions``."""
    import numpy as np
    import pyarrow as pa
    from bench_codec import make_table as codec_records

    table = codec_records(n, value_size)
    return table.append_column("partition", pa.array(np.arange(n, dtype=np.int32) % partitions))


def measure(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Best-of-``repeat`` seconds per (codec, op), in this process."""
    import kafkalog_spark as kl
    from kafkalog_spark.log.discovery import discover

    table = make_table(args.records, args.value_size, args.partitions)
    out: dict[str, dict[str, float]] = {}
    data = Path(args.data)
    for codec in args.codecs.split(","):
        best = {op: float("inf") for op in OPS}
        for r in range(args.repeat):
            target = data / f"write-{codec}-{os.getpid()}-{r}"
            t0 = time.perf_counter()
            kl.write_log(table, target, topic="bench", codec=codec,
                         segment_bytes=args.segment_mb << 20,
                         max_batch_records=args.batch_records)
            best["write"] = min(best["write"], time.perf_counter() - t0)
            for op, fn in (("discover", lambda: discover(target)),
                           ("scan", lambda: kl.verify(target)),
                           ("decode", lambda: kl.read_log(target))):
                t0 = time.perf_counter()
                result = fn()
                best[op] = min(best[op], time.perf_counter() - t0)
                del result
            _remove(target)
        out[codec] = best
    return out


def _remove(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def compare(args: argparse.Namespace) -> None:
    old, new = (str(Path(p).resolve()) for p in args.compare)
    runs: dict[str, list[dict]] = {old: [], new: []}
    argv = [sys.executable, __file__, "--json", "--records", str(args.records),
            "--value-size", str(args.value_size), "--batch-records", str(args.batch_records),
            "--partitions", str(args.partitions), "--segment-mb", str(args.segment_mb),
            "--codecs", args.codecs, "--repeat", str(args.repeat), "--data", args.data]
    for _ in range(args.rounds):
        for tree in (old, new):
            env = dict(os.environ, PYTHONPATH=tree)
            done = subprocess.run(argv, env=env, check=True, capture_output=True, text=True)
            runs[tree].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"# bench_paths --compare: {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"# OLD {old}\n# NEW {new}")
    print(f"# {args.records:,} records x {args.value_size} B, best of {args.repeat} in each of "
          f"{args.rounds} alternating rounds\n")
    print("| codec | op | OLD s | NEW s | NEW/OLD |")
    print("|---|---|---:|---:|---:|")
    for codec in args.codecs.split(","):
        for op in OPS:
            a = min(r[codec][op] for r in runs[old])
            b = min(r[codec][op] for r in runs[new])
            print(f"| {codec} | {op} | {a:.3f} | {b:.3f} | {b / a:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--batch-records", type=int, default=150)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--segment-mb", type=int, default=64)
    ap.add_argument("--codecs", default="none,lz4")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds for --compare")
    ap.add_argument("--data", default="/tmp/kafkalog-bench-paths", help="scratch folder")
    ap.add_argument("--json", action="store_true", help="print one JSON line (for --compare)")
    ap.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"))
    args = ap.parse_args()
    Path(args.data).mkdir(parents=True, exist_ok=True)
    if args.compare:
        compare(args)
        return
    result = measure(args)
    if args.json:
        print(json.dumps(result))
        return
    print("| codec | op | best s |")
    print("|---|---|---:|")
    for codec, ops in result.items():
        for op, s in ops.items():
            print(f"| {codec} | {op} | {s:.3f} |")


if __name__ == "__main__":
    main()
