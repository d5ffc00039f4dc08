"""Verify as a Spark job (recovery layer): every segment of one or many log dirs checked in
parallel, segments as the unit of work.

The driver discovers the dirs (listings and ``stat`` only) and sends one task per segment to
:func:`~kafkalog_spark.log.verify.verify_segment` — the same function the local
:func:`~kafkalog_spark.log.verify.verify` calls — largest segments first so the slowest tasks
start early; a second, small stage runs
:func:`~kafkalog_spark.log.verify.verify_producer_state` per partition (it replays segments in
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


def _segment_task(unit: tuple, deep: bool, check_indexes: bool) -> tuple[int, int, SegmentCheck]:
    pi, si, seg, active, topic, partition = unit
    return pi, si, verify_segment(seg, deep=deep, check_indexes=check_indexes, active=active,
                                  topic=topic, partition=partition)


def _state_task(unit: tuple, check_indexes: bool) -> tuple[int, list]:
    pi, part, checks = unit
    return pi, verify_producer_state(part, checks, check_indexes=check_indexes)


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
        Number of Spark tasks for the segment stage (default 4 × default parallelism, at most
        one per segment).

    Returns
    -------
    VerifyReport
        Identical to what the local verify returns for the same dirs.
    """
    found = discover(paths)
    parts = found.all_partition_dirs()
    units = [(pi, si, seg, si == len(part.segments) - 1, part.topic, part.partition)
             for pi, part in enumerate(parts) for si, seg in enumerate(part.segments)]
    units.sort(key=lambda u: -u[2].log_size)
    sc = spark.sparkContext
    checks: list[list[Any]] = [[None] * len(p.segments) for p in parts]
    if units:
        n = max(1, min(len(units), tasks or sc.defaultParallelism * 4))
        task = partial(_segment_task, deep=deep, check_indexes=check_indexes)
        for pi, si, result in sc.parallelize(units, n).map(task).collect():
            checks[pi][si] = result
    states: list[list] = [[] for _ in parts]
    state_units = [(pi, part, checks[pi]) for pi, part in enumerate(parts)]
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
