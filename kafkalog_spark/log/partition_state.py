"""Partition state (log layer): log start, log end, high watermark and per-segment facts,
read from a stopped broker's files — what retention, compaction and recovery plan from.

What a broker holds in memory after loading (KAFKA_FORMATS §12), recomputed offline:

* log start offset = ``max(log-start-offset-checkpoint entry, first segment base)``;
* log end offset (LEO) = last offset of the last segment's last entry + 1 (else its base);
* high watermark = ``replication-offset-checkpoint`` entry clamped to ``[log start, LEO]``;
  a partition without an entry gets the log start offset (``UnifiedLog`` initialises the HW
  there), which blocks every HW-guarded deletion until a checkpoint exists;
* a segment's largest timestamp = its time index's last timestamp if ≥ 0, else the ``.log``
  mtime (``LogSegment.largestTimestamp``); a missing time index is recomputed from the batch
  headers, as the broker would rebuild it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..codec.files import checkpoints as C
from ..codec.files import naming as N
from ..codec.files.index import read_time_index
from ..codec.records.scan import scan_entries
from ..errors import InvalidOptionError
from ..storage import as_path, mapped_file
from ..storage.atomic import read_checkpoint_file
from .model import PartitionDir, Segment


@dataclass(frozen=True)
class SegmentState:
    """One segment as log management sees it."""

    base_offset: int
    size: int
    largest_timestamp: int
    mtime_ms: int
    segment: Segment


@dataclass(frozen=True)
class PartitionState:
    """One partition's offsets and segments (oldest first; the last one is the active segment)."""

    topic: str
    partition: int
    path: Path
    log_dir: Path
    segments: tuple[SegmentState, ...]
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    high_watermark_known: bool

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)


def read_offsets(log_dir: str | os.PathLike[str], name: str) -> dict[tuple[str, int], int]:
    """One of the log dir's offset checkpoint files (missing = empty, as Kafka reads it)."""
    return read_checkpoint_file(as_path(log_dir) / name, C.parse_offset_checkpoint)


def checkpointed_log_starts(parts: Iterable[PartitionDir]) -> dict[Path, int]:
    """The log start offset each live partition's log dir checkpoints for it (Kafka's
    ``log-start-offset-checkpoint``, advanced by ``DeleteRecords`` and retention), keyed by the
    partition dir; each log dir's file is read once. A consumer cannot fetch below it: the
    records still on disk under it are deleted in Kafka's view."""
    by_log_dir: dict[Path, dict[tuple[str, int], int]] = {}
    out: dict[Path, int] = {}
    for part in parts:
        if part.kind is not None or part.topic is None or part.partition is None:
            continue  # -delete/-future/-stray copies and loose segments have no entry
        log_dir = as_path(part.path).parent
        if log_dir not in by_log_dir:
            by_log_dir[log_dir] = read_offsets(log_dir, N.LOG_START_OFFSET_CHECKPOINT)
        start = by_log_dir[log_dir].get((part.topic, part.partition))
        if start is not None:
            out[part.path] = start
    return out


def at_log_start(start: int | None, log_start: int | None) -> int | None:
    """A read's inclusive start offset moved up to the log start offset (``None``: none)."""
    if log_start is None:
        return start
    return log_start if start is None else max(start, log_start)


def segment_next_offset(seg: Segment) -> int:
    """Last offset of the segment's last valid entry + 1, or its base offset when empty."""
    with mapped_file(seg.log) as buf:
        table = scan_entries(buf)
        return int(table.last_offset[-1]) + 1 if len(table) else seg.base_offset


def largest_timestamp(seg: Segment) -> int:
    """``LogSegment.largestTimestamp`` (module docstring)."""
    mtime_ms = int(seg.mtime * 1000)
    if seg.timeindex is not None and seg.timeindex_size:
        with mapped_file(seg.timeindex) as buf:
            ts, _ = read_time_index(buf, seg.base_offset, file=str(seg.timeindex)).last_entry()
    else:
        with mapped_file(seg.log) as buf:
            table = scan_entries(buf)
            ts = int(np.max(table.max_timestamp)) if len(table) else -1
    return ts if ts >= 0 else mtime_ms


HIGH_WATERMARK_SOURCES = ("checkpoint", "log-end")


def check_high_watermark_source(source: str) -> str:
    """``source`` if it is one of :data:`HIGH_WATERMARK_SOURCES`, else InvalidOptionError."""
    if source not in HIGH_WATERMARK_SOURCES:
        raise InvalidOptionError(f"high watermark must be one of "
                                 f"{', '.join(HIGH_WATERMARK_SOURCES)}; got {source!r}")
    return source


def partition_state(part: PartitionDir, log_dir: str | os.PathLike[str], *,
                    log_start: dict[tuple[str, int], int] | None = None,
                    replication: dict[tuple[str, int], int] | None = None,
                    timestamps: bool = True,
                    high_watermark: str = "checkpoint") -> PartitionState:
    """Compute :class:`PartitionState` for one live partition dir.

    Parameters
    ----------
    part : PartitionDir
        From :func:`kafkalog_spark.log.discovery.discover` (must have a topic and partition).
    log_dir : path
        Its log dir (checkpoint files).
    log_start, replication : dict, optional
        Pre-read ``log-start-offset-checkpoint`` / ``replication-offset-checkpoint``.
    timestamps : bool
        Read each segment's largest timestamp (time index), which retention.ms needs.
    high_watermark : {"checkpoint", "log-end"}
        Where the high watermark comes from: Kafka's rule, ``replication-offset-checkpoint``
        (absent: the log start offset, which blocks cleaning and deletion), or the log end
        offset — for a copied log dir that no broker will load again, where "everything
        written is replicated" is the offline user's own decision.
    """
    assert part.topic is not None and part.partition is not None
    tp = (part.topic, part.partition)
    if log_start is None:
        log_start = read_offsets(log_dir, N.LOG_START_OFFSET_CHECKPOINT)
    if replication is None:
        replication = read_offsets(log_dir, N.REPLICATION_OFFSET_CHECKPOINT)
    segs = sorted(part.segments, key=lambda s: s.base_offset)
    states = tuple(SegmentState(s.base_offset, s.log_size,
                                largest_timestamp(s) if timestamps else -1,
                                int(s.mtime * 1000), s) for s in segs)
    first = segs[0].base_offset if segs else 0
    leo = segment_next_offset(segs[-1]) if segs else 0
    start = max(log_start.get(tp, first), first)
    hw = leo if check_high_watermark_source(high_watermark) == "log-end" else replication.get(tp)
    known = hw is not None
    hw = min(max(start if hw is None else hw, start), leo)
    return PartitionState(part.topic, part.partition, part.path, as_path(log_dir), states, start,
                          leo, hw, known)
