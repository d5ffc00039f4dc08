"""Compaction as a Spark job (log-management layer): the key map as a shuffle, the retained offsets
joined back in the cluster, the rewrite as tasks writing each cleaned segment once.

    keys      a private Python data source over the rewritten segments (input partitions:
              consecutive segments of about :data:`CHUNK_BYTES`): each task runs key_rows per
              segment, digests the keys and combines its rows per key (key_map.combine_keys:
              one row per key with its largest offset, that record's group, its row count
              ``n`` and whether it is dirty), and hands Spark Arrow record batches of
              :data:`ROW_SCHEMA` ``(tp, piece, k1, k2, offset, n, dirty)`` — ``tp`` numbers
              the partition, ``piece`` the rewrite task of the record's segment (below),
              ``k1, k2`` the key's 128-bit
              MurmurHash3 digest (codec/digest.py) — columnar in and out of Python, no
              per-record Python objects and no pandas (mapInArrow needs pandas; a data source
              reader does not). With ``exact_keys`` the rows carry the key bytes instead, one
              per record (:data:`EXACT_ROW_SCHEMA`, ``key binary``)
    retained  one groupBy(tp, k1, k2) (:func:`write_retained`): the key's largest offset and
              that record's group when seen dirty or once, else (several clean records only)
              all its offsets by a semi-join on the same columns. Two fixed-width longs shuffle
              far faster than variable-length keys, and the tasks' combining sends each key
              about once per task instead of once per record; distinct keys collide with a
              chance of about n²/2^129 (Kafka's own map compares 16-byte MD5s);
              ``exact_keys`` groups by ``(tp, key)``, the full key bytes, instead. The
              surviving ``(piece, offset)`` rows are written by Spark as Parquet partitioned
              by ``piece`` into a staging folder beside the log dir: the driver never holds
              per-record data
    rewrite   one task per piece of a group (consecutive segments of about
              :data:`CHUNK_BYTES`, so one big group still keeps every core busy): reads its
              ``piece=<n>`` offsets, streams its segments' cleaned batches into a file
              of its own attempt in the staging folder (rewrite.py, the same code as the local
              path) and fsyncs it; a group of several pieces is then joined into one file by
              one more task (storage ``concat``), in order

Task attempts never write into the log dir: a retried or speculative attempt (or one Spark
lost track of) writes its own ``<gid>-<piece>-<attempt>.log`` (joined: ``<gid>-<attempt>.log``)
in staging, so no attempt can truncate a
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
import itertools
import json
import os
import pickle
import time
from collections.abc import Callable, Iterator, Sequence
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
from .key_map import combine_keys
from .plan import CleaningPlan, GroupTask
from .rewrite import (GroupOutput, cleaned_path, cleaned_segments, key_columns, key_rows,
                      keyed_rows, write_cleaned)

ROW_SCHEMA = "tp int, piece int, k1 long, k2 long, offset long, n long, dirty boolean"
EXACT_ROW_SCHEMA = "tp int, piece int, key binary, offset long, n long, dirty boolean"
KEYS_SOURCE = "kafkalog_compaction_keys"
ROWS_PER_BATCH = 1 << 16
KEY_CHUNK_BYTES = 512 << 20  # most segment bytes per key-pass input partition, roughly
CHUNK_BYTES = 256 << 20  # most segment bytes per rewrite piece, roughly


def row_schema(exact_keys: bool = False) -> str:
    """The key pass's row schema: :data:`ROW_SCHEMA` (digests) or :data:`EXACT_ROW_SCHEMA`."""
    return EXACT_ROW_SCHEMA if exact_keys else ROW_SCHEMA


