"""Scaling without a cluster (benchmarks): each Spark job's measured task graph, from Spark's
event log, replayed on N = 1, 2, 8, 32, 128 executor slots (issue 33, item 1).

A 2-CPU machine cannot show how a job scales, but it can measure what a cluster would run: every
stage and task of the job and the driver's time outside tasks. Each master of ``--masters``
(default ``local[1]`` and ``local[2]``) runs in a Python process of its own with Spark's event
log on (``spark.eventLog.enabled``, a temp dir) and ``spark.default.parallelism`` =
``spark.sql.shuffle.partitions`` = ``--parallelism`` (default 128: the task graph as a 128-slot
cluster's defaults would cut it; scans get ``minPartitions`` the same, as docs/datasource.md
tells users with more cores). After an untimed warm-up scan (the Python workers started, numba's
kernels loaded: a per-executor fixed cost, item 2's subject) it times each job:

* ``scan-all``: ``format("kafkalog")``, every column, into Spark's ``noop`` sink;
* ``scan-2col``: ``partition`` and ``value`` only, likewise;
* ``write``: the log read and written again with ``df.write.format("kafkalog")`` (lz4);
* ``verify``: ``verify --deep --spark`` (:func:`~kafkalog_spark.recovery.verify_job.verify_spark`);
* ``migrate``: ``migrate --spark`` into a fresh folder of per-topic Delta tables;
* ``restore``: those tables back into a fresh log dir (``restore(..., spark=spark)``; run
  alone, ``migrate`` first, untimed);
* ``compact``: ``compact --engine spark --execute --force`` with ``cleanup.policy=compact`` on
  every topic, on a copy made before the clock starts: one Spark job with both shuffles (keys
  by digest bucket, retained offsets to the rewrite pieces). Last: the longest.

After each job its wall time and event log folder go into ``result-<master>.json``, so a run
still going (or killed) reports the jobs it finished, and ``--jobs X`` measures job X again
(a fixed one) and replaces only its entry.

The event log is parsed by :mod:`scaling_replay` (the model is described there) into one trace
per job. Printed per job, from the ``local[1]`` trace (tasks measured without a second task on
the other CPU): wall time, serial share of it, the largest warm task's share of its stage, the
first-use time (what a fresh Python worker pays on its first task of each stage: imports,
numba's cached kernels), and the projected speed-up (replay at 1 slot over replay at N) at
8/32/128 slots with warm workers, and at 32/128 with every slot's worker fresh (``cold``); then
the check of the replay against reality: ``local[1]``'s trace replayed on 2 fresh slots against
the measured ``local[2]`` wall time, ``local[2]``'s trace on 1 slot against ``local[1]``'s, each
trace on its own slot count, and how much longer the tasks took with two running at once (on a
2-CPU machine shared with other work, two slots do not get two free CPUs). Then every stage.
Goals (issue 33): serial share <= 5 %, >= 6x at 8, >= 20x at 32 (judged warm).

    .venv/bin/python benchmarks/bench_scaling.py --size-mb 300 --partitions 32      # small
    .venv/bin/python benchmarks/bench_scaling.py --size-mb 4096 --partitions 64     # issue size

The log is made by ``gen_big.py`` (mixed codecs, codec switches, v0/v1 segments from the real
fixtures when present) under ``--work`` (default: a temp dir, removed at the end; given, it keeps
the log, the event logs and each master's ``result-<master>.json``, and ``--report-only`` prints
the report again from them). Then, for each job that misses a goal, what adds most to its
replay over the ideal: a driver interval or a stage, with the cause
(:meth:`scaling_replay.Trace.losses`). Timings are printed, never asserted; on a loaded machine say so
beside them (the load average is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from scaling_replay import TAG, Trace, event_log_file, read_traces  # noqa: E402
from tree_cpu import TreeCpuSampler  # noqa: E402

JOBS = ("scan-all", "scan-2col", "write", "verify", "migrate", "restore", "compact")
SLOTS = (1, 2, 8, 32, 128)
GOALS = {"serial": 0.05, 8: 6.0, 32: 20.0}
CPUS = os.cpu_count() or 1  # the report is printed on the machine that measured


def generate(work: Path, size_mb: int, partitions: int, segment_kib: int) -> Path:
    """A gen_big log dir of about ``size_mb`` MiB in ``partitions`` partitions; its path."""
    import gen_big

    root = work / "data"
    if not (root / "kafka-logs-0").is_dir():
        shutil.rmtree(root, ignore_errors=True)
        segments = max(2, round(size_mb * 1024 / (partitions * segment_kib)))
        done = gen_big.generate(root, partitions=partitions, segments=segments,
                                topics=max(1, partitions // 8), segment_kib=segment_kib)
        print(f"# generated {done.bytes / 2**20:.0f} MiB, {done.records:,} records, "
              f"{done.partitions} partitions, {done.segments} segments, codecs {done.codecs}, "
              f"legacy {done.legacy}", flush=True)
    return root / "kafka-logs-0"


# --- one master, in a process of its own -------------------------------------------------------


def child(master: str, log_dir: Path, work: Path, parallelism: int, jobs: list[str]) -> None:
    """Run the jobs on ``master`` with the event log on; after each job, its wall time (ms) and
    event log folder go into ``result-<master>.json`` (a later run of some jobs replaces only
    those jobs' entries, so a fixed job can be measured again alone)."""
    from kafkalog_spark.spark import session

    stamp = time.strftime("%Y%m%d-%H%M%S")
    events = work / f"events-{master.strip('local[]')}-{stamp}"
    events.mkdir(parents=True)
    scratch = work / f"scratch-{master.strip('local[]')}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    p = str(parallelism)
    spark = session(master, app_name="bench-scaling", conf={
        "spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri(),
        "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false",
        "spark.default.parallelism": p,
        "spark.sql.shuffle.partitions": p})
    sc = spark.sparkContext
    sc.setLocalProperty(TAG, "warm-up")
    _job(spark, "warm-up", log_dir, scratch, p)()
    cpu_file = events.with_name(events.name.replace("events-", "cpu-") + ".json")
    with TreeCpuSampler() as cpu:  # this process, its JVM, the JVM's Python processes
        for name in jobs:
            fn = _job(spark, name, log_dir, scratch, p)  # its set-up untagged, before the clock
            sc.setLocalProperty(TAG, name)
            t0 = time.time()
            fn()
            t1 = time.time()
            sc.setLocalProperty(TAG, None)
            cpu_file.write_text(json.dumps(cpu.samples))
            _record(work / f"result-{master}.json", name,
                    {"wall": [t0 * 1000, t1 * 1000], "events": str(events),
                     "cpu": str(cpu_file)})
            print(f"#   {master} {name}: {t1 - t0:.1f} s", file=sys.stderr, flush=True)
    spark.stop()
    shutil.rmtree(scratch, ignore_errors=True)


def _job(spark, name: str, log_dir: Path, scratch: Path, p: str):
    """The benchmarked call of job ``name``, after its untimed set-up."""
    from kafkalog_spark.compaction.compact import compact
    from kafkalog_spark.delta.migrate import migrate
    from kafkalog_spark.delta.restore import restore
    from kafkalog_spark.recovery.verify_job import verify_spark

    def read():
        return spark.read.format("kafkalog").option("minPartitions", p).load(str(log_dir))

    tables = scratch / "tables"
    if name in ("scan-all", "warm-up"):
        return lambda: read().write.format("noop").mode("overwrite").save()
    if name == "scan-2col":
        return lambda: read().select("partition", "value").write.format("noop") \
            .mode("overwrite").save()
    if name == "write":
        return lambda: read().write.format("kafkalog").mode("append") \
            .option("compression", "lz4").save(str(scratch / "written"))
    if name == "verify":
        return lambda: _check(verify_spark(spark, [str(log_dir)], deep=True).ok, "verify")
    if name == "compact":
        copy = scratch / "compacted"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(log_dir, copy)
        return lambda: _check(compact([str(copy)], execute=True, force=True, engine="spark",
                                      spark=spark, options={"cleanup.policy": "compact"}
                                      ).metrics.get("partitions_cleaned"), "compact")
    if name == "migrate":
        shutil.rmtree(tables, ignore_errors=True)
        return lambda: _check(migrate([str(log_dir)], str(tables), spark=spark,
                                      engine="spark").get("records"), "migrate")
    if name == "restore":
        if not tables.is_dir():  # restore measured alone: its input, untimed
            migrate([str(log_dir)], str(tables), spark=spark, engine="spark")
        shutil.rmtree(scratch / "restored", ignore_errors=True)
        return lambda: _check(restore(str(tables), str(scratch / "restored"), spark=spark
                                      )["partitions"], "restore")
    raise ValueError(f"unknown job {name!r}; the jobs: {', '.join(JOBS)}")


def _record(path: Path, name: str, entry: dict) -> None:
    """``entry`` as job ``name``'s in the result file at ``path`` (replaced whole)."""
    done = json.loads(path.read_text()) if path.exists() else {}
    done[name] = entry
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(done, indent=1))
    os.replace(tmp, path)


