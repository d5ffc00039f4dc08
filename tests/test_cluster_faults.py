"""Faults on the standalone cluster (issue 14, point 5): an executor JVM or one executor Python
worker SIGKILLed in the middle of ``df.write.format("kafkalog")``, distributed compaction
(``jobs/compact.py``) and the migration to Delta (``jobs/migrate_delta.py``), and each job once
more with speculation forcing duplicate task attempts.

Every run either completes with exactly the expected records (the input's; for compaction, the
local engine's result on a copy) — no loss, no duplicate offsets, ``verify`` clean, Delta rows
equal and no stray files — or fails with a clear error and leaves the destination byte for byte
as it was.

The tasks are made slow, and every task attempt leaves a marker file, by a test-only Python
daemon for the executors (``spark.python.daemon.module``, :data:`INJECT`): it wraps the task
entry points of the three jobs in the forked Python workers (a marker naming stage, partition,
attempt and worker pid; a sleep; for one "slow" partition, slow batches or slow writes). The
product code runs unchanged. Speculation needs two hosts (Spark never starts a copy of a task
on a host already running it), so those runs add a worker on 127.0.0.2 for the time of the
test.
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

import kafkalog_spark as kl
from kafkalog_spark.compaction.compact import compact
from kafkalog_spark.log.staging import STAGING_INFIX

from cluster import (REPO, add_worker_on_host, descendants, remove_worker,
                     spark_submit_background, stop_submit)
from test_delta_migrate import delta_rows, log_rows, parquet_on_disk, records, table_files

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

T = 1_700_000_000_000
JOB_TIMEOUT = 240

# --- the test-only executor daemon ---------------------------------------------------------------

INJECT = textwrap.dedent('''
    """Test instrumentation (not product code): the executors' Python daemon, run as
    spark.python.daemon.module. Each forked worker wraps the jobs' task entry points before its
    first task: a marker file per task attempt in $KLF_MARKERS, then the delays of $KLF_DELAY
    ({kind: {"task": s, "slow_partition": p, "slow_task": s, "slow": s per batch/write}})."""
    import json, os, sys, time

    import pyspark.worker as W

    _done = False


    def _spec(kind):
        return json.loads(os.environ.get("KLF_DELAY", "{}")).get(kind, {})


    _attempts = set()


    def _start(kind):
        """Called by every instrumented call of a task: the first call of a task attempt leaves
        its marker and takes the task's delay."""
        from pyspark import TaskContext

        c = TaskContext.get()
        spec = _spec(kind)
        if (kind, c.taskAttemptId()) not in _attempts:
            _attempts.add((kind, c.taskAttemptId()))
            name = (f"{kind}-s{c.stageId()}-p{c.partitionId()}-a{c.attemptNumber()}"
                    f"-t{c.taskAttemptId()}-w{os.getpid()}")
            open(os.path.join(os.environ["KLF_MARKERS"], name), "x").close()
            time.sleep(spec.get("task", 0))
            if spec.get("slow_partition") == c.partitionId():
                time.sleep(spec.get("slow_task", 0))
        if spec.get("slow_partition") != c.partitionId():
            return 0
        # "slow_copy": a later attempt (a speculative copy, a retry) on a busier executor
        return spec.get("slow_copy", spec.get("slow", 0)) if c.attemptNumber() else spec.get("slow", 0)


    def _slowly(batches, pause):
        for b in batches:
            if pause:
                time.sleep(pause)
            yield b


    class _SlowSink:
        def __init__(self, f, pause):
            self.f, self.pause = f, pause

        def write(self, data):
            time.sleep(self.pause)
            return self.f.write(data)

        def __getattr__(self, name):
            return getattr(self.f, name)


    def _install():
        from kafkalog_spark.compaction import rewrite, spark_job
        from kafkalog_spark.datasource import writer
        from kafkalog_spark.delta import spark_job as delta_job

        write = writer.KafkaLogWriter.write

        def slow_write(self, iterator):
            return write(self, _slowly(iterator, _start("write")))

        writer.KafkaLogWriter.write = slow_write

        keys = spark_job._KeyReader.read

        def slow_keys(self, partition):
            pause = _start("keys")
            return _slowly(keys(self, partition), pause)

        spark_job._KeyReader.read = slow_keys

        rewrite_task, rewrite_group = spark_job.rewrite_task, rewrite.rewrite_group
        state = {"pause": 0}

        def slow_rewrite_task(retained_dir, item):
            state["pause"] = _start("rewrite")
            return rewrite_task(retained_dir, item)

        def slow_rewrite_group(task, retained, sink=None):
            if sink is not None and state["pause"]:
                sink = _SlowSink(sink, state["pause"])
            return rewrite_group(task, retained, sink)

        spark_job.rewrite_task = slow_rewrite_task
        rewrite.rewrite_group = slow_rewrite_group

        read = delta_job._MigrationReader.read

        def slow_read(self, partition):
            pause = _start("migrate")
            return _slowly(read(self, partition), pause)

        delta_job._MigrationReader.read = slow_read


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

