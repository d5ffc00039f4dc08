"""Benchmark (benchmarks layer): cold Spark jobs against warm ones and against the local engine
(issue 33).

    .venv/bin/python benchmarks/bench_cold.py [--log DIR] [--records N] [--partitions P]
                                              [--runs R] [--what session,submit,count]
                                              [--trees DIR[,DIR]]

One compactable log dir (made once under ``--log`` unless it is there: ``--partitions``
partitions of ``--records`` records in all, 8-byte keys drawn from 1 M, about 100-byte values,
half the partitions lz4 and half uncompressed, 16 MiB segments) is measured three ways, each in
fresh processes, for every package checkout in ``--trees`` (default: this one; the checkout is
put first on ``PYTHONPATH``, as the runs alternate tree by tree so that a drifting machine
touches each alike):

session  a child process starts a Spark session (``local[2]``), runs one small compaction
         (a 2-partition, 40 k-record log of 256 KiB segments), then ``--rounds`` compactions of fresh copies of the
         big log (copies not timed); prints each round's wall time. The first big round over
         the median of the later ones is the "cold round" ratio (goal: at most 1.25)
submit   whole process: ``spark-submit --master local[2] jobs/compact.py --execute --force
         --high-watermark log-end --config cleanup.policy=compact COPY`` against ``python -m
         kafkalog_spark.cli compact`` with the same arguments, each on a fresh copy (not timed),
         in turn (goal: spark-submit at most 2x)
count    whole process: ``spark-submit`` of a script doing
         ``spark.read.format("kafkalog").load(LOG).count()`` against a plain Python process
         counting the same records through ``kafkalog_spark.iter_log`` (goal: at most 2x)

Wall seconds are a monotonic clock around each child; CPU seconds are the children's user +
system time (``resource.getrusage``). Prints markdown tables (median, min, max) headed by
machine, date, load average and command. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
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

HERE = Path(__file__).resolve().parents[1]
OPTIONS = {"cleanup.policy": "compact"}
COMPACT_ARGS = ["--execute", "--force", "--high-watermark", "log-end", "--config",
                "cleanup.policy=compact"]
COUNT_SCRIPT = """import sys
from kafkalog_spark.spark import session
spark = session(app_name="kafkalog-count")
print("COUNT", spark.read.format("kafkalog").load(sys.argv[1]).count())
"""
LOCAL_COUNT = """import sys
from kafkalog_spark.log.reader import iter_log
print("COUNT", sum(b.num_rows for b in iter_log(sys.argv[1], columns=["offset"])))
"""


def make_log(log_dir: Path, records: int, partitions: int, *, key_space: int = 1_000_000,
             value_bytes: int = 100, segment_bytes: int = 16 << 20, seed: int = 1) -> Path:
    """A compactable log dir: ``partitions`` partitions of topic ``cold`` sharing ``records``,
    8-byte keys from ``key_space``, values of about ``value_bytes`` (half repeated text, half
    random: lz4 finds something to compress), even partitions lz4, odd ones uncompressed."""
    from kafkalog_spark import write_log

    rng = np.random.default_rng(seed)
    per = records // partitions
    step = 500_000
    for p in range(partitions):
        for lo in range(0, per, step):
            n = min(per, lo + step) - lo
            keys = rng.integers(0, key_space, n).astype(">u8")
            noise = rng.integers(0, 256, (n, value_bytes // 2), np.uint8)
            text = np.frombuffer(b"cold-start " * (value_bytes // 20 + 1), np.uint8)
            values = np.concatenate([np.broadcast_to(text[:value_bytes - value_bytes // 2],
                                                     (n, value_bytes - value_bytes // 2)),
                                     noise], axis=1)
            table = pa.table({
                "key": pa.array([k.tobytes() for k in keys], pa.binary()),
                "value": pa.array([v.tobytes() for v in values], pa.binary())})
            write_log(table, log_dir, topic="cold", partition=p, segment_bytes=segment_bytes,
                      codec="lz4" if p % 2 == 0 else "none", max_batch_records=500)
    return log_dir


def fresh_copy(src: Path, dst: Path) -> Path:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return dst


def env_for(tree: Path) -> dict[str, str]:
    """The environment of a child running checkout ``tree``: it first on ``PYTHONPATH``, this
    interpreter as Spark's Python (driver and workers)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