def _check(ok, what: str) -> None:
    if not ok:  # a job that did nothing (or found problems) times nothing worth projecting
        raise RuntimeError(f"{what} did not do its work: {ok!r}")


def run_master(master: str, args, log_dir: Path, work: Path) -> None:
    """The child process for ``master``; it records into ``result-<master>.json`` in
    ``work``."""
    cmd = [sys.executable, __file__, "--child", master, "--log-dir", str(log_dir), "--work",
           str(work), "--parallelism", str(args.parallelism), "--jobs", args.jobs]
    done = subprocess.run(cmd)
    if done.returncode:
        raise SystemExit(f"{master} run failed (exit {done.returncode})")


def load_traces(work: Path, master: str) -> dict[str, Trace]:
    """Each job's trace on ``master`` recorded in ``work``, from the event log of the run that
    measured it last (a run still going or killed: its log so far)."""
    result = json.loads((work / f"result-{master}.json").read_text())
    runs: dict[str, dict[str, tuple[float, float]]] = {}
    samples: dict[str, str | None] = {}
    for name, entry in result.items():
        runs.setdefault(entry["events"], {})[name] = tuple(entry["wall"])
        samples[entry["events"]] = entry.get("cpu")  # runs before the sampler: none
    traces: dict[str, Trace] = {}
    for folder, walls in runs.items():
        cpu = samples[folder]
        cpu = [tuple(x) for x in json.loads(Path(cpu).read_text())] if cpu else None
        traces.update(read_traces(event_log_file(Path(folder)), walls, cpu))
    return traces


