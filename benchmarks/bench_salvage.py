"""Salvage and reconcile benchmark (issue 19, point 5): ``recover --salvage`` and ``reconcile``
against Kafka's rule (``recover``) on one large segment with three damaged regions.

One partition whose single segment holds ``--segment-mib`` MiB (uncompressed v2 batches of 100
records, ~1 KiB values; written with the package's own writer) is damaged in three places —
a flipped bit at 25% of the file, a zeroed 4 KiB page at 50%, a false batch length at 75% —
and then, for each contender, a fresh copy is recovered with ``--execute`` in a **fresh
process** (this script with ``--child``), timed inside the process around the one call:

* ``recover`` — Kafka's rule: cut at the first damage (25%), the rest to the quarantine;
* ``salvage`` — ``recover(salvage=True)``: every valid batch after each damaged region kept;
* ``reconcile`` — ``reconcile([damaged copy, intact replica], new dir)``: the damaged replica is
  the reference (same epoch and length, named first), its three damaged batches are filled from
  the intact one (a second broker's undamaged copy): the whole log written anew.

Reported: wall seconds, MB/s of the segment, peak anonymous memory (``RssAnon`` sampled every
20 ms; the segment's mapped page cache is not the process's) and that before the call, batches
kept; salvage / recover as a ratio. Run at two sizes
(``--segment-mib 256,1024``) to see that memory does not grow with the segment. The page cache
is warm (data just written and copied, then ``sync``); timings are reported, never asserted.

    .venv/bin/python benchmarks/bench_salvage.py                       # 256 MiB and 1 GiB
    .venv/bin/python benchmarks/bench_salvage.py --segment-mib 64 --rounds 1
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RECORDS_PER_BATCH = 100
VALUE_BYTES = 1000


def generate(log_dir: Path, mib: int) -> Path:
    """One partition, one segment of about ``mib`` MiB; returns the segment's ``.log``."""
    from kafkalog_spark import write_log

    n = (mib << 20) // (VALUE_BYTES + 80)
    body = np.random.default_rng(5).integers(97, 123, n * VALUE_BYTES, dtype=np.uint8)
    offsets = np.arange(0, (n + 1) * VALUE_BYTES, VALUE_BYTES, dtype=np.int32)
    values = pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                          pa.py_buffer(body)])
    # one call: each write_log call starts a segment of its own
    write_log(pa.table({"value": values}), log_dir, topic="t",
              max_batch_records=RECORDS_PER_BATCH, segment_bytes=(mib + 64) << 20)
    return sorted((log_dir / "t-0").glob("*.log"))[0]


