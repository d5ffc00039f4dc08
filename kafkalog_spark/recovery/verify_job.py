"""Verify as a Spark job (recovery layer): every segment of one or many log dirs checked in
parallel, segments as the unit of work.

The driver discovers the dirs (listings and ``stat`` only) and sends the segments to
:func:`~kafkalog_spark.log.verify.verify_segment` — the same function the local
:func:`~kafkalog_spark.log.verify.verify` calls — in one task per core holding an equal share
of bytes (:func:`balance`); a second, small stage runs
:func:`~kafkalog_spark.log.verify.verify_producer_state` per partition that has producer state (it replays segments in
order, so a partition is its unit). The driver then assembles the report exactly as the local
path does, so both give the same problems in the same order. Executors must see the same paths
(local mode, or a shared filesystem).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from ..log.discovery import discover
from ..log.verify import (SegmentCheck, VerifyReport, assemble_report, verify_producer_state,
                          verify_segment)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# one row per problem; file/position/base_offset locate it
PROBLEM_SCHEMA = ("severity string, check string, message string, file string, position long, "
                  "base_offset long")
SPARK_THRESHOLD_BYTES = 16 << 30  # `kafkalog verify` switches to Spark from this size on


def _segment_bin(units: list, deep: bool, check_indexes: bool) -> list[tuple[int, int, SegmentCheck]]:
    out = []
    for pi, si, seg, active, topic, partition in units:
        out.append((pi, si, verify_segment(seg, deep=deep, check_indexes=check_indexes,
                                           active=active, topic=topic, partition=partition)))
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


def verify_spark(spark: "SparkSession", paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                 *, deep: bool = False, check_indexes: bool = True,
                 tasks: int | None = None) -> VerifyReport:
    """:func:`~kafkalog_spark.log.verify.verify` as a Spark job.

    Parameters
    ----------
    spark : SparkSession
        From :func:`kafkalog_spark.spark.session`.
    paths : path or sequence of paths
        Log dirs, partition dirs or ``.log`` files.
    deep, check_indexes : bool
        As for the local verify.
    tasks : int, optional
        Number of Spark tasks for the segment stage (default: the default parallelism, one per
        core); segments are spread over them by size with :func:`balance`.

    Returns
    -------
    VerifyReport
        Identical to what the local verify returns for the same dirs.
    """
    found = discover(paths)
    parts = found.all_partition_dirs()
    units = [(pi, si, seg, si == len(part.segments) - 1, part.topic, part.partition)
             for pi, part in enumerate(parts) for si, seg in enumerate(part.segments)]
    sc = spark.sparkContext
    checks: list[list[Any]] = [[None] * len(p.segments) for p in parts]
    if units:
        bins = balance(units, tasks or sc.defaultParallelism)
        task = partial(_segment_bin, deep=deep, check_indexes=check_indexes)
        for pi, si, result in sc.parallelize(bins, len(bins)).flatMap(task).collect():
            checks[pi][si] = result
    # the producer-state stage only for partitions that have producer state to check
    states: list[list] = [[] for _ in parts]
    state_units = [(pi, part, checks[pi]) for pi, part in enumerate(parts)
                   if part.snapshots or any(c.producer_batches for c in checks[pi])
                   or (check_indexes and any(s.txnindex is not None for s in part.segments))]
    if state_units:
        n = max(1, min(len(state_units), sc.defaultParallelism))
        task = partial(_state_task, check_indexes=check_indexes)
        for pi, problems in sc.parallelize(state_units, n).map(task).collect():
            states[pi] = problems
    return assemble_report(found, paths, checks, states, deep=deep)


def problems_dataframe(spark: "SparkSession", report: VerifyReport) -> "DataFrame":
    """The report's problems as a DataFrame (:data:`PROBLEM_SCHEMA`)."""
    rows = [(p.severity, p.check, p.message, p.file, p.position, p.base_offset)
            for p in report.problems]
    return spark.createDataFrame(rows, PROBLEM_SCHEMA)
