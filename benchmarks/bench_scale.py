"""Scale benchmark: info, read, verify, compaction and migration (plans and runs) on big log dirs.

For each size (``--partitions``, a list; about ``--segments`` segments each) a log dir is made
with :mod:`gen_big` (mixed codecs, some v0/v1 segments), then every operation runs in a
**fresh process** and is timed from the outside, with the peak resident memory of the process
(its own ``VmHWM``: the driver) and, for Spark, of the Python workers and the JVM
(``VmHWM`` of the driver's descendants, sampled every 0.1 s: the tasks):

* ``info`` / ``info --shallow`` — ``kafkalog info DIR`` (the CLI, whole process);
* ``plan_read`` — :func:`kafkalog_spark.log.reader.plan_read` (in-process time);
* ``read (local)`` — :func:`iter_log` over every record (in-process time, MB/s of ``.log``);
* ``spark read: plan`` / ``spark read: count`` — ``df.rdd.getNumPartitions()`` then
  ``df.count()`` on ``local[2]``, session start and a warm-up read excluded;
* ``verify (local)`` — ``kafkalog verify --local DIR`` (CLI);
* ``verify (spark)`` — :func:`verify_spark` on ``local[2]``, session start excluded;
* ``compact (dry run)`` — ``kafkalog compact DIR --config-file topic-configs.json`` (CLI, plans
  every compacted partition, changes nothing);
* ``migrate (dry run)`` — ``kafkalog migrate --dry-run DIR DEST`` (CLI, plans every partition);
* ``migrate (local)`` / ``migrate (spark)`` — :func:`~kafkalog_spark.delta.migrate.migrate` of
  the whole log dir into new Delta tables (Spark: session start and a warm-up run excluded);
* ``compact (spark, execute)`` — one cleaning round with Spark on a copy of the log dir (copy
  and a warm-up round excluded); ``compact (local, execute)`` — the same round in-process on
  the log dir itself, last, since it changes it.

CLI rows include the interpreter start and imports (``kafkalog --version`` is listed as the
baseline). Every file is read once before each operation, so the page cache is warm. Each
size's data is deleted after it is measured unless ``--keep``.

    .venv/bin/python benchmarks/bench_scale.py                       # 4 sizes, ~1k..40k segments
    .venv/bin/python benchmarks/bench_scale.py --partitions 100,400 --no-spark --work /tmp/s

Prints a markdown table headed by machine, date and command, then the scaling exponent of
each operation between the smallest and the largest size (1.0 = linear in segments).
"""

from __future__ import annotations

import argparse
import json
import math
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

import gen_big  # noqa: E402

PY = sys.executable
TIMEOUT = 1800

# runs a CLI command in this process and prints its peak RSS (VmHWM: ru_maxrss of a child
# would include this benchmark's own memory, inherited at fork)
CLI = r'''
import atexit, sys
def _hwm():
    with open("/proc/self/status") as f:
        print("VMHWM", next(int(l.split()[1]) // 1024 for l in f if l.startswith("VmHWM")),
              file=sys.stderr, flush=True)
atexit.register(_hwm)
from kafkalog_spark.cli import main
sys.argv = ["kafkalog", *sys.argv[1:]]
main()
'''

# runs inside each measured Python process: JSON of {"seconds", "tasks_mb", "jvm_mb", ...}
PRELUDE = r'''
import json, os, sys, threading, time, resource
_peak = {"python": 0, "java": 0}
def _sample(stop):
    me = os.getpid()
    while not stop.is_set():
        parents = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        parents[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
                except OSError:
                    pass
        for pid in parents:
            p, seen = pid, 0
            while p in parents and p != me and seen < 64:
                p, seen = parents[p], seen + 1
            if p != me or pid == me:
                continue
            try:
                with open(f"/proc/{pid}/status") as f:
                    st = dict(l.split(":", 1) for l in f if ":" in l)
                kind = "java" if "java" in st["Name"] else "python" if "python" in st["Name"] else None
                if kind:
                    _peak[kind] = max(_peak[kind], int(st.get("VmHWM", "0 kB").split()[0]) // 1024)
            except (OSError, KeyError, ValueError):
                pass
        stop.wait(0.1)
_stop = threading.Event()
threading.Thread(target=_sample, args=(_stop,), daemon=True).start()
def _hwm():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) // 1024 for l in f if l.startswith("VmHWM"))
def report(seconds, **extra):
    _stop.set(); time.sleep(0.15)
    print("RESULT " + json.dumps({"seconds": seconds, "driver_mb": _hwm(),
          "tasks_mb": _peak["python"] or None, "jvm_mb": _peak["java"] or None, **extra}),
          flush=True)
DIR, ROOT, WARM = sys.argv[1], sys.argv[2], sys.argv[3]
'''

