"""Compaction as a Spark job (log-management layer): the key map as a shuffle, the rewrite as tasks.

    keys      a private Python data source over the rewritten segments (input partitions:
              consecutive segments of about equal bytes): each task runs key_rows per segment
              and hands Spark Arrow record batches of
              (topic, partition, grp, key, offset, dirty) — columnar in and out of Python, no
              per-record Python objects and no pandas (mapInArrow needs pandas; a data source
              reader does not)
    retained  one groupBy(topic, partition, key) (retained_rows): the key's largest offset when
              seen dirty or once, else (several clean records only) all its offsets by a
              semi-join — full key bytes are the grouping key,
              so distinct keys never collide (Kafka's map compares MD5s); the surviving keyed
              records' (topic, partition, offset) are collected as Arrow and split per group
              and segment on the driver by base offsets
    rewrite   one item per source segment: rewrite_group(segment, its offsets) writes that
              segment's part of the cleaned group to a staging folder beside the log dir; every
              segment runs, with or without retained keys (empty batches, markers)

The driver joins each group's parts in offset order (a one-segment group's part is memory-
mapped, not copied), swaps each partition in Kafka's order (compact.swap_in) and removes the
staging folder. The byte work is the same code as the local
path (rewrite.py).
"""

from __future__ import annotations

import base64
import json
import mmap
import os
import pickle
import shutil
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from .plan import CleaningPlan, GroupTask
from .rewrite import GroupOutput, key_rows, rewrite_group

ROW_SCHEMA = "topic string, partition int, grp int, key binary, offset long, dirty boolean"
KEYS_SOURCE = "kafkalog_compaction_keys"
ROWS_PER_BATCH = 1 << 16
CHUNK_BYTES = 256 << 20  # most segment bytes per key-pass input partition, roughly
MAX_REWRITE_TASKS = 1024


def key_batches(task: GroupTask, max_rows: int = ROWS_PER_BATCH) -> Iterator[pa.RecordBatch]:
    """The key rows of one group as Arrow batches of :data:`ROW_SCHEMA` (what a key task hands
    Spark)."""
    rows = key_rows(task)
    offsets = rows.column("offset")
    n = rows.num_rows
    table = pa.table({
        "topic": pa.array([task.topic], pa.string()).take(np.zeros(n, np.int32)),
        "partition": pa.array(np.full(n, task.partition, np.int32)),
        "grp": pa.array(np.full(n, task.group, np.int32)),
        "key": rows.column("key"),
        "offset": offsets,
        "dirty": pc.greater_equal(offsets, task.first_dirty),
    })
    yield from table.to_batches(max_chunksize=max_rows)


class _KeyReader(DataSourceReader):
    def __init__(self, tasks: list[GroupTask]):
        self.tasks = tasks

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(chunk) for chunk in self.tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # pragma: no cover
        for task in partition.value:
            yield from key_batches(task)


class KeyRowsSource(DataSource):
    """Private data source of the key pass: option ``tasks`` holds the pickled chunks (one input
    partition each) of one-segment group tasks."""

    @classmethod
    def name(cls) -> str:
        return KEYS_SOURCE

    def schema(self) -> str:
        return ROW_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return _KeyReader(pickle.loads(base64.b64decode(self.options["tasks"])))


