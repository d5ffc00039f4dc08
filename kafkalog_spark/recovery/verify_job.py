"""Verify as a Spark job (recovery layer): every segment of one or many log dirs checked in
parallel.

The driver discovers the dirs (listings and ``stat`` only) and sends the work to
:func:`~kafkalog_spark.inspect.verify_segments.verify_segment` and
:func:`~kafkalog_spark.inspect.verify_partitions.verify_producer_state` — the same functions the local
:func:`~kafkalog_spark.inspect.verify.verify` calls — in one task per core holding an equal share
of bytes (:func:`balance`), or more tasks when a core's share would exceed
:data:`MAX_SEGMENTS_PER_TASK` segments (task memory stays flat as log dirs grow). Two shapes, chosen by :func:`plan_bins`:

* **whole partitions** (the usual case: many partitions) — one Spark job; a task checks its
  partitions' segments and then replays their producer state;
* **segments** (a few large partitions would leave cores idle) — a job over segments, then a
  small second job running the producer-state replay per partition that has producer state
  (it replays segments in order, so a partition is its unit).

Each Spark job costs ~0.1–0.25 s of fixed time here, which is why the whole-partition shape is
preferred whenever it balances (one job of two stages, the checks shuffled by partition to the
replays, was tried: the shuffle cost more than the second job, BENCHMARKS.md). The driver then
assembles the report exactly as the local path does, so both give the same problems in the
same order. Executors must see the same paths (local mode, or a shared filesystem).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from ..datasource.executors import require_visible, task_errors
from ..inspect.verify import VerifyReport, assemble_report
from ..inspect.verify_partitions import verify_producer_state
from ..inspect.verify_segments import SegmentCheck, verify_segment
from ..log.discovery import discover
from ..log.history import found_with_remote_tier
from ..tiered.tier import RemoteTier

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# one row per problem; file/position/base_offset locate it
PROBLEM_SCHEMA = ("severity string, check string, message string, file string, position long, "
                  "base_offset long")
SPARK_THRESHOLD_BYTES = 16 << 30  # `kafkalog verify` switches to Spark from this size on


BALANCE_SLACK = 1.15  # whole-partition bins may be this much above an even share of bytes
# a task checks at most about this many segments: its inputs and results are held until it
# ends, so one task per core over 40k segments grew each task by ~50 MB; more tasks cost
# ~65 ms each here (a tenth of a second per 2,000 segments checked in ~1 s)
MAX_SEGMENTS_PER_TASK = 2000


def _needs_state(part, checks: Sequence[SegmentCheck], check_indexes: bool) -> bool:
    """Whether a partition has producer state to check (snapshots, producer batches, txn indexes)."""
    return bool(part.snapshots or any(c.producer_batches for c in checks)
                or (check_indexes and any(s.txnindex is not None for s in part.segments)))


def _producer_state(part, checks: Sequence[SegmentCheck], check_indexes: bool) -> list:
    """A partition's producer-state problems, where it has producer state to check."""
    return (verify_producer_state(part, checks, check_indexes=check_indexes)
            if _needs_state(part, checks, check_indexes) else [])


def _check_segment(unit: tuple, deep: bool, check_indexes: bool) -> SegmentCheck:
    _, si, seg, active, topic, partition = unit
    return verify_segment(seg, deep=deep, check_indexes=check_indexes, active=active,
                          topic=topic, partition=partition)


def _log_dirs_visible(segments: Iterable[Any]) -> None:
    """In a task: every log dir of ``segments`` is reachable here (else PathNotSharedError,
    not a report of unreadable files)."""
    for log_dir in {seg.dir.parent for seg in segments}:
        require_visible(log_dir, "log dir")


def _segment_bin(units: list, deep: bool, check_indexes: bool) -> list[tuple[int, int, SegmentCheck]]:
    _log_dirs_visible(u[2] for u in units)
    return [(u[0], u[1], _check_segment(u, deep, check_indexes)) for u in units]


def _partition_bin(units: list, deep: bool, check_indexes: bool) -> list[tuple[int, list, list]]:
    _log_dirs_visible(u[2] for _, _, seg_units in units for u in seg_units)
    out = []
    for pi, part, seg_units in units:
        checks = [_check_segment(u, deep, check_indexes) for u in seg_units]
        out.append((pi, checks, _producer_state(part, checks, check_indexes)))
    return out


def _state_task(unit: tuple, check_indexes: bool) -> tuple[int, list]:
    pi, part, checks = unit
    return pi, verify_producer_state(part, checks, check_indexes=check_indexes)