SPECULATION = {"spark.speculation": "true", "spark.speculation.multiplier": "1",
               "spark.speculation.quantile": "0.1", "spark.speculation.minTaskRuntime": "0",
               "spark.speculation.interval": "100ms",
               # 3.4+: else only tasks judged inefficient by their processing rate are copied
               "spark.speculation.efficiency.enabled": "false"}

# --- helpers ---------------------------------------------------------------------------------


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (bytes) and folder (None) under ``root``."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


def staging_leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.parent.iterdir() if STAGING_INFIX in p.name)


class Run:
    """One background spark-submit with the fault daemon, its markers and its event log."""

    def __init__(self, cluster, tmp: Path, name: str, script: Path, args: list[str],
                 delay: dict, conf: dict | None = None) -> None:
        self.cluster, self.dir = cluster, tmp / name
        self.markers, self.events = self.dir / "markers", self.dir / "events"
        for d in (self.markers, self.events):
            d.mkdir(parents=True)
        inject = self.dir / "inject"
        inject.mkdir()
        (inject / "klfault_daemon.py").write_text(INJECT)
        self.output = self.dir / "submit.out"
        conf = {"spark.python.daemon.module": "klfault_daemon",
                "spark.executorEnv.PYTHONPATH": str(inject),
                "spark.executorEnv.KLF_MARKERS": str(self.markers),
                "spark.executorEnv.KLF_DELAY": json.dumps(delay),
                "spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{self.events}",
                "spark.eventLog.rolling.enabled": "false", "spark.eventLog.compress": "false",
                "spark.task.maxFailures": "4", **(conf or {})}
        self.t0 = time.monotonic()
        self.proc = spark_submit_background(script, *args, master=cluster.url, conf=conf,
                                            output=self.output)

    def started(self, kind: str) -> list[dict]:
        out = []
        for p in self.markers.iterdir():
            k, s, part, a, t, w = p.name.split("-")
            if k == kind:
                out.append({"stage": int(s[1:]), "partition": int(part[1:]),
                            "attempt": int(a[1:]), "tid": int(t[1:]), "pid": int(w[1:])})
        return out

    def wait_started(self, kind: str, n: int = 1, timeout: float = 120) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.started(kind)
            if len(got) >= n:
                return got
            if self.proc.poll() is not None:
                raise AssertionError(f"the job ended before {n} {kind} task(s) started:\n"
                                     + self.text()[-4000:])
            time.sleep(0.1)
        raise AssertionError(f"no {kind} task started within {timeout}s:\n" + self.text()[-4000:])

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

    def task_events(self) -> list[dict]:
        """TaskStart / TaskEnd events of the application's event log."""
        out = []
        for f in self.events.iterdir():
            for line in f.read_text().splitlines():
                e = json.loads(line)
                if e["Event"] in ("SparkListenerTaskStart", "SparkListenerTaskEnd"):
                    out.append(e)
        return out

    def summary(self) -> dict:
        ends = Counter(e["Task End Reason"]["Reason"] for e in self.task_events()
                       if e["Event"] == "SparkListenerTaskEnd")
        spec = sum(1 for e in self.task_events()
                   if e["Event"] == "SparkListenerTaskStart" and e["Task Info"]["Speculative"])
        return {"seconds": round(self.seconds, 1), "task_ends": dict(ends),
                "speculative_starts": spec}


def kill_executor_running(run: Run, task: dict) -> int:
    """SIGKILL the executor JVM whose Python worker runs ``task``; returns its pid."""
    for e in run.cluster.executor_pids():
        if task["pid"] in descendants(e):
            os.kill(e, signal.SIGKILL)
            return e
    raise AssertionError(f"no executor runs Python worker {task['pid']}")


def kill_python_worker(run: Run, task: dict) -> int:
    assert task["pid"] in run.cluster.python_worker_pids(), "not an executor's Python worker"
    os.kill(task["pid"], signal.SIGKILL)
    return task["pid"]


def inject_fault(run: Run, fault: str, kind: str, after: int) -> dict:
    """Wait until ``after`` tasks of ``kind`` started, then kill what runs the latest one."""
    started = run.wait_started(kind, after)
    task = max(started, key=lambda t: t["tid"])
    if fault == "executor":
        kill_executor_running(run, task)
    else:
        kill_python_worker(run, task)
    return task


