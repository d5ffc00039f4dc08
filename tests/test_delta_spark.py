"""delta-spark for real (issue 31.1): the migration's delta-spark writer on a Spark session with
the Delta jars (delta-spark_4.2_2.13 from Maven, ``tests/spark_jars.py``), locally and on the
standalone cluster, incremental and exactly once (run twice, a run killed half-way, an executor
killed mid-task, rerun: every record once); the tables read back equal by
``spark.read.format("delta")``, delta-rs and DuckDB; delta-spark reading delta-rs tables and
either writer continuing the other's; ``restore`` and ``erase --table`` on tables delta-spark
wrote, deletion vectors off and on; what the session helper gives a Delta user.

The session with the jars runs in a process of its own (a JVM takes its driver-side jars at
start; the suite's shared ``spark`` session has none): ``JarSpark.run(fn, ...)`` calls the
module-level functions ``_…(spark, ...)`` below there.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

import kafkalog_spark as kl
from kafkalog_spark.delta import migrate
from kafkalog_spark.errors import InvalidOptionError

from cluster import submit_command, submit_env
from oracle import maven_jars
from spark_jars import DELTA_CONF, JarSpark, artifact_name, pyspark_jars, spark_jars
from test_delta_migrate import COLUMNS, delta_rows, log_rows, records

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[1]
DV_DEFAULT = "spark.databricks.delta.properties.defaults.enableDeletionVectors"
SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"


def delta_jars() -> list[str]:
    try:
        return spark_jars("delta")
    except maven_jars.MavenUnavailable as e:
        pytest.fail(f"{e} (the delta-spark tests need Maven to fetch the Delta jars once)")


@pytest.fixture(scope="module")
def delta_spark():
    """A local[2] session with the Delta jars, extension and catalog, in its own process."""
    js = JarSpark(delta_jars(), conf=DELTA_CONF)
    yield js
    js.close()


# --- run in the jar session's process ----------------------------------------------------------


def _migrate(spark, src, dest, **kw) -> dict:
    return migrate(src, dest, spark=spark, **kw)


def _spark_rows(spark, path, columns=COLUMNS) -> list[dict]:
    """The table as ``spark.read.format("delta")`` returns it, sorted like ``delta_rows``."""
    t = spark.read.format("delta").load(str(path)).toArrow()
    t = t.select([c for c in columns if c in t.schema.names])
    return sorted(t.to_pylist(), key=lambda r: (r["topic"], r["partition"], r["offset"]))


def _sql(spark, query) -> list[dict]:
    return [r.asDict(recursive=True) for r in spark.sql(query).collect()]


def _set_conf(spark, key, value) -> None:
    if value is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, value)


def _migrate_dv(spark, src, dest, dv: bool, **kw) -> dict:
    """A migration whose new tables get deletion vectors on or off (Delta's session default
    for new tables' properties), the default restored afterwards."""
    spark.conf.set(DV_DEFAULT, str(dv).lower())
    try:
        return migrate(src, dest, spark=spark, **kw)
    finally:
        spark.conf.unset(DV_DEFAULT)


# --- helpers -------------------------------------------------------------------------------


def duckdb_rows(path: Path, columns=COLUMNS) -> list[dict]:
    """The table as DuckDB's delta extension (delta-kernel) reads it."""
    import duckdb
    import duckdb_extension_delta

    (extension,) = Path(duckdb_extension_delta.__file__).parent.glob(
        "extensions/*/delta.duckdb_extension")
    con = duckdb.connect()
    con.execute(f"LOAD '{extension}'")
    t = con.execute(f"SELECT * FROM delta_scan('{path}')").arrow().read_all()
    t = t.select([c for c in columns if c in t.schema.names])
    return sorted(t.to_pylist(), key=lambda r: (r["topic"], r["partition"], r["offset"]))


def assert_once(rows: list[dict]) -> None:
    keys = [(r["topic"], r["partition"], r["offset"]) for r in rows]
    assert len(keys) == len(set(keys)), "a record is in the table more than once"


def log_ends(logs: Path, topic: str) -> dict[int, int]:
    t = kl.read_log(logs, topics=[topic])
    out: dict[int, int] = {}
    for p, o in zip(t["partition"].to_pylist(), t["offset"].to_pylist()):
        out[p] = max(out.get(p, 0), o + 1)
    return out


def history(js: JarSpark, path: Path) -> list[dict]:
    return js.run(_sql, f"DESCRIBE HISTORY delta.`{path}`")


def make_logs(root: Path, orders: int = 600, partitions: int = 2, users: bool = False) -> Path:
    """``orders``: ``partitions`` partitions, segments of 8 KiB; ``users``: 90 gzip records in
    one partition. (Few partitions: the delta-spark writer runs a Spark job per partition.)"""
    logs = root / "logs"
    kl.write_log(records(orders, partitions=partitions), logs, segment_bytes=8 * 1024,
                 max_batch_records=25)
    if users:
        kl.write_log(records(90, topic="users", partitions=1), logs, codec="gzip")
    return logs


def delta_submit_args(jars: list[str]) -> list[str]:
    """What a spark-submit user gives for delta-spark (the jars as files, not Ivy)."""
    args = ["--jars", ",".join(jars)]
    for k, v in DELTA_CONF.items():
        args += ["--conf", f"{k}={v}"]
    return args


# --- the jar sets ------------------------------------------------------------------------------


def test_maven_sets_match_the_installed_pyspark_and_delta_spark():
    """The Maven sets name the installed pyspark's Spark and Hadoop versions and a delta-spark
    jar of the pip package's minor release built for that Spark (a pyspark upgrade must move
    them too)."""
    import importlib.metadata

    import pyspark

    assert maven_jars.SPARK_VERSION == pyspark.__version__
    assert maven_jars.SPARK_MINOR == ".".join(pyspark.__version__.split(".")[:2])
    hadoop = {p.name for p in pyspark_jars().glob("hadoop-client-api-*.jar")}
    assert hadoop == {f"hadoop-client-api-{maven_jars.HADOOP_VERSION}.jar"}
    pip_delta = importlib.metadata.version("delta_spark")
    assert maven_jars.DELTA_VERSION.split(".")[:2] == pip_delta.split(".")[:2]
    [delta] = maven_jars.ARTIFACT_SETS["delta"].coordinates
    assert delta.startswith(f"io.delta:delta-spark_{maven_jars.SPARK_MINOR}_2.13:")


def test_session_jars_are_only_what_pyspark_lacks():
    jars = [Path(j).name for j in delta_jars()]
    assert any(j.startswith("delta-spark_4.2_2.13-") for j in jars)
    assert any(j.startswith("delta-storage-") for j in jars)
    bundled = {artifact_name(p.name) for p in pyspark_jars().glob("*.jar")}
    assert not [j for j in jars if artifact_name(j) in bundled]


# --- the delta-spark writer, local ----------------------------------------------------------------


def test_delta_spark_writer_incremental_exactly_once_three_readers(delta_spark, tmp_path):
    logs, dest = make_logs(tmp_path, users=True), tmp_path / "delta"
    m = delta_spark.run(_migrate, logs, dest, writer="delta-spark", partition_by=["partition"])
    assert (m["engine"], m["writer"]) == ("spark", "delta-spark")
    for topic in ("orders", "users"):
        want = log_rows(logs, topics=[topic])
        assert delta_spark.run(_spark_rows, dest / topic) == want
        assert delta_rows(dest / topic) == want
        assert duckdb_rows(dest / topic) == want
    table = DeltaTable(str(dest / "orders"))
    assert table.metadata().partition_columns == ["partition"]
    # the offsets reached, as the same application transactions the delta-rs writer records
    for p, end in log_ends(logs, "orders").items():
        assert table.transaction_version(f"kafkalog:orders:{p}") == end
    before = len(history(delta_spark, dest / "orders"))
    again = delta_spark.run(_migrate, logs, dest, writer="delta-spark", partition_by=["partition"])
    assert again["commits"] == 0 and len(history(delta_spark, dest / "orders")) == before
    kl.write_log(records(60, start=600), logs)
    delta_spark.run(_migrate, logs, dest, writer="delta-spark", partition_by=["partition"])
    rows = delta_spark.run(_spark_rows, dest / "orders")
    assert_once(rows)
    assert rows == log_rows(logs, topics=["orders"]) == delta_rows(dest / "orders")


def test_delta_spark_writer_metrics_count_what_it_wrote(delta_spark, tmp_path):
    logs, dest = make_logs(tmp_path, users=True), tmp_path / "delta"
    m = delta_spark.run(_migrate, logs, dest, writer="delta-spark")
    assert m["records"] == 690
    by_table = {Path(t["path"]).name: t for t in m["tables"]}
    assert (by_table["orders"]["records"], by_table["users"]["records"]) == (600, 90)
    # one Delta commit per Kafka partition: what the tables' histories hold
    made = sum(len(history(delta_spark, dest / t)) for t in ("orders", "users"))
    assert m["commits"] == made == 3


def test_delta_spark_reads_delta_rs_tables_and_each_writer_continues_the_other(
        delta_spark, tmp_path):
    """A table delta-rs started (local engine) is read by delta-spark and continued by it; the
    delta-rs writer then continues the table delta-spark wrote — every record once."""
    logs, dest = make_logs(tmp_path), tmp_path / "delta"
    migrate(logs, dest, partition_by=["partition"])  # local engine: delta-rs
    assert delta_spark.run(_spark_rows, dest / "orders") == log_rows(logs, topics=["orders"])
    kl.write_log(records(60, start=600), logs)
    m = delta_spark.run(_migrate, logs, dest, writer="delta-spark", partition_by=["partition"])
    assert m["writer"] == "delta-spark"
    kl.write_log(records(30, start=660), logs)
    m = delta_spark.run(_migrate, logs, dest, writer="delta-rs", partition_by=["partition"])
    assert (m["writer"], m["records"]) == ("delta-rs", 30)
    want = log_rows(logs, topics=["orders"])
    for rows in (delta_spark.run(_spark_rows, dest / "orders"), delta_rows(dest / "orders"),
                 duckdb_rows(dest / "orders")):
        assert_once(rows)
        assert rows == want


def test_auto_writer_is_delta_rs_for_a_table_delta_rs_can_write(delta_spark, tmp_path):
    logs = make_logs(tmp_path)
    m = delta_spark.run(_migrate, logs, tmp_path / "delta")
    assert m["writer"] == "delta-rs"


def test_auto_writer_continues_a_table_with_deletion_vectors(delta_spark, tmp_path):
    """A table with the deletionVectors feature (delta-rs reads its offsets reached, not its
    rows) is continued by delta-spark under ``auto`` — whatever ``auto`` picks for other
    tables."""
    logs, dest = make_logs(tmp_path), tmp_path / "delta"
    delta_spark.run(_migrate_dv, logs, dest, True, writer="delta-spark", topics=["orders"])
    kl.write_log(records(60, start=600), logs)
    for kw in ({}, {"writer": "delta-rs"}):  # no Delta jars here, or delta-rs asked for
        with pytest.raises(InvalidOptionError, match="deletionVectors.*cannot write"):
            migrate(logs, dest, topics=["orders"], **kw)
    m = delta_spark.run(_migrate, logs, dest, topics=["orders"])
    assert m["writer"] == "delta-spark"
    rows = delta_spark.run(_spark_rows, dest / "orders")
    assert_once(rows)
    assert rows == log_rows(logs, topics=["orders"])


# --- restore and erase on tables delta-spark wrote ----------------------------------------------

def kafkalog(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkalog_spark.cli", *args],
                          capture_output=True, text=True, timeout=600,
                          env=submit_env(env), cwd=REPO)


@pytest.mark.parametrize("dv", [False, True], ids=["dv-off", "dv-on"])
def test_restore_a_table_delta_spark_wrote(delta_spark, tmp_path, dv):
    """The table (partitioned by Kafka partition, with a row deleted by delta-spark: a
    deletion vector when they are on) restores into a log dir holding exactly the table's
    rows."""
    logs, dest = make_logs(tmp_path), tmp_path / "delta"
    delta_spark.run(_migrate_dv, logs, dest, dv, writer="delta-spark", topics=["orders"],
                    include_control=True, partition_by=["partition"])
    table = dest / "orders"
    delta_spark.run(_sql, f"DELETE FROM delta.`{table}` WHERE key = X'6b31'")  # k1
    if dv:
        _assert_a_deletion_vector_deleted(delta_spark, table)
    _assert_restore_gives_the_tables_rows(delta_spark, table, tmp_path / "restored")


def test_restore_a_delta_rs_table_after_delta_spark_deleted_with_deletion_vectors(
        delta_spark, tmp_path):
    """A table the delta-rs writer made (a migrate table by every test), then deletion vectors
    turned on and a row deleted by delta-spark: restore gives the table's rows, not the
    deleted one back."""
    logs, dest = make_logs(tmp_path), tmp_path / "delta"
    migrate(logs, dest, include_control=True)
    table = dest / "orders"
    delta_spark.run(_sql, f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES "
                          f"('delta.enableDeletionVectors' = 'true')")
    delta_spark.run(_sql, f"DELETE FROM delta.`{table}` WHERE key = X'6b31'")  # k1
    _assert_a_deletion_vector_deleted(delta_spark, table)
    _assert_restore_gives_the_tables_rows(delta_spark, table, tmp_path / "restored")


def _assert_a_deletion_vector_deleted(delta_spark, table) -> None:
    assert any(h["operationMetrics"].get("numDeletionVectorsAdded", "0") != "0"
               for h in history(delta_spark, table) if h["operation"] == "DELETE")


def _assert_restore_gives_the_tables_rows(delta_spark, table, restored) -> None:
    """``kafkalog restore`` of ``table`` gives the rows delta-spark reads (599: one deleted)."""
    done = kafkalog("restore", str(table), str(restored), "--json")
    assert done.returncode == 0, done.stderr
    want = delta_spark.run(_spark_rows, table)
    assert log_rows(restored) == want and len(want) == 599


def _append_rows(spark, logs, table, app_id) -> None:
    """The log's rows appended by delta-spark with no userMetadata (as kafkalog's delta-spark
    writer did before its commits carried the run id), recording ``app_id`` if given."""
    writer = spark.read.format("kafkalog").load(str(logs)).write.format("delta").mode("append")
    if app_id is not None:
        writer = writer.option("txnAppId", app_id).option("txnVersion", "1")
    writer.save(str(table))


def test_a_table_recording_kafkalog_transactions_is_a_migrate_table(delta_spark, tmp_path):
    """Without a run id in any commit, the ``kafkalog:<topic>:<p>`` transactions say migrate
    wrote the table; a table with neither is refused, naming both."""
    from kafkalog_spark.delta.restore import migrate_tables

    logs = make_logs(tmp_path)
    needed = ("topic", "partition", "offset")
    for name, app_id in (("ours", "kafkalog:orders:0"), ("theirs", "etl:orders:0"), ("bare", None)):
        delta_spark.run(_append_rows, logs, tmp_path / name, app_id)
    assert migrate_tables(tmp_path / "ours", needed, "erase") == [tmp_path / "ours"]
    for name in ("theirs", "bare"):
        with pytest.raises(InvalidOptionError, match="no commit carries kafkalog.runId, none "
                                                     "records a kafkalog:"):
            migrate_tables(tmp_path / name, needed, "erase")


@pytest.mark.parametrize("dv", [False, True], ids=["dv-off", "dv-on"])
def test_erase_table_on_a_table_delta_spark_wrote(delta_spark, tmp_path, dv):
    """Deletion vectors off: the local erase (delta-rs) does it. On: delta-rs cannot write the
    table, so without Spark and the Delta jars the run is refused in one line (exit 2) before
    anything changes; with ``--spark`` and the jars delta-spark deletes the rows."""
    logs, dest = make_logs(tmp_path), tmp_path / "delta"
    delta_spark.run(_migrate_dv, logs, dest, dv, writer="delta-spark", topics=["orders"])
    keys = tmp_path / "keys"
    keys.write_text("k2\nk3\n")
    args = ["erase", str(logs), "--topic", "orders", "--keys", str(keys), "--table", str(dest),
            "--execute", "--json"]
    env = None
    if dv:
        before = log_rows(logs, topics=["orders"])
        refused = kafkalog(*args)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        assert "deletionVectors" in refused.stderr and "--spark" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert log_rows(logs, topics=["orders"]) == before and len(before) == 600
        args += ["--spark", "--master", "local[2]"]
        env = {"PYSPARK_SUBMIT_ARGS": f"--jars {','.join(delta_jars())} pyspark-shell"}
    done = kafkalog(*args, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = delta_spark.run(_spark_rows, dest / "orders")
    assert [r for r in rows if r["key"] in (b"k2", b"k3")] == []
    assert rows == log_rows(logs, topics=["orders"]) and len(rows) == 598


# --- the session helper ------------------------------------------------------------------------

SESSION_PROBE = textwrap.dedent("""
    import json, sys
    from kafkalog_spark.spark import session
    spark = session("local[1]", conf=json.loads(sys.argv[1]))
    conf = spark.sparkContext.getConf()
    print(json.dumps({k: conf.get(k, None) for k in json.loads(sys.argv[2])}))
    spark.stop()
""")


def session_conf(conf: dict, keys: list[str], env: dict | None = None) -> dict:
    done = subprocess.run([sys.executable, "-c", SESSION_PROBE, json.dumps(conf),
                           json.dumps(keys)], capture_output=True, text=True, timeout=300,
                          env=submit_env(env), cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_session_with_delta_jars_gets_the_delta_extension_and_catalog():
    """And a local master gets few Delta snapshot partitions (Delta's default 50 made each
    commit seconds slower on local[2])."""
    jars = ",".join(delta_jars())
    got = session_conf({}, [*DELTA_CONF, SNAPSHOT_PARTITIONS],
                       env={"PYSPARK_SUBMIT_ARGS": f"--jars {jars} pyspark-shell"})
    assert got == {**DELTA_CONF, SNAPSHOT_PARTITIONS: "8"}


def test_session_delta_asks_maven_for_the_jar_the_pip_package_matches():
    """``session(delta=True)`` (and ``configure_spark_with_delta_pip``) ask Ivy for the jar of
    the installed delta-spark pip package: Maven must have it (the pin in pyproject.toml)."""
    from kafkalog_spark.spark import DELTA_CONF as SESSION_DELTA_CONF, delta_package, names_delta

    [coordinate] = maven_jars.ARTIFACT_SETS["delta"].coordinates
    assert delta_package() == coordinate
    assert SESSION_DELTA_CONF == DELTA_CONF
    assert names_delta({"spark.jars.packages": f"org.x:y:1, {coordinate}"})
    assert names_delta({"spark.jars": ",".join(f"file:{j}" for j in delta_jars())})
    assert not names_delta({"spark.jars": "/opt/jars/delta-storage-4.4.0.jar"})


def test_session_keeps_the_users_own_sql_extensions_and_catalog():
    """A user's own extension, catalog and snapshot partitions stay as they set them, jars or
    not."""
    jars = ",".join(delta_jars())
    mine = {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension,my.Extension",
            "spark.sql.catalog.spark_catalog": DELTA_CONF["spark.sql.catalog.spark_catalog"],
            SNAPSHOT_PARTITIONS: "3"}
    submit = " ".join(f"--conf {k}={v}" for k, v in mine.items())
    got = session_conf({}, list(mine),
                       env={"PYSPARK_SUBMIT_ARGS": f"--jars {jars} {submit} pyspark-shell"})
    assert got == mine


# --- killed runs: spark-submit locally, the CLI ------------------------------------------------


def commits(table: Path) -> list[Path]:
    return sorted((table / "_delta_log").glob("*.json")) if table.exists() else []


def kill_after_first_commit(cmd: list[str], env: dict, table: Path, output: Path) -> int:
    """Start ``cmd`` in a process group of its own and SIGKILL the group once ``table`` has
    its first commit; the exit code (``-9``: killed before it finished)."""
    with open(output, "wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=REPO, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not commits(table) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_migrate_job_with_delta_spark_killed_then_rerun_is_exactly_once(tmp_path):
    """``spark-submit --jars <delta> jobs/migrate_delta.py --writer delta-spark`` (local[2]),
    SIGKILLed after its first partition's commit (six partitions: six commits), run again:
    every record once; a third run adds nothing."""
    logs, dest = make_logs(tmp_path, orders=600, partitions=6), tmp_path / "delta"
    jars = delta_jars()
    cmd, env = submit_command(REPO / "jobs" / "migrate_delta.py", "--writer", "delta-spark",
                              "--topics", "orders", logs, dest, master="local[2]",
                              conf={"spark.ui.enabled": "false"},
                              submit_args=delta_submit_args(jars))
    code = kill_after_first_commit(cmd, env, dest / "orders", tmp_path / "first.out")
    assert code == -signal.SIGKILL, (tmp_path / "first.out").read_text()[-3000:]
    assert 1 <= len(commits(dest / "orders")) < 6
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-4000:]
    assert json.loads(done.stdout[done.stdout.index("{"):])["writer"] == "delta-spark"
    rows = delta_rows(dest / "orders")
    assert_once(rows)
    assert rows == duckdb_rows(dest / "orders") == log_rows(logs, topics=["orders"])
    made = len(commits(dest / "orders"))
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0 and len(commits(dest / "orders")) == made


def test_cli_migrate_spark_writer_delta_spark_twice(tmp_path):
    logs, dest = make_logs(tmp_path), tmp_path / "delta"
    jars = ",".join(delta_jars())
    submit = " ".join(f"--conf {k}={v}" for k, v in DELTA_CONF.items())
    env = {"PYSPARK_SUBMIT_ARGS": f"--jars {jars} {submit} pyspark-shell"}
    args = ["migrate", str(logs), str(dest), "--spark", "--master", "local[2]", "--writer",
            "delta-spark", "--json"]
    first = kafkalog(*args, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads(first.stdout)["writer"] == "delta-spark"
    second = kafkalog(*args, env=env)
    assert second.returncode == 0 and json.loads(second.stdout)["commits"] == 0
    assert delta_rows(dest / "orders") == log_rows(logs, topics=["orders"])


# --- the standalone cluster: an executor killed mid-task ---------------------------------------

HOLD_DAEMON = textwrap.dedent('''
    """Test instrumentation (not product code): the executors' Python daemon, run as
    spark.python.daemon.module. Every task attempt reading a migration's rows for the
    delta-spark writer leaves a marker file in $KLD_MARKERS naming partition, attempt, task id
    and worker pid; the first attempt 0 to start then waits (at most 150 s) for the test to
    kill its executor (its marker ``held-p<partition>-w<pid>``)."""
    import os, time

    import pyspark.worker as W

    MARKERS = os.environ["KLD_MARKERS"]
    _done = False


    def _claim(name):
        try:
            os.close(os.open(os.path.join(MARKERS, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            return False


    def _install():
        from pyspark import TaskContext
        from kafkalog_spark.delta import spark_job

        read = spark_job._MigrationReader.read

        def held_read(self, partition):
            c = TaskContext.get()
            open(os.path.join(MARKERS, f"read-p{c.partitionId()}-a{c.attemptNumber()}"
                                       f"-t{c.taskAttemptId()}-w{os.getpid()}"), "x").close()
            if c.attemptNumber() == 0 and _claim("hold"):
                open(os.path.join(MARKERS, f"held-p{c.partitionId()}-w{os.getpid()}"),
                     "x").close()
                deadline, parent = time.monotonic() + 150, os.getppid()
                while time.monotonic() < deadline and os.getppid() == parent:
                    time.sleep(0.05)
            yield from read(self, partition)

        spark_job._MigrationReader.read = held_read


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


def read_markers(markers: Path) -> list[dict]:
    out = []
    for p in markers.glob("read-*"):
        _, part, att, tid, pid = p.name.split("-")
        out.append({"partition": int(part[1:]), "attempt": int(att[1:]), "tid": int(tid[1:]),
                    "pid": int(pid[1:])})
    return out


@pytest.mark.cluster
def test_delta_spark_job_on_the_cluster_survives_a_killed_executor(spark_cluster, tmp_path):
    """``spark-submit --jars <delta> jobs/migrate_delta.py --writer delta-spark`` on the
    standalone cluster: the executor running the first task attempt is SIGKILLed while the
    task runs (held there by the test daemon, not by timing); Spark runs the task again
    elsewhere and the job ends with every record once. A rerun commits nothing."""
    from cluster import spark_submit, spark_submit_background, stop_submit
    from servers import descendants
    from test_cluster_faults import wait_gone

    logs, dest = make_logs(tmp_path, orders=600, partitions=2), tmp_path / "delta"
    jars = delta_jars()
    inject, markers = tmp_path / "inject", tmp_path / "markers"
    inject.mkdir()
    markers.mkdir()
    (inject / "kld_daemon.py").write_text(HOLD_DAEMON)
    job = [REPO / "jobs" / "migrate_delta.py", "--writer", "delta-spark", "--topics", "orders",
           logs, dest]
    # a few tasks for Delta's snapshot state, not its default 50 (a local master gets 8 from
    # session(); a cluster is left as configured)
    conf = {**DELTA_CONF, "spark.ui.enabled": "false", "spark.task.maxFailures": "4",
            SNAPSHOT_PARTITIONS: "2"}
    proc = spark_submit_background(
        *job, master=spark_cluster.url, submit_args=["--jars", ",".join(jars)],
        conf={**conf, "spark.python.daemon.module": "kld_daemon",
              "spark.executorEnv.PYTHONPATH": str(inject),
              "spark.executorEnv.KLD_MARKERS": str(markers)},
        output=tmp_path / "submit.out")
    try:
        deadline = time.monotonic() + 240
        while not list(markers.glob("held-*")):
            assert proc.poll() is None and time.monotonic() < deadline, \
                (tmp_path / "submit.out").read_text()[-4000:]
            time.sleep(0.05)
        _, part, pid = next(markers.glob("held-*")).name.split("-")
        held = {"partition": int(part[1:]), "pid": int(pid[1:])}
        owners = [e for e in spark_cluster.executor_pids() if held["pid"] in descendants(e)]
        assert len(owners) == 1, "no executor runs the held Python worker"
        victims = [owners[0], *descendants(owners[0])]
        os.kill(owners[0], signal.SIGKILL)
        wait_gone(victims)
        assert proc.wait(timeout=400) == 0, (tmp_path / "submit.out").read_text()[-4000:]
    finally:
        stop_submit(proc)
    spark_cluster.wait_idle(60)
    assert any(m["partition"] == held["partition"] and m["attempt"] > 0
               for m in read_markers(markers)), "the killed task never ran again"
    rows = delta_rows(dest / "orders")
    assert_once(rows)
    assert rows == duckdb_rows(dest / "orders") == log_rows(logs, topics=["orders"])
    made = len(commits(dest / "orders"))
    done = spark_submit(*job, master=spark_cluster.url, conf=conf,
                        submit_args=["--jars", ",".join(jars)])
    assert '"commits": 0' in done.stdout and len(commits(dest / "orders")) == made
