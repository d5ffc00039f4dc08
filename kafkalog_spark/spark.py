"""Spark session (Spark layer): the embedded local default, configured the way this package needs.

Every Spark entry point — the CLI, ``jobs/``, examples and tests — gets its session here, so the
settings live in one place: the workers run this interpreter (``PYSPARK_PYTHON``), session time
zone UTC (Kafka timestamps are UTC instants), Arrow on, Python DataSource filter pushdown on,
the ``kafkalog`` data source registered. Any existing session (a cluster's) works too: pass it
to :func:`register` instead.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from .errors import SparkSetupError
from .log.storage import LOCAL

if TYPE_CHECKING:  # pyspark is imported only when a session is asked for
    from pyspark.sql import SparkSession

# One table of the settings a session gets (documented from here).
SESSION_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.enabled": "false",  # no port to conflict with on shared machines
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}
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


def session(master: str | None = None, *, app_name: str = "kafkalog", driver_memory: str = "2g",
            conf: dict[str, str] | None = None) -> "SparkSession":
    """A Spark session for kafkalog jobs: the active one if there is one, else a local one.

    Parameters
    ----------
    master : str, optional
        Spark master; default ``local[*]`` (or ``$KAFKALOG_SPARK_MASTER``).
    app_name, driver_memory : str
        Used only when a new session is started.
    conf : dict, optional
        Extra settings, applied over :data:`SESSION_CONF`.

    Returns
    -------
    pyspark.sql.SparkSession
        Where ``format("kafkalog")`` resolves: PySpark discovers the installed
        ``pyspark_kafkalog`` package by itself; otherwise the source is registered here. An
        already active session is returned as it is (call :func:`register` on it if this
        package is not installed where its Python workers run).

    Raises
    ------
    SparkSetupError
        No usable Java (:func:`java_version`).
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    java_version()  # a clear message instead of Spark's "Java gateway process exited"
    # the Python workers must run this interpreter, with this package importable
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # local mode: stay on loopback
    builder = SparkSession.builder.master(
        master or os.environ.get("KAFKALOG_SPARK_MASTER", "local[*]")).appName(app_name)
    builder = builder.config("spark.driver.memory", driver_memory)
    for key, value in {**SESSION_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if importlib.util.find_spec("pyspark_kafkalog") is None:
        register(spark)  # else PySpark registers it by itself (pyspark_* package discovery)
    return spark


def register(spark: Any) -> None:
    """Register the ``kafkalog`` data source on ``spark`` (also found automatically through the
    ``pyspark_kafkalog`` package once this package is installed) and enable filter pushdown."""
    from .datasource import KafkaLogDataSource

    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(KafkaLogDataSource)
