"""Spark where it really runs: sessions under the real spark-submit, and the standalone cluster
fixture (master + 2 workers, executors in their own JVMs and Python processes)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from cluster import spark_submit

pytestmark = pytest.mark.spark

SHOW_SESSION = textwrap.dedent("""
    import json, os, sys
    from kafkalog_spark.spark import session
    spark = session()
    c = spark.conf
    keys = ["spark.sql.shuffle.partitions", "spark.app.name", "spark.sql.session.timeZone",
            "spark.ui.enabled", "spark.sql.python.filterPushdown.enabled",
            "spark.sql.execution.arrow.pyspark.enabled", "spark.driver.host"]
    out = {k: c.get(k, None) for k in keys}
    out["master"] = spark.sparkContext.master
    out["pids"] = sorted(set(spark.sparkContext.parallelize(range(8), 4)
                             .map(lambda _: os.getpid()).collect()))
    out["driver_pid"] = os.getpid()
    print("SESSION " + json.dumps(out))
    spark.stop()
""")


def _session_of(done) -> dict:
    line = [x for x in done.stdout.splitlines() if x.startswith("SESSION ")][-1]
    return json.loads(line[len("SESSION "):])


@pytest.fixture(scope="module")
def show_session(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("submit") / "show_session.py"
    p.write_text(SHOW_SESSION)
    return p


def test_spark_submit_master_and_conf_survive(show_session):
    """What spark-submit sets wins over the package's defaults; the settings the package needs
    fill in what it left unset; a required setting the user changed is kept, with a warning."""
    done = spark_submit(show_session, master="local[1]",
                        conf={"spark.sql.shuffle.partitions": "3",
                              "spark.sql.session.timeZone": "Europe/Paris"},
                        submit_args=["--name", "mine"])
    got = _session_of(done)
    assert got["master"] == "local[1]"
    assert got["spark.sql.shuffle.partitions"] == "3"
    assert got["spark.app.name"] == "mine"
    assert got["spark.sql.session.timeZone"] == "Europe/Paris"
    # spark-submit's PythonRunner merges the driver's stderr into its stdout
    assert "keeping spark.sql.session.timeZone=Europe/Paris" in done.stdout + done.stderr
    # Python DataSource filter pushdown is left as configured (off): see KafkaLogReader
    assert got["spark.sql.python.filterPushdown.enabled"] in (None, "false")
    assert got["spark.sql.execution.arrow.pyspark.enabled"] == "true"
    assert got["spark.ui.enabled"] == "false"  # a local master: the package's default


def test_spark_defaults_file_and_env_master(show_session, tmp_path):
    """Without spark-submit: spark-defaults.conf in SPARK_CONF_DIR is not overridden, and
    $KAFKALOG_SPARK_MASTER picks the master when nothing else does."""
    import subprocess
    import sys

    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("spark.sql.shuffle.partitions 5\n"
                                                  "spark.ui.showConsoleProgress true\n")
    env = dict(os.environ, SPARK_CONF_DIR=str(conf_dir), KAFKALOG_SPARK_MASTER="local[1]")
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    done = subprocess.run([sys.executable, str(show_session)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = _session_of(done)
    assert got["master"] == "local[1]"
    assert got["spark.sql.shuffle.partitions"] == "5"
    assert got["spark.sql.session.timeZone"] == "UTC"


def test_configured_conf_reads_submit_args(monkeypatch, tmp_path):
    """PYSPARK_SUBMIT_ARGS as spark-submit parses it: flags, --conf in both spellings, and a
    --properties-file that replaces spark-defaults.conf."""
    from pyspark import SparkContext

    from kafkalog_spark.spark import configured_conf

    props = tmp_path / "my.conf"
    props.write_text("spark.executor.memory=3g\nnot.spark.key 1\nspark.master yarn\n")
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    # A process with no JVM yet: an earlier test's session would answer for itself.
    monkeypatch.setattr(SparkContext, "_gateway", None)
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS",
                       f"--master=local[3] --name x --conf spark.a=1 --conf=spark.b=2 "
                       f"-c spark.c=3 --driver-memory 3g --properties-file {props} pyspark-shell")
    got = configured_conf()
    assert got == {"spark.master": "local[3]", "spark.app.name": "x", "spark.a": "1",
                   "spark.b": "2", "spark.c": "3", "spark.driver.memory": "3g",
                   "spark.executor.memory": "3g"}


@pytest.mark.cluster
@pytest.mark.nojit
def test_cluster_runs_tasks_in_executor_processes(spark_cluster, show_session):
    """The fixture's two workers serve one application with two executors: tasks run in
    Python processes that are neither the driver nor each other's."""
    assert spark_cluster.alive_workers(spark_cluster.state()) == 2
    done = spark_submit(show_session, master=spark_cluster.url)
    got = _session_of(done)
    assert got["master"] == spark_cluster.url
    assert got["spark.ui.enabled"] is None  # local-master defaults stay off a cluster
    assert got["driver_pid"] not in got["pids"]
    assert len(got["pids"]) >= 2