SNIPPETS = {
    "plan_read": r'''
from kafkalog_spark.log.reader import plan_read
t0 = time.perf_counter(); n = len(plan_read(DIR)); report(time.perf_counter() - t0, splits=n)
''',
    "read (local)": r'''
from kafkalog_spark.log.reader import iter_log
t0 = time.perf_counter(); rows = 0
for b in iter_log(DIR):
    rows += b.num_rows
report(time.perf_counter() - t0, rows=rows)
''',
    "spark read": r'''
from kafkalog_spark.spark import session
s = session("local[2]", driver_memory="2g")
s.read.format("kafkalog").load(WARM).count()  # workers started, numba caches loaded
t0 = time.perf_counter()
df = s.read.format("kafkalog").load(DIR)
n = df.rdd.getNumPartitions()
t1 = time.perf_counter()
rows = df.count()
t2 = time.perf_counter()
print("RESULT " + json.dumps({"seconds": t1 - t0, "op": "spark read: plan", "tasks": n,
                              "driver_mb": _hwm()}), flush=True)
report(t2 - t1, op="spark read: count", rows=rows, tasks=n)
''',
    "verify (spark)": r'''
from kafkalog_spark.spark import session
from kafkalog_spark.recovery.verify_job import verify_spark
s = session("local[2]", driver_memory="2g")
verify_spark(s, WARM)
t0 = time.perf_counter(); r = verify_spark(s, DIR); report(time.perf_counter() - t0, ok=r.ok)
''',
}


# operations that write: run after every read-only one. Migrations write new tables under
# ROOT; the Spark compaction works on a copy of the log dir (made outside the timing) and the
# local compaction then on the log dir itself, so it runs last.
EXECUTIONS = {
    "migrate (local)": r'''
from kafkalog_spark.delta.migrate import migrate
t0 = time.perf_counter(); m = migrate(DIR, ROOT + "/delta-local")
report(time.perf_counter() - t0, rows=m["records"], files=m["files"])
''',
    "migrate (spark)": r'''
from kafkalog_spark.delta.migrate import migrate
from kafkalog_spark.spark import session
s = session("local[2]", driver_memory="2g")
migrate(WARM, ROOT + "/delta-warm", spark=s)  # workers started, numba caches loaded
t0 = time.perf_counter(); m = migrate(DIR, ROOT + "/delta-spark", spark=s)
report(time.perf_counter() - t0, rows=m["records"], files=m["files"])
''',
    "compact (spark, execute)": r'''
import shutil
from kafkalog_spark.compaction.compact import compact
from kafkalog_spark.spark import session
copy = ROOT + "/compact-copy"
shutil.copytree(DIR, copy)
s = session("local[2]", driver_memory="2g")
shutil.copytree(WARM, ROOT + "/compact-warm")
compact(ROOT + "/compact-warm", execute=True, engine="spark", spark=s,  # workers started
        config_file=os.path.dirname(WARM) + "/topic-configs.json")
t0 = time.perf_counter()
r = compact(copy, execute=True, engine="spark", spark=s, config_file=ROOT + "/topic-configs.json")
report(time.perf_counter() - t0, cleaned=r.metrics["partitions_cleaned"])
shutil.rmtree(copy)
''',
    "compact (local, execute)": r'''
from kafkalog_spark.compaction.compact import compact
t0 = time.perf_counter()
r = compact(DIR, execute=True, config_file=ROOT + "/topic-configs.json")
report(time.perf_counter() - t0, cleaned=r.metrics["partitions_cleaned"])
''',
}


