"""What a Spark task of a Python worker costs before it does any work (benchmarks): the fixed
time every task of every job pays, by daemon and socket (issue 33).

    .venv/bin/python benchmarks/bench_task_overhead.py [--tasks N] [--jobs J] [--trees DIR[,DIR]]

For each package checkout in ``--trees`` (default: this one; first on ``PYTHONPATH``) and each
way of running the Python workers — pyspark's daemon or the package's
(``spark.python.daemon.module``), over loopback TCP or Unix sockets
(``spark.python.unix.domain.socket.enabled``) — a fresh process starts a ``local[1]`` session
with Spark's event log on, runs one job to start the workers (not counted), then ``--jobs``
jobs of ``--tasks`` empty tasks each (``parallelize(range(N), N).flatMap(lambda _: [])``) and
reads from the event log each counted task's executor run time and its launch-to-finish time.
Printed per row: median and 90th percentile of both (ms), and the jobs' median wall seconds.
The combinations run checkout by checkout, in turn, twice over (``--rounds``). Timings are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
WAYS = {  # the extra --conf of each way of running the workers
    "pyspark daemon + TCP": {"spark.python.daemon.module": "pyspark.daemon",
                            "spark.python.unix.domain.socket.enabled": "false"},
    "pyspark daemon + Unix socket": {"spark.python.daemon.module": "pyspark.daemon",
                                    "spark.python.unix.domain.socket.enabled": "true"},
    "package daemon + TCP": {"spark.python.daemon.module": "kafkalog_spark.daemon",
                            "spark.python.unix.domain.socket.enabled": "false"},
    "package daemon + Unix socket": {"spark.python.daemon.module": "kafkalog_spark.daemon",
                                    "spark.python.unix.domain.socket.enabled": "true"},
    "session() defaults": {},
}
CHILD = """import json, sys, time
from kafkalog_spark.spark import session
conf = json.loads(sys.argv[1])
tasks, jobs = int(sys.argv[3]), int(sys.argv[4])
spark = session("local[1]", app_name="task-overhead", conf={
    **conf, "spark.eventLog.enabled": "true", "spark.eventLog.dir": sys.argv[2],
    "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"})
sc = spark.sparkContext
sc.parallelize(range(2), 2).flatMap(lambda _: []).collect()  # the workers started
walls = []
for _ in range(jobs):
    t0 = time.perf_counter()
    sc.parallelize(range(tasks), tasks).flatMap(lambda _: []).collect()
    walls.append(time.perf_counter() - t0)
spark.stop()
print("WALLS " + json.dumps(walls))
"""


def task_times(events: Path) -> tuple[list[int], list[int]]:
    """Executor run time and launch-to-finish time (ms) of every task after the first job's."""
    runs, walls = [], []
    for file in events.iterdir():
        for line in file.open():
            e = json.loads(line)
            if e.get("Event") == "SparkListenerTaskEnd" and e["Stage ID"] > 0:
                info = e["Task Info"]
                runs.append(e["Task Metrics"]["Executor Run Time"])
                walls.append(info["Finish Time"] - info["Launch Time"])
    return runs, walls


def measure(tree: Path, conf: dict[str, str], tasks: int, jobs: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-task-") as tmp:
        events = Path(tmp) / "events"
        events.mkdir()
        env = dict(os.environ, PYTHONPATH=str(tree), PYSPARK_PYTHON=sys.executable,
                   PYSPARK_DRIVER_PYTHON=sys.executable)
        env.pop("PYSPARK_SUBMIT_ARGS", None)
        out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(conf), events.as_uri(),
                              str(tasks), str(jobs)], env=env, cwd=tmp, capture_output=True,
                             text=True, timeout=1800)
        if out.returncode:
            raise RuntimeError(f"the child failed:\n{out.stderr[-3000:]}")
        walls = json.loads(out.stdout.split("WALLS ", 1)[1].splitlines()[0])
        runs, spans = task_times(events)
    return {"run": runs, "span": spans, "walls": walls}


def pct(values: list[int], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", type=int, default=130)
    p.add_argument("--jobs", type=int, default=3)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--trees", default=str(HERE), help="package checkouts, comma-separated")
    p.add_argument("--ways", default=",".join(WAYS), help="which rows of WAYS")
    args = p.parse_args(argv)
    trees = [Path(t).resolve() for t in args.trees.split(",")]
    ways = [w.strip() for w in args.ways.split(",")]
    got: dict[tuple[str, str], list[dict]] = {}
    for _ in range(args.rounds):
        for way in ways:
            for tree in trees:
                got.setdefault((way, str(tree)), []).append(
                    measure(tree, WAYS[way], args.tasks, args.jobs))
    print(f"# bench_task_overhead: {platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}, "
          f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}\n"
          f"# {' '.join([os.path.basename(sys.executable)] + sys.argv)}\n")
    print("| workers | checkout | task run ms (median, p90) | task launch-to-finish ms "
          f"(median, p90) | {args.tasks} empty tasks, wall s (median) |")
    print("|---|---|---:|---:|---:|")
    for (way, tree), results in got.items():
        runs = [x for r in results for x in r["run"]]
        spans = [x for r in results for x in r["span"]]
        walls = [x for r in results for x in r["walls"]]
        print(f"| {way} | {Path(tree).name} | {statistics.median(runs):.0f}, "
              f"{pct(runs, 0.9):.0f} | {statistics.median(spans):.0f}, {pct(spans, 0.9):.0f} | "
              f"{statistics.median(walls):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
