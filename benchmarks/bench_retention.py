"""Retention benchmark (issue 18, point 5): planning and execution at 1k..40k segments.

For each size (``--segments``, a list of segment totals; ``segments / --per-partition``
partitions of about that many segments each) one log dir is generated with :mod:`gen_big`
(mixed codecs, some v0/v1 segments; ``replication-offset-checkpoint`` at the log end, so the
high watermark does not hold anything back). Then, each in a **fresh process** (this script
with ``--child``), timed inside the process around the one call:

* ``plan`` — :func:`kafkalog_spark.retention.retain` with ``execute=False`` on the generated
  log dir: discovery, checkpoints, the time index of every segment, one scan of each active
  segment;
* ``execute`` — ``retain(..., execute=True)`` on a copy of the log dir (the copy is made
  before and not timed): the plan again, then per partition the log-start-offset and
  leader-epoch checkpoints and the renaming and removal of every deleted segment's files.

Both use ``retention.ms`` = 1 day with ``now_ms`` fixed at 2100-01-01, so every segment but the
active one is deletable (the generated records are from 2023; legacy segments without
timestamps fall back to their mtime, also long before 2100). Memory is the process's peak
resident set (``VmHWM``) and its resident set just before the call (after imports);
``ru_maxrss`` is not used because on Linux a child's value includes its parent's peak RSS,
inherited at fork/exec. Each size's data is generated once (not subsets of the biggest one) and
deleted after it is measured unless ``--keep``. The page cache is warm (data just written)
and written back (``sync`` after generating and after copying, so the fsyncs of ``execute``
do not flush the copy).

    .venv/bin/python benchmarks/bench_retention.py                      # 1k, 4k, 16k, 40k segments
    .venv/bin/python benchmarks/bench_retention.py --segments 1000,4000 --work /tmp/r --keep

Prints a markdown table headed by machine, date and command; timings are reported, never
asserted (only that each execution deleted segments).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

PY = sys.executable
TIMEOUT = 1800
NOW_MS = 4_102_444_800_000  # 2100-01-01T00:00:00Z
OPTIONS = {"retention.ms": 86_400_000}  # 1 day: every closed segment is older


def _status_mib(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) // 1024 for line in f if line.startswith(field))


def child(op: str, log_dir: str) -> None:
    """One measurement in this (fresh) process; prints ``RESULT {json}``."""
    from kafkalog_spark.retention.retain import retain

    before = _status_mib("VmRSS:")
    t0 = time.perf_counter()
    r = retain(log_dir, execute=op == "execute", now_ms=NOW_MS, options=OPTIONS)
    seconds = time.perf_counter() - t0
    m = r.metrics
    print("RESULT " + json.dumps({"seconds": seconds, "rss_before_mib": before,
                                  "peak_mib": _status_mib("VmHWM:"),
                                  "partitions": m["partitions_checked"],
                                  "segments_deleted": m["segments_deleted"]}), flush=True)


def run_child(op: str, log_dir: str) -> dict:
    p = subprocess.run([PY, __file__, "--child", op, log_dir], capture_output=True, text=True,
                       timeout=TIMEOUT)
    if p.returncode != 0:
        raise RuntimeError(f"{op} on {log_dir} exited {p.returncode}:\n{p.stderr[-2000:]}")
    lines = [line for line in p.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(lines[-1][7:])


def measure(segments: int, per_partition: int, segment_kib: int, seed: int, work: Path,
            keep: bool) -> dict:
    import gen_big

    root = work / f"s{segments}"
    if root.exists():
        shutil.rmtree(root)
    g = gen_big.generate(root, partitions=max(1, segments // per_partition), segments=per_partition,
                         segment_kib=segment_kib, seed=seed)
    print(f"{g.partitions} partitions, {g.segments} segments, {g.bytes / 2**30:.2f} GiB "
          f"generated in {g.seconds:.1f} s", file=sys.stderr, flush=True)
    log_dir = g.log_dirs[0]
    os.sync()  # written back now: a measured fsync must not flush the generator's data
    plan = run_child("plan", log_dir)
    copy = root / "execute-copy"
    shutil.copytree(log_dir, copy)
    os.sync()
    execute = run_child("execute", str(copy))
    assert execute["segments_deleted"] > 0, f"nothing deleted at {segments} segments: {execute}"
    assert execute["segments_deleted"] == plan["segments_deleted"], (plan, execute)
    if not keep:
        shutil.rmtree(root)
    row = {"segments": g.segments, "partitions": g.partitions, "bytes": g.bytes,
           "plan": plan, "execute": execute}
    print(f"  plan {plan['seconds']:.2f} s, {plan['peak_mib']} MiB; execute "
          f"{execute['seconds']:.2f} s, {execute['peak_mib']} MiB, "
          f"{execute['segments_deleted']} segments deleted", file=sys.stderr, flush=True)
    return row


def table(rows: list[dict]) -> str:
    lines = ["| segments | partitions | .log GiB | plan s | plan µs/segment | plan RSS MiB "
             "(before → peak) | execute s | execute µs/deleted segment | execute RSS MiB "
             "(before → peak) | segments deleted |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        p, e = r["plan"], r["execute"]
        cells = [f"{r['segments']:,}", f"{r['partitions']:,}", f"{r['bytes'] / 2**30:.2f}",
                 f"{p['seconds']:.2f}", f"{p['seconds'] / r['segments'] * 1e6:.0f}",
                 f"{p['rss_before_mib']} → {p['peak_mib']}", f"{e['seconds']:.2f}",
                 f"{e['seconds'] / e['segments_deleted'] * 1e6:.0f}",
                 f"{e['rss_before_mib']} → {e['peak_mib']}", f"{e['segments_deleted']:,}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--segments", default="1000,4000,16000,40000",
                    help="comma-separated segment totals, one size each")
    ap.add_argument("--per-partition", type=int, default=10, help="mean segments per partition")
    ap.add_argument("--segment-kib", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=None, help="folder for the data (default: a "
                    "temporary folder under /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the generated data")
    ap.add_argument("--child", nargs=2, metavar=("OP", "LOG_DIR"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child(*a.child)
        return 0
    from bench_scale import machine

    work = a.work or Path(tempfile.mkdtemp(prefix="bench-retention-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        rows = [measure(int(s), a.per_partition, a.segment_kib, a.seed, work, a.keep)
                for s in a.segments.split(",")]
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"Machine: {machine()}  \nDate: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  \n"
          f"Command: `{' '.join([Path(PY).name, *sys.argv])}`  \n"
          f"Data: gen_big, {a.per_partition} segments/partition on average, {a.segment_kib} KiB "
          f"segments, seed {a.seed}; retention.ms {OPTIONS['retention.ms']} at now_ms {NOW_MS}; "
          f"each call in a fresh process, in-process time; page cache warm\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
