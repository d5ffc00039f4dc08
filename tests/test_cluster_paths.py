"""Paths the executors cannot see: a log dir or destination on the driver's disk only — the
usual mistake with a local path on a real cluster — fails with an error naming the path and
saying it must be on storage every executor reaches; never an empty result, never a Python
traceback from inside a task.

The cluster fixture's workers run in their own mount namespace with an empty tmpfs over
``spark_cluster.hidden``: what the driver writes there, the executors do not see. The six
spark-submits start together in the ``runs`` fixture, two at a time (one starts its driver
while the other's executors work); each test waits for its own and checks its output.
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pytest

import kafkalog_spark as kl
from cluster import REPO, spark_submit

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

SHARED_MSG = "must be on storage every executor reaches"
C1_ONLY = "-XX:TieredStopAtLevel=1"
# the error is the same on every attempt: one attempt keeps these tests short; and these
# short-lived JVMs start much sooner with the C1 compiler alone (about a third off a submit)
QUICK = {"spark.task.maxFailures": "1",
         "spark.driver.extraJavaOptions": C1_ONLY, "spark.executor.extraJavaOptions": C1_ONLY}

READ = """
    from kafkalog_spark.spark import session
    spark = session()
    df = spark.read.format("kafkalog").load({path!r})
    print("ROWS", df.count())
"""
REMOVE = """
    from pathlib import Path
    from kafkalog_spark.compaction.spark_job import remove_replaced
    from kafkalog_spark.spark import session
    paths = sorted(Path({path!r}).rglob("*.deleted"))
    remove_replaced(session(), paths)
    print("LEFT", sum(p.exists() for p in paths), "OF", len(paths))
"""
WRITE = """
    from kafkalog_spark.spark import session
    spark = session()
    df = spark.range(1000).selectExpr("cast(id as string) as value", "cast(id % 2 as int) as partition")
    df.repartition(4).write.format("kafkalog").mode("append").option("topic", "t").save({path!r})
    print("WROTE")
"""


def _records(n: int = 2000) -> pa.Table:
    return pa.table({"key": [b"k%d" % (i % 50) for i in range(n)],
                     "value": [b"v%d" % i for i in range(n)],
                     "partition": [i % 2 for i in range(n)]})


def _logs(path: Path) -> Path:
    kl.write_log(_records(), path, topic="orders", segment_bytes=4 << 10, max_batch_records=50)
    return path


def _script(path: Path, template: str, target: Path) -> Path:
    path.write_text(textwrap.dedent(template.format(path=str(target))))
    return path


def _files(log_dir: Path) -> dict[Path, bytes]:
    """Every file of a log dir with its bytes, but the ``.lock`` a job may create."""
    return {p: p.read_bytes() for p in log_dir.rglob("*") if p.is_file() and p.name != ".lock"}


@dataclass
class Run:
    """One test's spark-submit: the script, its arguments, the driver-only path it names."""

    script: Path
    path: Path
    args: tuple[str, ...] = ()
    before: dict[Path, bytes] = field(default_factory=dict)  # the path's files, beforehand
    future: Future | None = None

    @property
    def done(self) -> subprocess.CompletedProcess:
        """The finished spark-submit (waits for it)."""
        assert self.future is not None
        return self.future.result()