def timed(cmd: list[str], env: dict[str, str], cwd: Path, ok: tuple[int, ...] = (0,)
          ) -> tuple[float, float, str]:
    """Run ``cmd``; wall seconds, children's CPU seconds, its output. Raises on an exit code
    not in ``ok``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode not in ok:
        raise RuntimeError(f"{' '.join(cmd)} exited {out.returncode}:\n{out.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out.stdout


def spark_submit() -> str:
    return str(Path(sys.executable).parent / "spark-submit")


def session_child(args) -> None:
    """``--child-session``: in this one process, a session, one small compaction, then
    ``--rounds`` big ones on fresh copies; prints ``RESULT`` with the round times."""
    from kafkalog_spark.compaction.compact import compact
    from kafkalog_spark.spark import session

    scratch = Path(args.scratch)
    t0 = time.perf_counter()
    spark = session(master="local[2]")
    started = time.perf_counter() - t0
    small = make_log(scratch / "small", 40_000, 2, key_space=4_000, segment_bytes=256 << 10)
    t0 = time.perf_counter()
    compact(small, execute=True, force=True, engine="spark", spark=spark, options=OPTIONS,
            high_watermark="log-end")
    small_s = time.perf_counter() - t0
    rounds = []
    for _ in range(args.rounds):
        copy = fresh_copy(Path(args.child_session), scratch / "copy")
        t0 = time.perf_counter()
        compact(copy, execute=True, force=True, engine="spark", spark=spark, options=OPTIONS,
                high_watermark="log-end")
        rounds.append(time.perf_counter() - t0)
    shutil.rmtree(scratch / "copy", ignore_errors=True)
    print("RESULT " + json.dumps({"start": started, "small": small_s, "rounds": rounds}))


def stats(values: list[float]) -> str:
    """``median (min–max)``: one table cell."""
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def measure_session(trees: list[Path], log_dir: Path, scratch: Path, runs: int,
                    rounds: int) -> list[str]:
    got: dict[Path, list[dict]] = {t: [] for t in trees}
    for _ in range(runs):
        for tree in trees:
            cmd = [sys.executable, __file__, "--child-session", str(log_dir), "--scratch",
                   str(scratch / "session"), "--rounds", str(rounds)]
            _, _, out = timed(cmd, env_for(tree), tree)
            got[tree].append(json.loads(out.split("RESULT ", 1)[1]))
    lines = ["| checkout | session start s | small round s | first big round s (median, min, "
             "max) | later rounds s (median, min, max) | first / later (median of runs) |",
             "|---|---:|---:|---|---|---:|"]
    for tree, results in got.items():
        first = [r["rounds"][0] for r in results]
        later = [x for r in results for x in r["rounds"][1:]]
        ratio = statistics.median(r["rounds"][0] / statistics.median(r["rounds"][1:])
                                  for r in results)
        lines.append(f"| {tree} | {statistics.median(r['start'] for r in results):.2f} | "
                     f"{statistics.median(r['small'] for r in results):.2f} | {stats(first)} | "
                     f"{stats(later)} | {ratio:.2f} |")
    return lines


def measure_pair(trees: list[Path], log_dir: Path, scratch: Path, runs: int, what: str
                 ) -> list[str]:
    """``submit`` or ``count``: the Spark process against the local one, in turn."""
    script = scratch / "count.py"
    script.write_text(COUNT_SCRIPT)
    local_script = scratch / "local_count.py"
    local_script.write_text(LOCAL_COUNT)
    submit = [spark_submit(), "--master", "local[2]"]
    times: dict[tuple[Path, str], list[tuple[float, float]]] = {}
    counts = set()
    for _ in range(runs):
        for tree in trees:
            if what == "submit":
                cmds = {"spark-submit jobs/compact.py":
                        [*submit, str(tree / "jobs" / "compact.py"), *COMPACT_ARGS],
                        "kafkalog compact": [sys.executable, "-m", "kafkalog_spark.cli",
                                             "compact", *COMPACT_ARGS]}
            else:
                cmds = {"spark-submit count": [*submit, str(script), str(log_dir)],
                        "python iter_log count": [sys.executable, str(local_script),
                                                  str(log_dir)]}
            for name, cmd in cmds.items():
                if what == "submit":
                    cmd = cmd + [str(fresh_copy(log_dir, scratch / "copy"))]
                wall, cpu, out = timed(cmd, env_for(tree), tree,
                                       ok=(0, 1) if what == "submit" else (0,))
                times.setdefault((tree, name), []).append((wall, cpu))
                if what == "count":
                    counts.add(int(out.split("COUNT", 1)[1].split()[0]))
    if what == "count" and len(counts) != 1:
        raise RuntimeError(f"the counts differ: {counts}")
    lines = ["| checkout | command | wall s (median, min, max) | cpu s (median, min, max) | "
             "wall / local (median) |", "|---|---|---|---|---:|"]
    for tree in trees:
        names = [n for t, n in times if t == tree]
        base = statistics.median(w for w, _ in times[(tree, names[1])])
        for name in names:
            walls = [w for w, _ in times[(tree, name)]]
            cpus = [c for _, c in times[(tree, name)]]
            lines.append(f"| {tree} | {name} | {stats(walls)} | {stats(cpus)} | "
                         f"{statistics.median(walls) / base:.2f} |")
    if counts:
        lines.append(f"\n{counts.pop():,} records counted")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--log", default=None, help="the log dir (made here when missing)")
    p.add_argument("--records", type=int, default=8_000_000)
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3, help="big rounds per session")
    p.add_argument("--what", default="session,submit,count")
    p.add_argument("--trees", default=str(HERE), help="package checkouts, comma-separated")
    p.add_argument("--child-session", default=None, help=argparse.SUPPRESS)
    p.add_argument("--scratch", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child_session:
        session_child(args)
        return 0
    trees = [Path(t).resolve() for t in args.trees.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as tmp:
        scratch = Path(tmp)
        log_dir = Path(args.log) if args.log else scratch / "log"
        if not log_dir.exists():
            make_log(log_dir, args.records, args.partitions)
        size = sum(f.stat().st_size for f in log_dir.rglob("*.log"))
        out = [f"{args.records:,} records in {args.partitions} partitions, {size / 1e6:.0f} MB; "
               f"{args.runs} runs per checkout\n"]
        print(heading() + "\n".join(out), flush=True)
        for what in args.what.split(","):  # each table as soon as it is measured
            lines = (measure_session(trees, log_dir, scratch, args.runs, args.rounds)
                     if what == "session" else measure_pair(trees, log_dir, scratch,
                                                            args.runs, what))
            print(f"\n### {what} (load average after: {load()})\n", *lines, sep="\n",
                  flush=True)
    return 0


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def heading() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    return (f"# bench_cold: {platform.machine()} {cpu}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}, "
            f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}, load average "
            f"{load()}\n# {' '.join([os.path.basename(sys.executable)] + sys.argv)}\n\n")


if __name__ == "__main__":
    sys.exit(main())
