"""Spark with jars from Maven for the tests (test harness, not the package): delta-spark,
Spark's own Kafka source, hadoop-aws — the sets of ``tests/oracle/maven_jars.py``, fetched
once into the cache outside the repo.

A JVM takes its driver-side jars when it starts: ``spark.jars`` given to a second session of
a process whose JVM already runs reach the executors but not the driver
(``ClassNotFoundException: delta.DefaultSource``). The session the suite shares (the
``spark`` fixture) starts without them, so a session with jars runs in a process of its own:
:class:`JarSpark` starts one worker process (``spawn``) holding one Spark session for as long
as the fixture lives; ``run(fn, *args)`` calls ``fn(spark, *args)`` there and returns its
(picklable) result. ``fn`` must be a module-level function of an importable module (a test
module is: the worker gets the test process's ``sys.path``).

The jars are passed as ``spark.jars`` (absolute paths, no Ivy at session start): only those
of a set that pyspark does not already ship (:func:`spark_jars`) — the rest of a set's
closure are older copies of jars in ``pyspark/jars`` (Hadoop client 3.4.2, Jackson 2.13,
Parquet 1.16, slf4j 1.7) that Spark's parent-first class loading would never use anyway.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import re
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from oracle import maven_jars

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
_VERSION_SUFFIX = re.compile(r"-\d[\w.]*?(-\d+)?(\.Final|-GA)?\.jar$")


def artifact_name(jar: str) -> str:
    """``parquet-hadoop-1.16.0.jar`` -> ``parquet-hadoop``."""
    return _VERSION_SUFFIX.sub("", jar)


def pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def spark_jars(*sets: str) -> list[str]:
    """Absolute paths of the jars of the named sets (fetched if not cached) that pyspark does
    not ship itself (by artifact name). Raises ``maven_jars.MavenUnavailable`` when a set is
    not cached and cannot be fetched here."""
    bundled = {artifact_name(p.name) for p in pyspark_jars().glob("*.jar")}
    out: list[str] = []
    for name in sets:
        folder = maven_jars.fetch(name)
        out += [str(p) for p in sorted(folder.glob("*.jar")) if artifact_name(p.name) not in bundled]
    return out


class RemoteError(RuntimeError):
    """An exception in the worker that does not pickle: its type and traceback as text."""


_SPARK = None


def _start(master: str, conf: dict[str, str], env: dict[str, str]) -> None:
    global _SPARK
    os.environ.update(env)
    from kafkalog_spark.spark import session

    _SPARK = session(master, app_name="kafkalog-tests-jars", conf=conf)


def _call(fn: Callable, args: tuple, kwargs: dict) -> Any:
    try:
        return fn(_SPARK, *args, **kwargs)
    except Exception as exc:
        try:
            pickle.loads(pickle.dumps(exc))
        except Exception:
            raise RemoteError(f"{type(exc).__name__} in the jar session:\n"
                              f"{traceback.format_exc()[-6000:]}") from None
        raise


def _stop() -> None:
    if _SPARK is not None:
        _SPARK.stop()


class JarSpark:
    """One Spark session with extra jars in a worker process (see the module docstring)."""

    def __init__(self, jars: list[str], *, master: str = "local[2]",
                 conf: Mapping[str, str] | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        settings = {"spark.jars": ",".join(jars), "spark.driver.memory": "2g", **(conf or {})}
        self.conf = settings
        self.pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_start,
                                        initargs=(master, settings, dict(env or {})))

    def run(self, fn: Callable, *args: Any, timeout: float = 600, **kwargs: Any) -> Any:
        """``fn(spark, *args, **kwargs)`` in the worker; its result or its exception."""
        return self.pool.submit(_call, fn, args, kwargs).result(timeout=timeout)

    def close(self) -> None:
        try:
            self.pool.submit(_stop).result(timeout=120)
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)
