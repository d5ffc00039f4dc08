"""Erase benchmark (issue 20, point 6): ``erase`` of 0.1% of a topic's keys against a full
compaction of the same topic, on the same data.

One single-partition log of ``--records`` records (100-byte values, 10% unique keys, 16 MiB
segments: ``bench_compaction.make_log``) is written once. Each round, on a fresh copy (copies
not timed), in a **fresh process** (this script with ``--child``), alternating the order:

* ``erase`` — :func:`kafkalog_spark.compaction.erase.erase` of 0.1% of the distinct keys
  (every segment scanned, the segments holding one of the keys rewritten);
* ``compact`` — :func:`kafkalog_spark.compaction.compact` with ``--force`` (every segment read,
  keys mapped, every segment rewritten).

Reported: seconds, MB/s of the log, peak anonymous memory, records removed, segments
rewritten; erase / compact as a ratio of time. Timings are printed, never asserted.

    .venv/bin/python benchmarks/bench_erase.py                       # 16 M records (~2 GB)
    .venv/bin/python benchmarks/bench_erase.py --records 2000000 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def child(mode: str, log_dir: str, fraction: float) -> None:
    """One contender in this (fresh) process; its figures as JSON."""
    import numpy as np
    from bench_compaction import PeakAnon

    from kafkalog_spark.compaction.compact import compact
    from kafkalog_spark.compaction.erase import erase

    distinct = int(json.loads(Path(log_dir, "..", "distinct.json").read_text()))
    picked = np.random.default_rng(3).choice(distinct, max(1, int(distinct * fraction)),
                                             replace=False)
    keys = [b"key-%08d" % k for k in picked.tolist()]
    with PeakAnon() as mem:
        t0 = time.perf_counter()
        if mode == "erase":
            r = erase(log_dir, "bench", keys, execute_plan=True)
            removed = r["records_removed"]
            rewritten = sum(len(p["segments_rewritten"]) for p in r["partitions"])
        else:
            r = compact(log_dir, execute=True, force=True, options={"cleanup.policy": "compact"})
            removed = r.metrics["records_read"] - r.metrics["records_kept"]
            rewritten = None
        secs = time.perf_counter() - t0
    print(json.dumps({"secs": secs, "peak": mem.peak << 10, "removed": removed,
                      "rewritten": rewritten, "keys": len(keys)}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=16_000_000)
    ap.add_argument("--fraction", type=float, default=0.001)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child", nargs=3, metavar=("MODE", "LOG_DIR", "FRACTION"))
    a = ap.parse_args(argv)
    if a.child:
        child(a.child[0], a.child[1], float(a.child[2]))
        return 0
    from bench_compaction import log_bytes, make_log
    from bench_scale import machine

    work = Path(tempfile.mkdtemp(prefix="bench-erase-"))
    src = make_log(work / "src", a.records)
    (work / "src" / "distinct.json").write_text(json.dumps(max(1, a.records // 10)))
    size = log_bytes(src)
    results: dict[str, list[dict]] = {"erase": [], "compact": []}
    for rnd in range(a.rounds):
        for mode in (("erase", "compact") if rnd % 2 == 0 else ("compact", "erase")):
            copy = work / "copy" / "logs"
            shutil.rmtree(work / "copy", ignore_errors=True)
            shutil.copytree(src, copy)
            shutil.copy(work / "src" / "distinct.json", work / "copy" / "distinct.json")
            subprocess.run(["sync"], check=False)
            out = subprocess.run([sys.executable, __file__, "--child", mode, str(copy),
                                  str(a.fraction)], capture_output=True, text=True, check=True)
            results[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    shutil.rmtree(work, ignore_errors=True)
    print(f"Machine: {machine()}  \n"
          f"Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}  \n"
          f"Command: `{' '.join([os.path.relpath(sys.executable), *sys.argv])}`  \n"
          f"Data: {a.records:,} records, {size / 2**20:,.0f} MiB of segments; erase "
          f"{results['erase'][0]['keys']:,} keys ({a.fraction:.1%} of the distinct keys)\n")
    print("| operation | seconds | MB/s | peak anon MiB | records removed | segments rewritten |")
    print("|---|---:|---:|---:|---:|---:|")
    med = {}
    for mode in ("erase", "compact"):
        rs = results[mode]
        med[mode] = statistics.median(r["secs"] for r in rs)
        rw = rs[0]["rewritten"]
        print(f"| {mode} | {med[mode]:.2f} | {size / med[mode] / 1e6:,.0f} | "
              f"{max(r['peak'] for r in rs) / 2**20:,.0f} | {rs[0]['removed']:,} | "
              f"{'all' if rw is None else rw} |")
    print(f"| erase / compact | {med['erase'] / med['compact']:.2f}× | | | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
