"""Paths the executors cannot see: a log dir or destination on the driver's disk only — the
usual mistake with a local path on a real cluster — fails with an error naming the path and
saying it must be on storage every executor reaches; never an empty result, never a Python
traceback from inside a task.

The cluster fixture's workers run in their own mount namespace with an empty tmpfs over
``spark_cluster.hidden``: what the driver writes there, the executors do not see.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

import kafkalog_spark as kl
from cluster import REPO, spark_submit

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

SHARED_MSG = "must be on storage every executor reaches"
# the error is the same on every attempt: one attempt keeps these tests short
ONE_TRY = {"spark.task.maxFailures": "1"}


def _records(n: int = 2000) -> pa.Table:
    return pa.table({"key": [b"k%d" % (i % 50) for i in range(n)],
                     "value": [b"v%d" % i for i in range(n)],
                     "partition": [i % 2 for i in range(n)]})


@pytest.fixture
def hidden_logs(spark_cluster, tmp_path) -> Path:
    """A log dir that exists on the driver only."""
    assert spark_cluster.hidden is not None
    path = spark_cluster.hidden / tmp_path.name / "logs"
    kl.write_log(_records(), path, topic="orders", segment_bytes=4 << 10, max_batch_records=50)
    yield path
    shutil.rmtree(path.parent, ignore_errors=True)


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


def test_read_of_a_driver_only_log_dir_fails_naming_it(spark_cluster, hidden_logs, tmp_path):
    script = tmp_path / "read.py"
    script.write_text(textwrap.dedent(f"""
        from kafkalog_spark.spark import session
        spark = session()
        df = spark.read.format("kafkalog").load({str(hidden_logs)!r})
        print("ROWS", df.count())
    """))
    done = spark_submit(script, master=spark_cluster.url, conf=ONE_TRY, check=False)
    out = done.stdout + done.stderr
    assert done.returncode != 0 and "\nROWS " not in done.stdout  # never an empty result
    assert "PathNotSharedError" in out and SHARED_MSG in out and str(hidden_logs) in out


def test_compaction_of_a_driver_only_log_dir_is_one_error_line(spark_cluster, hidden_logs):
    before = {p: p.read_bytes() for p in hidden_logs.rglob("*") if p.is_file()}
    job = REPO / "jobs" / "compact.py"
    done = spark_submit(job, "--execute", "--force",
                        "--config", "cleanup.policy=compact", str(hidden_logs),
                        master=spark_cluster.url, conf=ONE_TRY, check=False)
    line = _one_error_line(done, job)
    assert SHARED_MSG in line and str(hidden_logs) in line
    after = {p: p.read_bytes() for p in hidden_logs.rglob("*") if p.is_file()
             and p.name != ".lock"}
    assert after == {p: b for p, b in before.items() if p.name != ".lock"}


def test_verify_of_a_driver_only_log_dir_is_one_error_line(spark_cluster, hidden_logs):
    job = REPO / "jobs" / "recover.py"
    done = spark_submit(job, str(hidden_logs),
                        master=spark_cluster.url, conf=ONE_TRY, check=False)
    line = _one_error_line(done, job)
    assert SHARED_MSG in line and str(hidden_logs) in line


def test_migration_into_a_driver_only_table_commits_nothing(spark_cluster, tmp_path):
    source = tmp_path / "logs"  # visible to every executor
    kl.write_log(_records(), source, topic="orders", segment_bytes=4 << 10, max_batch_records=50)
    dest = spark_cluster.hidden / tmp_path.name / "table"
    try:
        job = REPO / "jobs" / "migrate_delta.py"
        done = spark_submit(job, str(source), str(dest),
                            master=spark_cluster.url, conf=ONE_TRY, check=False)
        line = _one_error_line(done, job)
        assert SHARED_MSG in line and str(dest) in line
        assert not (dest / "orders" / "_delta_log").exists() and \
            not (dest / "_delta_log").exists()
    finally:
        shutil.rmtree(dest.parent, ignore_errors=True)


def test_write_to_a_driver_only_log_dir_fails_and_writes_nothing(spark_cluster, tmp_path):
    target = spark_cluster.hidden / tmp_path.name / "logs"
    target.parent.mkdir(parents=True)
    script = tmp_path / "write.py"
    script.write_text(textwrap.dedent(f"""
        from kafkalog_spark.spark import session
        spark = session()
        df = spark.range(1000).selectExpr("cast(id as string) as value", "cast(id % 2 as int) as partition")
        df.repartition(4).write.format("kafkalog").mode("append").option("topic", "t").save({str(target)!r})
        print("WROTE")
    """))
    try:
        done = spark_submit(script, master=spark_cluster.url, conf=ONE_TRY, check=False)
        out = done.stdout + done.stderr
        assert done.returncode != 0 and "\nWROTE" not in done.stdout
        assert "PathNotSharedError" in out and SHARED_MSG in out
        assert not target.exists() or not any(target.iterdir())
        assert not [p for p in target.parent.iterdir() if "staging" in p.name]
    finally:
        shutil.rmtree(target.parent, ignore_errors=True)