def assert_fault_hit(run: Run) -> None:
    """The kill really failed a task attempt (Spark recorded it), so the retry path ran."""
    ends = run.summary()["task_ends"]
    assert ends.get("ExecutorLostFailure", 0) + ends.get("ExceptionFailure", 0) >= 1, ends


def assert_duplicate_attempts(run: Run, kind: str) -> None:
    """Speculation really ran two attempts of one task of ``kind`` (markers), and Spark says
    so (a speculative TaskStart in the event log)."""
    per_task = Counter((t["stage"], t["partition"]) for t in run.started(kind))
    assert max(per_task.values()) >= 2, per_task
    assert run.summary()["speculative_starts"] >= 1


def assert_failed_cleanly(run: Run, before: dict, dest: Path) -> None:
    out = run.text()
    assert ("Error" in out or "Exception" in out), out[-3000:]
    assert snapshot(dest) == before, "a failed job changed the destination"


# --- data ------------------------------------------------------------------------------------


def write_source(path: Path, n: int = 4800) -> None:
    table = records(n, topic="src", partitions=3)
    kl.write_log(table, path, segment_bytes=4096, max_batch_records=20)


def compaction_source(path: Path, n: int = 9000) -> None:
    table = pa.table({
        "topic": ["c"] * n,
        "partition": pa.array([i % 3 for i in range(n)], pa.int32()),
        "key": [f"k{(i * 7) % 300}".encode() for i in range(n)],
        "value": [None if i % 13 == 0 else f"v{i}".encode() * 3 for i in range(n)],
        "timestamp": pa.array([(T - 3_600_000 + i) * 1000 for i in range(n)],
                              pa.timestamp("us", tz="UTC")),
    })
    kl.write_log(table, path, segment_bytes=2048, max_batch_records=10)


COMPACT_OPTIONS = {"cleanup.policy": "compact", "segment.bytes": "8192"}


def log_content(path: Path) -> list[dict]:
    t = kl.read_log(path, include_headers=True)
    cols = ["topic", "partition", "offset", "key", "value", "timestamp", "headers"]
    return sorted(t.select([c for c in cols if c in t.schema.names]).to_pylist(),
                  key=lambda r: (r["topic"], r["partition"], r["offset"]))


def no_duplicate_offsets(rows: list[dict]) -> None:
    keys = Counter((r["topic"], r["partition"], r["offset"]) for r in rows)
    assert not [k for k, c in keys.items() if c > 1]


# --- the three jobs ------------------------------------------------------------------------------


def run_write(cluster, tmp: Path, name: str, delay: dict, fault: str | None = None,
              conf: dict | None = None):
    src, dst = tmp / f"{name}-src", tmp / f"{name}-dst"
    write_source(src)
    kl.write_log(records(50, topic="other", partitions=2), dst)  # the destination has data
    before, other = snapshot(dst), snapshot(dst)
    script = tmp / "write_job.py"
    script.write_text(WRITE_JOB)
    run = Run(cluster, tmp, name, script, [src, dst, "48"], delay, conf)
    if fault:
        run.injected = inject_fault(run, fault, "write", after=6)
    code = run.finish()
    if code != 0:
        assert_failed_cleanly(run, before, dst)
        return run, False
    assert len({t["partition"] for t in run.started("write")}) >= 40  # 40+ write tasks
    got = log_content(dst)
    no_duplicate_offsets(got)
    assert [r for r in got if r["topic"] == "src"] == log_content(src)
    assert {k: v for k, v in snapshot(dst).items() if k.startswith("other-")} == \
        {k: v for k, v in other.items() if k.startswith("other-")}
    report = kl.verify(dst, deep=True)
    assert report.ok, report.problems
    assert staging_leftovers(dst) == []
    return run, True


def run_compact(cluster, tmp: Path, name: str, delay: dict, fault: str | None = None,
                kind: str = "rewrite", conf: dict | None = None):
    log_dir, local = tmp / f"{name}-logs", tmp / f"{name}-local"
    compaction_source(log_dir)
    shutil.copytree(log_dir, local)
    compact(local, now_ms=T, execute=True, force=True, options=COMPACT_OPTIONS)
    expected = log_content(local)
    assert len(expected) < len(log_content(log_dir))  # compaction drops records here
    before = snapshot(log_dir)
    args = ["--execute", "--force", "--now", str(T)]
    for k, v in COMPACT_OPTIONS.items():
        args += ["--config", f"{k}={v}"]
    run = Run(cluster, tmp, name, REPO / "jobs" / "compact.py", [*args, log_dir], delay, conf)
    if fault:
        run.injected = inject_fault(run, fault, kind, after=2)
    code = run.finish()
    if code != 0:
        assert_failed_cleanly(run, before, log_dir)
        return run, False
    got = log_content(log_dir)
    no_duplicate_offsets(got)
    assert got == expected
    report = kl.verify(log_dir, deep=True)
    assert report.ok, report.problems
    stray = [p.name for p in log_dir.rglob("*") if p.suffix in (".cleaned", ".swap", ".deleted")]
    assert stray == [] and staging_leftovers(log_dir) == []
    return run, True