READ_AND_COMPARE = textwrap.dedent("""
    import json, os, sys
    from pyspark.sql import functions as F
    from kafkalog_spark.spark import session
    spark = session()
    df = spark.read.format("kafkalog").load(sys.argv[1])
    row = df.select(F.count("*"), F.sum("offset"), F.sum(F.length("value"))).first()
    jit = spark.sparkContext.parallelize(range(2), 2).map(
        lambda _: os.environ.get("NUMBA_DISABLE_JIT", "0")).collect()
    print("READ " + json.dumps({"rows": row[0], "offsets": row[1], "bytes": row[2],
                                "executor_jit_off": jit}))
    spark.stop()
""")


@pytest.mark.cluster
@pytest.mark.nojit
def test_cluster_reads_what_the_local_api_reads(spark_cluster, tmp_path):
    """A scan decoded by the executors equals ``read_log``'s — run in the JIT pass and again
    in the plain-Python pass (``NUMBA_DISABLE_JIT=1`` reaches the executors too)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    import kafkalog_spark as kl

    logs = tmp_path / "logs"
    kl.write_log(pa.table({"value": [b"v%d" % i for i in range(3000)],
                           "partition": [i % 3 for i in range(3000)]}),
                 logs, topic="t", codec="lz4", segment_bytes=8 << 10, max_batch_records=50)
    script = tmp_path / "read.py"
    script.write_text(READ_AND_COMPARE)
    done = spark_submit(script, str(logs), master=spark_cluster.url)
    got = json.loads([x for x in done.stdout.splitlines() if x.startswith("READ ")][-1][5:])
    local = kl.read_log(logs)
    assert got["rows"] == local.num_rows == 3000
    assert got["offsets"] == pc.sum(local["offset"]).as_py()
    assert got["bytes"] == pc.sum(pc.binary_length(local["value"])).as_py()
    expected = os.environ.get("NUMBA_DISABLE_JIT", "0")
    assert got["executor_jit_off"] == [expected, expected]


WORKERS_PROBE = textwrap.dedent("""
    import json, sys
    from kafkalog_spark.spark import session
    spark = session()
    def probe(_):
        import gc, os
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            parent = f.read().replace(b"\\0", b" ").decode()
        return parent, gc.get_freeze_count(), os.environ.get("PYTHON_UNIX_DOMAIN_ENABLED")
    rows = spark.read.format("kafkalog").load(sys.argv[1]).count()
    workers = spark.sparkContext.parallelize(range(4), 4).map(probe).collect()
    print("WORKERS " + json.dumps({"rows": rows, "workers": workers}))
    spark.stop()
""")


@pytest.mark.cluster
def test_cluster_workers_forked_from_the_package_daemon_on_unix_sockets(spark_cluster, tmp_path):
    """docs/cluster.md's two settings for executors that have the package installed: the
    package's daemon (workers forked with it loaded and frozen out of the garbage collector's
    reach) and Unix sockets between each executor and its Python workers."""
    import pyarrow as pa

    import kafkalog_spark as kl

    kl.write_log(pa.table({"value": [b"v%d" % i for i in range(2000)]}), tmp_path / "logs",
                 topic="t", codec="zstd", max_batch_records=50)
    script = tmp_path / "probe.py"
    script.write_text(WORKERS_PROBE)
    done = spark_submit(script, str(tmp_path / "logs"), master=spark_cluster.url,
                        conf={"spark.python.daemon.module": "kafkalog_spark.daemon",
                              "spark.python.unix.domain.socket.enabled": "true"})
    got = json.loads([x for x in done.stdout.splitlines() if x.startswith("WORKERS ")][-1][8:])
    assert got["rows"] == 2000
    for parent, frozen, unix in got["workers"]:
        assert "-m kafkalog_spark.daemon pyspark.worker" in parent
        assert frozen > 50_000
        assert str(unix).lower() == "true"  # as pyspark's daemon reads it