def damage(log: Path) -> list[int]:
    """A flipped bit at 25%, a zeroed page at 50%, a false length on the first batch after
    75%; the three byte positions."""
    from kafkalog_spark.codec.records.scan import scan_entries

    data = np.memmap(log, np.uint8, mode="r")
    size, positions = len(data), scan_entries(data).position
    late = int(positions[np.searchsorted(positions, size * 3 // 4)])
    del data
    page = (size // 2) // 4096 * 4096
    with open(log, "r+b") as f:
        f.seek(size // 4)
        b = f.read(1)
        f.seek(size // 4)
        f.write(bytes([b[0] ^ 0x10]))
        f.seek(page)
        f.write(bytes(4096))
        f.seek(late + 8)
        f.write((3 << 20).to_bytes(4, "big"))
    return [size // 4, page, late]


def child(mode: str, log_dir: str) -> None:
    """Run one contender in this (fresh) process and print its figures as JSON (``reconcile``:
    with the intact replica ``<log dir>-intact``, into ``<log dir>-reconciled``)."""
    from kafkalog_spark.recovery.reconcile import reconcile
    from kafkalog_spark.recovery.recover import recover

    import threading

    before, peak, done = _rss("RssAnon"), [0], threading.Event()

    def sample() -> None:  # anonymous memory: the mapped segment's page cache is not ours
        while not done.wait(0.02):
            peak[0] = max(peak[0], _rss("RssAnon"))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.perf_counter()
    if mode == "reconcile":
        done_ = reconcile([log_dir, f"{log_dir}-intact"], f"{log_dir}-reconciled",
                          execute_plan=True)
        damage_ranges = sum(r["damaged_ranges"] for p in done_.partitions for r in p["replicas"])
    else:
        report = recover([log_dir], execute_plan=True, salvage=mode == "salvage")
        damage_ranges = sum(len(p.damage) for p in report.partitions)
    secs = time.perf_counter() - t0
    done.set()
    sampler.join()
    print(json.dumps({"secs": secs, "peak": max(peak[0], _rss("RssAnon")), "before": before,
                      "damaged": damage_ranges}))


def _rss(field: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


MODES = ("recover", "salvage", "reconcile")


def _clean(copy: Path) -> None:
    """Remove a contender's copy and everything its run left next to it."""
    for p in (copy, Path(f"{copy}.kafkalog-quarantine"), Path(f"{copy}-reconciled"),
              Path(f"{copy}-reconciled.kafkalog-quarantine")):
        shutil.rmtree(p, ignore_errors=True)


def kept_batches(log_dir: Path) -> int:
    from kafkalog_spark.codec.records.scan import scan_entries

    return sum(len(scan_entries(np.memmap(p, np.uint8, mode="r")))
               for p in sorted((log_dir / "t-0").glob("*.log")) if p.stat().st_size)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--segment-mib", default="256,1024")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--work", default=None)
    ap.add_argument("--child", nargs=2, metavar=("MODE", "LOG_DIR"))
    a = ap.parse_args(argv)
    if a.child:
        child(*a.child)
        return 0
    work = Path(a.work or tempfile.mkdtemp(prefix="bench-salvage-"))
    rows = []
    try:
        for mib in [int(x) for x in a.segment_mib.split(",")]:
            source = work / f"src-{mib}"
            shutil.rmtree(source, ignore_errors=True)
            log = generate(source, mib)
            for mode in MODES:  # the second broker's undamaged replica, for reconcile
                shutil.rmtree(work / f"copy-{mode}-intact", ignore_errors=True)
            shutil.copytree(source, work / "copy-reconcile-intact")
            size, where = log.stat().st_size, damage(log)
            results: dict[str, list[dict]] = {m: [] for m in MODES}
            for rnd in range(a.rounds):
                for mode in (MODES if rnd % 2 == 0 else MODES[::-1]):
                    copy = work / f"copy-{mode}"
                    _clean(copy)
                    shutil.copytree(source, copy)
                    subprocess.run(["sync"], check=False)
                    out = subprocess.run([sys.executable, __file__, "--child", mode, str(copy)],
                                         capture_output=True, text=True, check=True)
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                    r["kept"] = kept_batches(Path(f"{copy}-reconciled") if mode == "reconcile"
                                             else copy)
                    results[mode].append(r)
            base = None
            for mode in MODES:
                rs = results[mode]
                secs = statistics.median(r["secs"] for r in rs)
                rows.append((mib, size, mode, secs, size / secs / 1e6,
                             max(r["peak"] for r in rs), max(r["before"] for r in rs),
                             rs[0]["kept"], rs[0]["damaged"]))
                if mode == "recover":
                    base = rows[-1]
                else:
                    rows.append((mib, size, f"{mode} / recover", secs / base[3], None, None, None,
                                 rs[0]["kept"] / max(1, base[7]), None))
            shutil.rmtree(source, ignore_errors=True)
            for mode in MODES:
                _clean(work / f"copy-{mode}")
            shutil.rmtree(work / "copy-reconcile-intact", ignore_errors=True)
            print(f"damaged at bytes {where} of {size:,}", file=sys.stderr)
    finally:
        if a.work is None:
            shutil.rmtree(work, ignore_errors=True)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    print(f"Machine: {platform.machine()} {cpu}, nproc {len(os.sched_getaffinity(0))}  \n"
          f"Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}  \n"
          f"Command: `{' '.join([os.path.relpath(sys.executable), *sys.argv])}`\n")
    print("| segment | mode | seconds | MB/s | peak anon MiB | anon before MiB | batches kept "
          "| damaged ranges |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for mib, size, mode, secs, mbs, peak, before, kept, damaged in rows:
        if "/" in mode:
            print(f"| {size / 2**20:,.0f} MiB | {mode} | {secs:.2f}× | | | | {kept:.2f}× | |")
        else:
            print(f"| {size / 2**20:,.0f} MiB | {mode} | {secs:.2f} | {mbs:,.0f} | "
                  f"{peak / 2**20:,.0f} | {before / 2**20:,.0f} | {kept:,} | {damaged} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
