"""Restore benchmark (issue 20, point 6): ``restore`` (Delta table -> log dir) against ``migrate``
(log dir -> Delta table) on the same records, both local engines.

The records of ``bench_migrate.make_records`` (16-byte keys, 100-byte values, one header, every
metadata column; ``--partitions`` partitions, batches of ``--batch`` records, ``--codec``) are
written once as a log dir. Each round, in a **fresh process** (this script with ``--child``)
timed around the one call, alternating the order:

* ``migrate`` — :func:`kafkalog_spark.delta.migrate` of the log dir into a new table;
* ``restore`` — :func:`kafkalog_spark.delta.restore.restore` of that table into a new log dir
  (its indexes, snapshots and checkpoints rebuilt).

Reported: seconds, records/s, peak anonymous memory, and restore / migrate as a ratio of
records/s; the restored log dir is checked to hold the same records. Timings are printed,
never asserted.

    .venv/bin/python benchmarks/bench_restore.py                       # 1 M records
    .venv/bin/python benchmarks/bench_restore.py --records 200000 --rounds 1
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


def child(mode: str, src: str, dest: str) -> None:
    """Run one contender in this (fresh) process; print its figures as JSON."""
    from bench_compaction import PeakAnon

    from kafkalog_spark.delta import migrate
    from kafkalog_spark.delta.restore import restore

    with PeakAnon() as mem:
        t0 = time.perf_counter()
        if mode == "migrate":
            records = migrate(src, dest)["records"]
        else:
            records = sum(p["records"] for p in restore(src, dest)["partitions"])
        secs = time.perf_counter() - t0
    print(json.dumps({"secs": secs, "records": records, "peak": mem.peak << 10,
                      "before": mem.before << 10}))


def run(mode: str, src: Path, dest: Path) -> dict:
    for p in (dest, Path(f"{dest}.kafkalog-quarantine")):
        shutil.rmtree(p, ignore_errors=True)
    subprocess.run(["sync"], check=False)
    out = subprocess.run([sys.executable, __file__, "--child", mode, str(src), str(dest)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--codec", default="none")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child", nargs=3, metavar=("MODE", "SRC", "DEST"))
    a = ap.parse_args(argv)
    if a.child:
        child(*a.child)
        return 0
    import kafkalog_spark as kl
    from bench_migrate import make_records
    from bench_scale import machine

    work = Path(tempfile.mkdtemp(prefix="bench-restore-"))
    logs = work / "logs"
    kl.write_log(make_records(a.records, a.partitions), logs, codec=a.codec,
                 max_batch_records=a.batch)
    size = sum(p.stat().st_size for p in logs.glob("*-*/*.log"))
    run("migrate", logs, work / "table")  # the table restore reads
    results: dict[str, list[dict]] = {"migrate": [], "restore": []}
    for rnd in range(a.rounds):
        for mode in (("migrate", "restore") if rnd % 2 == 0 else ("restore", "migrate")):
            src, dest = (logs, work / "t2") if mode == "migrate" else (work / "table", work / "back")
            results[mode].append(run(mode, src, dest))
    same = kl.read_log(work / "back").num_rows == kl.read_log(logs).num_rows
    print(f"Machine: {machine()}  \n"
          f"Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}  \n"
          f"Command: `{' '.join([os.path.relpath(sys.executable), *sys.argv])}`  \n"
          f"Data: {a.records:,} records, {a.partitions} partitions, {a.batch} per batch, codec "
          f"{a.codec}, {size / 2**20:,.0f} MiB of segments; restored records equal: {same}\n")
    print("| direction | seconds | records/s | MB/s of segments | peak anon MiB |")
    print("|---|---:|---:|---:|---:|")
    rate = {}
    for mode in ("migrate", "restore"):
        secs = statistics.median(r["secs"] for r in results[mode])
        rate[mode] = a.records / secs
        peak = max(r["peak"] for r in results[mode])
        print(f"| {mode} | {secs:.2f} | {rate[mode]:,.0f} | {size / secs / 1e6:,.0f} | "
              f"{peak / 2**20:,.0f} |")
    print(f"| restore / migrate | | {rate['restore'] / rate['migrate']:.2f}× | | |")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
