"""Compaction as a Spark job (log-management layer): the key map as a shuffle of key digests,
the surviving offsets shuffled to the rewrite tasks, each writing one cleaned piece once.

A Spark job of three stages, then one of one (Python RDD tasks; Spark's shuffles move whole
Arrow tables and offset arrays, so the JVM does no work per record):

    keys      map tasks over chunks of consecutive segments (about :data:`KEY_CHUNK_BYTES`):
              decode the keyed records, digest the keys (128-bit MurmurHash3 in the numba
              kernel, codec/digest.py), combine per key and partition, and shuffle the rows by
              a bucket of the digest (key_shuffle.key_task). Distinct keys collide with a
              chance of about n²/2^129 (Kafka's own map compares 16-byte MD5s); ``exact_keys``
              shuffles the key bytes and groups by them instead
    retained  one reduce task per bucket (key_shuffle.bucket_count: bounded rows per task)
              finds the surviving records of its keys and shuffles their offsets by rewrite
              piece (key_shuffle.retained_task): the driver never holds per-record data; the
              pieces' descriptions go to the rewrite tasks as a broadcast
    rewrite   one task per piece of a group (consecutive segments of about
              :data:`CHUNK_BYTES`, so one big group still keeps every core busy): takes its
              piece's offsets from the shuffle, streams its segments' cleaned batches into a
              file of its own attempt in the staging folder (rewrite.py, the same code as the
              local path) and fsyncs it
    finish    one task per group (finish_task): its pieces joined into one file, in order
              (storage ``concat``; a group of one piece keeps its file), and the segment's
              ``.index`` and ``.timeindex`` built from it

The driver plans too with tasks (plan_spark: every partition's plan reads its segments' batch
headers). Task attempts never write into the log dir: a retried or speculative attempt (or one
Spark lost track of) writes its own ``<gid>-<piece>-<attempt>.log`` (joined:
``<gid>-<attempt>.log``, indexes ``<gid>-<attempt>.index``/``.timeindex``) in staging, so no
attempt can truncate a file another one wrote. The driver renames the files of the attempt
Spark returned to ``<partition dir>/<base>.log.cleaned`` (``.index.cleaned``,
``.timeindex.cleaned``; same file system: the staging folder is the log dir's sibling) and
swaps each partition in Kafka's order (compact.swap_in), which renames those files instead of
writing them again; the driver reads no segment. The replaced files (``.deleted``) are then
removed in tasks (:func:`remove_replaced`), as Kafka deletes a swap's old segments after it.
A crash
before the swap leaves ``.cleaned`` files that Kafka's log loading (and ``kafkalog recover`` /
the next compaction) disposes of; an error before the swap removes them and the staging folder
here — with every other attempt's output.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..codec.files import naming as N
from ..codec.files.index_rebuild import build_indexes
from ..datasource.executors import require_visible, task_attempt, task_errors
from ..errors import CorruptRecordError, Location
from ..log.staging import create_staging_dir, remove_staging_dir
from ..log.swap import remove_files
from ..storage import mapped_file, storage_for
from ..storage.atomic import disk_errors
from .cleaned import cleaned_path, cleaned_segments, write_cleaned
from .key_shuffle import bucket_count, key_task, most_rows, retained_task
from .plan import CleaningPlan, GroupTask, PlanAll
from .rewrite import GroupOutput

KEY_CHUNK_BYTES = 512 << 20  # most segment bytes per key-pass map task, roughly
KEY_CHUNK_ROWS = 8 << 20  # most key rows per map task (about 400 MB while it combines them)
CHUNK_BYTES = 256 << 20  # most segment bytes per rewrite piece, roughly
PLAN_CHUNK_BYTES = 256 << 20  # segment bytes whose partitions one planning task plans, roughly
REMOVE_CHUNK_FILES = 2048  # replaced files one task removes, roughly (a task costs ~0.07 s)
REMOVE_THREADS = 8  # removals at once in a task (they wait on the file system, not Python)


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


def plan_spark(spark: Any) -> PlanAll:
    """The partitions' planning (compact.plan_log_dir's ``plan_all``) as Spark tasks: it reads
    every segment's batch headers (producer state, transaction facts): 0.6 s per GB here, hours
    for a broker's 10 TB on the driver. Whole partitions in tasks of about
    :data:`PLAN_CHUNK_BYTES` (a Python task costs about 0.07 s in itself, so not one per small
    partition); the plans come back in order."""
    def plan_all(plan: Callable[..., Any], todo: list[tuple[Any, Any]]) -> list[Any]:
        if not todo:
            return []
        sc = spark.sparkContext
        total = sum(part.size for part, _ in todo)
        chunks = chunk_tasks(todo, -(-total // PLAN_CHUNK_BYTES), size=lambda item: item[0].size)
        with task_errors():  # a damaged segment's typed error, as the local planning raises it
            done = (sc.parallelize(chunks, len(chunks))
                    .map(lambda chunk: [_plan_task(plan, part, config) for part, config in chunk])
                    .collect())
        return [found for chunk in done for found in chunk]
    return plan_all


def _plan_task(plan: Callable[..., Any], part: Any, config: Any) -> Any:
    require_visible(part.path, "partition dir")
    return plan(part, config)


def rewrite_task(item: tuple[GroupTask, int, int, str],
                 shuffled: Iterable[tuple[int, np.ndarray]], out_dir: str
                 ) -> tuple[int, int, str, str, float]:
    """One piece of a group's rewrite as a Spark task runs it (:func:`rewrite_spark`): the
    piece's ``(task, gid, piece, partition dir)`` item and what the shuffle by piece delivered
    — its retained offsets from each reduce task of the key pass — its segments' cleaned
    batches streamed into this attempt's own file in ``out_dir`` (:func:`write_cleaned`).
    Returns ``(gid, piece, path, stats as JSON, start time)``."""
    started = time.time()
    parts = [offsets for _, offsets in shuffled]
    task, gid, piece, pdir = item
    require_visible(pdir, "partition dir")
    require_visible(out_dir, "staging folder next to the log dir")
    offsets = np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
    path = Path(out_dir) / f"{gid}-{piece}-{task_attempt()}.log"
    out = write_cleaned(task, offsets, pdir, path=path)
    return gid, piece, str(out.path), json.dumps(out.stats), started


def finish_task(out_dir: str, item: tuple[int, list[str], int, int]
                ) -> tuple[int, str, str, str, int]:
    """Make group ``gid``'s cleaned segment whole in this attempt's own files in ``out_dir``:
    its pieces joined in order (one piece: that file as it is), then its ``.index`` and
    ``.timeindex`` built as the swap builds a cleaned segment's (recovery's rule, every CRC
    checked: what a task wrote is never swapped in unread), so the driver only renames. The
    item: ``(gid, pieces, base offset, the topic's index.interval.bytes)``. Returns ``(gid,
    log, index, time index, the offset after the last batch)``."""
    gid, pieces, base_offset, interval = item
    require_visible(out_dir, "staging folder next to the log dir")
    stem = Path(out_dir) / f"{gid}-{task_attempt()}"
    log = pieces[0]
    fs = storage_for(log)
    if len(pieces) > 1:
        log = f"{stem}.log"
        with disk_errors("joining the pieces of a cleaned segment", log):
            fs.concat(pieces, log)
    with mapped_file(log) as buf:
        built = build_indexes(buf, base_offset, index_interval_bytes=interval, file=log)
    if built.stop_reason is not None:
        raise CorruptRecordError(f"a cleaned segment a task wrote does not read back "
                                 f"({built.stop_reason})",
                                 Location(log, built.valid_bytes, base_offset))
    paths = f"{stem}.{N.INDEX}", f"{stem}.{N.TIME_INDEX}"
    for path, index in zip(paths, (built.offset_index, built.time_index)):
        with disk_errors("writing a cleaned segment's index", path):
            fs.write_whole(path, index.to_bytes())
    return gid, log, *paths, built.next_offset


def remove_replaced(spark: Any, paths: Sequence[Path]) -> None:
    """Remove the files the swaps replaced (``.deleted``: compact.swap_all) in tasks of whole
    partition dirs, about :data:`REMOVE_CHUNK_FILES` files each (one fsync per folder:
    swap.remove_files). Each removal is one unlink, yet a round over a thousand partitions or
    small segments leaves tens of thousands: seconds of one driver's time (bench_scaling's
    4 GiB of 1 MiB segments: 12,246 files, 16 s summed over the 8 swap threads). A removal a
    retried attempt finds done is fine; if the job fails (a folder the executors cannot see),
    the driver removes them itself."""
    by_dir: dict[str, list[str]] = {}
    for path in paths:
        by_dir.setdefault(str(path.parent), []).append(str(path))
    if not by_dir:
        return
    sc = spark.sparkContext
    n = min(sc.defaultParallelism, -(-len(paths) // REMOVE_CHUNK_FILES))
    chunks = chunk_tasks(list(by_dir.items()), n, size=lambda d: len(d[1]))
    try:
        sc.parallelize(chunks, len(chunks)).foreach(_remove_task)
    except Exception:  # noqa: BLE001 (the swaps are done: whatever failed, remove them here)
        remove_files(paths, threads=REMOVE_THREADS)


def _remove_task(chunk: list[tuple[str, list[str]]]) -> None:
    for pdir, _ in chunk:
        require_visible(pdir, "partition dir")
    remove_files([f for _, files in chunk for f in files], threads=REMOVE_THREADS)


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


def _identity(bucket: int) -> int:
    return bucket


def _offset_span(items: Sequence[tuple[GroupTask, int, int, str]]) -> int:
    """Most key rows the groups ``items`` can hold: each partition's offsets from its first
    group's base to the round's upper bound."""
    lo: dict[int, int] = {}
    hi: dict[int, int] = {}
    for g, tp, _, _ in items:
        lo[tp] = min(lo.get(tp, g.base_offset), g.base_offset)
        hi[tp] = max(hi.get(tp, g.upper_bound), g.upper_bound)
    return sum(max(0, hi[tp] - lo[tp]) for tp in lo)


def group_items(plans: Sequence[CleaningPlan]) -> list[tuple[GroupTask, int, int, str]]:
    """Every group of ``plans`` as ``(task, tp, gid, partition dir)``, numbered in order."""
    items = []
    for tp, plan in enumerate(plans):
        for g in plan.groups:
            items.append((g, tp, len(items), str(plan.state.path)))
    return items


def _finish_groups(sc: Any, done: list[tuple[int, int, str, str]],
                   items: Sequence[tuple[GroupTask, int, int, str]],
                   plans: Sequence[CleaningPlan], out_dir: str
                   ) -> dict[int, tuple[tuple[str, str, str], int, dict[str, int]]]:
    """Per gid: the files of the group's cleaned segment (``.log``, ``.index``, ``.timeindex``:
    :func:`finish_task`), the offset after its last batch and its pieces' summed stats."""
    by_gid: dict[int, list[tuple[int, str, dict[str, int]]]] = {}
    for gid, piece, path, counts in done:
        by_gid.setdefault(gid, []).append((piece, path, json.loads(counts)))
    stats: dict[int, dict[str, int]] = {}
    todo = []
    for g, tp, gid, _ in items:
        parts = sorted(by_gid[gid])
        stats[gid] = {}
        for _, _, counts in parts:
            for k, v in counts.items():
                stats[gid][k] = stats[gid].get(k, 0) + v
        todo.append((gid, [p for _, p, _ in parts], g.base_offset,
                     plans[tp].config.index_interval_bytes))
    finished = (sc.parallelize(todo, len(todo))
                .map(lambda item: finish_task(out_dir, item)).collect())
    return {gid: (files, end, stats[gid]) for gid, *files, end in finished}