def key_table(task: GroupTask, tp: int, piece: int, *, exact_keys: bool = False) -> pa.Table:
    """The key rows of one (single-segment) task as a table of :func:`row_schema`, one row per
    record (``n`` = 1; keys digested here, on the executor, unless ``exact_keys``); ``tp`` and
    ``piece`` number its partition and rewrite piece."""
    with planned_files(Path(task.sources[0].log).parent):
        rows = keyed_rows(key_rows(task), exact_keys)
    offsets = rows.column("offset")
    n = rows.num_rows
    return pa.table({
        "tp": pa.array(np.full(n, tp, np.int32)),
        "piece": pa.array(np.full(n, piece, np.int32)),
        **{c: rows.column(c) for c in key_columns(exact_keys)},
        "offset": offsets,
        "n": pa.array(np.ones(n, np.int64)),
        "dirty": pc.greater_equal(offsets, task.first_dirty),
    })


def chunk_batches(chunk: Sequence[tuple[GroupTask, int, int]], max_rows: int = ROWS_PER_BATCH,
                  *, exact_keys: bool = False) -> Iterator[pa.RecordBatch]:
    """What one key-pass task hands Spark: the key rows of its ``(one-segment task, tp, piece)``
    items, combined per key within each partition (:func:`combine_keys`) unless
    ``exact_keys``, as Arrow batches of :func:`row_schema`."""
    for tp, run in itertools.groupby(chunk, key=lambda item: item[1]):
        table = pa.concat_tables([key_table(task, tp, piece, exact_keys=exact_keys)
                                  for task, _, piece in run])
        if not exact_keys:
            cols = combine_keys(*(table.column(c).to_numpy() for c in
                                  ("k1", "k2", "offset", "dirty", "piece")))
            table = pa.table({"tp": pa.array(np.full(len(cols["k1"]), tp, np.int32)),
                              **{c: pa.array(cols[c]) for c in
                                 ("piece", "k1", "k2", "offset", "n", "dirty")}})
        yield from table.to_batches(max_chunksize=max_rows)


class _KeyReader(DataSourceReader):
    def __init__(self, chunks: list[list[tuple[GroupTask, int, int]]], exact_keys: bool):
        self.chunks = chunks
        self.exact_keys = exact_keys

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(chunk) for chunk in self.chunks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # pragma: no cover
        yield from chunk_batches(partition.value, exact_keys=self.exact_keys)


