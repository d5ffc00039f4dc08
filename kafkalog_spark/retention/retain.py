"""Retention (log-management layer): ``UnifiedLog.deleteOldSegments`` offline (KAFKA_FORMATS §14).

Planning, per partition, in Kafka's order — each pass deletes a prefix of what is left::

    logStartOffsetBreach  S deletable iff its successor's base offset <= log start offset
    retentionSizeBreach   (policy has delete, retention.bytes >= 0, size >= retention.bytes)
                          diff = size - retention.bytes; S deletable while diff - S.size >= 0
    retentionMsBreach     (policy has delete, retention.ms >= 0) now - S.largestTimestamp > ms
    common guards         high watermark >= S's upper bound (next base offset, or the LEO);
                          never an empty last segment; stop at the first segment that is not
                          deletable. When a pass takes every segment, the active one too,
                          Kafka first rolls an empty segment at the LEO (roll.py): the log
                          starts there

A pure ``compact`` policy runs only the first pass. Execution, under the log dir's ``.lock``::

    1  log-start-offset-checkpoint := first surviving segment's base, for every partition of
       the log dir in one atomic write — so a crash after this point never re-exposes data
       that is about to go
    2  leader-epoch-checkpoint truncated from the start (``truncateFromStart``); the empty
       segment rolled at the LEO, when every segment goes
    3  rename every file of each deleted segment (``.log`` last) and its producer snapshot to
       ``<name>.deleted``
    4  remove the ``.deleted`` files now (``delete_delay_ms == 0``) or leave them for a later
       run, which removes those renamed more than ``file.delete.delay.ms`` ago
    5  log-start-offset-checkpoint without the entries of step 1 that now equal their
       partition's first segment's base: Kafka checkpoints a log start only above it
       (``LogManager.checkpointLogStartOffsetsInDir``); a crash before this leaves them, which
       says the same

A tiered partition (tiered storage: :mod:`kafkalog_spark.log.tiered_topics`) is refused, plan
and run alike: its broker owns its retention across both tiers.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..codec.files import checkpoints as C
from ..codec.files import naming as N
from ..errors import InvalidOptionError
from ..log.discovery import discover
from ..log.partition_state import (PartitionState, SegmentState, check_high_watermark_source,
                                   partition_state, read_offsets)
from ..log.selection import command_partitions
from ..log.tiered_topics import refuse_tiered, tiered_partitions
from ..log.topic_config import TopicConfig, configured_partitions
from ..storage import storage_for
from ..storage.atomic import disk_errors, read_checkpoint_file, write_checkpoint_file
from ..storage.lock import ensure_not_locked, hold_lock
from .roll import roll_empty_segment

Step = Callable[[str], None]
TIERED_WHY = ("with tiered storage the broker owns the log start offset and deletes a local "
              "segment only once its remote tier holds it (local.retention.*), so retain could "
              "delete offsets the tier does not hold and break the broker's remote bookkeeping; "
              "the broker's own retention covers both tiers - leave these topics out (--topic)")


@dataclass(frozen=True)
class Deletion:
    """One segment to delete and the rule that deletes it."""

    base_offset: int
    size: int
    reason: str


@dataclass(frozen=True)
class PartitionRetention:
    """The retention plan of one partition."""

    topic: str
    partition: int
    path: Path
    log_dir: Path
    deletions: tuple[Deletion, ...]
    log_start_offset: int
    new_log_start_offset: int
    notes: tuple[str, ...] = ()
    rolled_at: int | None = None  # every segment goes: the empty segment rolled at the LEO
    first_kept_base: int | None = None  # the first segment left (rolled_at when rolled)

    def to_dict(self) -> dict[str, Any]:
        return {"partition": f"{self.topic}-{self.partition}", "path": str(self.path),
                "log_start_offset": self.log_start_offset,
                "new_log_start_offset": self.new_log_start_offset,
                "rolled_segment": self.rolled_at,
                "deleted_segments": [{"base_offset": d.base_offset, "bytes": d.size,
                                      "reason": d.reason} for d in self.deletions],
                "notes": list(self.notes)}


def _deletable_prefix(segs: Sequence[SegmentState], state: PartitionState,
                      predicate: Callable[[SegmentState, SegmentState | None], bool]) -> int:
    """How many leading segments ``deletableSegments`` returns: the active (last) one too when
    the high watermark reaches the log end, unless it is empty."""
    n = 0
    for i, s in enumerate(segs):
        nxt = segs[i + 1] if i + 1 < len(segs) else None
        upper = state.log_end_offset if nxt is None else nxt.base_offset
        if ((nxt is None and s.size == 0) or state.high_watermark < upper
                or not predicate(s, nxt)):
            break
        n += 1
    return n


def plan_partition(state: PartitionState, config: TopicConfig, now_ms: int) -> PartitionRetention:
    """Plan ``deleteOldSegments`` for one partition (module docstring); reads nothing."""
    segs = list(state.segments)
    deletions: list[Deletion] = []
    notes = []
    if not state.high_watermark_known:
        notes.append("no replication-offset-checkpoint entry: high watermark taken as the log "
                     "start offset, nothing above it can be deleted (as in Kafka; for a copied "
                     "log dir no broker will load again, --high-watermark log-end takes the "
                     "log end instead)")

    rolled: list[int] = []

    def take(n: int, reason: str) -> None:
        deletions.extend(Deletion(s.base_offset, s.size, reason) for s in segs[:n])
        if n and n == len(segs):  # a log keeps a segment: Kafka rolls one at the LEO first
            rolled.append(state.log_end_offset)
        del segs[:n]

    start = state.log_start_offset
    take(_deletable_prefix(segs, state, lambda s, nxt: nxt is not None and nxt.base_offset <= start),
         f"below the log start offset {start}")
    if config.delete:
        size = sum(s.size for s in segs)
        if config.retention_bytes >= 0 and size >= config.retention_bytes:
            diff = [size - config.retention_bytes]

            def over_size(s: SegmentState, nxt: SegmentState | None) -> bool:
                if diff[0] - s.size >= 0:
                    diff[0] -= s.size
                    return True
                return False

            take(_deletable_prefix(segs, state, over_size),
                 f"retention.bytes {config.retention_bytes} exceeded")
        if config.retention_ms >= 0:
            take(_deletable_prefix(segs, state,
                                   lambda s, nxt: now_ms - s.largest_timestamp > config.retention_ms),
                 f"older than retention.ms {config.retention_ms}")
    first_kept = rolled[0] if rolled else segs[0].base_offset if segs else None
    new_start = start if first_kept is None else max(start, first_kept)
    if not deletions and state.high_watermark_known:
        notes.append(_why_nothing_deleted(state, config, now_ms))
    return PartitionRetention(state.topic, state.partition, state.path, state.log_dir,
                              tuple(deletions), start, new_start, tuple(notes),
                              rolled[0] if rolled else None, first_kept)


def _why_nothing_deleted(state: PartitionState, config: TopicConfig, now_ms: int) -> str:
    """Why :func:`plan_partition` deletes no segment of a partition (its report says so)."""
    segs = state.segments
    if len(segs) == 1 and segs[0].size == 0:
        return "nothing to delete: only an empty active segment, which is never deleted"
    end = segs[1].base_offset if len(segs) > 1 else state.log_end_offset
    if state.high_watermark < end:
        return (f"nothing to delete: the high watermark {state.high_watermark} is below the end "
                f"of the oldest segment ({end})")
    if not config.delete:
        return ("nothing to delete: cleanup.policy has no delete, so only segments below the "
                "log start offset go")
    if config.retention_ms < 0 and config.retention_bytes < 0:
        return "nothing to delete: retention.ms and retention.bytes are both -1 (unlimited)"
    parts = []
    if config.retention_ms >= 0:
        parts.append(f"the oldest segment is not older than retention.ms {config.retention_ms} "
                     f"(newest record {now_ms - segs[0].largest_timestamp} ms ago)")
    if config.retention_bytes >= 0:
        parts.append(f"{state.size} bytes do not exceed retention.bytes "
                     f"{config.retention_bytes} by a whole segment")
    return "nothing to delete: " + "; ".join(parts)


def plan_retention(log_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
                   now_ms: int | None = None, options: Mapping[str, Any] | None = None,
                   config_file: str | os.PathLike[str] | None = None,
                   topics: Sequence[str] | None = None,
                   high_watermark: str = "checkpoint") -> list[PartitionRetention]:
    """Plan retention for every live partition of the log dirs (nothing is changed).

    Parameters
    ----------
    log_dirs : path or sequence of paths
        Broker log dirs.
    now_ms : int, optional
        The current time in ms (fixed for reproducible runs); default the clock.
    options, config_file
        Topic config overrides (:func:`kafkalog_spark.log.topic_config.effective_config`).
    topics : sequence of str, optional
        Only these topics.
    high_watermark : {"checkpoint", "log-end"}
        Kafka's rule, or the log end offset for a copied dir no broker will load again
        (:func:`kafkalog_spark.log.partition_state.partition_state`).
    """
    now_ms = int(time.time() * 1000) if now_ms is None else int(now_ms)
    check_high_watermark_source(high_watermark)
    found = discover(log_dirs)
    command_partitions(found, topics=topics, log_dirs_only="retention")
    refuse_tiered("retain", tiered_partitions(
        found, [p for d in found.log_dirs for p in d.partitions
                if topics is None or p.topic in topics],
        options=options, config_file=config_file), TIERED_WHY)
    plans = []
    for log_dir in found.log_dirs:
        log_start = read_offsets(log_dir.path, N.LOG_START_OFFSET_CHECKPOINT)
        replication = read_offsets(log_dir.path, N.REPLICATION_OFFSET_CHECKPOINT)
        for part, config in configured_partitions(log_dir, options=options,
                                                  config_file=config_file, topics=topics):
            state = partition_state(part, log_dir.path, log_start=log_start,
                                    replication=replication, high_watermark=high_watermark,
                                    timestamps=config.delete and config.retention_ms >= 0)
            plans.append(plan_partition(state, config, now_ms))
    return plans


def _say(step: Step | None, label: str) -> None:
    if step is not None:
        step(label)


def _segment_files(pdir: Path, base: int) -> list[Path]:
    files = [pdir / N.segment_file_name(base, kind) for kind in (*N.INDEX_KINDS, N.SNAPSHOT, N.LOG)]
    fs = storage_for(pdir)
    return [p for p in files if fs.exists(p)]


def remove_expired_deleted_files(pdir: Path, now_ms: int, delay_ms: int,
                                 step: Step | None = None) -> int:
    """Remove ``*.deleted`` segment files renamed at least ``delay_ms`` ago (the rename sets
    their ctime); returns how many were removed."""
    removed = 0
    fs = storage_for(pdir)
    for p in fs.glob(pdir, f"*.{N.DELETED}"):
        if p.name.endswith(f".{N.CHECKPOINT}.{N.DELETED}"):
            continue  # KRaft snapshots belong to the Raft layer
        if now_ms - int(fs.stat(p).st_ctime * 1000) >= delay_ms:
            _say(step, f"remove {p.name}")
            fs.remove(p)
            removed += 1
    if removed:
        fs.fsync_dir(pdir)
    return removed


def advance_log_start(log_dir: Path, plans: Sequence[PartitionRetention],
                      step: Step | None = None) -> None:
    """Step 1 for every partition of one log dir at once: one atomic write of its
    ``log-start-offset-checkpoint`` with each planned partition's new log start (written before
    any segment of the dir goes, so the order per partition is Kafka's; one write per log dir,
    not per partition: rewriting a file of every partition once per partition is quadratic)."""
    path = log_dir / N.LOG_START_OFFSET_CHECKPOINT
    offsets = read_checkpoint_file(path, C.parse_offset_checkpoint)
    changed = False
    for plan in plans:
        tp = (plan.topic, plan.partition)
        if plan.deletions and offsets.get(tp, -1) < plan.new_log_start_offset:
            offsets[tp] = plan.new_log_start_offset
            changed = True
    if changed:
        _say(step, f"write {N.LOG_START_OFFSET_CHECKPOINT}")
        write_checkpoint_file(path, C.format_offset_checkpoint(offsets))


def drop_first_base_entries(log_dir: Path, plans: Sequence[PartitionRetention],
                            step: Step | None = None) -> None:
    """Step 5 for one log dir, once its partitions' segments are gone: the
    ``log-start-offset-checkpoint`` entries of the changed partitions that equal their first
    segment's base offset go (``LogManager.checkpointLogStartOffsetsInDir`` writes an entry
    only for a log start above it; the loader takes the first base without one)."""
    path = log_dir / N.LOG_START_OFFSET_CHECKPOINT
    offsets = read_checkpoint_file(path, C.parse_offset_checkpoint)
    tps = [(p.topic, p.partition, p.first_kept_base) for p in plans if p.deletions]
    gone = [(t, n) for t, n, first in tps if offsets.get((t, n), -1) == first]
    if gone:
        for tp in gone:
            del offsets[tp]
        _say(step, f"write {N.LOG_START_OFFSET_CHECKPOINT}")
        write_checkpoint_file(path, C.format_offset_checkpoint(offsets))


def execute_partition(plan: PartitionRetention, *, delete_delay_ms: int = 0,
                      step: Step | None = None) -> None:
    """Carry out one partition's plan, steps 2-4 (module docstring): step 1 for its log dir
    (:func:`advance_log_start`) must have been done, step 5 follows
    (:func:`drop_first_base_entries`); the caller holds the lock."""
    if not plan.deletions:
        return
    epochs_path = plan.path / N.LEADER_EPOCH_CHECKPOINT
    fs = storage_for(plan.path)
    if fs.exists(epochs_path):
        epochs = read_checkpoint_file(epochs_path, C.parse_leader_epoch_checkpoint)
        trimmed = C.truncate_epochs_from_start(epochs, plan.new_log_start_offset)
        if trimmed != epochs:
            _say(step, f"write {N.LEADER_EPOCH_CHECKPOINT}")
            write_checkpoint_file(epochs_path, C.format_leader_epoch_checkpoint(trimmed))
    if plan.rolled_at is not None:
        (part,) = discover(plan.path).partitions
        roll_empty_segment(part, plan.rolled_at, step)
    renamed = []
    # a file gone since planning is skipped, as Kafka's deleteIfExists does; other disk errors
    # are typed and name the file (recover completes the .deleted renames)
    with disk_errors("deleting segments", plan.path):
        for d in plan.deletions:
            for p in _segment_files(plan.path, d.base_offset):
                target = p.with_name(f"{p.name}.{N.DELETED}")
                _say(step, f"rename {p.name} -> {target.name}")
                with contextlib.suppress(FileNotFoundError):
                    fs.rename(p, target)
                    renamed.append(target)
        fs.fsync_dir(plan.path)
        if delete_delay_ms == 0:
            for p in renamed:
                _say(step, f"remove {p.name}")
                with contextlib.suppress(FileNotFoundError):
                    fs.remove(p)
            fs.fsync_dir(plan.path)


@dataclass
class RetentionResult:
    """What :func:`retain` planned or did, plus metrics."""

    executed: bool
    now_ms: int
    plans: list[PartitionRetention] = field(default_factory=list)
    removed_deleted_files: int = 0

    @property
    def metrics(self) -> dict[str, Any]:
        dels = [d for p in self.plans for d in p.deletions]
        return {"executed": self.executed, "now_ms": self.now_ms,
                "partitions_checked": len(self.plans),
                "partitions_changed": sum(1 for p in self.plans if p.deletions),
                "segments_deleted": len(dels), "bytes_deleted": sum(d.size for d in dels),
                "expired_deleted_files_removed": self.removed_deleted_files}

    def to_dict(self) -> dict[str, Any]:
        return {"metrics": self.metrics, "partitions": [p.to_dict() for p in self.plans]}


def retain(log_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
           execute: bool = False, now_ms: int | None = None,
           options: Mapping[str, Any] | None = None,
           config_file: str | os.PathLike[str] | None = None,
           topics: Sequence[str] | None = None, delete_delay_ms: int = 0,
           step: Step | None = None, high_watermark: str = "checkpoint") -> RetentionResult:
    """Plan (and with ``execute`` carry out) retention on stopped brokers' log dirs.

    Parameters
    ----------
    log_dirs : path or sequence of paths
        Broker log dirs.
    execute : bool
        Change the disk (default: a dry run that only plans).
    now_ms : int, optional
        Fixed current time in ms for reproducible runs.
    options, config_file, topics, high_watermark
        As in :func:`plan_retention`.
    delete_delay_ms : int
        0 removes the ``.deleted`` files at once; otherwise they stay until a later run finds
        them older than this (Kafka's ``file.delete.delay.ms``).
    step : callable, optional
        Called with a label before every file operation (progress, crash tests).

    Raises
    ------
    LogDirLockedError
        A live process (a broker) holds a log dir's ``.lock``.
    TieredPartitionError
        A partition of the selected topics is tiered (tiered storage), plan or run.
    """
    if delete_delay_ms < 0:
        raise InvalidOptionError(f"delete_delay_ms must be >= 0, got {delete_delay_ms}")
    dirs = [log_dirs] if isinstance(log_dirs, (str, os.PathLike)) else list(log_dirs)
    for d in dirs:
        ensure_not_locked(d)
    now_ms = int(time.time() * 1000) if now_ms is None else int(now_ms)
    plans = plan_retention(dirs, now_ms=now_ms, options=options, config_file=config_file,
                           topics=topics, high_watermark=high_watermark)
    result = RetentionResult(execute, now_ms, plans)
    if not execute:
        return result
    for d in sorted({storage_for(x).resolve(x) for x in dirs}):
        with hold_lock(d):
            mine = [p for p in plans if p.log_dir == d]
            advance_log_start(d, mine, step)
            for plan in mine:
                execute_partition(plan, delete_delay_ms=delete_delay_ms, step=step)
                if delete_delay_ms:
                    result.removed_deleted_files += remove_expired_deleted_files(
                        plan.path, result.now_ms, delete_delay_ms, step)
            drop_first_base_entries(d, mine, step)
    return result