def run_migrate(cluster, tmp: Path, name: str, delay: dict, fault: str | None = None,
                conf: dict | None = None):
    src, dest = tmp / f"{name}-src", tmp / f"{name}-delta"
    kl.write_log(records(3000, topic="orders", partitions=4), src, segment_bytes=4096,
                 max_batch_records=20)
    dest.mkdir()
    before = snapshot(dest)
    run = Run(cluster, tmp, name, REPO / "jobs" / "migrate_delta.py", [src, dest], delay,
              conf)
    if fault:
        run.injected = inject_fault(run, fault, "migrate", after=1)
    code = run.finish()
    if code != 0:
        assert_failed_cleanly(run, before, dest)
        return run, False
    got = delta_rows(dest / "orders")
    no_duplicate_offsets(got)
    assert got == log_rows(src)
    assert parquet_on_disk(dest / "orders") == table_files(dest / "orders")
    return run, True


# --- the tests -------------------------------------------------------------------------------


WRITE_DELAY = {"write": {"task": 0.3}}
COMPACT_DELAY = {"keys": {"task": 1.0}, "rewrite": {"task": 0.8}}
MIGRATE_DELAY = {"migrate": {"task": 4.0}}


@pytest.mark.parametrize("fault", ["executor", "python"])
def test_write_survives_a_killed(spark_cluster, tmp_path, fault):
    run, ok = run_write(spark_cluster, tmp_path, f"write-{fault}", WRITE_DELAY, fault)
    print("\nwrite", fault, run.summary())
    assert_fault_hit(run)
    assert ok, "the job failed: " + run.text()[-3000:]


@pytest.mark.parametrize("fault, kind", [("executor", "rewrite"), ("python", "keys")])
def test_compaction_survives_a_killed(spark_cluster, tmp_path, fault, kind):
    run, ok = run_compact(spark_cluster, tmp_path, f"compact-{fault}", COMPACT_DELAY, fault, kind)
    print("\ncompact", fault, kind, run.summary())
    assert_fault_hit(run)
    assert ok, "the job failed: " + run.text()[-3000:]


@pytest.mark.parametrize("fault", ["executor", "python"])
def test_migration_survives_a_killed(spark_cluster, tmp_path, fault):
    run, ok = run_migrate(spark_cluster, tmp_path, f"migrate-{fault}", MIGRATE_DELAY, fault)
    print("\nmigrate", fault, run.summary())
    assert_fault_hit(run)
    assert ok, "the job failed: " + run.text()[-3000:]


@pytest.fixture(scope="module")
def second_host(spark_cluster):
    """A third worker on 127.0.0.2 while the speculation tests run."""
    proc = add_worker_on_host(spark_cluster, "worker-host2", "127.0.0.2")
    yield spark_cluster
    remove_worker(spark_cluster, proc)


def test_write_with_speculation(second_host, tmp_path):
    delay = {"write": {"task": 0.2, "slow_partition": 30, "slow_task": 3, "slow": 0.2}}
    conf = {**SPECULATION, "spark.sql.execution.arrow.maxRecordsPerBatch": "10"}
    run, ok = run_write(second_host, tmp_path, "write-spec", delay, conf=conf)
    print("\nwrite speculation", run.summary())
    assert_duplicate_attempts(run, "write")


def test_compaction_with_speculation(second_host, tmp_path):
    # the copy writes slower than the original: the original wins while the copy, which
    # reopened the same .cleaned file, is half way
    delay = {"keys": {"task": 0.3},
             "rewrite": {"slow_partition": 8, "slow": 0.05, "slow_copy": 0.5}}
    run, ok = run_compact(second_host, tmp_path, "compact-spec", delay, conf=SPECULATION)
    print("\ncompact speculation", run.summary())
    assert_duplicate_attempts(run, "rewrite")


def test_migration_with_speculation(second_host, tmp_path):
    delay = {"migrate": {"task": 1.0, "slow_partition": 0, "slow_task": 6, "slow": 0.2}}
    run, ok = run_migrate(second_host, tmp_path, "migrate-spec", delay, conf=SPECULATION)
    print("\nmigrate speculation", run.summary())
    assert_duplicate_attempts(run, "migrate")
