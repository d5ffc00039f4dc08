"""Compaction as a Spark job (log-management layer): the key map as a shuffle, the rewrite as tasks.

    tasks     one row per segment group (a pickled GroupTask)
    rows      flatMap: key_rows(task) -> (topic, partition, group, key, offset, dirty) as a DataFrame
    latest    groupBy(topic, partition, key) over the dirty rows: max(offset) — full key bytes
              are the grouping key, so distinct keys never collide (Kafka's map compares MD5s)
    retained  rows left-joined with latest on (topic, partition, key), offset >= latest
              (or no latest): the keyed records that survive, per group
    rewrite   groupByKey((topic, partition, group)): rewrite_group(task, offsets) writes
              the cleaned segment to a staging folder beside the log dir; one sentinel row per
              group makes groups without a retained key still run (empty batches, markers)

The driver then swaps each partition in Kafka's order (compact.swap_in) from the staged files
and removes the staging folder. The byte work is the same code as the local path (rewrite.py).
"""

from __future__ import annotations

import mmap
import shutil
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .plan import CleaningPlan, GroupTask
from .rewrite import GroupOutput, key_rows, rewrite_group

ROW_SCHEMA = "topic string, partition int, grp int, key binary, offset long, dirty boolean"


def _extract(task: GroupTask):  # pragma: no cover - runs in Spark workers
    rows = key_rows(task)
    keys = rows.column("key").to_pylist()
    offsets = rows.column("offset").to_pylist()
    for key, offset in zip(keys, offsets):
        yield (task.topic, task.partition, task.group, key, offset, offset >= task.first_dirty)


def _rewrite(out_dir: str, tasks: dict, item):  # pragma: no cover - runs in Spark workers
    import json

    key, offsets = item
    arr = np.sort(np.fromiter((o for o in offsets if o >= 0), np.int64))
    out = rewrite_group(tasks[key], arr)
    path = Path(out_dir) / f"{key[0]}-{key[1]}-{out.base_offset}.log"
    with open(path, "wb") as f:
        f.write(out.log)
    return (key[0], key[1], key[2], out.base_offset, str(path), json.dumps(out.stats))


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
    # key extraction runs in Python tasks; the shuffle and join run in the JVM on full key bytes
    rows = spark.createDataFrame(
        sc.parallelize(list(tasks.values()), n_tasks).flatMap(_extract), ROW_SCHEMA)
    tp_key = ["topic", "partition", "key"]
    latest = rows.filter("dirty").groupBy(*tp_key).agg(F.max("offset").alias("latest"))
    retained = (rows.join(latest, tp_key, "left")
                .filter(F.col("offset") >= F.coalesce(F.col("latest"), F.lit(-1)))
                .select("topic", "partition", "grp", "offset")).persist()
    kept_keys = retained.count()
    t1 = time.perf_counter()
    sentinels = sc.parallelize([(k, -1) for k in tasks], n_tasks)
    out_dir = str(staging)
    written = (retained.rdd.map(lambda r: ((r[0], r[1], r[2]), r[3])).union(sentinels)
               .groupByKey(n_tasks).map(lambda item: _rewrite(out_dir, tasks, item)).collect())
    retained.unpersist()
    t2 = time.perf_counter()
    stats["shuffle_seconds"] = stats.get("shuffle_seconds", 0.0) + t1 - t0
    stats["rewrite_seconds"] = stats.get("rewrite_seconds", 0.0) + t2 - t1
    stats["retained_keyed_records"] = stats.get("retained_keyed_records", 0) + kept_keys
    import json

    by_tp: dict[tuple[str, int], list[GroupOutput]] = {}
    for topic, part, grp, base, path, counts in sorted(written):
        task = tasks[(topic, part, grp)]
        data = _map(path) if Path(path).stat().st_size else b""
        out = GroupOutput(base, data, task.sources[-1].mtime, json.loads(counts))
        for k, v in out.stats.items():
            stats[k] = stats.get(k, 0) + v
        by_tp.setdefault((topic, part), []).append(out)
    stats["_staging"] = str(staging)  # removed by the driver after the swaps
    return by_tp


def _map(path: str) -> memoryview:
    with open(path, "rb") as f:
        return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))


def remove_staging(stats: dict[str, Any]) -> None:
    """Delete the staging folder of a finished :func:`rewrite_spark`."""
    path = stats.pop("_staging", None)
    if path:
        shutil.rmtree(path, ignore_errors=False)