def split_retained(table: pa.Table, tasks: Sequence[GroupTask]
                   ) -> dict[tuple[str, int, int], np.ndarray]:
    """Sorted retained offsets per ``(topic, partition, group)`` of ``tasks`` from the collected
    ``(topic, partition, offset)`` rows (a group holds the offsets from its base offset to the
    next group's; every group present, maybe empty)."""
    by_tp: dict[tuple[str, int], list[GroupTask]] = {}
    for t in sorted(tasks, key=lambda t: (t.topic, t.partition, t.base_offset)):
        by_tp.setdefault((t.topic, t.partition), []).append(t)
    offsets_of: dict[tuple[str, int], np.ndarray] = {}
    if table.num_rows:
        table = table.sort_by([("topic", "ascending"), ("partition", "ascending"),
                               ("offset", "ascending")])
        topics = table.column("topic").combine_chunks().dictionary_encode()
        code = np.asarray(topics.indices.to_numpy(), np.int64)
        part = np.asarray(table.column("partition").to_numpy(), np.int64)
        offsets = np.asarray(table.column("offset").to_numpy(), np.int64)
        cut = np.flatnonzero((np.diff(code) != 0) | (np.diff(part) != 0)) + 1
        names = topics.dictionary.to_pylist()
        for lo, hi in zip(np.concatenate([[0], cut]), np.concatenate([cut, [len(offsets)]])):
            offsets_of[(names[code[lo]], int(part[lo]))] = offsets[lo:hi]
    out = {}
    for tp, groups in by_tp.items():
        offsets = offsets_of.get(tp, np.zeros(0, np.int64))
        cuts = np.searchsorted(offsets, [g.base_offset for g in groups[1:]])
        for g, mine in zip(groups, np.split(offsets, cuts)):
            out[(g.topic, g.partition, g.group)] = mine
    return out


def segment_tasks(task: GroupTask) -> list[GroupTask]:
    """One single-segment task per source segment of ``task`` (same group number): the key rows
    and the rewrite of a group are the concatenation of its segments' (rewrite.py works segment
    by segment), so segments are the unit of Spark parallelism even when a partition is one
    group."""
    return [replace(task, sources=(src,)) for src in task.sources]


def chunk_tasks(tasks: Sequence[GroupTask], n: int) -> list[list[GroupTask]]:
    """``tasks`` in at most ``n`` consecutive chunks of about equal bytes (on-disk size)."""
    sizes = np.array([sum(os.path.getsize(s.log) for s in t.sources) for t in tasks], np.float64)
    n = max(1, min(n, len(tasks)))
    edges = np.cumsum(sizes) / max(1.0, sizes.sum()) * n
    which = np.minimum(np.floor(edges - 1e-9).astype(np.int64), n - 1)
    chunks: list[list[GroupTask]] = [[] for _ in range(n)]
    for t, k in zip(tasks, which):
        chunks[k].append(t)
    return [c for c in chunks if c]


def split_segments(task: GroupTask, offsets: np.ndarray) -> list[tuple[GroupTask, np.ndarray]]:
    """The single-segment tasks of ``task`` with each one's slice of the group's sorted retained
    offsets (a segment holds offsets from its base to the next segment's base)."""
    subs = segment_tasks(task)
    bases = np.array([t.base_offset for t in subs[1:]], np.int64)
    cuts = np.searchsorted(offsets, bases)
    return list(zip(subs, np.split(offsets, cuts)))


def _rewrite(out_dir: str, item):  # pragma: no cover - runs in Spark workers
    task, offsets = item
    out = rewrite_group(task, offsets)
    path = Path(out_dir) / f"{task.topic}-{task.partition}-{task.group}-{out.base_offset}.log"
    with open(path, "wb") as f:
        f.write(out.log)
    return (task.topic, task.partition, task.group, out.base_offset, str(path), json.dumps(out.stats))


def retained_rows(rows: Any) -> pa.Table:
    """``(topic, partition, offset)`` of the surviving keyed records of the key rows ``rows``
    (a DataFrame of :data:`ROW_SCHEMA`), collected as Arrow.

    A key's latest dirty offset is its largest offset overall (clean offsets precede dirty
    ones), so it survives alone; a key absent from the dirty range keeps all its clean records.
    One hash aggregation (max, count — partial aggregation on the map side, no join) answers
    every key seen in the dirty range or once; only keys with several clean records and no
    dirty one (a clean range that was not compacted) take a second, semi-join pass.
    """
    from pyspark.sql import functions as F

    tp_key = ["topic", "partition", "key"]
    per_key = rows.groupBy(*tp_key).agg(F.max("offset").alias("offset"),
                                        F.count(F.lit(1)).alias("n"),
                                        F.max(F.col("dirty").cast("int")).alias("d"))
    single = (F.col("d") == 1) | (F.col("n") == 1)
    main = per_key.select("topic", "partition",
                          F.when(single, F.col("offset")).otherwise(F.lit(-1)).alias("offset"))
    table = main.toArrow()
    flagged = pc.equal(table.column("offset"), -1)
    if table.num_rows == 0 or not pc.any(flagged).as_py():
        return table
    multi = per_key.where(~single).select(*tp_key)
    extra = rows.join(multi, tp_key, "left_semi").select("topic", "partition", "offset")
    return pa.concat_tables([table.filter(pc.invert(flagged)), extra.toArrow()])


