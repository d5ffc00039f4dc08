"""The Python daemon of a local session's workers (entry-point layer): pyspark's, after loading
once what every worker it forks would otherwise load on its first task.

Run as ``python -m kafkalog_spark.daemon WORKER_MODULE`` (Spark's ``spark.python.daemon.module``,
chosen by the session helper: :mod:`kafkalog_spark.spark_daemon`), it first puts the installed
pyspark ahead of Spark's zip (:func:`~kafkalog_spark.spark_daemon.prefer_installed_pyspark`).

pyspark's daemon forks a worker for each task slot, and another each time Spark does not take a
worker back: a task that stops reading before its partition's end (``df.limit(n)`` written or
joined, a ``take`` over several partitions) has its worker killed. A fresh worker imported
pyarrow, numba and this package's reader and writer (0.9 s) and loaded their numba kernels
from the cache (0.5 s) on its first task: ``df.limit(1000)`` of a 32-partition read written to
the ``noop`` sink took 25.6 s against 4.3 s for the whole read (``benchmarks/bench_churn.py``).
Here the daemon imports the modules the package's Spark tasks run (:data:`TASK_MODULES`: 0.1 s
more than the reader and writer) and reads a small log dir of every codec, written to a
temporary folder, through the data source's reader; every forked worker starts with all of it
loaded (the other jobs' kernels still load on their first call in each worker), and frozen out
of the garbage collector's reach (``gc.freeze``): pyspark's worker collects after every task,
which over all of that cost 35-40 ms a task.

A task cut short (``show()``, ``take``, ``limit``: Spark stops reading and closes the worker's
connection) made pyspark's daemon print a ``BrokenPipeError`` traceback for its worker's last
flush on the session's stderr: 66 of them for ``df.limit(1).count()`` of a 66-task read, with
or without this package (any Python data source; pyspark 4.1+ kills such a worker,
SPARK-54344). Here such a worker ends as pyspark ends it, without the traceback
(:func:`quiet_when_cut_short`).

Forking after that is safe: the only threads it leaves are jemalloc's background thread, which
importing pyarrow starts (jemalloc's fork handlers restart it in a child), and Arrow's CPU pool
(as many threads as ``OMP_NUM_THREADS``, 1 as Spark starts its Python processes here; Arrow
re-creates its pools in a forked child). If the warm-up fails (a missing codec library) the
daemon is pyspark's as it was: the workers meet the real error on the task that needs it.
"""

from __future__ import annotations

import functools
import gc
import importlib
import logging
import os
from collections.abc import Callable
from typing import Any

from .codec.layout import CODEC_NAMES
from .spark_daemon import prefer_installed_pyspark
from .storage import LOCAL

log = logging.getLogger(__name__)

TASK_MODULES = (  # what the package's Spark tasks unpickle and run
    "kafkalog_spark.datasource.reader", "kafkalog_spark.datasource.writer",
    "kafkalog_spark.compaction.spark_job", "kafkalog_spark.recovery.verify_job",
    "kafkalog_spark.delta.spark_job", "kafkalog_spark.delta.restore")


def warm_worker_code() -> None:
    """Import :data:`TASK_MODULES` and read a small log dir of every codec through the data
    source's reader, as a scan task would (its kernels loaded from numba's cache)."""
    import pyarrow as pa

    from .datasource.source import KafkaLogDataSource
    from .log.writer import write_log

    for name in TASK_MODULES:
        importlib.import_module(name)

    with LOCAL.temp_dir("kafkalog-daemon-") as folder:
        table = pa.table({"key": [b"k", None], "value": [b"v" * 40, b"w"]})
        for p, codec in CODEC_NAMES.items():
            write_log(table, folder, topic="warm", partition=p, codec=codec)
        source = KafkaLogDataSource({"path": folder})
        reader = source.reader(source.schema())
        rows = sum(b.num_rows for part in reader.partitions() for b in reader.read(part))
    if rows != len(CODEC_NAMES) * table.num_rows:
        raise RuntimeError(f"the warm-up read {rows} rows of {len(CODEC_NAMES) * table.num_rows}")


def quiet_when_cut_short(worker: Callable[..., int]) -> Callable[..., int]:
    """pyspark's forked ``worker(sock, authenticated)``, except that Spark having closed the
    connection first (``BrokenPipeError`` / ``ConnectionResetError`` out of the worker's last
    flush: its task was cut short or killed) ends the worker process as pyspark's daemon does
    (``os._exit(1)``), without printing the traceback: Spark reports what went wrong with a
    task, if anything did."""
    @functools.wraps(worker)
    def run(sock: Any, authenticated: bool) -> int:
        try:
            return worker(sock, authenticated)
        except (BrokenPipeError, ConnectionResetError):
            os._exit(1)
    return run


def main() -> None:
    """``python -m kafkalog_spark.daemon WORKER_MODULE``: pyspark's daemon, which
    forks the workers, after :func:`prefer_installed_pyspark` and :func:`warm_worker_code`."""
    prefer_installed_pyspark()
    try:
        warm_worker_code()
    except Exception as e:  # workers then meet the same cause on their task, with its context
        log.warning("the worker daemon could not load the reader ahead of its workers: %s", e)
    from pyspark import daemon

    # pyspark's forked worker runs a full gc.collect() after each task: over everything loaded
    # above (numba, pyarrow, the package) that was 35-40 ms a task; frozen, the collections
    # skip what the daemon loaded and see only what the worker's tasks made since
    gc.freeze()
    daemon.worker = quiet_when_cut_short(daemon.worker)
    daemon.manager()


if __name__ == "__main__":
    main()
