"""Spark sessions (datasource layer): the session every Spark entry point gets, configured the
way this package needs without overriding what spark-submit, ``spark-defaults.conf`` or the
caller already set.

The master comes from, first that exists: the ``master`` argument, spark-submit or
``spark.master`` (command line, ``PYSPARK_SUBMIT_ARGS``, the properties file),
``$KAFKALOG_SPARK_MASTER``, else ``local[*]``. Every session gets :data:`REQUIRED_CONF` (UTC
session time zone, Arrow) and the ``kafkalog`` data source; a value the user set for one of
those is kept, with a warning. A local master also gets :data:`LOCAL_CONF` (loopback, no UI,
few shuffle and Delta snapshot partitions, 2 GiB driver, Python workers on Unix sockets) where
nothing set those keys, and its Python workers run this interpreter, forked by
:mod:`~kafkalog_spark.daemon` where nothing chose a daemon (:mod:`~kafkalog_spark.spark_daemon`
says where): forked with the package's task code already loaded. A cluster master is left as
configured: ship the package to its executors as ``docs/cluster.md`` says.

Delta Lake: when delta-spark is on the session's classpath (a ``delta-spark_*`` jar in
``spark.jars`` / ``--jars``, or ``io.delta:delta-spark_*`` in ``spark.jars.packages`` /
``--packages``), the session also gets :data:`DELTA_CONF` (Delta's SQL extension and catalog),
each key only where nothing set it. ``session(delta=True)`` asks Ivy for the delta-spark jar of
the installed ``delta-spark`` pip package (:func:`delta_package`), as delta-spark's own
``configure_spark_with_delta_pip`` does (``docs/delta.md``: getting the jars).
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

from .errors import SparkSetupError
from .spark_daemon import (DAEMON_CONF, DAEMON_MODULE, prefer_installed_pyspark,
                           workers_import_this_package)
from .storage import LOCAL

if TYPE_CHECKING:  # pyspark is imported only when a session is asked for
    from pyspark.sql import SparkSession

log = logging.getLogger("kafkalog_spark.spark")

# Settings every session gets (documented from here): what the package relies on.
REQUIRED_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",  # Kafka timestamps are UTC instants
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}
# Defaults for a local master, each only where nothing else set it.
LOCAL_CONF: dict[str, str] = {
    "spark.driver.memory": "2g",
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.enabled": "false",  # no port to conflict with on shared machines
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.bindAddress": "127.0.0.1",  # a laptop's job stays on loopback
    "spark.driver.host": "127.0.0.1",
    # Delta rebuilds a table's state in this many tasks at each commit and read (default 50:
    # 3 delta-spark commits 27.8 s, so 6.5 s; BENCHMARKS.md); unused without the Delta jars
    "spark.databricks.delta.snapshotPartitions": "8",
}
if hasattr(socket, "AF_UNIX"):  # POSIX: the JVM and its Python workers talk over a Unix socket
    # Over loopback TCP each task of a Python worker waited ~40 ms (Nagle's algorithm against
    # delayed ACKs): 130 empty tasks took 7.7 s on local[1], 1.4 s so with the daemon's frozen
    # heap (:mod:`kafkalog_spark.daemon`; BENCHMARKS.md, "Python workers: 40 ms a task")
    LOCAL_CONF["spark.python.unix.domain.socket.enabled"] = "true"
# Delta Lake's SQL extension and catalog (delta-spark's documented session settings), added
# where nothing set them when delta-spark is on the classpath
DELTA_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
DEFAULT_MASTER = "local[*]"
MIN_JAVA = 17  # PySpark 4.x runs on Java 17 or 21


def java_version() -> tuple[str, int]:
    """The ``java`` Spark would start (``$JAVA_HOME/bin/java``, else ``java`` on ``PATH``) and
    its major version.

    Raises
    ------
    SparkSetupError
        No Java found, it does not run, or it is older than :data:`MIN_JAVA` — with what to do.
    """
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    where = f"JAVA_HOME={home}" if home else "PATH"
    if not java or not LOCAL.executable(java):
        raise SparkSetupError(
            f"Spark needs Java {MIN_JAVA} or newer, and none was found ({where}). Install one "
            f"(e.g. `apt install openjdk-17-jre-headless`) and put it on PATH or set JAVA_HOME. "
            f"Commands without --spark (info, dump, verify --local, recover, compact/retain "
            f"with the local engine, migrate without --spark) work without Java.")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SparkSetupError(f"cannot run {java} -version: {exc}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        raise SparkSetupError(f"cannot tell the version of {java}: {out.stderr.strip()[:200]}")
    major = int(match.group(1))
    major = int(match.group(2)) if major == 1 and match.group(2) else major  # "1.8" is Java 8
    if major < MIN_JAVA:
        raise SparkSetupError(f"{java} is Java {major}; Spark {MIN_JAVA}+ is needed. Point "
                              f"JAVA_HOME at a Java {MIN_JAVA} or 21 installation.")
    return java, major


def session(master: str | None = None, *, app_name: str = "kafkalog",
            driver_memory: str | None = None, conf: dict[str, str] | None = None,
            delta: bool = False) -> "SparkSession":
    """A Spark session for kafkalog jobs: the active one if there is one, else a new one.

    Parameters
    ----------
    master : str, optional
        Spark master; else spark-submit's / ``spark.master``, ``$KAFKALOG_SPARK_MASTER``, or
        ``local[*]`` (module docstring).
    app_name : str
        Used when nothing (spark-submit's ``--name``, ``spark.app.name``) named the app.
    driver_memory : str, optional
        ``spark.driver.memory`` for a new driver JVM; by default what is configured, else 2g
        for a local master.
    conf : dict, optional
        Settings the caller wants: applied over everything else.
    delta : bool
        Add the delta-spark jar of the installed ``delta-spark`` pip package to
        ``spark.jars.packages`` (fetched by Ivy at start: :func:`delta_package`) unless
        delta-spark is already on the classpath. Either way, with delta-spark on the classpath
        the session gets :data:`DELTA_CONF` where nothing set those keys.

    Returns
    -------
    pyspark.sql.SparkSession
        Where ``format("kafkalog")`` resolves. An already active session is returned with
        :data:`REQUIRED_CONF` applied where its own configuration left them unset.

    Raises
    ------
    SparkSetupError
        No usable Java (:func:`java_version`).
    """
    prefer_installed_pyspark()
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        _apply_required(active)
        _check_delta(active, delta)
        return active
    launching = SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ
    if launching:  # else spark-submit's JVM runs already
        java_version()  # a clear message instead of Spark's "Java gateway process exited"
    configured = configured_conf()
    chosen = master or configured.get("spark.master") \
        or os.environ.get("KAFKALOG_SPARK_MASTER") or DEFAULT_MASTER
    settings: dict[str, str] = {"spark.master": chosen}
    if "spark.app.name" not in configured:
        settings["spark.app.name"] = app_name
    defaults = dict(REQUIRED_CONF)
    if chosen.startswith("local"):
        defaults.update(LOCAL_CONF)
        # the Python workers of a local master run this interpreter, with this package
        if "spark.pyspark.python" not in configured:
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if workers_import_this_package(configured):
            defaults[DAEMON_CONF] = DAEMON_MODULE
    for key, value in defaults.items():
        if key not in configured:
            settings[key] = value
        elif key in REQUIRED_CONF and configured[key] != value:
            log.warning("keeping %s=%s as configured; kafkalog_spark assumes %s", key,
                        configured[key], value)
    if driver_memory is not None:
        settings["spark.driver.memory"] = driver_memory
    settings.update(conf or {})
    _add_delta(settings, configured, delta)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    load_walk_meanwhile()
    spark = _start(builder, {**configured, **settings}.get("spark.jars.packages"))
    if chosen.startswith("local"):
        spark.sparkContext.setLogLevel("WARN")
    if _needs_register(spark):
        register(spark)  # else PySpark registers it by itself (pyspark_* package discovery)
    return spark


def _needs_register(spark: Any) -> bool:
    """Whether :func:`register` must run: the package is not installed (no ``pyspark_kafkalog``
    to discover), or it comes through ``--py-files`` — the source PySpark discovers carries no
    py-files to the executors' tasks, one registered here does — or the session has
    ``spark.hadoop.fs.s3a.*`` settings, which only a registered source carries. Not otherwise:
    a registered source plans with ``spark.pyspark.python``, which for a shipped virtualenv
    (``./environment/bin/python``) exists only on the executors; with such a Python and s3a
    settings, a warning says to give the store options on the read."""
    import importlib.util

    if importlib.util.find_spec("pyspark_kafkalog") is None:
        return True
    if getattr(spark.sparkContext, "_python_includes", None):
        return True
    if session_storage_options(spark):
        python = spark.sparkContext.getConf().get("spark.pyspark.python", None)
        if python is None or LOCAL.executable(python):
            return True
        log.warning("the session's spark.hadoop.fs.s3a.* settings do not reach the kafkalog "
                    "source when spark.pyspark.python (%s) exists only on the executors; give "
                    "them as .option('storage.<name>', ...) on the read", python)
    return False


def load_walk_meanwhile() -> threading.Thread:
    """Load the entry-header walk from numba's cache in a background thread, while Spark
    starts (seconds, waiting on the JVM with the GIL released). A driver plans by walking
    segment tails — migrate's log ends, offset lookups — and numba's first load in a process
    costs ~0.3 s, which a cold job otherwise paid on its driver before its first task
    (BENCHMARKS.md); the first real walk waits for the thread under numba's lock."""
    def load() -> None:
        try:
            import numpy as np

            from .codec.records.scan import scan_entries

            scan_entries(np.frombuffer(bytes(64), np.uint8))
        except Exception:  # noqa: BLE001 - the first real walk loads it, and says why
            log.debug("could not load the header walk ahead", exc_info=True)

    thread = threading.Thread(target=load, name="kafkalog-load-walk", daemon=True)
    thread.start()
    return thread


def _start(builder: Any, packages: str | None) -> "SparkSession":
    """``builder.getOrCreate()``; a JVM that exits at start while Ivy resolves ``packages``
    (Ivy's report is on stderr above) becomes a :class:`SparkSetupError` saying what to try."""
    from pyspark.errors import PySparkRuntimeError

    try:
        return builder.getOrCreate()
    except PySparkRuntimeError as exc:
        if not packages or exc.getCondition() != "JAVA_GATEWAY_EXITED":
            raise
        raise SparkSetupError(
            f"Spark did not start while Ivy resolved spark.jars.packages={packages} (its report "
            "is above). A version Maven does not serve, no network, or an entry in ~/.m2 that "
            "holds a .pom without its .jar (left by an earlier mvn run; Ivy does not fall back "
            "to the remote for it) stop it; or pass the jars as files with spark.jars / --jars "
            "(docs/delta.md, getting the Delta jars)") from exc


def delta_package() -> str:
    """The Maven coordinate of the delta-spark jar for the installed ``delta-spark`` pip package
    and pyspark (``io.delta:delta-spark_<Spark major.minor>_2.13:<version>``), the one
    ``configure_spark_with_delta_pip`` asks for."""
    import importlib.metadata

    import pyspark

    try:
        version = importlib.metadata.version("delta_spark")
    except importlib.metadata.PackageNotFoundError:
        raise SparkSetupError("session(delta=True) takes the Delta jars' version from the "
                              "delta-spark pip package, which is not installed: pip install "
                              "delta-spark (the release built for pyspark "
                              f"{pyspark.__version__})") from None
    minor = ".".join(pyspark.__version__.split(".")[:2])
    return f"io.delta:delta-spark_{minor}_2.13:{version}"


def names_delta(conf: dict[str, str]) -> bool:
    """Whether the settings put delta-spark on the classpath: a ``delta-spark_*`` jar in
    ``spark.jars`` or an ``io.delta:delta-spark_*`` coordinate in ``spark.jars.packages``."""
    jars = [j.strip().rsplit("/", 1)[-1] for j in conf.get("spark.jars", "").split(",")]
    packages = [p.strip() for p in conf.get("spark.jars.packages", "").split(",")]
    return (any(j.startswith("delta-spark_") for j in jars)
            or any(p.startswith("io.delta:delta-spark_") for p in packages))


def _add_delta(settings: dict[str, str], configured: dict[str, str], delta: bool) -> None:
    """``delta``: the delta-spark package unless delta-spark is already named; then, with
    delta-spark on the classpath, :data:`DELTA_CONF` for the keys nothing set (a user's own
    extension list or catalog is kept as given)."""
    given = {**configured, **settings}
    if delta and not names_delta(given):
        packages = given.get("spark.jars.packages", "")
        settings["spark.jars.packages"] = ",".join(p for p in (packages, delta_package()) if p)
        given = {**configured, **settings}
    if names_delta(given):
        for key, value in DELTA_CONF.items():
            if key not in given:
                settings[key] = value


def _check_delta(spark: Any, delta: bool) -> None:
    """On a running session the jars and the extension are fixed: say when Delta is asked for
    or on the classpath and its extension is not in the session."""
    started = dict(spark.sparkContext.getConf().getAll())
    extension = DELTA_CONF["spark.sql.extensions"]
    if (delta or names_delta(started)) and extension not in started.get(
            "spark.sql.extensions", ""):
        log.warning("the active Spark session started without %s (set before its JVM "
                    "started: spark.jars / spark.jars.packages and %s); Delta SQL commands "
                    "and the delta catalog will not work in it", extension,
                    ", ".join(DELTA_CONF))


def _apply_required(spark: Any) -> None:
    """:data:`REQUIRED_CONF` on a running session, where its start-up configuration did not
    set the key (runtime SQL settings)."""
    started = dict(spark.sparkContext.getConf().getAll())
    for key, value in REQUIRED_CONF.items():
        if key in started:
            if started[key] != value:
                log.warning("keeping %s=%s as configured; kafkalog_spark assumes %s", key,
                            started[key], value)
            continue
        spark.conf.set(key, value)


def configured_conf() -> dict[str, str]:
    """What spark-submit and Spark's configuration files set for the next session.

    Under spark-submit (or once this process runs a JVM) that is the JVM's ``SparkConf``.
    Otherwise it is what pyspark's own launch of spark-submit will load: the properties file
    (``--properties-file`` in ``PYSPARK_SUBMIT_ARGS``, else ``spark-defaults.conf`` in
    ``$SPARK_CONF_DIR`` or ``$SPARK_HOME/conf``) overridden by ``PYSPARK_SUBMIT_ARGS``'
    ``--master``, ``--name``, ``--driver-memory``, ``--jars``, ``--packages`` and ``--conf``.
    """
    from pyspark import SparkConf, SparkContext

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        SparkContext._ensure_initialized()  # connects to spark-submit's JVM (never launches one)
        return dict(SparkConf().getAll())
    args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    flags = {"--master": "spark.master", "--name": "spark.app.name",
             "--driver-memory": "spark.driver.memory", "--jars": "spark.jars",
             "--packages": "spark.jars.packages"}
    given: dict[str, str] = {}
    props_file = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--") and "=" in arg:  # --master=yarn, --conf=spark.x=y
            (name, value), i = arg.split("=", 1), i + 1
        elif arg in (*flags, "--conf", "-c", "--properties-file") and i + 1 < len(args):
            name, value, i = arg, args[i + 1], i + 2
        else:
            i += 1
            continue
        if name in flags:
            given[flags[name]] = value
        elif name in ("--conf", "-c"):
            key, _, val = value.partition("=")
            given[key.strip()] = val.strip()
        elif name == "--properties-file":
            props_file = value
    return {**_defaults_file(props_file), **given}


def _defaults_file(path: str | None) -> dict[str, str]:
    from pyspark.find_spark_home import _find_spark_home

    from .codec.files.properties import parse_java_properties

    if path is None:
        conf_dir = os.environ.get("SPARK_CONF_DIR") or os.path.join(_find_spark_home(), "conf")
        path = os.path.join(conf_dir, "spark-defaults.conf")
        if not LOCAL.is_file(path):
            return {}
    try:
        props = parse_java_properties(LOCAL.read_text(path), file=path)
    except OSError as exc:
        raise SparkSetupError(f"cannot read Spark's properties file {path}: {exc}") from exc
    return {k: v.strip() for k, v in props.items() if k.startswith("spark.")}


def register(spark: Any) -> None:
    """Register the ``kafkalog`` data source on ``spark`` (also found automatically through the
    ``pyspark_kafkalog`` package once this package is installed).

    The session's ``spark.hadoop.fs.s3a.*`` settings (endpoint, keys, region, path style) become
    the source's default object-store options (:func:`~.log.object_options.from_hadoop`);
    options given on a read or write win."""
    from .datasource import KafkaLogDataSource

    source = KafkaLogDataSource
    storage = session_storage_options(spark)
    if storage:
        # a subclass that no module names is pickled by value: it carries the settings to the
        # Python workers that plan reads (pickled by reference, they would be lost)
        source = type("SessionKafkaLogDataSource", (KafkaLogDataSource,),
                      {"session_storage": storage})
    spark.dataSource.register(source)


def session_storage_options(spark: Any) -> dict[str, str]:
    """Object-store options from the session's ``spark.hadoop.fs.s3a.*`` settings (endpoint,
    keys, region, path style: :func:`~.log.object_options.from_hadoop`)."""
    from .storage.options import from_hadoop

    prefix = "spark.hadoop."
    return from_hadoop({k[len(prefix):]: v for k, v in spark.sparkContext.getConf().getAll()
                        if k.startswith(prefix + "fs.s3a.")})
