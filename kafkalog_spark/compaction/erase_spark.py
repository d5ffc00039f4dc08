"""Erase as a Spark job (log-management layer): every segment of the topic scanned — and, when it
holds matches, rewritten — by its own Spark task; the driver swaps the results in.

Each pass of the selection (one per key chunk, one for a predicate) is one Spark job over the
topic's segments, largest first. A task maps its segment, finds the matching records
(:func:`.erase_segment.erase_segment`, the same code as the local engine) and, when executing, writes
the rewritten segment to a file of its own attempt in a staging folder next to its log dir
(one per log dir). The driver — which holds every log dir's ``.lock`` for the run — renames
each file to ``<base>.log.cleaned`` and swaps it in with the crash-safe protocol, then removes
the staging folder. A failed job leaves the live segments untouched (nothing was swapped); the next run
redoes it. Executors must see the log dirs at the same paths (shared storage).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..datasource.executors import planned_files, require_visible, task_attempt, task_errors
from ..log.model import PartitionDir, Segment
from ..log.staging import create_staging_dir, remove_staging_dir
from ..storage import storage_for
from ..storage.atomic import disk_errors
from .cleaned import cleaned_path
from .erase_segment import PartitionErase, Step, erase_segment, rescan, swap_in
from .erase_select import Matcher, Selection

# (partition index, topic, partition, partition dir, segment, is the log's last segment,
#  the folder for this segment's rewrite: None in a dry run)
Item = tuple[int, str, int, str, Segment, bool, str | None]


def erase_spark(spark: Any, parts: Sequence[PartitionDir], selection: Selection, execute: bool,
                step: Step | None = None) -> list[PartitionErase]:
    """:func:`.erase.erase`'s per-partition work for ``parts`` (locks held, interrupted swaps
    finished by the caller) as Spark tasks; returns the audits in ``parts`` order."""
    audits = [PartitionErase(p.name) for p in parts]
    parts = list(parts)
    if not parts:
        return audits
    sc = spark.sparkContext
    # each log dir's rewritten segments are staged next to it (renamed into it: same file
    # system); a dry run or --check writes nothing, not even a staging folder
    roots = sorted({p.path.parent for p in parts}) if execute else []
    staging = {root: create_staging_dir(root) for root in roots}
    try:
        for root, folder in staging.items():
            storage_for(folder / "erased").make_dirs(folder / "erased")
        for matcher in selection.matchers():
            items = [(i, p.topic or "", p.partition or 0, str(p.path), seg,
                      seg is p.segments[-1],
                      str(staging[p.path.parent] / "erased") if execute else None)
                     for i, p in enumerate(parts) for seg in p.segments]
            items.sort(key=lambda it: -storage_for(it[4].log).size(it[4].log))
            slices = max(1, min(len(items), sc.defaultParallelism * 4))
            shared = sc.broadcast(matcher)  # a key chunk goes to each executor once
            try:
                with task_errors():  # a task's typed error (bad data, unreachable dir) as is
                    done = (sc.parallelize(items, slices)
                            .map(lambda it: _task(it, shared.value))
                            .collect())
            finally:
                shared.unpersist()
            _swap_all(parts, audits, done, step)
            if execute:
                parts = [rescan(p) for p in parts]
    finally:
        for folder in staging.values():
            remove_staging_dir(folder)
    return audits


def _task(item: Item, matcher: Matcher) -> tuple[int, Segment, np.ndarray, str | None]:
    """One segment, as a Spark task runs it: ``(partition index, segment, matching offsets,
    the file of this attempt's rewritten segment or None)``."""
    index, topic, partition, pdir, seg, last, out_dir = item
    require_visible(pdir, "partition dir")
    out = None
    if out_dir is not None:
        require_visible(out_dir, "staging folder next to the log dir")
        out = Path(out_dir) / f"{index}-{seg.base_offset}-{task_attempt()}.log"
    with planned_files(pdir):
        hits, written = erase_segment(topic, partition, seg, matcher, last_segment=last, out=out)
    return index, seg, hits, str(out) if written else None


def _swap_all(parts: list[PartitionDir], audits: list[PartitionErase],
              done: list[tuple[int, Segment, np.ndarray, str | None]], step: Step | None) -> None:
    """Count every task's matches; move each rewritten segment to its ``.cleaned`` name and
    swap it in (in offset order)."""
    moved: list[Path] = []
    try:
        for index, seg, hits, path in sorted(done, key=lambda d: (d[0], d[1].base_offset)):
            audits[index].add(seg, hits)
            if path is None:
                continue
            pdir = parts[index].path
            cleaned = cleaned_path(pdir, seg.base_offset)
            with disk_errors("moving an erased segment into its partition dir", cleaned):
                storage_for(cleaned).rename(path, cleaned)
            moved.append(cleaned)
            swap_in(pdir, seg, step)
    except BaseException:
        # a .cleaned file not yet swapped is only ours; Kafka's log loading would drop it too
        for path in moved:
            storage_for(path).remove(path, missing_ok=True)
        raise