@pytest.fixture(scope="module")
def runs(spark_cluster, tmp_path_factory) -> dict[str, Run]:
    """Every test's spark-submit (all six, whichever tests run), started here two at a time,
    longest first; each names a folder of its own under ``spark_cluster.hidden``, removed at
    the end."""
    assert spark_cluster.hidden is not None
    local = tmp_path_factory.mktemp("paths")  # visible to every executor
    hidden = spark_cluster.hidden / local.name
    jobs = REPO / "jobs"
    read_logs, compact_logs, verify_logs = (_logs(hidden / name / "logs")
                                            for name in ("read", "compact", "verify"))
    table, target = hidden / "migrate" / "table", hidden / "write" / "logs"
    target.parent.mkdir(parents=True)
    replaced = hidden / "remove"
    for name in ("t-0", "t-1"):
        (replaced / name).mkdir(parents=True)
        for base in (0, 40):
            (replaced / name / f"{base:020d}.log.deleted").write_bytes(b"old")
    runs = {
        "read": Run(_script(local / "read.py", READ, read_logs), read_logs),
        "migrate": Run(jobs / "migrate_delta.py", table,
                       (str(_logs(local / "logs")), str(table))),
        "write": Run(_script(local / "write.py", WRITE, target), target),
        "compact": Run(jobs / "compact.py", compact_logs,
                       ("--execute", "--force", "--config", "cleanup.policy=compact",
                        str(compact_logs)), before=_files(compact_logs)),
        "verify": Run(jobs / "recover.py", verify_logs, (str(verify_logs),)),
        "remove": Run(_script(local / "remove.py", REMOVE, replaced), replaced),
    }
    pool = ThreadPoolExecutor(2)
    try:
        for run in runs.values():
            run.future = pool.submit(spark_submit, run.script, *run.args,
                                     master=spark_cluster.url, conf=QUICK, check=False)
        yield runs
    finally:
        pool.shutdown(cancel_futures=True)  # waits for the running ones
        spark_cluster.wait_idle()
        shutil.rmtree(hidden, ignore_errors=True)


def _one_error_line(done, script: Path) -> str:
    """The job printed one ``Error: ...`` line and exit code 2, and no Python traceback
    through the job's own code (spark-submit merges the driver's stderr into its stdout; the
    executors' failures appear only in Spark's log lines)."""
    out = done.stdout + done.stderr
    assert done.returncode == 2, out[-3000:]
    errors = [line for line in out.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, out[-3000:]
    assert f'File "{script}"' not in out
    return errors[0]


def test_read_of_a_driver_only_log_dir_fails_naming_it(runs):
    run = runs["read"]
    out = run.done.stdout + run.done.stderr
    assert run.done.returncode != 0 and "\nROWS " not in run.done.stdout  # never an empty result
    assert "PathNotSharedError" in out and SHARED_MSG in out and str(run.path) in out


def test_compaction_of_a_driver_only_log_dir_is_one_error_line(runs):
    run = runs["compact"]
    line = _one_error_line(run.done, run.script)
    assert SHARED_MSG in line and str(run.path) in line
    assert _files(run.path) == run.before


def test_verify_of_a_driver_only_log_dir_is_one_error_line(runs):
    run = runs["verify"]
    line = _one_error_line(run.done, run.script)
    assert SHARED_MSG in line and str(run.path) in line


def test_migration_into_a_driver_only_table_commits_nothing(runs):
    run = runs["migrate"]  # its source log dir is visible to every executor
    line = _one_error_line(run.done, run.script)
    assert SHARED_MSG in line and str(run.path) in line
    assert not (run.path / "orders" / "_delta_log").exists() and \
        not (run.path / "_delta_log").exists()


def test_write_to_a_driver_only_log_dir_fails_and_writes_nothing(runs):
    run = runs["write"]
    out = run.done.stdout + run.done.stderr
    assert run.done.returncode != 0 and "\nWROTE" not in run.done.stdout
    assert "PathNotSharedError" in out and SHARED_MSG in out
    assert not run.path.exists() or not any(run.path.iterdir())
    assert not [p for p in run.path.parent.iterdir() if "staging" in p.name]


def test_replaced_files_the_executors_cannot_see_are_removed_by_the_driver(runs):
    """A compaction's last step, removing the swaps' ``.deleted`` files in tasks, falls back to
    the driver when the tasks fail: the swaps are done, nothing is left behind."""
    run = runs["remove"]
    out = run.done.stdout + run.done.stderr
    assert run.done.returncode == 0, out[-3000:]
    assert "LEFT 0 OF 4" in run.done.stdout.splitlines(), out[-3000:]
    assert "PathNotSharedError" in out  # the tasks failed: the driver removed them
    assert not list(run.path.rglob("*.deleted"))