# --- report -------------------------------------------------------------------------------------


def report(traces: dict[str, dict[str, Trace]], jobs: list[str]) -> None:
    one = traces.get("local[1]")
    two = traces.get("local[2]")
    base = one or next(iter(traces.values()))
    jobs = [j for j in jobs if j in base]  # a run still going: the jobs it finished
    print("\n| job | wall s | serial share | largest task / its stage | tasks | first use s "
          "| CPU per task s | x8 | x32 | x128 | x32 cold | x128 cold | misses |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for name in jobs:
        t = base[name]
        wide = t.widest_stage()
        where = f"{wide.largest_share:.0%} (stage {wide.stage_id})" if wide else "-"
        x = {n: t.speedup(n) for n in SLOTS}
        misses = [m for m, bad in (("serial", t.serial_share > GOALS["serial"]),
                                   ("x8", x[8] < GOALS[8]), ("x32", x[32] < GOALS[32])) if bad]
        first_use = sum(st.first_use_ms for st in t.stages) / 1000
        print(f"| {name} | {t.wall_ms / 1000:.1f} | {t.serial_share:.1%} | {where} | "
              f"{len(t.tasks)} | {first_use:.1f} | {_cpu_need(t)} | {x[8]:.1f} | {x[32]:.1f} | "
              f"{x[128]:.1f} | "
              f"{t.speedup(32, 'cold'):.1f} | {t.speedup(128, 'cold'):.1f} | "
              f"{', '.join(misses) or 'none'} |")
    why(base, jobs)
    if one and two:
        print(f"\nReplay against reality (projected / measured wall time; the slots share this "
              f"machine's {CPUS} CPUs; task time: the summed task time of local[2] over "
              f"local[1]'s):\n")
        print("| job | local[1] trace, 2 cold slots, vs local[2] | local[2] trace on 1 slot vs "
              "local[1] | self: local[1] on 1 | self: local[2] on 2 | task time |")
        print("|---|---:|---:|---:|---:|---:|")
        for name in [j for j in jobs if j in two]:
            a, b = one[name], two[name]
            ratio = sum(x.ms for x in b.tasks) / max(1, sum(x.ms for x in a.tasks))
            print(f"| {name} | {_ratio(a.replay(2, 'cold', CPUS), b.wall_ms)} | "
                  f"{_ratio(b.replay(1, cpus=CPUS), a.wall_ms)} | "
                  f"{_ratio(a.replay(1, cpus=CPUS), a.wall_ms)} | "
                  f"{_ratio(b.replay(2, cpus=CPUS), b.wall_ms)} | {ratio:.2f}x |")
    print("\nStages (first trace): id, operators, tasks, summed task s, first use s, largest warm "
          "task s, shuffle read / write MiB")
    for name in jobs:
        t = base[name]
        before, between, after = (x / 1000 for x in t.serial_parts())
        print(f"- {name}: serial {t.serial_ms / 1000:.1f} s of {t.wall_ms / 1000:.1f} s (before "
              f"the first task {before:.1f}, between tasks {between:.1f}, after the last "
              f"{after:.1f}), {t.spark_jobs} Spark jobs")
        for s in t.stages:
            if s.tasks:
                print(f"  - {s.stage_id} {s.name}: {len(s.tasks)}, {s.task_ms / 1000:.1f}, "
                      f"{s.first_use_ms / 1000:.2f}, {max(s.durations('warm')) / 1000:.2f}, "
                      f"{sum(x.shuffle_read for x in s.tasks) / 2**20:.1f} / "
                      f"{sum(x.shuffle_write for x in s.tasks) / 2**20:.1f}")


def why(traces: dict[str, Trace], jobs: list[str]) -> None:
    """For each job that misses a goal: what adds most to its replay on 8 and 32 slots over the
    ideal (1-slot replay / slots), with the stage and the cause (scaling_replay.Trace.losses)."""
    lines = []
    for name in jobs:
        t = traces[name]
        for n in (8, 32):
            if t.speedup(n) >= GOALS[n] and (n == 32 or t.serial_share <= GOALS["serial"]):
                continue
            total = t.replay(n, "warm")
            top = [f"{ms / total:.0%} {'stage %d %s: ' % (st.stage_id, st.name) if st else ''}"
                   f"{reason}" for ms, st, reason in t.losses(n)[:3] if ms > 0.02 * total]
            lines.append(f"- {name} on {n} slots ({t.speedup(n):.1f}x, serial "
                         f"{t.serial_share:.1%}): of its projected {total / 1000:.1f} s, lost "
                         f"over the ideal: {'; '.join(top) or 'nothing over 2 %'}")
    if lines:
        print("\nWhere the misses come from (share of the projected time lost over the ideal, "
              "largest first):\n")
        print("\n".join(lines))


def _cpu_need(t: Trace) -> str:
    """CPU seconds the process tree used per second of task time, over the job's stages."""
    phases = [(t.cpu_per_task(p), sum(s.task_ms for s in p)) for p in t.phases()]
    if not phases or any(need is None for need, _ in phases):
        return "-"
    return f"{sum(need * ms for need, ms in phases) / max(1, sum(ms for _, ms in phases)):.2f}"


def _ratio(projected: float, measured: float) -> str:
    return f"{projected / 1000:.1f} / {measured / 1000:.1f} s ({projected / measured - 1:+.0%})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=int, default=300, help=".log bytes to generate (MiB)")
    ap.add_argument("--partitions", type=int, default=32)
    ap.add_argument("--segment-kib", type=int, default=1024)
    ap.add_argument("--parallelism", type=int, default=128,
                    help="spark.default.parallelism, shuffle partitions and scan minPartitions")
    ap.add_argument("--masters", default="local[1],local[2]")
    ap.add_argument("--jobs", default=",".join(JOBS))
    ap.add_argument("--work", type=Path, default=None, help="keeps the generated log for reruns")
    ap.add_argument("--report-only", action="store_true",
                    help="print the report of the last run in --work again, running nothing")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--log-dir", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    jobs = args.jobs.split(",")
    if args.child:
        child(args.child, args.log_dir, args.work, args.parallelism, jobs)
        return 0
    masters = args.masters.split(",")
    if args.report_only:
        found = [m for m in masters if (args.work / f"result-{m}.json").exists()]
        if not found:
            raise SystemExit(f"no result-<master>.json in {args.work}: nothing measured there")
        report({m: load_traces(args.work, m) for m in found}, jobs)
        return 0
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-scaling-"))
    try:
        log_dir = generate(work, args.size_mb, args.partitions, args.segment_kib)
        print(f"# bench_scaling: {platform.machine()}, {os.cpu_count()} CPUs, Python "
              f"{platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
              f"load average {os.getloadavg()[0]:.1f}\n# command: {' '.join(sys.argv)}")
        for master in masters:
            run_master(master, args, log_dir, work)
            print(f"# {master} done, load average {os.getloadavg()[0]:.1f}", flush=True)
        report({m: load_traces(work, m) for m in masters}, jobs)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
