"""Faults on the standalone cluster (issue 14, point 5): one executor Python worker and one
executor JVM SIGKILLed in the middle of each of ``df.write.format("kafkalog")``, distributed
compaction (``jobs/compact.py``) and the migration to Delta (``jobs/migrate_delta.py``), and each
job once more with speculation making two attempts of one task run at the same time.

Every run must complete with exactly the expected records (the input's; for compaction, the
local engine's result on a copy) — no loss, no duplicate offsets, ``verify`` clean, Delta rows
equal, no stray staging, ``.cleaned``/``.swap``/``.deleted`` or Parquet files. (A failed run is
reported with its output after checking that it left the destination byte for byte as it was.)

Faults land in running tasks by construction, not by timing. A test-only Python daemon for the
executors (``spark.python.daemon.module``, :data:`INJECT`) wraps the task entry points of the
three jobs in the forked Python workers: every task attempt leaves a marker file naming kind,
stage, partition, attempt, task id and worker pid; the attempts the test is going to kill
(``KLF_PLAN["kill"]``) then wait, and the test SIGKILLs the worker or its executor once the
marker is there. The event log must then show that very attempt failed (``ExceptionFailure`` for
a Python worker, ``ExecutorLostFailure`` for an executor) and a later attempt of the same task
succeeded. One submit per job kills a Python worker first, then an executor (compaction: the
worker in the key pass, the executor in the rewrite stage). For speculation
(``KLF_PLAN["race"]``) the first attempt of one task to start waits until Spark has started a
second (speculative) attempt of it, then both run on (one of them slowed per batch/write) until Spark keeps one and kills the other.
Speculation needs two hosts (Spark never starts a copy of a task on a host already running it),
so those runs add a worker on 127.0.0.2. The product code runs unchanged.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import textwrap
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from cluster import (
    REPO,
    add_worker_on_host,
    descendants,
    remove_worker,
    spark_submit_background,
    stop_submit,
)
from test_delta_migrate import (
    delta_rows,
    log_rows,
    parquet_on_disk,
    records,
    table_files,
)

import kafkalog_spark as kl
from kafkalog_spark.compaction.compact import compact
from kafkalog_spark.delta.commit import STATE_DIR
from kafkalog_spark.log.staging import STAGING_INFIX

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

T = 1_700_000_000_000
JOB_TIMEOUT = 240
HOLD_SECONDS = 150  # longest an attempt waits for its kill (or for its speculative copy)

# --- the test-only executor daemon ---------------------------------------------------------------

INJECT = textwrap.dedent('''
    """Test instrumentation (not product code): the executors' Python daemon, run as
    spark.python.daemon.module. Each forked worker wraps the jobs' task entry points before its
    first task. Every task attempt leaves a marker file in $KLF_MARKERS; $KLF_PLAN (JSON) says
        "kill": [[kind, partition, attempt], ...]  that attempt (in the first stage running it)
            waits after its marker until the test kills it (at most HOLD seconds)
        "race": {"kind", "partition", "loser", "until_gone"}  the first attempt of that task
            to start waits until another attempt of it has started; then the attempt "loser"
            ("first" or "second" to start), at its first batch/write, waits until files matching the glob "until_gone" have existed
            and are gone (the driver has finished the run), and goes on writing."""
    import glob, json, os, time

    import pyspark.worker as W

    HOLD = float(os.environ.get("KLF_HOLD", "150"))
    MARKERS = os.environ.get("KLF_MARKERS", "")
    PLAN = json.loads(os.environ.get("KLF_PLAN", "{}"))
    _gates = {}  # task attempt id -> what it waits for at its next batch/write (or None)
    _done = False


    def _claim(name):
        """True for the first process of the application to claim ``name``."""
        try:
            os.close(os.open(os.path.join(MARKERS, "claims", name),
                             os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            return False


    def _wait(done):
        parent, deadline = os.getppid(), time.monotonic() + HOLD
        while time.monotonic() < deadline and not done():
            if os.getppid() != parent:  # the daemon went with its executor
                os._exit(1)
            time.sleep(0.05)


    def _start(kind):
        """Called by every instrumented call of a task; the first call of a task attempt
        leaves its marker and waits as planned. Returns the attempt's gate: called before
        each of its batches/writes."""
        from pyspark import TaskContext

        c = TaskContext.get()
        tid = c.taskAttemptId()
        if tid in _gates:
            return _gates[tid]
        part, att = c.partitionId(), c.attemptNumber()
        task = f"{kind}-s{c.stageId()}-p{part}-"
        open(os.path.join(MARKERS, f"{task}a{att}-t{tid}-w{os.getpid()}"), "x").close()
        if [kind, part, att] in PLAN.get("kill", []) and _claim(f"kill.{kind}.{part}.{att}"):
            _wait(lambda: False)  # until killed
        _gates[tid] = None
        race = PLAN.get("race")
        if race and race["kind"] == kind and race["partition"] == part:
            # roles by the order the attempts' Python code starts, not by attempt number: on a
            # loaded machine the copy's worker can start first (the original's fork was slow)
            mine = f"{task}a{att}-"
            first = _claim("race")
            if first:
                _wait(lambda: any(n.startswith(task) and not n.startswith(mine)
                                  for n in os.listdir(MARKERS)))
            if race["loser"] == ("first" if first else "second") and _claim("loser"):
                _gates[tid] = _after_run(race["until_gone"], tid)
        return _gates[tid]


    def _after_run(pattern, tid):
        def gate():
            if _gates.get(tid) is gate:
                _gates[tid] = None  # once
                seen = []

                def over():
                    seen.append(bool(glob.glob(pattern)))
                    return any(seen) and not seen[-1]

                _wait(over)
                _claim(f"resumed.{tid}")  # for the test's record
        return gate


    def _slowly(batches, gate):
        for b in batches:
            if gate is not None:
                gate()
            yield b


    class _SlowSink:
        def __init__(self, f, gate):
            self.f, self.gate = f, gate

        def write(self, data):
            self.gate()
            return self.f.write(data)

        def __getattr__(self, name):
            return getattr(self.f, name)


    def _install():
        from kafkalog_spark.compaction import key_shuffle, rewrite, spark_job
        from kafkalog_spark.datasource import writer
        from kafkalog_spark.delta import spark_job as delta_job

        write = writer.KafkaLogWriter.write

        def slow_write(self, iterator):
            return write(self, _slowly(iterator, _start("write")))

        writer.KafkaLogWriter.write = slow_write

        keys = key_shuffle.key_task

        def slow_keys(*args):
            pause = _start("keys")
            return _slowly(keys(*args), pause)

        key_shuffle.key_task = slow_keys

        rewrite_task, rewrite_group = spark_job.rewrite_task, rewrite.rewrite_group
        state = {"gate": None}

        def slow_rewrite_task(*args):
            state["gate"] = _start("rewrite")
            return rewrite_task(*args)

        def slow_rewrite_group(task, retained, sink=None):
            if sink is not None and state["gate"] is not None:
                sink = _SlowSink(sink, state["gate"])
            return rewrite_group(task, retained, sink)

        spark_job.rewrite_task = slow_rewrite_task
        rewrite.rewrite_group = slow_rewrite_group

        from kafkalog_spark.datasource import reader

        files_task, read_split = delta_job.files_task, reader.read_split
        migrating = {"gate": None}

        def slow_files_task(*args):
            migrating["gate"] = _start("migrate")
            return files_task(*args)

        def slow_read_split(*args, **kwargs):
            return _slowly(read_split(*args, **kwargs), migrating["gate"])

        delta_job.files_task = slow_files_task  # what the job's pickled task names
        reader.read_split = slow_read_split  # what write_splits imports when it runs


    _main = W.main


    def main(infile, outfile):
        global _done
        if not _done:
            _install()
            _done = True
        return _main(infile, outfile)


    W.main = main

    if __name__ == "__main__":
        from pyspark import daemon

        daemon.manager()
''')

WRITE_JOB = textwrap.dedent('''
    """df.write.format("kafkalog") as a submitted job: copy SRC into DST, offsets kept."""
    import sys
    from kafkalog_spark.spark import session

    src, dst, tasks = sys.argv[1:4]
    spark = session(app_name="kafkalog-fault-write")
    df = (spark.read.format("kafkalog").option("includeHeaders", "true")
          .option("minPartitions", tasks).load(src))
    df.write.format("kafkalog").mode("append").option("segment.bytes", "8192").save(dst)
    print("WRITE DONE", flush=True)
    spark.stop()
''')

WRITE_TASKS = 8  # at least (minPartitions)
SPECULATION = {"spark.speculation": "true", "spark.speculation.multiplier": "1",
               "spark.speculation.quantile": "0.1", "spark.speculation.minTaskRuntime": "0",
               "spark.speculation.interval": "100ms",
               # 3.4+: else only tasks judged inefficient by their processing rate are copied
               "spark.speculation.efficiency.enabled": "false",
               # every executor (two on 127.0.0.1, one on 127.0.0.2) registered before the first
               # job: a copy needs a free executor on another host than the original's
               "spark.cores.max": "3", "spark.scheduler.minRegisteredResourcesRatio": "1.0",
               "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
               # a killed attempt's Python worker lives on this long (default 2 s): long
               # enough, however loaded the machine, for the losing attempt to write on
               "spark.python.task.killTimeout": "10s"}

# --- helpers ---------------------------------------------------------------------------------


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (bytes) and folder (None) under ``root``."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


def staging_leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.parent.iterdir() if STAGING_INFIX in p.name)


def gone(pid: int) -> bool:
    """``pid`` has exited (or is a zombie nobody reaps)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def wait_gone(pids: list[int], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(gone(p) for p in pids):
            return
        time.sleep(0.1)
    raise AssertionError(f"processes still running {timeout}s after the kill: "
                         f"{[p for p in pids if not gone(p)]}")


class Run:
    """One background spark-submit with the fault daemon, its markers, kills and event log."""

    def __init__(self, cluster, tmp: Path, name: str, script: Path, args: list,
                 plan: dict | None = None, conf: dict | None = None) -> None:
        self.cluster, self.dir = cluster, tmp / name
        self.markers, self.events = self.dir / "markers", self.dir / "events"
        for d in (self.markers / "claims", self.events):
            d.mkdir(parents=True)
        inject = self.dir / "inject"
        inject.mkdir()
        (inject / "klfault_daemon.py").write_text(INJECT)
        self.output = self.dir / "submit.out"
        self.kills: list[tuple[str, dict]] = []
        conf = {"spark.python.daemon.module": "klfault_daemon",
                # then the driver's own path: the executors import the package the driver
                # does (a checkout run with PYTHONPATH, not the one the venv installs)
                "spark.executorEnv.PYTHONPATH": os.pathsep.join(
                    [str(inject), *filter(None, [os.environ.get("PYTHONPATH")])]),
                "spark.executorEnv.KLF_MARKERS": str(self.markers),
                "spark.executorEnv.KLF_PLAN": json.dumps(plan or {}),
                "spark.executorEnv.KLF_HOLD": str(HOLD_SECONDS),
                "spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{self.events}",
                "spark.eventLog.rolling.enabled": "false", "spark.eventLog.compress": "false",
                "spark.task.maxFailures": "4", "spark.ui.enabled": "false",
                # a few tasks per stage, not the cluster default's 200 per shuffle
                "spark.sql.shuffle.partitions": "4", **(conf or {})}
        self.t0 = time.monotonic()
        self.proc = spark_submit_background(script, *args, master=cluster.url, conf=conf,
                                            output=self.output)

    def started(self, kind: str) -> list[dict]:
        """The task attempts of ``kind`` whose Python code started (their markers)."""
        out = []
        for p in self.markers.iterdir():
            if p.is_file():
                k, s, part, a, t, w = p.name.split("-")
                if k == kind:
                    out.append({"stage": int(s[1:]), "partition": int(part[1:]),
                                "attempt": int(a[1:]), "tid": int(t[1:]), "pid": int(w[1:])})
        return out

    def wait_started(self, kind: str, partition: int, attempt: int,
                     timeout: float = 120) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = [t for t in self.started(kind)
                   if (t["partition"], t["attempt"]) == (partition, attempt)]
            if got:
                return min(got, key=lambda t: t["tid"])  # the held one: the first stage's
            if self.proc.poll() is not None:
                raise AssertionError(f"the job ended before {kind} task {partition} attempt "
                                     f"{attempt} started:\n" + self.text()[-4000:])
            time.sleep(0.05)
        raise AssertionError(f"{kind} task {partition} attempt {attempt} did not start within "
                             f"{timeout}s:\n" + self.text()[-4000:])

    def kill(self, fault: str, kind: str, partition: int, attempt: int = 0) -> dict:
        """Wait until that attempt runs (it then waits for this), SIGKILL its Python worker
        (``fault="python"``) or the executor JVM it runs under (``"executor"``), and wait
        until the killed processes are gone."""
        task = self.wait_started(kind, partition, attempt)
        if fault == "python":
            assert task["pid"] in self.cluster.python_worker_pids(), "not an executor's worker"
            victims = [task["pid"]]
        else:
            owners = [e for e in self.cluster.executor_pids() if task["pid"] in descendants(e)]
            assert len(owners) == 1, f"no executor runs Python worker {task['pid']}"
            victims = [owners[0], *descendants(owners[0])]
        os.kill(victims[0], signal.SIGKILL)
        wait_gone(victims)  # the executor's Python daemon and workers go with it
        self.kills.append((fault, task))
        return task

    def finish(self) -> int:
        try:
            self.proc.wait(timeout=JOB_TIMEOUT)
        finally:
            stop_submit(self.proc)
        self.seconds = time.monotonic() - self.t0
        self.cluster.wait_idle(60)
        return self.proc.returncode

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def task_events(self, event: str) -> list[dict]:
        """The application's event-log events named ``event`` (``TaskStart``, ``TaskEnd``)."""
        out = []
        for f in self.events.iterdir():
            for line in f.read_text().splitlines():
                if f'"SparkListener{event}"' in line:
                    out.append(json.loads(line))
        return out

    def task_ends(self) -> list[dict]:
        return self.task_events("TaskEnd")

    def summary(self) -> dict:
        ends = self.task_ends()
        resumed = [p.name for p in (self.markers / "claims").glob("resumed.*")]
        # speculative attempts counted where they start: the attempt Spark kills once its twin
        # has won may get no TaskEnd at all when the application stops first (CI: the copy
        # lost, its kill was never logged, and a count of ends saw no speculation)
        return {"seconds": round(self.seconds, 1), "loser_resumed_after_run": resumed,
                "task_ends": dict(Counter(e["Task End Reason"]["Reason"] for e in ends)),
                "speculative": sum(1 for e in self.task_events("TaskStart")
                                   if e["Task Info"]["Speculative"])}


def assert_faults_hit(run: Run, wanted: list[str]) -> None:
    """Each kill failed the very attempt it targeted (Spark recorded it: ``ExceptionFailure``
    for a Python worker, ``ExecutorLostFailure`` for an executor) and a later attempt of that
    task succeeded — the retry path really ran."""
    assert [f for f, _ in run.kills] == wanted
    ends = run.task_ends()
    by_tid = {e["Task Info"]["Task ID"]: e for e in ends}
    for fault, task in run.kills:
        end = by_tid.get(task["tid"])
        assert end is not None, f"no TaskEnd for the killed attempt {task}"
        reason = end["Task End Reason"]["Reason"]
        assert reason == {"python": "ExceptionFailure",
                          "executor": "ExecutorLostFailure"}[fault], (fault, task, reason)
        info = end["Task Info"]
        assert any(e["Stage ID"] == end["Stage ID"] and e["Task End Reason"]["Reason"] == "Success"
                   and e["Task Info"]["Index"] == info["Index"]
                   and e["Task Info"]["Task ID"] > info["Task ID"] for e in ends), \
            f"no later attempt of the killed task {task} succeeded"


def assert_duplicate_attempts(run: Run, kind: str, partition: int) -> None:
    """Speculation really ran two attempts of task ``partition`` of ``kind`` at once (markers:
    attempt 0 waited until another attempt had started), and Spark says so (a speculative
    attempt in the event log)."""
    per_task = Counter((t["stage"], t["partition"]) for t in run.started(kind))
    assert max(n for (_, p), n in per_task.items() if p == partition) >= 2, per_task
    assert run.summary()["speculative"] >= 1


def fail_with_output(run: Run, before: dict, dest: Path) -> None:
    """The job failed: it must have said why and left the destination as it was; the test
    fails either way (these faults are all survivable)."""
    out = run.text()
    assert "Error" in out or "Exception" in out, out[-3000:]
    assert snapshot(dest) == before, "a failed job changed the destination"
    pytest.fail(f"the job failed cleanly, but it should have survived:\n{out[-3000:]}")


def log_content(path: Path) -> list[dict]:
    t = kl.read_log(path, include_headers=True)
    cols = ["topic", "partition", "offset", "key", "value", "timestamp", "headers"]
    return sorted(t.select([c for c in cols if c in t.schema.names]).to_pylist(),
                  key=lambda r: (r["topic"], r["partition"], r["offset"]))


def no_duplicate_offsets(rows: list[dict]) -> None:
    keys = Counter((r["topic"], r["partition"], r["offset"]) for r in rows)
    assert not [k for k, c in keys.items() if c > 1]


# --- data: built once for the module ---------------------------------------------------------


COMPACT_OPTIONS = {"cleanup.policy": "compact", "segment.bytes": "8192"}


@pytest.fixture(scope="module")
def write_source(tmp_path_factory):
    """A log dir to copy with ``df.write`` (read only) and its records."""
    src = tmp_path_factory.mktemp("faults-data") / "write-src"
    kl.write_log(records(4800, topic="src", partitions=3), src, segment_bytes=4096,
                 max_batch_records=20)
    return src, log_content(src)


@pytest.fixture(scope="module")
def compaction_source(tmp_path_factory):
    """A log dir to compact (each run compacts its own copy) and what the local engine makes
    of it."""
    root = tmp_path_factory.mktemp("faults-data")
    n = 9000
    table = pa.table({
        "topic": ["c"] * n,
        "partition": pa.array([i % 3 for i in range(n)], pa.int32()),
        "key": [f"k{(i * 7) % 300}".encode() for i in range(n)],
        "value": [None if i % 13 == 0 else f"v{i}".encode() * 3 for i in range(n)],
        "timestamp": pa.array([(T - 3_600_000 + i) * 1000 for i in range(n)],
                              pa.timestamp("us", tz="UTC")),
    })
    src, local = root / "compact-src", root / "compact-local"
    kl.write_log(table, src, segment_bytes=2048, max_batch_records=10)
    shutil.copytree(src, local)
    compact(local, now_ms=T, execute=True, force=True, options=COMPACT_OPTIONS)
    expected = log_content(local)
    assert len(expected) < n  # compaction drops records here
    return src, expected


@pytest.fixture(scope="module")
def migrate_source(tmp_path_factory):
    """A log dir to migrate to Delta (read only) and its rows."""
    src = tmp_path_factory.mktemp("faults-data") / "migrate-src"
    kl.write_log(records(3000, topic="orders", partitions=4), src, segment_bytes=4096,
                 max_batch_records=20)
    return src, log_rows(src)


# --- the three jobs ------------------------------------------------------------------------------


def start_write(cluster, tmp: Path, source, name: str, plan=None, conf=None):
    src, _ = source
    dst = tmp / f"{name}-dst"
    kl.write_log(records(50, topic="other", partitions=2), dst)  # the destination has data
    script = tmp / "write_job.py"
    script.write_text(WRITE_JOB)
    run = Run(cluster, tmp, name, script, [src, dst, WRITE_TASKS], plan, conf)
    return run, dst, snapshot(dst)


def check_write(run: Run, source, dst: Path, before: dict) -> None:
    _, expected = source
    if run.finish() != 0:
        fail_with_output(run, before, dst)
    assert len({t["partition"] for t in run.started("write")}) >= WRITE_TASKS
    got = log_content(dst)
    no_duplicate_offsets(got)
    assert [r for r in got if r["topic"] == "src"] == expected
    assert {k: v for k, v in snapshot(dst).items() if k.startswith("other-")} == \
        {k: v for k, v in before.items() if k.startswith("other-")}
    report = kl.verify(dst, deep=True)
    assert report.ok, report.problems
    assert staging_leftovers(dst) == []


def start_compact(cluster, tmp: Path, source, name: str, plan=None, conf=None):
    src, _ = source
    log_dir = tmp / f"{name}-logs"
    shutil.copytree(src, log_dir)
    args = ["--execute", "--force", "--now", str(T)]
    for k, v in COMPACT_OPTIONS.items():
        args += ["--config", f"{k}={v}"]
    run = Run(cluster, tmp, name, REPO / "jobs" / "compact.py", [*args, log_dir], plan, conf)
    return run, log_dir, snapshot(log_dir)


def check_compact(run: Run, source, log_dir: Path, before: dict) -> None:
    _, expected = source
    if run.finish() != 0:
        fail_with_output(run, before, log_dir)
    got = log_content(log_dir)
    no_duplicate_offsets(got)
    assert got == expected
    report = kl.verify(log_dir, deep=True)
    assert report.ok, report.problems
    stray = [p.name for p in log_dir.rglob("*") if p.suffix in (".cleaned", ".swap", ".deleted")]
    assert stray == [] and staging_leftovers(log_dir) == []


def start_migrate(cluster, tmp: Path, source, name: str, plan=None, conf=None):
    src, _ = source
    dest = tmp / f"{name}-delta"
    dest.mkdir()
    run = Run(cluster, tmp, name, REPO / "jobs" / "migrate_delta.py", [src, dest], plan, conf)
    return run, dest, snapshot(dest)


def check_migrate(run: Run, source, dest: Path, before: dict) -> None:
    _, expected = source
    if run.finish() != 0:
        fail_with_output(run, before, dest)
    table = dest / "orders"
    got = delta_rows(table)
    no_duplicate_offsets(got)
    assert got == expected
    assert parquet_on_disk(table) == table_files(table)
    state = table / STATE_DIR
    assert not list((state / "runs").iterdir())
    assert not (state / "staging").exists() or not list((state / "staging").rglob("*.parquet"))


# --- the tests -------------------------------------------------------------------------------


def test_write_survives_killed_python_worker_and_executor(spark_cluster, tmp_path, write_source):
    run, dst, before = start_write(spark_cluster, tmp_path, write_source, "write-faults",
                                   plan={"kill": [["write", 2, 0], ["write", 5, 0]]})
    run.kill("python", "write", 2)
    run.kill("executor", "write", 5)
    check_write(run, write_source, dst, before)
    print("\nwrite faults", run.summary())
    assert_faults_hit(run, ["python", "executor"])


def test_compaction_survives_killed_python_worker_and_executor(spark_cluster, tmp_path,
                                                               compaction_source):
    run, log_dir, before = start_compact(spark_cluster, tmp_path, compaction_source,
                                         "compact-faults",
                                         plan={"kill": [["keys", 1, 0], ["rewrite", 2, 0]]})
    run.kill("python", "keys", 1)  # the key pass (the shuffle's map stage)
    run.kill("executor", "rewrite", 2)  # a later stage: the cleaned segments' rewrite
    check_compact(run, compaction_source, log_dir, before)
    print("\ncompact faults", run.summary())
    assert_faults_hit(run, ["python", "executor"])


def test_migration_survives_killed_python_worker_and_executor(spark_cluster, tmp_path,
                                                              migrate_source):
    # one Spark stage: its task 0 loses its Python worker, then its retry loses its executor
    run, dest, before = start_migrate(spark_cluster, tmp_path, migrate_source, "migrate-faults",
                                      plan={"kill": [["migrate", 0, 0], ["migrate", 0, 1]]})
    run.kill("python", "migrate", 0, attempt=0)
    run.kill("executor", "migrate", 0, attempt=1)
    check_migrate(run, migrate_source, dest, before)
    print("\nmigrate faults", run.summary())
    assert_faults_hit(run, ["python", "executor"])


@pytest.fixture(scope="module")
def second_host(spark_cluster):
    """A third worker on 127.0.0.2 while the speculation tests run."""
    proc = add_worker_on_host(spark_cluster, "worker-host2", "127.0.0.2")
    yield spark_cluster
    remove_worker(spark_cluster, proc)


def staging_glob(log_dir: Path) -> str:
    return str(log_dir.parent / f".{log_dir.name}{STAGING_INFIX}*")


# Each race: the first attempt of one task to start (usually the original) waits until a
# speculative copy of it has started; the attempt that is to lose then stops at its first batch/write until the driver has finished the
# run (its staging gone), and carries on writing — a killed attempt whose Python worker is not
# dead yet (Spark kills it spark.python.task.killTimeout after the task: 2 s by default).


def test_write_with_speculation(second_host, tmp_path, write_source):
    # the second wins; the first writes on after the driver published and dropped the staging
    run, dst, before = start_write(
        second_host, tmp_path, write_source, "write-spec",
        plan={"race": {"kind": "write", "partition": 5, "loser": "first",
                       "until_gone": staging_glob(tmp_path / "write-spec-dst")}},
        conf={**SPECULATION, "spark.sql.execution.arrow.maxRecordsPerBatch": "10"})
    check_write(run, write_source, dst, before)
    print("\nwrite speculation", run.summary())
    assert_duplicate_attempts(run, "write", 5)


def test_compaction_with_speculation(second_host, tmp_path, compaction_source):
    # the first wins; the second, half way through its file, writes on after the swap
    run, log_dir, before = start_compact(
        second_host, tmp_path, compaction_source, "compact-spec",
        plan={"race": {"kind": "rewrite", "partition": 1, "loser": "second",
                       "until_gone": staging_glob(tmp_path / "compact-spec-logs")}},
        conf=SPECULATION)
    check_compact(run, compaction_source, log_dir, before)
    print("\ncompact speculation", run.summary())
    assert_duplicate_attempts(run, "rewrite", 1)


def test_migration_with_speculation(second_host, tmp_path, migrate_source):
    # the second wins; the first decodes and writes its Parquet after the commit
    runs = tmp_path / "migrate-spec-delta" / "orders" / STATE_DIR / "runs" / "*"
    run, dest, before = start_migrate(
        second_host, tmp_path, migrate_source, "migrate-spec",
        plan={"race": {"kind": "migrate", "partition": 0, "loser": "first",
                       "until_gone": str(runs)}},
        conf=SPECULATION)
    check_migrate(run, migrate_source, dest, before)
    print("\nmigrate speculation", run.summary())
    assert_duplicate_attempts(run, "migrate", 0)