def run_process(argv: list[str]) -> tuple[float, int | None, str]:
    """Run ``argv``; return (wall seconds, peak RSS MB the process printed, stdout)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        try:
            proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        text = out.read().decode(errors="replace")
        errors = err.read().decode(errors="replace")
    if proc.returncode not in (0, 1):  # 1: a dry run that would change something
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n{errors[-2000:]}")
    hwm = [int(line.split()[1]) for line in errors.splitlines() if line.startswith("VMHWM ")]
    return wall, hwm[-1] if hwm else None, text


def warm_cache(root: str) -> None:
    """Read every file under ``root`` once, so each operation starts with the page cache warm
    (this VM drops clean pages it has not used for a while)."""
    for dirpath, _, names in os.walk(root):
        for name in names:
            with open(os.path.join(dirpath, name), "rb") as f:
                while f.read(1 << 20):
                    pass


def measure(size: dict, log_dir: str, root: str, warm: str, spark: bool,
            only: set[str] | None, repeat: int = 1) -> list[dict]:
    """Every operation on one log dir, each in a fresh process (best of ``repeat``)."""
    best: dict[str, dict] = {}
    mb = size["bytes"] / 2**20

    def add(op: str, seconds: float, driver: int | None, tasks=None, jvm=None, note: str = ""):
        row = {**size, "op": op, "seconds": round(seconds, 3),
               "mb_s": round(mb / seconds, 1) if seconds > 0 else None,
               "driver_mb": driver, "tasks_mb": tasks, "jvm_mb": jvm, "note": note}
        if op not in best or seconds < best[op]["seconds"]:
            best[op] = row
        print(f"  {op:22s} {seconds:8.2f} s  driver {driver} MB  tasks {tasks} MB  jvm {jvm} MB"
              f"  {note}", file=sys.stderr, flush=True)

    def wanted(op: str) -> bool:
        return only is None or any(o in op for o in only)

    for _ in range(repeat):
        _measure_once(add, wanted, log_dir, root, warm, spark)
    return list(best.values())


def _measure_once(add, wanted, log_dir: str, root: str, warm: str, spark: bool) -> None:

    cli = [("kafkalog --version", ["--version"]), ("info", ["info", log_dir]),
           ("info --shallow", ["info", "--shallow", log_dir]),
           ("verify (local)", ["verify", "--local", log_dir]),
           ("compact (dry run)", ["compact", log_dir, "--config-file",
                                  str(Path(root) / "topic-configs.json")]),
           ("migrate (dry run)", ["migrate", "--dry-run", log_dir,
                                  str(Path(root) / "delta-dest")])]
    for op, args in cli:
        if wanted(op):
            warm_cache(log_dir)
            wall, rss, _ = run_process([PY, "-c", CLI, *args])
            add(op, wall, rss)
    for op, code in {**SNIPPETS, **EXECUTIONS}.items():
        if not wanted(op) or ("spark" in op and not spark):
            continue
        warm_cache(log_dir)
        _, _, text = run_process([PY, "-c", PRELUDE + code, log_dir, root, warm])
        for line in text.splitlines():
            if line.startswith("RESULT "):
                r = json.loads(line[7:])
                note = ", ".join(f"{k} {v}" for k, v in r.items()
                                 if k in ("tasks", "rows", "splits", "ok", "files", "cleaned"))
                add(r.get("op", op), r["seconds"], r.get("driver_mb"), r.get("tasks_mb"),
                    r.get("jvm_mb"), note)


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    mem = next((int(line.split()[1]) // 2**20 for line in open("/proc/meminfo")
                if line.startswith("MemTotal")), 0)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, text=True,
                            capture_output=True).stdout.strip()
    return (f"{cpu}, {os.cpu_count()} cores, {mem} GiB RAM, Linux {platform.release()}, "
            f"Python {platform.python_version()}, commit {commit}")


def table(rows: list[dict]) -> str:
    head = ("| segments | partitions | .log GiB | operation | seconds | MB/s | driver peak MB "
            "| task peak MB | JVM peak MB | notes |\n|---:|---:|---:|---|---:|---:|---:|---:|---:|---|")
    lines = [head]
    for r in rows:
        cells = [f"{r['segments']:,}", f"{r['partitions']:,}", f"{r['bytes'] / 2**30:.2f}", r["op"],
                 f"{r['seconds']:.3g}", "" if r["mb_s"] is None or "version" in r["op"] else f"{r['mb_s']:.0f}",
                 str(r["driver_mb"] or ""), str(r["tasks_mb"] or ""), str(r["jvm_mb"] or ""), r["note"]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def scaling(rows: list[dict]) -> str:
    """Per operation: the exponent k of seconds ~ segments^k between the two largest sizes
    (1.0 = linear; the smaller sizes are dominated by start-up), microseconds per segment at
    the largest, and memory from the smallest to the largest size."""
    out = ["| operation | seconds by size | k (two largest) | µs/segment (largest) "
           "| driver MB by size | task MB by size |", "|---|---|---:|---:|---|---|"]
    ops = list(dict.fromkeys(r["op"] for r in rows))
    for op in ops:
        rs = sorted((r for r in rows if r["op"] == op), key=lambda r: r["segments"])
        if len(rs) < 2:
            continue
        a, b = rs[-2], rs[-1]
        k = (math.log(b["seconds"] / a["seconds"]) / math.log(b["segments"] / a["segments"])
             if a["seconds"] > 0 and b["seconds"] > 0 else float("nan"))
        seconds = " / ".join(f"{r['seconds']:.3g}" for r in rs)
        driver = " / ".join(str(r["driver_mb"] or "-") for r in rs)
        tasks = " / ".join(str(r["tasks_mb"] or "-") for r in rs)
        per_segment = b["seconds"] / b["segments"] * 1e6
        out.append(f"| {op} | {seconds} | {k:.2f} | {per_segment:.0f} | {driver} | {tasks} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", default="100,400,1600,4000",
                    help="comma-separated partition counts, one size each")
    ap.add_argument("--segments", type=int, default=10, help="mean segments per partition")
    ap.add_argument("--segment-kib", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=None, help="folder for the data (default: a "
                    "temporary folder under /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the generated data")
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--only", default=None, help="comma-separated operation name parts")
    ap.add_argument("--repeat", type=int, default=1, help="best of this many runs per operation")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    a = ap.parse_args(argv)
    work = a.work or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    only = None if a.only is None else set(a.only.split(","))
    warm = work / "warm"
    if not warm.exists():
        gen_big.generate(warm, partitions=4, segments=2, segment_kib=16, seed=a.seed)
    rows: list[dict] = []
    try:
        for parts in (int(p) for p in a.partitions.split(",")):
            root = work / f"p{parts}"
            if root.exists():
                shutil.rmtree(root)
            g = gen_big.generate(root, partitions=parts, segments=a.segments,
                                 segment_kib=a.segment_kib, seed=a.seed)
            size = {"partitions": g.partitions, "segments": g.segments, "bytes": g.bytes}
            print(f"{g.partitions} partitions, {g.segments} segments, {g.bytes / 2**30:.2f} GiB "
                  f"generated in {g.seconds:.1f} s", file=sys.stderr, flush=True)
            rows += measure(size, g.log_dirs[0], str(root), str(warm / "kafka-logs-0"),
                            not a.no_spark, only, a.repeat)
            if not a.keep:
                shutil.rmtree(root)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    print(f"Machine: {machine()}  \nDate: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  \n"
          f"Command: `{' '.join([Path(PY).name, *sys.argv])}`  \n"
          f"Data: gen_big, {a.segments} segments/partition on average, {a.segment_kib} KiB "
          f"segments, seed {a.seed}; best of {a.repeat}; page cache warm (every file read "
          f"before each operation); Spark local[2], session start excluded\n")
    print(table(rows))
    print()
    print(scaling(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
