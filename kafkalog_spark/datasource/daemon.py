"""The Python daemon of a local session's workers (data source layer): pyspark's, after loading
once what every worker it forks would otherwise load on its first task.

Run as ``python -m kafkalog_spark.datasource.daemon WORKER_MODULE`` (Spark's
``spark.python.daemon.module``), it first puts the installed pyspark ahead of Spark's zip
(:mod:`kafkalog_spark.spark_daemon`).

pyspark's daemon forks a worker for each task slot, and another each time Spark does not take a
worker back: a task that stops reading before its partition's end (``df.limit(n)`` written or
joined, a ``take`` over several partitions) has its worker killed. A fresh worker imported
pyarrow, numba and this package's reader and writer (0.9 s) and loaded their numba kernels
from the cache (0.5 s) on its first task: ``df.limit(1000)`` of a 32-partition scan written to
the ``noop`` sink took 32.5 s against 6.8 s for the whole scan (``benchmarks/bench_churn.py``).
Here the daemon imports the reader and the writer and reads a small log dir of every codec,
written to a temporary folder, through the reader the tasks use; every forked worker starts
with all of it loaded.

Forking after that is safe: the only thread it leaves is jemalloc's background thread, started
by importing pyarrow in every worker anyway (jemalloc's fork handlers restart it in a child);
``OMP_NUM_THREADS`` (1, as Spark sets it for its Python processes here) keeps OpenBLAS without
threads. The warm-up failing (a missing codec library) leaves the daemon as pyspark's: the
workers then raise the real error on the task that needs it.
"""

from __future__ import annotations

import importlib
import logging
import sys

from ..spark_daemon import prefer_installed_pyspark
from ..storage import LOCAL

log = logging.getLogger(__name__)

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def warm_worker_code() -> None:
    """Import the data source's reader and writer and read a small log dir of every codec
    through the reader, as a task would (its kernels loaded from numba's cache)."""
    import pyarrow as pa

    from ..log.writer import write_log
    from .source import KafkaLogDataSource

    importlib.import_module(".writer", __package__)  # what a write task unpickles

    with LOCAL.temp_dir("kafkalog-daemon-") as folder:
        table = pa.table({"key": [b"k", None], "value": [b"v" * 40, b"w"]})
        for p, codec in enumerate(CODECS):
            write_log(table, folder, topic="warm", partition=p, codec=codec)
        source = KafkaLogDataSource({"path": folder})
        reader = source.reader(source.schema())
        rows = sum(b.num_rows for part in reader.partitions() for b in reader.read(part))
    if rows != len(CODECS) * table.num_rows:
        raise RuntimeError(f"the warm-up read {rows} rows of {len(CODECS) * table.num_rows}")


def main() -> None:
    """``python -m kafkalog_spark.datasource.daemon WORKER_MODULE``: pyspark's daemon, which
    forks the workers, after :func:`prefer_installed_pyspark` and :func:`warm_worker_code`."""
    prefer_installed_pyspark()
    try:
        warm_worker_code()
    except Exception as e:  # workers then meet the same cause on their task, with its context
        log.warning("the worker daemon could not load the reader ahead of its workers: %s", e)
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    sys.exit(main())
