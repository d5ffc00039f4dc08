"""Compaction as a Spark job (log-management layer): the key map as a shuffle, the retained offsets
joined back in the cluster, the rewrite as tasks writing each cleaned segment once.

    keys      a private Python data source over the rewritten segments (input partitions:
              consecutive segments of about equal bytes): each task runs key_rows per segment
              and hands Spark Arrow record batches of :data:`ROW_SCHEMA`
              ``(tp, gid, k1, k2, offset, dirty)`` — ``tp`` numbers the partition, ``gid`` the
              group (cleaned segment), ``k1, k2`` the key's 128-bit MurmurHash3 digest, computed
              in the task (codec/digest.py) — columnar in and out of Python, no per-record
              Python objects and no pandas (mapInArrow needs pandas; a data source reader does
              not). With ``exact_keys`` the rows carry the key bytes instead
              (:data:`EXACT_ROW_SCHEMA`, ``key binary``)
    retained  one groupBy(tp, k1, k2) (:func:`retained_offsets`): the key's largest offset and
              that record's group when seen dirty or once, else (several clean records only)
              all its offsets by a semi-join on the same columns. Two fixed-width longs shuffle
              far faster than variable-length keys; distinct keys collide with a chance of
              about n²/2^129 (Kafka's own map compares 16-byte MD5s); ``exact_keys`` groups by
              ``(tp, key)``, the full key bytes, instead. The surviving ``(gid, offset)``
              rows are written by Spark as Parquet partitioned by ``gid`` into a staging folder
              beside the log dir: the driver never holds per-record data
    rewrite   one task per group: reads its ``gid=<n>`` offsets, streams the cleaned segment
              into a file of its own attempt in the staging folder (rewrite.py, the same code
              as the local path) and fsyncs it; tasks of different groups run in parallel

Task attempts never write into the log dir: a retried or speculative attempt (or one Spark
lost track of) writes its own ``<gid>-<attempt>.log`` in staging, so no attempt can truncate a
file another one wrote. The driver renames the attempt Spark returned to
``<partition dir>/<base>.log.cleaned`` (same file system: the staging folder is the log dir's
sibling), maps each (for the scan, indexes and ``.txnindex``) and swaps each partition in
Kafka's order (compact.swap_in), which renames that file instead of writing it again. A crash
before the swap leaves ``.cleaned`` files that Kafka's log loading (and ``kafkalog recover`` /
the next compaction) disposes of; an error before the swap removes them and the staging folder
here — with every other attempt's output.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pickle
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..datasource.executors import planned_files, require_visible, task_errors
from ..log.atomic import disk_errors
from ..log.storage import storage_for
from ..log.staging import create_staging_dir, remove_staging_dir
from .plan import CleaningPlan, GroupTask
from .rewrite import (GroupOutput, cleaned_path, cleaned_segments, key_columns, key_rows,
                      keyed_rows, write_cleaned)

ROW_SCHEMA = "tp int, gid int, k1 long, k2 long, offset long, dirty boolean"
EXACT_ROW_SCHEMA = "tp int, gid int, key binary, offset long, dirty boolean"
KEYS_SOURCE = "kafkalog_compaction_keys"
ROWS_PER_BATCH = 1 << 16
CHUNK_BYTES = 256 << 20  # most segment bytes per key-pass input partition, roughly


def row_schema(exact_keys: bool = False) -> str:
    """The key pass's row schema: :data:`ROW_SCHEMA` (digests) or :data:`EXACT_ROW_SCHEMA`."""
    return EXACT_ROW_SCHEMA if exact_keys else ROW_SCHEMA


def key_batches(task: GroupTask, tp: int, gid: int, max_rows: int = ROWS_PER_BATCH, *,
                exact_keys: bool = False) -> Iterator[pa.RecordBatch]:
    """The key rows of one (single-segment) task as Arrow batches of :func:`row_schema` (what a
    key task hands Spark: keys digested here, on the executor, unless ``exact_keys``); ``tp``
    and ``gid`` number its partition and group."""
    with planned_files(Path(task.sources[0].log).parent):
        rows = keyed_rows(key_rows(task), exact_keys)
    offsets = rows.column("offset")
    n = rows.num_rows
    table = pa.table({
        "tp": pa.array(np.full(n, tp, np.int32)),
        "gid": pa.array(np.full(n, gid, np.int32)),
        **{c: rows.column(c) for c in key_columns(exact_keys)},
        "offset": offsets,
        "dirty": pc.greater_equal(offsets, task.first_dirty),
    })
    yield from table.to_batches(max_chunksize=max_rows)