@contextlib.contextmanager
def rewrite_spark(plans: Sequence[CleaningPlan], stats: dict[str, float], *,
                  spark: Any, exact_keys: bool = False
                  ) -> Iterator[dict[tuple[str, int], list[GroupOutput]]]:
    """Key shuffle (by digest, or by key bytes with ``exact_keys``) and group rewrites with
    Spark (module docstring). Yields the outputs per partition, each naming its task-written
    ``.cleaned`` files (the ``.log`` and its two indexes, for the swaps); on leaving, removes
    the staging folder, and on an error the ``.cleaned`` files that were not swapped in."""
    if not plans:
        yield {}
        return
    items = group_items(plans)
    staging = create_staging_dir(plans[0].state.log_dir)
    attempts_dir = str(staging / "cleaned")  # every rewrite attempt's own output
    storage_for(attempts_dir).make_dirs(attempts_dir)
    try:
        with cleaned_segments() as files:
            sc = spark.sparkContext
            t0 = time.time()
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
            # fewer, larger chunks shuffle fewer rows; each holds its rows, so not too many
            rows = most_rows(_offset_span(items), total)
            chunks = chunk_tasks(singles, max(sc.defaultParallelism,
                                              -(-total // KEY_CHUNK_BYTES),
                                              -(-rows // KEY_CHUNK_ROWS)),
                                 size=lambda i: size(i[0]))
            buckets = bucket_count(rows, sc.defaultParallelism)
            first_dirty = {tp: g.first_dirty for g, tp, _, _ in items}
            # the last pieces of groups first: a group keeps most records (each key's latest)
            # near its end, so those take longest; started first, they do not finish last alone
            last = {gid: piece for _, gid, piece, _ in pieces}
            order = sorted(pieces, key=lambda p: (last[p[1]] - p[2], p[2]))
            rank = [0] * len(order)
            for i, (_, _, piece, _) in enumerate(order):
                rank[piece] = i
            with task_errors():  # a task's typed error (unreachable log dir, bad data) as is
                retained = (sc.parallelize(chunks, len(chunks))
                            .flatMap(lambda chunk: key_task(chunk, buckets, exact_keys))
                            .partitionBy(buckets, _identity)
                            .mapPartitions(lambda rows: retained_task(rows, first_dirty,
                                                                     exact_keys)))
                # the items reach the rewrite tasks as a broadcast (each Python worker loads
                # it once), not through the shuffle: a union with a parallelized list ran a
                # second Python worker beside each retained task (a nested Python RDD), so
                # a cold job started and warmed twice the workers it needed
                items_of = sc.broadcast(order)
                done = (retained.partitionBy(len(order), lambda piece: rank[piece])
                        .mapPartitionsWithIndex(lambda i, shuffled: [rewrite_task(
                            items_of.value[i], shuffled, attempts_dir)])
                        .collect())
                items_of.destroy()
                t1 = min(started for *_, started in done)
                finished = _finish_groups(sc, [d[:4] for d in done], items, plans, attempts_dir)
            t2 = time.time()
            # the key pass ends where the first rewrite task started (an executor's clock)
            t1 = min(max(t0, t1), t2)
            stats["shuffle_seconds"] = stats.get("shuffle_seconds", 0.0) + t1 - t0
            stats["rewrite_seconds"] = stats.get("rewrite_seconds", 0.0) + t2 - t1
            outputs: dict[tuple[str, int], list[GroupOutput]] = {}
            for g, tp, gid, pdir in items:
                attempts, end, counts = finished[gid]
                for attempt, kind in zip(attempts, (N.LOG, N.INDEX, N.TIME_INDEX)):
                    path = cleaned_path(pdir, g.base_offset, kind)
                    files.track(path)  # before the rename: an error from here on removes it
                    with disk_errors("moving a cleaned segment into its partition dir", path):
                        storage_for(path).rename(attempt, path)
                for k, v in counts.items():
                    stats[k] = stats.get(k, 0) + v
                outputs.setdefault(plans[tp].state.tp, []).append(GroupOutput(
                    g.base_offset, b"", g.sources[-1].mtime, counts,
                    path=str(cleaned_path(pdir, g.base_offset)), end_offset=end))
            files.swapping = True
            yield outputs
    finally:
        remove_staging_dir(staging)
