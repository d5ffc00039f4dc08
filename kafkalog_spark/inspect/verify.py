"""Verification (inspect layer): can this log dir be trusted? Every problem located to the byte.
Holds the public :func:`verify`, its :class:`VerifyReport` and the log-dir checkpoint checks;
the segment checks are in :mod:`.verify_segments`, the partition checks in :mod:`.verify_partitions`.

Per segment (:func:`verify_segment`, the unit of parallel work): structure, CRCs, offsets,
optionally records, and the index files against the log. Per partition
(:func:`check_segment_sequence`, :func:`check_leader_epochs`, :func:`verify_producer_state`):
offsets across segments, leader epochs, ``.txnindex`` files and producer snapshots against a
replay of the batch headers, leftovers and orphaned indexes.

Per log dir (:func:`verify_log_dir_files`): checkpoint files parse and are sane — recovery point
and high watermark ≤ log end, log start within the log, cleaner checkpoint in range (§11.3).

Read-only: files are memory-mapped read-only and nothing is written. :func:`verify` runs it all
in this process; :mod:`kafkalog_spark.recovery.verify_job` runs the same functions as a Spark job.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field

from ..codec.files import checkpoints as C
from ..codec.files import naming as N
from ..errors import KafkaLogError
from ..log.discovery import discover
from ..log.history import found_with_remote_tier
from ..log.model import LogDir
from ..storage import storage_for
from ..storage.atomic import read_checkpoint_file
from ..tiered.tier import RemoteTier
from .verify_partitions import (_partition_file_problems, check_leader_epochs,
                                check_segment_sequence, partition_bounds, verify_producer_state)
from .verify_segments import ERROR, WARNING, Problem, SegmentCheck, _from_error, verify_segment


@dataclass
class VerifyReport:
    """Everything :func:`verify` found, with counts of what it looked at."""

    problems: list[Problem] = field(default_factory=list)
    partitions: int = 0
    segments: int = 0
    bytes: int = 0
    batches: int = 0
    records: int | None = None  # counted only with deep=True

    @property
    def ok(self) -> bool:
        """No error-severity problem (warnings allowed)."""
        return not any(p.severity == ERROR for p in self.problems)

    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == ERROR]

    def to_dict(self) -> dict:
        return {"ok": self.ok, "partitions": self.partitions, "segments": self.segments,
                "bytes": self.bytes, "batches": self.batches, "records": self.records,
                "problems": [asdict(p) for p in self.problems]}


def verify(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
           deep: bool = False, check_indexes: bool = True,
           remote_tier: RemoteTier | None = None) -> VerifyReport:
    """Verify log dirs, partition dirs or single ``.log`` files.

    Parameters
    ----------
    paths : path or sequence of paths
        What to check (as :func:`~kafkalog_spark.log.discovery.discover` accepts).
    deep : bool
        Also decompress every batch and parse every record.
    check_indexes : bool
        Check ``.index``, ``.timeindex`` and ``.txnindex`` against their logs.
    remote_tier : RemoteTier, optional
        Tiered storage: each partition's remote segments are checked too, before its local
        ones, and how they join is reported (gaps, overlaps, segments left out).

    Returns
    -------
    VerifyReport
        ``report.ok`` is False when any error-severity problem was found.
    """
    found = found_with_remote_tier(discover(paths), remote_tier)

    def results() -> Iterator[tuple[list[SegmentCheck], list[Problem]]]:
        # one partition at a time: the report keeps its problems, not every segment's check
        for part in found.all_partition_dirs():
            checks = [verify_segment(seg, deep=deep, check_indexes=check_indexes,
                                     active=i == len(part.segments) - 1, topic=part.topic,
                                     partition=part.partition)
                      for i, seg in enumerate(part.segments)]
            yield checks, verify_producer_state(part, checks, check_indexes=check_indexes)

    return assemble_report(found, paths, results(), deep=deep)


def assemble_report(found, paths,
                    results: Iterable[tuple[Sequence[SegmentCheck], Sequence[Problem]]], *,
                    deep: bool) -> VerifyReport:
    """Combine per-partition results — each partition's segment checks and producer-state
    problems, computed here or by Spark tasks, in ``found.all_partition_dirs()`` order — with
    the log-dir checks into one report."""
    report = VerifyReport(records=0 if deep else None)
    parts = found.all_partition_dirs()
    ends: dict[str, dict[tuple[str, int], tuple[int, int]]] = {}
    for part, (seg_checks, state) in zip(parts, results, strict=True):
        report.partitions += 1
        report.problems.extend(_partition_file_problems(part))
        for c in seg_checks:
            report.segments += 1
            report.bytes += c.bytes
            report.batches += c.batches
            if deep:
                report.records = (report.records or 0) + (c.records or 0)
            report.problems.extend(c.problems)
        report.problems.extend(check_segment_sequence(part.segments, seg_checks))
        if part.segments:
            report.problems.extend(check_leader_epochs(part, partition_bounds(part, seg_checks)[1]))
        report.problems.extend(state)
        if part.topic is not None and part.partition is not None and part.kind is None:
            ends.setdefault(str(part.path.parent), {})[(part.topic, part.partition)] = \
                partition_bounds(part, seg_checks)
    for log_dir in found.log_dirs:
        report.problems.extend(verify_log_dir_files(log_dir, ends.get(str(log_dir.path), {})))
    if report.partitions == 0:
        report.problems.append(Problem(WARNING, "files", "no partition dirs or segments found "
                                       "(is this the log dir named in log.dirs?)",
                                       ", ".join(str(p) for p in _as_list(paths))))
    for dup in found.duplicates:
        if not dup.is_move:
            report.problems.append(Problem(
                ERROR, "files", f"{dup.topic}-{dup.partition} is present in several log dirs: "
                + ", ".join(str(p) for p in dup.paths)))
    return report


def _as_list(paths) -> list:
    return [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)


# --- per log dir ------------------------------------------------------------------------------


def verify_log_dir_files(log_dir: LogDir, ends: dict[tuple[str, int], tuple[int, int]]) -> list[Problem]:
    """Checkpoint files of one log dir parse, and their offsets fit the logs: recovery point and
    high watermark ≤ log end offset, log start offset within ``[first base, log end]``, cleaner
    checkpoint within ``[log start, log end]``.

    Parameters
    ----------
    log_dir : LogDir
        As discovered.
    ends : dict
        ``{(topic, partition): (first segment base offset, log end offset)}`` of its partitions.
    """
    problems: list[Problem] = []
    values: dict[str, dict[tuple[str, int], int]] = {}
    for name in N.CHECKPOINT_FILES:
        path = log_dir.path / name
        if storage_for(path).exists(path):
            try:
                values[name] = read_checkpoint_file(path, C.parse_offset_checkpoint)
            except KafkaLogError as exc:
                problems.append(_from_error(exc, "checkpoint"))
    for path in log_dir.leftovers:
        problems.append(Problem(WARNING, "files", "leftover temporary file of an "
                                "interrupted checkpoint write", str(path)))
    for path in log_dir.unknown:
        if storage_for(path).is_dir(path):
            problems.append(Problem(ERROR, "files", "directory whose name is not "
                                    "<topic>-<partition>: a broker would take this log dir "
                                    "offline", str(path)))
    starts = values.get(N.LOG_START_OFFSET_CHECKPOINT, {})
    for name, offsets in values.items():
        file = str(log_dir.path / name)
        for tp, offset in sorted(offsets.items()):
            if tp not in ends:
                continue
            first, leo = ends[tp]
            log_start = max(starts.get(tp, first), first)
            where = f"{tp[0]}-{tp[1]}: {name} holds {offset}"
            if name in (N.RECOVERY_POINT_CHECKPOINT, N.REPLICATION_OFFSET_CHECKPOINT) and offset > leo:
                problems.append(Problem(ERROR, "checkpoint", f"{where}, beyond the log end offset "
                                        f"{leo}", file, None, offset))
            elif name == N.LOG_START_OFFSET_CHECKPOINT and offset > leo:
                problems.append(Problem(ERROR, "checkpoint", f"{where}, beyond the log end offset "
                                        f"{leo} (a broker would delete every segment)", file, None,
                                        offset))
            elif name == N.LOG_START_OFFSET_CHECKPOINT and offset < first:
                problems.append(Problem(WARNING, "checkpoint", f"{where}, below the first segment's "
                                        f"base offset {first} (ignored by a broker, unless tiered "
                                        "storage holds these offsets in a remote tier: "
                                        "--remote-tier)", file, None, offset))
            elif name == N.CLEANER_OFFSET_CHECKPOINT and offset > leo:
                problems.append(Problem(ERROR, "checkpoint", f"{where}, beyond the log end offset "
                                        f"{leo}", file, None, offset))
            elif name == N.CLEANER_OFFSET_CHECKPOINT and offset < log_start:
                problems.append(Problem(WARNING, "checkpoint", f"{where}, below the log start "
                                        f"offset {log_start} (the cleaner resets it)", file, None,
                                        offset))
    return problems