def balance(units: list, n: int, size=lambda u: u[2].log_size) -> list[list]:
    """Split ``units`` into ``n`` bins of about equal bytes (largest first into the lightest
    bin): Spark's per-task cost (~50 ms on a busy machine) makes one task per core cheaper than
    one per segment."""
    bins: list[list] = [[] for _ in range(max(1, n))]
    load = [0] * len(bins)
    for u in sorted(units, key=lambda u: -size(u)):
        i = load.index(min(load))
        bins[i].append(u)
        load[i] += size(u)
    return [b for b in bins if b]


def plan_bins(parts: Sequence, n: int,
              max_segments: int = MAX_SEGMENTS_PER_TASK) -> tuple[str, list[list]]:
    """``("partitions", bins)`` when whole partitions fill the bins within
    :data:`BALANCE_SLACK` of an even share of bytes (one Spark job), else ``("segments",
    bins)``. There are ``n`` bins, or more when that would give a bin more than about
    ``max_segments`` segments. Partition units are ``(pi, part, segment units)``; segment
    units are ``(pi, si, segment, active, topic, partition)``."""
    seg_units = [[(pi, si, seg, si == len(part.segments) - 1, part.topic, part.partition)
                  for si, seg in enumerate(part.segments)] for pi, part in enumerate(parts)]
    part_units = [(pi, part, units) for pi, (part, units) in enumerate(zip(parts, seg_units))
                  if units]
    total = sum(p.size for p in parts)
    segments = sum(len(u) for u in seg_units)
    n = max(1, min(max(n, -(-segments // max_segments)), segments))
    whole = balance(part_units, n, size=lambda u: u[1].size)
    heaviest = max((sum(u[1].size for u in b) for b in whole), default=0)
    if len(whole) == n and heaviest <= BALANCE_SLACK * total / n:
        return "partitions", whole
    return "segments", balance([u for units in seg_units for u in units], n)


@task_errors()
def verify_spark(spark: "SparkSession", paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                 *, deep: bool = False, check_indexes: bool = True,
                 tasks: int | None = None, remote_tier: RemoteTier | None = None) -> VerifyReport:
    """:func:`~kafkalog_spark.inspect.verify.verify` as a Spark job.

    Parameters
    ----------
    spark : SparkSession
        From :func:`kafkalog_spark.spark.session`.
    paths : path or sequence of paths
        Log dirs, partition dirs or ``.log`` files.
    deep, check_indexes, remote_tier : optional
        As for the local verify.
    tasks : int, optional
        Number of Spark tasks (default: the default parallelism, one per core; more when a
        task would check over :data:`MAX_SEGMENTS_PER_TASK` segments); whole partitions or
        segments are spread over them by size (:func:`plan_bins`).

    Returns
    -------
    VerifyReport
        Identical to what the local verify returns for the same dirs.
    """
    found = found_with_remote_tier(discover(paths), remote_tier)
    parts = found.all_partition_dirs()
    sc = spark.sparkContext
    checks: list[list[Any]] = [[None] * len(p.segments) for p in parts]
    states: list[list] = [[] for _ in parts]
    for pi, part in enumerate(parts):  # no segment, so in no task: its snapshots, if any
        if not part.segments:
            states[pi] = _producer_state(part, [], check_indexes)
    shape, bins = plan_bins(parts, tasks or sc.defaultParallelism)
    if bins and shape == "partitions":
        task = partial(_partition_bin, deep=deep, check_indexes=check_indexes)
        for pi, seg_checks, state in sc.parallelize(bins, len(bins)).flatMap(task).collect():
            checks[pi], states[pi] = seg_checks, state
        return assemble_report(found, paths, zip(checks, states), deep=deep)
    if bins:
        task = partial(_segment_bin, deep=deep, check_indexes=check_indexes)
        for pi, si, result in sc.parallelize(bins, len(bins)).flatMap(task).collect():
            checks[pi][si] = result
    state_units = [(pi, part, checks[pi]) for pi, part in enumerate(parts)
                   if part.segments and _needs_state(part, checks[pi], check_indexes)]
    if state_units:
        n = max(1, min(len(state_units), sc.defaultParallelism))
        task = partial(_state_task, check_indexes=check_indexes)
        for pi, problems in sc.parallelize(state_units, n).map(task).collect():
            states[pi] = problems
    return assemble_report(found, paths, zip(checks, states), deep=deep)


def problems_dataframe(spark: "SparkSession", report: VerifyReport) -> "DataFrame":
    """The report's problems as a DataFrame (:data:`PROBLEM_SCHEMA`)."""
    rows = [(p.severity, p.check, p.message, p.file, p.position, p.base_offset)
            for p in report.problems]
    return spark.createDataFrame(rows, PROBLEM_SCHEMA)
