"""What a cold Spark job starts with (issue 33): a local session's Python workers forked by the
package's daemon (pyspark imported from its installed bytecode, not recompiled from
``pyspark.zip`` in each process) where nothing else was configured; the JVM's options left as
configured."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import pyspark
from kafkalog_spark.spark_daemon import DAEMON_CONF, DAEMON_MODULE, workers_import_this_package

INSTALLED_ZIP = Path(pyspark.__file__).parent / "python" / "lib" / "pyspark.zip"
WHERE_FROM = ("from kafkalog_spark.spark_daemon import prefer_installed_pyspark\n"
              "moved = prefer_installed_pyspark()\n"
              "import pyspark\n"
              "print('FROM', moved, pyspark.__file__)\n")


def _where_pyspark_comes_from(zip_path: Path) -> tuple[str, str]:
    """Run WHERE_FROM with ``zip_path`` first on the path, as Spark starts its processes."""
    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(zip_path), str(repo)]))
    out = subprocess.run([sys.executable, "-c", WHERE_FROM], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    moved, origin = out.stdout.split("FROM ", 1)[1].split()
    return moved, origin


def test_the_installed_pyspark_is_imported_before_its_own_zip(tmp_path):
    """The zip of the installed pyspark, also reached through a linked SPARK_HOME (as the dev
    venv's spark-distribution), goes behind the installed package."""
    assert _where_pyspark_comes_from(INSTALLED_ZIP) == ("True", pyspark.__file__)
    home = tmp_path / "spark-home"
    (home / "python").mkdir(parents=True)
    (home / "python" / "lib").symlink_to(INSTALLED_ZIP.parent)
    assert _where_pyspark_comes_from(home / "python" / "lib" / "pyspark.zip") == (
        "True", pyspark.__file__)


def test_the_zip_of_another_spark_installation_stays_first(tmp_path):
    """A pyspark.zip that is not the installed package's (another SPARK_HOME: the JVM's own
    version) is what the process imports, as Spark meant."""
    other = tmp_path / "spark" / "python" / "lib" / "pyspark.zip"
    other.parent.mkdir(parents=True)
    shutil.copyfile(INSTALLED_ZIP, other)
    moved, origin = _where_pyspark_comes_from(other)
    assert moved == "False" and origin.startswith(str(other))


@pytest.mark.spark
def test_spark_planning_processes_import_the_installed_pyspark(spark):
    """The processes Spark starts to plan a Python data source (here its schema) run pyspark's
    own daemon, which no setting replaces: ``kafkalog_spark_pyspark.pth`` (installed beside the
    package, by a wheel or by ./dev) moves the installed pyspark's zip behind the installed
    files as they start (0.2-0.4 s to import the planner, 0.8-1.3 s from the zip)."""
    from pyspark.sql.datasource import DataSource

    class Origin(DataSource):
        @classmethod
        def name(cls):
            return "kafkalog_test_pyspark_origin"

        def schema(self):
            import pyspark as p
            return "from_zip INT" if ".zip" in p.__file__ else "installed INT"

    spark.dataSource.register(Origin)
    assert spark.read.format("kafkalog_test_pyspark_origin").load().schema.names == ["installed"]


def test_the_start_up_hook_never_stops_python(monkeypatch):
    """Whatever goes wrong in the .pth's call, the process starts (pyspark from the zip)."""
    import kafkalog_spark.spark_daemon as sd

    def broken():
        raise OSError("unreadable")

    monkeypatch.setattr(sd, "prefer_installed_pyspark", broken)
    assert sd.at_python_start() is None


def test_the_daemon_is_chosen_only_where_workers_can_import_it(monkeypatch, tmp_path):
    """Workers running this interpreter get the package's daemon; one chosen by the user, a
    package shipped with --py-files, or another virtualenv's Python keep pyspark's."""
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    assert workers_import_this_package({})
    assert workers_import_this_package({"spark.submit.pyFiles": ""})  # spark-submit's default
    assert not workers_import_this_package({DAEMON_CONF: "pyspark.daemon"})
    assert not workers_import_this_package({"spark.submit.pyFiles": "/x/kafkalog.zip"})
    # another venv: its python links to the same base interpreter, without this package
    other = tmp_path / "venv" / "bin"
    other.mkdir(parents=True)
    (other / "python").symlink_to(os.path.realpath(sys.executable))
    assert not workers_import_this_package({"spark.pyspark.python": str(other / "python")})
    monkeypatch.setenv("PYSPARK_PYTHON", str(other / "python"))
    assert not workers_import_this_package({})
    monkeypatch.delenv("PYSPARK_PYTHON")
    assert not workers_import_this_package({})  # Spark's default python3: not known here


def _workers(spark) -> list[tuple[str, str, int, str | None]]:
    """Each task's pyspark file, its worker's parent (the daemon) command line, how many
    objects the worker's garbage collector skips (frozen) and whether it talks to the JVM over
    a Unix socket (pyspark's daemon reads the same variable)."""
    def probe(_):
        import gc

        import pyspark as p

        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            return (p.__file__, f.read().replace(b"\0", b" ").decode(), gc.get_freeze_count(),
                    os.environ.get("PYTHON_UNIX_DOMAIN_ENABLED"))

    return spark.sparkContext.parallelize(range(4), 4).map(probe).collect()


@pytest.mark.spark
def test_a_local_session_forks_its_workers_from_the_package_daemon(spark):
    """Forked with the package loaded and frozen out of the garbage collector's reach
    (pyspark's worker collects after each task: over all of it 35-40 ms a task), on a Unix
    socket (over loopback TCP each task waited ~40 ms more)."""
    conf = spark.sparkContext.getConf()
    assert conf.get(DAEMON_CONF) == DAEMON_MODULE
    assert conf.get("spark.python.unix.domain.socket.enabled") == "true"
    for origin, daemon, frozen, unix in _workers(spark):
        assert f"-m {DAEMON_MODULE} pyspark.worker" in daemon
        assert ".zip" not in origin
        assert frozen > 50_000  # numba, pyarrow and the package: ~140,000 objects
        assert str(unix).lower() == "true"  # as pyspark's daemon reads it


@pytest.mark.spark
def test_the_users_daemon_and_jvm_options_are_kept(tmp_path):
    """Set in PYSPARK_SUBMIT_ARGS, the user's daemon and driver JVM options win."""
    script = textwrap.dedent("""
        import json, os
        from kafkalog_spark.spark import session
        spark = session("local[1]")
        conf = spark.sparkContext.getConf()
        def probe(_):
            with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
                return f.read().replace(b"\\0", b" ").decode()
        print("GOT " + json.dumps({
            "daemon": conf.get("spark.python.daemon.module"),
            "java": conf.get("spark.driver.extraJavaOptions"),
            "unix": conf.get("spark.python.unix.domain.socket.enabled"),
            "parent": spark.sparkContext.parallelize([0], 1).map(probe).collect()[0]}))
        spark.stop()
    """)
    env = dict(os.environ, PYSPARK_SUBMIT_ARGS="--conf spark.python.daemon.module=pyspark.daemon "
               "--conf spark.driver.extraJavaOptions=-Dmine=1 "
               "--conf spark.python.unix.domain.socket.enabled=false pyspark-shell")
    env.pop("PYSPARK_GATEWAY_PORT", None)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.split("GOT ", 1)[1].splitlines()[0])
    assert got["daemon"] == "pyspark.daemon"
    assert got["java"].endswith("-Dmine=1")  # after the options Spark adds itself
    assert "-m pyspark.daemon pyspark.worker" in got["parent"]
    assert got["unix"] == "false"



