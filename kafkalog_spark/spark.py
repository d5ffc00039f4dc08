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
import sys
from typing import TYPE_CHECKING, Any

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
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
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