class KeyRowsSource(DataSource):
    """Private data source of the key pass: option ``tasks`` holds the pickled chunks (one input
    partition each) of ``(one-segment task, tp, piece)``; option ``exact_keys`` (``"true"``)
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


def write_retained(rows: Any, folder: str, parts: int, exact_keys: bool = False) -> None:
    """Write ``(offset)`` of the surviving keyed records of the key rows ``rows`` (a DataFrame
    of :func:`row_schema`) as Parquet partitioned by ``piece`` (``parts`` writing tasks, one
    file per piece and task) into ``folder`` — nothing is collected. A key is ``(tp, k1,
    k2)``, or with ``exact_keys`` ``(tp, key)``.

    A key's latest dirty offset is its largest offset overall (clean offsets precede dirty
    ones), so it survives alone, in the piece of that record (``max_by``); a key absent from
    the dirty range keeps all its clean records. One hash aggregation answers every key seen
    in the dirty range or once, in one job that also counts (``observe``) the keys with several
    clean records and no dirty one (a clean range that was never compacted); only when there
    are such keys does a second job add their offsets by a semi-join of the key rows (which
    reads the segments again).
    """
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    tp_key = ["tp", *key_columns(exact_keys)]
    per_key = (rows.groupBy(*tp_key)
               .agg(F.max("offset").alias("offset"), F.max_by("piece", "offset").alias("piece"),
                    F.sum("n").alias("n"), F.max(F.col("dirty").cast("int")).alias("d")))
    single = (F.col("d") == 1) | (F.col("n") == 1)
    seen = Observation("kafkalog_compaction_keys")
    out = (per_key.observe(seen, F.sum((~single).cast("long")).alias("several_clean"))
           .where(single).select("piece", "offset"))
    _write_by_piece(out, folder, parts, "overwrite")
    if seen.get.get("several_clean"):
        multi = per_key.where(~single).select(*tp_key)
        _write_by_piece(rows.join(multi, tp_key, "left_semi").select("piece", "offset"),
                        folder, parts, "append")


def _write_by_piece(df: Any, folder: str, parts: int, mode: str) -> None:
    df.repartition(parts, "piece").write.partitionBy("piece").mode(mode).parquet(folder)


def read_retained(folder: str | os.PathLike[str], piece: int) -> np.ndarray:
    """The sorted retained offsets of rewrite piece ``piece`` from the Parquet folder the
    shuffle wrote (no ``piece=<n>`` subfolder: the piece keeps no keyed record)."""
    import pyarrow.parquet as pq

    path = Path(folder) / f"piece={piece}"
    fs = storage_for(path)
    if not fs.is_dir(path):
        return np.zeros(0, np.int64)
    files = sorted(p for p in (path / name for name in fs.listdir(path))
                   if p.suffix == ".parquet")
    if not files:
        return np.zeros(0, np.int64)
    table = pq.read_table(files, columns=["offset"], filesystem=fs.arrow_fs)
    return np.sort(np.asarray(table.column("offset").to_numpy(), np.int64))


def rewrite_task(retained_dir: str, out_dir: str, item: tuple[GroupTask, int, int, str]
                 ) -> tuple[int, int, str, str]:
    """One piece of a group's rewrite as a Spark task runs it (:func:`rewrite_pieces`): its
    offsets from the shuffle's Parquet, the cleaned batches of its segments streamed into this
    attempt's own file in ``out_dir`` (:func:`write_cleaned`). Returns ``(gid, piece, path,
    stats as JSON)``."""
    task, gid, piece, pdir = item
    require_visible(pdir, "partition dir")
    require_visible(out_dir, "staging folder next to the log dir")
    path = Path(out_dir) / f"{gid}-{piece}-{task_attempt()}.log"
    out = write_cleaned(task, read_retained(retained_dir, piece), pdir, path=path)
    return gid, piece, str(out.path), json.dumps(out.stats)


def concat_task(out_dir: str, item: tuple[int, list[str]]) -> tuple[int, str]:
    """Join the pieces of group ``gid`` (in order) into this attempt's own file in
    ``out_dir``; returns ``(gid, path)``."""
    gid, pieces = item
    require_visible(out_dir, "staging folder next to the log dir")
    path = Path(out_dir) / f"{gid}-{task_attempt()}.log"
    with disk_errors("joining the pieces of a cleaned segment", path):
        storage_for(path).concat(pieces, path)
    return gid, str(path)


def task_attempt() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.taskAttemptId() if ctx is not None else 0


def _log_size(task: GroupTask) -> int:
    """Bytes of the ``.log`` file of a one-segment task."""
    log = task.sources[0].log
    return storage_for(log).size(log)


def rewrite_pieces(items: Sequence[tuple[GroupTask, int, int, str]], piece_bytes: int = CHUNK_BYTES,
                   size: Callable[[GroupTask], int] = _log_size
                   ) -> list[tuple[GroupTask, int, int, str]]:
    """Every group of ``items`` (:func:`group_items`) as ``(piece, gid, piece number, partition
    dir)``: runs of its consecutive segments of about ``piece_bytes`` each, so that one large
    group is rewritten by several tasks at once. Piece numbers run over all groups, in
    order."""
    out = []
    for g, _, gid, pdir in items:
        subs = segment_tasks(g)
        n = max(1, -(-sum(size(s) for s in subs) // max(1, piece_bytes)))
        for run in chunk_tasks(subs, n, size=size):
            out.append((replace(g, sources=tuple(s.sources[0] for s in run)), gid, len(out),
                        pdir))
    return out


def group_items(plans: Sequence[CleaningPlan]) -> list[tuple[GroupTask, int, int, str]]:
    """Every group of ``plans`` as ``(task, tp, gid, partition dir)``, numbered in order."""
    items = []
    for tp, plan in enumerate(plans):
        for g in plan.groups:
            items.append((g, tp, len(items), str(plan.state.path)))
    return items


def _join_pieces(sc: Any, done: list[tuple[int, int, str, str]], out_dir: str
                 ) -> dict[int, tuple[str, dict[str, int]]]:
    """Per gid: the file holding the group's cleaned segment (its one piece, or the pieces
    joined by :func:`concat_task` tasks) and the pieces' summed stats."""
    by_gid: dict[int, list[tuple[int, str, dict[str, int]]]] = {}
    for gid, piece, path, counts in done:
        by_gid.setdefault(gid, []).append((piece, path, json.loads(counts)))
    out = {}
    several = []
    for gid, parts in by_gid.items():
        parts.sort()
        stats: dict[str, int] = {}
        for _, _, counts in parts:
            for k, v in counts.items():
                stats[k] = stats.get(k, 0) + v
        out[gid] = (parts[0][1], stats)
        if len(parts) > 1:
            several.append((gid, [p for _, p, _ in parts]))
    if several:
        for gid, path in (sc.parallelize(several, len(several))
                          .map(lambda item: concat_task(out_dir, item)).collect()):
            out[gid] = (path, out[gid][1])
    return out


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
            sizes = {src.log: storage_for(src.log).size(src.log)
                     for g, _, _, _ in items for src in g.sources}
            size = lambda task: sizes[task.sources[0].log]  # noqa: E731 (one-segment task)
            total = sum(sizes.values())
            # pieces small enough for every core to get several: the work of a group gathers
            # where its surviving records are, not evenly over its bytes
            pieces = rewrite_pieces(items, min(CHUNK_BYTES,
                                               max(1, total // (sc.defaultParallelism * 4))),
                                    size=size)
            tp_of = {gid: tp for _, tp, gid, _ in items}
            singles = [(s, tp_of[gid], piece) for task, gid, piece, _ in pieces
                       for s in segment_tasks(task)]
            # as few key tasks as keep every core busy: each combines its rows per key, so
            # fewer, larger chunks send fewer rows through the JVM's aggregation
            chunks = chunk_tasks(singles, max(sc.defaultParallelism,
                                              -(-total // KEY_CHUNK_BYTES)),
                                 size=lambda i: size(i[0]))
            blob = base64.b64encode(pickle.dumps(chunks)).decode("ascii")
            with task_errors():  # a task's typed error (unreachable log dir, bad data) as is
                rows = (spark.read.format(KEYS_SOURCE).option("tasks", blob)
                        .option("exact_keys", str(exact_keys).lower()).load())
                write_retained(rows, retained_dir,
                               max(1, min(len(pieces), sc.defaultParallelism * 2)), exact_keys)
                t1 = time.perf_counter()
                # the last pieces of groups first: a group keeps most records (each key's
                # latest) near its end, so those take longest; started first, they do not
                # finish last alone
                last = {gid: piece for _, gid, piece, _ in pieces}
                order = sorted(pieces, key=lambda p: (last[p[1]] - p[2], p[2]))
                done = (sc.parallelize(order, max(1, min(len(order),
                                                         sc.defaultParallelism * 4)))
                        .map(lambda item: rewrite_task(retained_dir, str(attempts_dir), item))
                        .collect())
                joined = _join_pieces(sc, done, str(attempts_dir))
            t2 = time.perf_counter()
            stats["shuffle_seconds"] = stats.get("shuffle_seconds", 0.0) + t1 - t0
            stats["rewrite_seconds"] = stats.get("rewrite_seconds", 0.0) + t2 - t1
            outputs: dict[tuple[str, int], list[GroupOutput]] = {}
            for g, tp, gid, pdir in items:
                attempt, counts = joined[gid]
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