WARM_PROBE = textwrap.dedent("""
    import json, os, sys
    import pyarrow as pa
    from kafkalog_spark import write_log
    from kafkalog_spark.spark import session

    def probe(_):
        import sys
        scan = sys.modules.get("kafkalog_spark.codec.records.scan")
        kernels = getattr(getattr(scan, "_walk", None), "signatures", None)
        return ["kafkalog_spark.datasource.reader" in sys.modules,
                "kafkalog_spark.datasource.writer" in sys.modules,
                None if kernels is None else len(kernels) > 0]

    spark = session("local[2]")
    import threading
    for t in threading.enumerate():  # the driver's walk, loaded while Spark started
        if t.name == "kafkalog-load-walk":
            t.join(120)
    driver = getattr(sys.modules["kafkalog_spark.codec.records.scan"]._walk, "signatures", None)
    sc = spark.sparkContext
    first = sc.parallelize(range(2), 2).map(probe).collect()  # the workers' first tasks
    table = pa.table({"value": [b"x" * 100] * 4000})
    for p in range(8):
        write_log(table, sys.argv[1], topic="t", partition=p, max_batch_records=50)
    df = spark.read.format("kafkalog").option("minPartitions", "8").load(sys.argv[1])
    limited = df.limit(100).count()  # tasks that stop reading early: their workers killed
    after = sc.parallelize(range(2), 2).map(probe).collect()
    print("GOT " + json.dumps({"first": first, "after": after, "limited": limited,
                               "driver": None if driver is None else len(driver) > 0,
                               "all": df.count(), "daemon": sc.getConf().get(
                                   "spark.python.daemon.module")}))
    print("STOPPING", file=sys.stderr, flush=True)
    spark.stop()
""")


@pytest.mark.spark
@pytest.mark.parametrize("daemon", [None, "pyspark.daemon"])
def test_a_local_sessions_workers_start_with_the_reader_loaded(tmp_path, daemon):
    """The package's daemon loads the data source's reader and writer, and the scan's kernels,
    before it forks: a worker's first task finds them loaded, and a worker whose task was cut
    short ends quietly. pyspark's own daemon (chosen by the user here) forks workers that load
    them on their first task, each. Either way the driver loaded its header walk while Spark
    started."""
    env = dict(os.environ)
    env.pop("PYSPARK_GATEWAY_PORT", None)
    if daemon:
        env["PYSPARK_SUBMIT_ARGS"] = f"--conf spark.python.daemon.module={daemon} pyspark-shell"
    out = subprocess.run([sys.executable, "-c", WARM_PROBE, str(tmp_path / "log")], env=env,
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.split("GOT ", 1)[1].splitlines()[0])
    assert got["limited"] == 100 and got["all"] == 32_000
    assert got["daemon"] == (daemon or DAEMON_MODULE)
    jit = os.environ.get("NUMBA_DISABLE_JIT") != "1"
    # the driver's header walk was loaded while Spark started (its planning walks tails)
    assert got["driver"] is (True if jit else None)
    if daemon:  # a fresh worker loads the package on its first task
        assert got["first"] == [[False, False, None]] * 2
        return
    # the limit's tasks stopped reading early: their workers ended without a traceback each
    # (pyspark's daemon prints a BrokenPipeError for every one of them). Until the session
    # stops: then pyspark's own daemon of the data source's planning processes (which the
    # package does not replace) may print one for an idle planner worker whose socket the
    # JVM closed (BENCHMARKS.md)
    running = out.stderr.split("STOPPING\n", 1)[0]
    assert "BrokenPipeError" not in running and "Traceback" not in running, running[-3000:]
    for reader, writer, kernels in got["first"] + got["after"]:
        assert reader and writer
        assert kernels is (True if jit else None)  # plain Python: no kernels to load
