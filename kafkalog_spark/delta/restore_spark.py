"""Restore as Spark tasks (Delta layer): a partition per task, or a big partition in offset
ranges — each range's batches into a piece file, one last task joining the pieces into the
segments the library path writes — each partition then deriving its own files.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path

from ..codec.records.scan import scan_segment
from ..datasource.executors import task_attempt
from ..storage import storage_for
from .restore_read import Survey, Tp, feed
from .restore_write import (PIECE_SUFFIX, PartitionRestore, PieceWriter, SegmentWriter, Writer,
                            open_partition, partition_dir, remove_unfinished,
                            write_metadata)

RANGE_COST = 160 << 20
"""The least work of one offset range, in :attr:`Survey.cost` units (table bytes weighted by
codec; this is about 128 MiB of a zstd partition's table, 67 MiB of a gzip one's): a partition
is cut into ranges only where it holds more than its share of the restore on the session's
slots, and never finer than this (:func:`range_cost`)."""


def restore_spark(spark, found: Mapping[Path, Mapping[Tp, Survey]], dest: Path,
                  segment_bytes: int, topic_ids: Mapping[str, str]
                  ) -> list[tuple[PartitionRestore, tuple[int, int] | None]]:
    """Restore as Spark tasks: a partition per task, but one holding more than
    :func:`range_cost` of work is restored in offset ranges of about that cost, each
    range task encoding its batches into a piece file of its own attempt, then one task per
    partition joins the pieces into segments (the rule the library path uses: the same bytes)
    and derives the partition's files. With ``(restored, (first base, log end))``."""
    target = range_cost([s.cost for parts in found.values() for s in parts.values()],
                        spark.sparkContext.defaultParallelism)
    work, joins = [], []  # (weight, task) and (weight, join)
    for table, parts in found.items():
        for tp, survey in parts.items():
            bounds = ranges(survey, target)
            if len(bounds) == 1:
                work.append((survey.cost, ("whole", (table, tp, survey))))
                continue
            open_partition(dest, tp)  # here, not in tasks: range tasks write there at once
            joins.append((survey.bytes, (tp, survey.start, len(bounds))))
            work += [(survey.cost // len(bounds), ("range", (table, tp, survey, k, lo, hi)))
                     for k, (lo, hi) in enumerate(bounds)]
    sc = spark.sparkContext
    task = partial(_restore_task, dest=dest, segment_bytes=segment_bytes, topic_ids=topic_ids)
    done = sc.parallelize(_biggest_first(work), len(work)).map(task).collect() if work else []
    out = [d for kind, d in done if kind == "whole"]
    pieces: dict[Tp, dict[int, tuple[PartitionRestore, str]]] = {}
    for k, part, piece in (d for kind, d in done if kind == "range"):
        pieces.setdefault((part.topic, part.partition), {})[k] = (part, piece)
    if joins:
        join = partial(_join_task, dest=dest, segment_bytes=segment_bytes, topic_ids=topic_ids)
        out += sc.parallelize([(tp, start, [pieces[tp][k] for k in range(n)])
                               for tp, start, n in _biggest_first(joins)], len(joins)
                              ).map(join).collect()
    return out


def _biggest_first(weighted: list[tuple[int, tuple]]) -> list[tuple]:
    """The tasks, heaviest first: Spark starts a stage's tasks in order, so a long task
    started last would run on alone while the other slots idle."""
    return [t for _, t in sorted(weighted, key=lambda w: -w[0])]


def range_cost(costs: list[int], slots: int) -> int:
    """The work of one offset range: a slot's share of the restore (``costs``: each
    partition's :attr:`Survey.cost`), at least :data:`RANGE_COST`. Cutting a partition costs
    a task per range, a join and reading each range's boundary row groups twice (about a fifth
    more work in all, measured at 45 MiB ranges: BENCHMARKS.md), so it is done only where one
    partition would otherwise keep a slot busy longer than the others: many partitions on few
    slots are not cut at all."""
    return max(RANGE_COST, -(-sum(costs) // max(1, slots)))


def ranges(found: Survey, target: int) -> list[tuple[int | None, int | None]]:
    """The ``batchBaseOffset`` ranges ``[lo, hi)`` (None: unbounded) a partition is restored
    in: one, unless its :attr:`Survey.cost` exceeds ``target``; then equal offset spans from its
    first offset on."""
    n = min(-(-found.cost // target), found.last + 1 - found.first)
    if n <= 1:
        return [(None, None)]
    span = -(-(found.last + 1 - found.first) // n)
    cuts = [found.first + span * i for i in range(1, n)]
    return list(zip([None, *cuts], [*cuts, None]))


def _restore_task(work: tuple[str, tuple], *, dest: Path, segment_bytes: int,
                  topic_ids: Mapping[str, str]) -> tuple[str, tuple]:
    """One Spark task of :func:`restore_spark`: a whole partition, or an offset range of
    one."""
    kind, args = work
    if kind == "whole":
        return kind, _whole_partition(*args, dest=dest, segment_bytes=segment_bytes,
                                      topic_ids=topic_ids)
    return kind, _range_piece(*args, dest=dest)


def _whole_partition(table: Path, tp: Tp, found: Survey, *, dest: Path, segment_bytes: int,
                     topic_ids: Mapping[str, str]
                     ) -> tuple[PartitionRestore, tuple[int, int] | None]:
    """A partition restored in one task: its rows only (pushed down by partition), then its
    derived files as ``recover`` would write them after the driver's checkpoints (the driver
    does not read every restored segment again alone); with ``(first base, log end)``."""
    sink = Writer.segments(dest, tp, segment_bytes, None)
    feed(table, {tp: sink}, {tp: found}, tp[1])
    return _derived(sink.close(topic_ids[tp[0]], None), sink.pdir)


def _derived(done: PartitionRestore, pdir: Path
             ) -> tuple[PartitionRestore, tuple[int, int] | None]:
    from ..recovery.recover import recover_written_partition

    return done, (recover_written_partition(pdir, done.end) if done.segments else None)


def _range_piece(table: Path, tp: Tp, found: Survey, k: int, lo: int | None, hi: int | None,
                 *, dest: Path) -> tuple[int, PartitionRestore, str]:
    """The batches of ``tp`` whose base offset is in ``[lo, hi)`` (its range ``k``), encoded
    into a piece file of this task attempt (another attempt of the range writes its own);
    with ``k`` and the piece's path."""
    pdir = partition_dir(dest, tp)
    piece = pdir / f"{lo or 0:020d}-{task_attempt()}{PIECE_SUFFIX}"
    sink = Writer(pdir, tp, found.start, PieceWriter(piece))
    feed(table, {tp: sink}, {tp: found}, tp[1], lo, hi)
    sink.out.close()
    return k, sink.result, str(piece)


def _join_task(work: tuple[Tp, int, list[tuple[PartitionRestore, str]]], *, dest: Path,
               segment_bytes: int, topic_ids: Mapping[str, str]
               ) -> tuple[PartitionRestore, tuple[int, int] | None]:
    """The last task of a partition restored in ranges: its pieces' batches, in offset order,
    into segments as :class:`SegmentWriter` cuts them, the partition's pieces removed, then
    the derived files; with ``(first base, log end)``."""
    tp, start, pieces = work
    pdir = partition_dir(dest, tp)
    fs = storage_for(pdir)
    out = PartitionRestore(tp[0], tp[1], start, start)
    segments = SegmentWriter(pdir, segment_bytes, None)
    for part, piece in pieces:
        out.records += part.records
        out.batches += part.batches
        out.bytes += part.bytes
        out.end = max(out.end, part.end)
        with fs.mapped(piece) as buf:
            found = scan_segment(buf, piece)
        with fs.open_read(piece) as src:
            segments.copy(src, found)
    out.segments = segments.close()
    remove_unfinished(pdir)  # these pieces, and those of failed attempts
    write_metadata(pdir, topic_ids[tp[0]], None)
    return _derived(out, pdir)