class _KeyReader(DataSourceReader):
    def __init__(self, chunks: list[list[tuple[GroupTask, int, int]]], exact_keys: bool):
        self.chunks = chunks
        self.exact_keys = exact_keys

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(chunk) for chunk in self.chunks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # pragma: no cover
        for task, tp, gid in partition.value:
            yield from key_batches(task, tp, gid, exact_keys=self.exact_keys)


class KeyRowsSource(DataSource):
    """Private data source of the key pass: option ``tasks`` holds the pickled chunks (one input
    partition each) of ``(one-segment task, tp, gid)``; option ``exact_keys`` (``"true"``)
    selects key bytes over digests."""

    @classmethod
    def name(cls) -> str:
        return KEYS_SOURCE

    def _exact_keys(self) -> bool:
        return self.options.get("exact_keys", "false").lower() == "true"

    def schema(self) -> str:
        return row_schema(self._exact_keys())

    def reader(self, schema: Any) -> DataSourceReader:
        return _KeyReader(pickle.loads(base64.b64decode(self.options["tasks"])),
                          self._exact_keys())


def segment_tasks(task: GroupTask) -> list[GroupTask]:
    """One single-segment task per source segment of ``task`` (same group number): a group's key
    rows are the concatenation of its segments', so segments are the unit of the key pass even
    when a partition is one group."""
    return [replace(task, sources=(src,)) for src in task.sources]


def chunk_tasks(items: Sequence[Any], n: int, size=lambda item: item) -> list[list[Any]]:
    """``items`` in at most ``n`` consecutive chunks of about equal ``size`` (empty chunks
    dropped; order kept)."""
    sizes = np.array([size(i) for i in items], np.float64)
    n = max(1, min(n, len(items)))
    edges = np.cumsum(sizes) / max(1.0, sizes.sum()) * n
    which = np.minimum(np.floor(edges - 1e-9).astype(np.int64), n - 1)
    chunks: list[list[Any]] = [[] for _ in range(n)]
    for item, k in zip(items, which):
        chunks[k].append(item)
    return [c for c in chunks if c]