def rewrite_spark(plans: Sequence[CleaningPlan], stats: dict[str, float], *,
                  spark: Any = None) -> dict[tuple[str, int], list[GroupOutput]]:
    """Key shuffle and group rewrites with Spark (module docstring); returns the staged outputs
    per partition, memory-mapped (valid until the driver swaps them in)."""
    from pyspark.sql import functions as F

    if not plans:
        return {}
    if spark is None:
        from ..spark import session

        spark = session()
    log_dir = plans[0].state.log_dir
    staging = log_dir.parent / f"{log_dir.name}.kafkalog-compact-{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    tasks = {(g.topic, g.partition, g.group): g for p in plans for g in p.groups}
    sc = spark.sparkContext
    n_tasks = max(1, min(len(tasks), sc.defaultParallelism * 2))
    t0 = time.perf_counter()
    spark.dataSource.register(KeyRowsSource)
    singles = [t for g in tasks.values() for t in segment_tasks(g)]
    chunks = chunk_tasks(singles, max(sc.defaultParallelism * 2,
                                      sum(os.path.getsize(t.sources[0].log) for t in singles)
                                      // CHUNK_BYTES))
    blob = base64.b64encode(pickle.dumps(chunks)).decode("ascii")
    rows = spark.read.format(KEYS_SOURCE).option("tasks", blob).load()
    retained = retained_rows(rows)
    per_group = split_retained(retained, list(tasks.values()))
    t1 = time.perf_counter()
    out_dir = str(staging)
    items = [item for k in tasks for item in split_segments(tasks[k], per_group[k])]
    written = (sc.parallelize(items, min(max(n_tasks, len(items)), MAX_REWRITE_TASKS))
               .map(lambda item: _rewrite(out_dir, item)).collect())
    t2 = time.perf_counter()
    stats["shuffle_seconds"] = stats.get("shuffle_seconds", 0.0) + t1 - t0
    stats["rewrite_seconds"] = stats.get("rewrite_seconds", 0.0) + t2 - t1
    stats["retained_keyed_records"] = stats.get("retained_keyed_records", 0) + retained.num_rows
    parts: dict[tuple[str, int, int], list[tuple[int, str, dict]]] = {}
    for topic, part, grp, base, path, counts in sorted(written):
        parts.setdefault((topic, part, grp), []).append((base, path, json.loads(counts)))
    by_tp: dict[tuple[str, int], list[GroupOutput]] = {}
    for key in sorted(parts):
        task = tasks[key]
        counts = {}
        for _, _, c in parts[key]:
            for k, v in c.items():
                counts[k] = counts.get(k, 0) + v
                stats[k] = stats.get(k, 0) + v
        out = GroupOutput(task.base_offset, _join([p for _, p, _ in parts[key]]),
                          task.sources[-1].mtime, counts)
        by_tp.setdefault(key[:2], []).append(out)
    stats["_staging"] = str(staging)  # removed by the driver after the swaps
    return by_tp


def _map(path: str) -> memoryview | bytes:
    if not os.path.getsize(path):
        return b""
    with open(path, "rb") as f:
        return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))


def _join(paths: Sequence[str]) -> memoryview | bytes | bytearray:
    """One group's cleaned log from its segments' staged parts (memory-mapped when one)."""
    if len(paths) == 1:
        return _map(paths[0])
    out = bytearray()
    for path in paths:
        out += Path(path).read_bytes()
    return out


def remove_staging(stats: dict[str, Any]) -> None:
    """Delete the staging folder of a finished :func:`rewrite_spark`."""
    path = stats.pop("_staging", None)
    if path:
        shutil.rmtree(path, ignore_errors=False)