def retained_offsets(rows: Any, exact_keys: bool = False) -> Any:
    """``(gid, offset)`` of the surviving keyed records of the key rows ``rows`` (a DataFrame of
    :func:`row_schema`), as a DataFrame — nothing is collected. A key is ``(tp, k1, k2)``, or
    with ``exact_keys`` ``(tp, key)``.

    A key's latest dirty offset is its largest offset overall (clean offsets precede dirty
    ones), so it survives alone, in the group of that record (``max_by``); a key absent from
    the dirty range keeps all its clean records. One hash aggregation (map-side partial
    aggregation, no join) answers every key seen in the dirty range or once; only keys with
    several clean records and no dirty one (a clean range that was not compacted) take a
    semi-join pass, and only when a cheap check finds one.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    tp_key = ["tp", *key_columns(exact_keys)]
    per_key = (rows.groupBy(*tp_key)
               .agg(F.max("offset").alias("offset"), F.max_by("gid", "offset").alias("gid"),
                    F.count(F.lit(1)).alias("n"), F.max(F.col("dirty").cast("int")).alias("d"))
               .persist(StorageLevel.MEMORY_AND_DISK))  # spills: never bounded by memory
    single = (F.col("d") == 1) | (F.col("n") == 1)
    out = per_key.where(single).select("gid", "offset")
    multi = per_key.where(~single).select(*tp_key)
    if multi.limit(1).count():
        out = out.unionByName(rows.join(multi, tp_key, "left_semi").select("gid", "offset"))
    return out, per_key


def read_retained(folder: str | os.PathLike[str], gid: int) -> np.ndarray:
    """The sorted retained offsets of group ``gid`` from the Parquet folder the shuffle wrote
    (no ``gid=<n>`` subfolder: the group keeps no keyed record)."""
    import pyarrow.parquet as pq

    path = Path(folder) / f"gid={gid}"
    fs = storage_for(path)
    if not fs.is_dir(path):
        return np.zeros(0, np.int64)
    files = sorted(p for p in (path / name for name in fs.listdir(path))
                   if p.suffix == ".parquet")
    if not files:
        return np.zeros(0, np.int64)
    table = pq.read_table(files, columns=["offset"], filesystem=fs.arrow_fs)
    return np.sort(np.asarray(table.column("offset").to_numpy(), np.int64))


def rewrite_task(retained_dir: str, out_dir: str, item: tuple[GroupTask, int, str]
                 ) -> tuple[int, str, str]:
    """One group's rewrite as a Spark task runs it: its offsets from the shuffle's Parquet, the
    cleaned segment streamed into this attempt's own file in ``out_dir`` (:func:`write_cleaned`).
    Returns ``(gid, path, stats as JSON)``."""
    from pyspark import TaskContext

    task, gid, pdir = item
    require_visible(pdir, "partition dir")
    require_visible(out_dir, "staging folder next to the log dir")
    ctx = TaskContext.get()
    attempt = ctx.taskAttemptId() if ctx is not None else 0
    path = Path(out_dir) / f"{gid}-{attempt}.log"
    out = write_cleaned(task, read_retained(retained_dir, gid), pdir, path=path)
    return gid, str(out.path), json.dumps(out.stats)


def group_items(plans: Sequence[CleaningPlan]) -> list[tuple[GroupTask, int, int, str]]:
    """Every group of ``plans`` as ``(task, tp, gid, partition dir)``, numbered in order."""
    items = []
    for tp, plan in enumerate(plans):
        for g in plan.groups:
            items.append((g, tp, len(items), str(plan.state.path)))
    return items


def _log_size(task: GroupTask) -> int:
    """Bytes of the ``.log`` file of a one-segment task."""
    log = task.sources[0].log
    return storage_for(log).size(log)


@contextlib.contextmanager
def rewrite_spark(plans: Sequence[CleaningPlan], stats: dict[str, float], *,
                  spark: Any = None, exact_keys: bool = False
                  ) -> Iterator[dict[tuple[str, int], list[GroupOutput]]]:
    """Key shuffle (by digest, or by key bytes with ``exact_keys``) and group rewrites with
    Spark (module docstring). Yields the outputs per
    partition, each a map of its task-written ``.cleaned`` file (valid inside the ``with``, for
    the swaps); on leaving, removes the staging folder, and on an error the ``.cleaned`` files
    that were not swapped in."""
    if not plans:
        yield {}
        return
    if spark is None:
        from ..spark import session

        spark = session()
    items = group_items(plans)
    staging = create_staging_dir(plans[0].state.log_dir)
    retained_dir = str(staging / "retained")
    attempts_dir = staging / "cleaned"  # every rewrite attempt's own output
    storage_for(attempts_dir).make_dirs(attempts_dir)
    try:
        with cleaned_segments() as files:
            sc = spark.sparkContext
            t0 = time.perf_counter()
            spark.dataSource.register(KeyRowsSource)
            singles = [(s, tp, gid) for g, tp, gid, _ in items for s in segment_tasks(g)]
            total = sum(_log_size(s) for s, _, _ in singles)
            chunks = chunk_tasks(singles, max(sc.defaultParallelism * 2, total // CHUNK_BYTES),
                                 size=lambda i: _log_size(i[0]))
            blob = base64.b64encode(pickle.dumps(chunks)).decode("ascii")
            with task_errors():  # a task's typed error (unreachable log dir, bad data) as is
                rows = (spark.read.format(KEYS_SOURCE).option("tasks", blob)
                        .option("exact_keys", str(exact_keys).lower()).load())
                retained, per_key = retained_offsets(rows, exact_keys)
                n_out = max(1, min(len(items), sc.defaultParallelism * 2))
                (retained.repartition(n_out, "gid").write.partitionBy("gid").mode("overwrite")
                 .parquet(retained_dir))
                per_key.unpersist()
                t1 = time.perf_counter()
                work = [(g, gid, pdir) for g, _, gid, pdir in items]
                results = (sc.parallelize(work, max(1, min(len(work), sc.defaultParallelism * 4)))
                           .map(lambda item: rewrite_task(retained_dir, str(attempts_dir),
                                                          item)).collect())
            t2 = time.perf_counter()
            stats["shuffle_seconds"] = stats.get("shuffle_seconds", 0.0) + t1 - t0
            stats["rewrite_seconds"] = stats.get("rewrite_seconds", 0.0) + t2 - t1
            by_gid = {gid: (path, json.loads(counts)) for gid, path, counts in results}
            outputs: dict[tuple[str, int], list[GroupOutput]] = {}
            for g, tp, gid, pdir in items:
                attempt, counts = by_gid[gid]
                path = cleaned_path(pdir, g.base_offset)
                files.track(path)  # before the rename: an error from here on removes it
                with disk_errors("moving a cleaned segment into its partition dir", path):
                    storage_for(path).rename(attempt, path)
                for k, v in counts.items():
                    stats[k] = stats.get(k, 0) + v
                out = GroupOutput(g.base_offset, b"", g.sources[-1].mtime, counts, path=str(path))
                outputs.setdefault(plans[tp].state.tp, []).append(files.adopt(out))
            files.swapping = True
            yield outputs
    finally:
        remove_staging_dir(staging)
