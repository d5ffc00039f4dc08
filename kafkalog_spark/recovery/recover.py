"""Offline log recovery (recovery layer): ``kafkalog recover`` — Kafka's log-loading semantics
(KAFKA_FORMATS §12) applied to a stopped broker's log dirs, losing nothing.

Per partition, in this order (each step planned from the disk as it is, so a run killed at any
point is completed by the next run, and a second run of a finished one plans nothing):

1. finish or roll back interrupted segment swaps — ``LogLoader`` passes 1-3
   (:mod:`kafkalog_spark.log.swap`); split segments whose offsets overflow (:mod:`~.split`);
   with ``salvage``, rewrite damaged segments without their damaged ranges (:mod:`~.salvage`);
2. quarantine leftover ``.tmp`` files and orphaned index files (pass 4 deletes the latter);
3. in the segments the broker's load recovers (step 4; with ``salvage`` all of them), find the
   first invalid entry — structure, CRC, offsets not increasing or outside the segment's
   range, a transaction marker Kafka cannot parse — and, like ``recoverLog`` (§12.4), move every
   later segment into the quarantine, then copy the cut tail there and truncate (later
   segments first: a run killed after the cut must not find them valid and keep them); damage
   in the others is left, as the load leaves it, and listed;
4. indexes as the broker's load leaves them (§12.5, :mod:`~kafkalog_spark.recovery.rebuild`):
   the segments it recovers (:mod:`~kafkalog_spark.recovery.loader`: without the clean-shutdown
   marker the one holding the recovery point and every later one, and any whose ``.index`` is
   missing or whose ``.txnindex`` fails the load's sanity check) and the cut one get
   ``.index``, ``.timeindex`` (at the topic's ``index.interval.bytes``) and ``.txnindex``
   rebuilt from their batches; the others keep theirs, but a missing ``.timeindex`` is created
   empty — what differs from the batches there is listed (``left``) for ``rebuild-index``;
5. producer snapshots where a broker's load leaves them (§12.7,
   :mod:`~kafkalog_spark.recovery.loader`): write the replayed state (from a snapshot it
   loads, without the producers the load expires there) where no snapshot agrees with the log
   — at the log end offset, at the base and end of every segment the load recovers, and at
   the last two segment bases its producer-state rebuilds pass —, then
   quarantine corrupt ones and those the load deletes: beyond the new log end, at or below the
   log start or above a recovered segment's base (``truncateAndReload``), at no segment base
   (``removeStraySnapshots``);
6. ``leader-epoch-checkpoint`` from the batch headers (``assign``, truncated at the log end and
   the log start, §11.2);

then per log dir, rewrite the offset checkpoints (§11.3): recovery point and high watermark
capped at the log end, log start capped at the log end, cleaner checkpoint reset to the log
start when out of range.

Deliberate differences from a broker: nothing is deleted — every removed byte is moved to the
quarantine with a manifest (:mod:`~kafkalog_spark.recovery.quarantine`); a batch whose offsets
do not increase cuts the log at that batch (Kafka empties the whole segment); a log-start
checkpoint beyond the log end is capped (Kafka deletes every segment). ``-delete`` dirs and the KRaft metadata log are not
touched. A tiered partition (tiered storage, :mod:`kafkalog_spark.log.tiered_topics`) is
recovered as the broker's loader does with remote storage on: its log start offset stays the
checkpointed one, below its local log, and its leader epochs are truncated from the start only
there (the remote offsets keep theirs); the report notes each one. Dry run unless ``execute``: its plan lists every action the execute run takes (splits
and salvage rewrites are rehearsed in a private temporary folder,
:mod:`~kafkalog_spark.recovery.rehearse`, and the rest planned from the result); refuses a log
dir whose ``.lock`` a live process holds.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..codec.files import naming as N
from ..codec.files.index_rebuild import DEFAULT_INDEX_INTERVAL_BYTES
from ..errors import KafkaLogError
from ..log import swap
from ..log.discovery import _classify, _scan_partition_dir, discover
from ..log.model import LogDir, PartitionDir
from ..log.selection import command_partitions
from ..log.staging import STAGING_INFIX
from ..log.tiered_topics import TieredPartition, tiered_partitions
from ..log.topic_config import configured_partitions
from ..storage import LOCAL, storage_for
from ..storage.lock import ensure_local, ensure_not_locked, hold_lock
from .actions import QUARANTINE_FILE, RENAME, SALVAGE, SPLIT, WRITE_FILE, Action, execute
from .plan import PartitionOutcome, plan_checkpoints, plan_partition, read_offsets
from .quarantine import Quarantine
from .rehearse import real_paths, rehearse
from .salvage import execute_salvage, plan_partition_salvage
from .split import execute_split, plan_partition_splits

Step = Callable[[str], None]


@dataclass
class RecoveryReport:
    """What :func:`recover` planned and (with ``execute``) did."""

    executed: bool = False
    partitions: list[PartitionOutcome] = field(default_factory=list)
    log_dir_actions: list[Action] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    quarantine_runs: list[str] = field(default_factory=list)

    @property
    def actions(self) -> list[Action]:
        return [a for p in self.partitions for a in p.actions] + self.log_dir_actions

    @property
    def changed(self) -> bool:
        return bool(self.actions)

    def to_dict(self) -> dict:
        return {"executed": self.executed, "changed": self.changed, "notes": self.notes,
                "quarantine_runs": self.quarantine_runs,
                "partitions": [{"partition": p.name, "path": p.path, "first_base_offset": p.first_base,
                                "log_end_offset": p.log_end, "cut": p.cut, "damage": p.damage,
                                "left_as_the_broker_leaves_it": p.left,
                                "salvage_would_keep": p.salvage_would_keep,
                                "actions": [a.to_dict() for a in p.actions]} for p in self.partitions],
                "log_dir_actions": [a.to_dict() for a in self.log_dir_actions]}


def recover(log_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
            execute_plan: bool = False, quarantine_dir: str | os.PathLike[str] | None = None,
            step: Step | None = None, salvage: bool = False,
            recovered: Mapping[Path, tuple[int, int]] | None = None,
            repair_trusted: bool = False, now_ms: int | None = None) -> RecoveryReport:
    """Plan (and with ``execute_plan`` carry out) the recovery of log dirs.

    Parameters
    ----------
    log_dirs : path or sequence of paths
        Broker log dirs (``log.dirs`` entries).
    execute_plan : bool
        Change the disk (default: a dry run that only plans).
    quarantine_dir : path, optional
        Quarantine root (default ``<log dir>.kafkalog-quarantine`` next to each log dir); must
        not be inside a log dir.
    step : callable, optional
        Called with a label before every durable operation.
    salvage : bool
        Keep every valid entry after damage instead of cutting there
        (:mod:`~kafkalog_spark.recovery.salvage`); default: Kafka's rule, and the report says
        what salvage would keep.
    recovered : mapping, optional
        ``{partition dir: (first base offset, log end offset)}`` of partitions the caller has
        just recovered itself (:func:`recover_written_partition`, in restore's Spark tasks):
        not read again, their offsets used for the log dir's checkpoints.
    repair_trusted : bool
        Also rebuild a missing or inconsistent index of a segment the broker's load does not
        recover (for log dirs the caller has just written: restore, reconcile). Default: such
        a file is left as the load leaves it, and listed in the partition's ``left``.
    now_ms : int, optional
        When the broker's load is taken to run (default: now): where it loads a producer
        snapshot it leaves out the producers idle ``producer.id.expiration.ms`` (Kafka's 1 day)
        before that, with no transaction open — so a log of old producers gets smaller
        snapshots on a second run, as on a broker's second restart.

    Returns
    -------
    RecoveryReport
        ``report.changed`` is False when the dirs needed nothing.

    Raises
    ------
    LogDirLockedError
        A live process (a broker) holds a log dir's ``.lock``.
    InvalidOptionError
        A path that is not a log dir, or a quarantine inside a log dir.
    """
    ensure_local(log_dirs)
    found = discover(log_dirs)
    command_partitions(found, log_dirs_only="recover")
    report = RecoveryReport(executed=execute_plan)
    for d in found.log_dirs:
        ensure_not_locked(d.path)
    tiered = {t.path: t for t in tiered_partitions(
        found, [p for d in found.log_dirs for p in d.partitions], notes=report.notes)}
    for log_dir in found.log_dirs:
        q = Quarantine(log_dir.path, quarantine_dir, step=step)
        if execute_plan:
            with hold_lock(log_dir.path):
                q.resume()
                _recover_log_dir(log_dir, report, q, step, scratch=None, salvage=salvage,
                                 tiered=tiered, recovered=recovered,
                                 repair_trusted=repair_trusted, now_ms=now_ms)
                q.finish()
        else:
            with LOCAL.temp_dir("kafkalog-recover-plan-") as scratch:
                _recover_log_dir(log_dir, report, q, step, scratch=Path(scratch),
                                 salvage=salvage, tiered=tiered, repair_trusted=repair_trusted,
                                 now_ms=now_ms)
        if q.run is not None:
            report.quarantine_runs.append(str(q.run))
    return report


def _recover_log_dir(log_dir: LogDir, report: RecoveryReport, q: Quarantine, step: Step | None,
                     *, scratch: Path | None, salvage: bool = False,
                     tiered: Mapping[Path, TieredPartition] | None = None,
                     recovered: Mapping[Path, tuple[int, int]] | None = None,
                     repair_trusted: bool = False, now_ms: int | None = None) -> None:
    """Plan the recovery of one log dir and, without ``scratch`` (a dry run's private folder
    for rehearsed rewrites), carry it out. ``tiered``: the tiered partitions, by path;
    ``recovered``, ``repair_trusted``, ``now_ms``: as for :func:`recover`."""
    tiered = tiered or {}
    done = {storage_for(p).resolve(p): ends for p, ends in (recovered or {}).items()}
    execute_plan = scratch is None
    starts = read_offsets(log_dir.path / N.LOG_START_OFFSET_CHECKPOINT)
    points = read_offsets(log_dir.path / N.RECOVERY_POINT_CHECKPOINT)
    intervals = _index_intervals(log_dir, report)
    if now_ms is None:
        now_ms = int(time.time() * 1000)  # a broker's load expires idle producers as of its start
    for part in log_dir.special:
        if part.kind == N.DELETE_DIR:
            report.notes.append(f"{part.path}: partition dir queued for deletion; not recovered")
    if log_dir.metadata_log is not None:
        report.notes.append(f"{log_dir.metadata_log.path}: the KRaft metadata log belongs to the "
                            "Raft layer; not recovered")
    parent = log_dir.path.parent
    for staging in storage_for(parent).glob(parent, f".{log_dir.path.name}{STAGING_INFIX}*"):
        # a Spark write stages without the lock, so a live job's folder looks the same: report
        report.notes.append(f"{staging}: staging folder of a write that did not finish (killed?); "
                            "nothing in it is part of the log — delete it once no write to this "
                            "log dir is running")
    for path in log_dir.unknown:
        if storage_for(path).is_dir(path):
            report.notes.append(f"{path}: not a <topic>-<partition> name, a broker would take the "
                                "log dir offline; not touched (move it out yourself)")
    for tmp in log_dir.leftovers:
        action = Action(QUARANTINE_FILE, str(tmp), "leftover of an interrupted atomic write (.tmp)")
        report.log_dir_actions.append(action)
        if execute_plan:
            execute([action], q, step)
    ends: dict[tuple[str, int], tuple[int, int]] = {}
    for part in log_dir.partitions + tuple(p for p in log_dir.special if p.kind != N.DELETE_DIR):
        known = done.get(storage_for(part.path).resolve(part.path)) if part.kind is None else None
        if known is not None and part.topic is not None:
            ends[(part.topic, part.partition)] = known  # type: ignore[index]
            continue
        swap_actions = [_swap_action(a) for a in swap.plan_swap_recovery(part.path)]
        if execute_plan:
            execute(swap_actions, q, step)
            view = _scan_partition_dir(part.path, N.parse_partition_dir_name(part.path.name),
                                       root=log_dir.path)
        else:
            files = swap.view_after(part.path, swap.plan_swap_recovery(part.path))
            view = _classify(part.path, part.topic, part.partition, part.kind, part.uuid, files, [])
        tp = (part.topic, part.partition) if part.topic is not None else None
        start = starts.get(tp, 0) if tp is not None else 0
        view, rewrites, damage = _rewrite_segments(view, log_dir, q, step, salvage, scratch)
        remote = tiered.get(part.path) if part.kind is None else None
        outcome = plan_partition(view, log_start_checkpoint=start, tiered=remote is not None,
                                 recovery_point=None if log_dir.clean_shutdown
                                 else points.get(tp, 0) if tp is not None else 0,
                                 repair_trusted=repair_trusted, check_all=salvage,
                                 index_interval_bytes=intervals.get(
                                     part.path, DEFAULT_INDEX_INTERVAL_BYTES), now_ms=now_ms)
        outcome.damage = damage
        if remote is not None:
            report.notes.append(tiered_note(remote, outcome))
        if outcome.cut is not None and not salvage:
            from .salvage import estimate
            outcome.salvage_would_keep = estimate(view)
        outcome.actions[:0] = swap_actions + rewrites
        if scratch is None:
            execute(outcome.actions[len(swap_actions) + len(rewrites):], q, step)
        else:  # planned on rehearsed segments: name the files --execute will find
            outcome.actions = real_paths(outcome.actions, [outcome.cut, *damage], scratch,
                                         part.path)
        report.partitions.append(outcome)
        if part.kind is None and tp is not None:
            ends[tp] = (outcome.first_base, outcome.log_end)  # type: ignore[index]
    actions = plan_checkpoints(log_dir.path, ends)
    report.log_dir_actions.extend(actions)
    if execute_plan:
        execute(actions, q, step)


def _index_intervals(log_dir: LogDir, report: RecoveryReport) -> dict[Path, int]:
    """Each partition's ``index.interval.bytes`` as its topic's KRaft metadata records it (a
    segment the load recovers has its indexes rebuilt with it; Kafka's default without a
    record). Configs that do not read give the defaults, and a note."""
    try:
        return {part.path: config.index_interval_bytes
                for part, config in configured_partitions(log_dir)}
    except KafkaLogError as exc:
        report.notes.append(f"{log_dir.path}: topic configs not read ({exc}); indexes rebuilt "
                            f"with index.interval.bytes {DEFAULT_INDEX_INTERVAL_BYTES}")
        return {}


def recover_written_partition(pdir: Path, recovery_point: int) -> tuple[int, int] | None:
    """Steps 2-6 for one partition dir its caller has just written (restore, in a Spark task:
    each task derives its own partition's files instead of the driver reading every segment
    again), with the log start the log dir's checkpoint holds and ``recovery_point`` as the
    caller's checkpoint will say (none after a clean shutdown). Carried out only when the plan
    writes derived files that do not exist yet — nothing to quarantine or cut, so no
    quarantine run is opened outside the driver; returns the partition's ``(first base
    offset, log end offset)`` for :func:`recover`'s ``recovered``, else None (the driver's
    :func:`recover` then takes the partition)."""
    log_dir, name = pdir.parent, N.parse_partition_dir_name(pdir.name)
    if swap.plan_swap_recovery(pdir):
        return None
    clean = storage_for(log_dir).exists(log_dir / N.CLEAN_SHUTDOWN_FILE)
    start = read_offsets(log_dir / N.LOG_START_OFFSET_CHECKPOINT).get(
        (name.topic, name.partition), 0)
    outcome = plan_partition(_scan_partition_dir(pdir, name, root=log_dir),
                             log_start_checkpoint=start,
                             recovery_point=None if clean else recovery_point,
                             repair_trusted=True)
    fs = storage_for(pdir)
    if outcome.cut is not None or any(
            a.kind != WRITE_FILE or fs.exists(Path(a.path)) for a in outcome.actions):
        return None
    execute(outcome.actions, Quarantine(log_dir))  # opened on first use: never here
    return outcome.first_base, outcome.log_end


def _rewrite_segments(view: PartitionDir, log_dir: LogDir, q: Quarantine, step: Step | None,
                      salvage: bool, scratch: Path | None
                      ) -> tuple[PartitionDir, list[Action], list[dict]]:
    """Split offset-overflowed segments (:mod:`~kafkalog_spark.recovery.split`, as Kafka's
    loader does), then with ``salvage`` rewrite each damaged segment without its damaged ranges
    (:mod:`~kafkalog_spark.recovery.salvage`). Returns the partition as it then is, the
    rewrites as actions, and every damaged range with the offsets around it. A dry run
    (``scratch``: its private folder) rehearses the rewrites there
    (:mod:`~kafkalog_spark.recovery.rehearse`), so the rest of its plan is the execute run's."""

    splits, _ = plan_partition_splits(view)
    actions = [Action(SPLIT, str(p.segment.log), p.describe()) for p in splits]
    if scratch is not None:
        view = rehearse(view, {p.segment.base_offset: [(c.base_offset, [(c.start, c.end)])
                                                       for c in p.pieces] for p in splits},
                        scratch)
    elif splits:
        for p in splits:
            execute_split(view, p, q, step)
        view = _scan_partition_dir(view.path, N.parse_partition_dir_name(view.path.name),
                                   root=log_dir.path)
    if not salvage:
        return view, actions, []
    plans = plan_partition_salvage(view)
    rewrite = [p for p in plans if p.rewrite]
    actions += [Action(SALVAGE, str(p.segment.log),
                       f"keep {p.kept_entries} valid entries ({p.kept_bytes} bytes), drop "
                       f"{len(p.damage)} damaged range(s) of "
                       f"{sum(d.end - d.start for d in p.damage)} bytes into the quarantine")
                for p in rewrite]
    if scratch is not None:
        view = rehearse(view, {p.segment.base_offset: [(p.segment.base_offset, p.keep)]
                               for p in rewrite}, scratch)
    elif rewrite:
        for p in rewrite:
            execute_salvage(view, p, q, step)
        view = _scan_partition_dir(view.path, N.parse_partition_dir_name(view.path.name),
                                   root=log_dir.path)
    return view, actions, [d.to_dict() for p in plans for d in p.damage]


def tiered_note(remote: TieredPartition, outcome: PartitionOutcome) -> str:
    """What recovery of a tiered partition's local log kept, and whether the remote tier holds
    offsets beyond the recovered log end (a cut below what was copied)."""
    note = (f"{remote.describe()}: tiered storage - only its local log is recovered, as the "
            "broker's loader does with remote storage on: the checkpointed log start offset and "
            "the leader epochs of the remote offsets are kept; the remote tier is the broker's")
    if remote.remote_end is not None and outcome.log_end <= remote.remote_end:
        note += (f"; the remote tier holds offsets up to {remote.remote_end}, at or beyond the "
                 f"recovered log end {outcome.log_end}: the broker will find its copies ahead "
                 "of its log")
    return note


def _swap_action(a: swap.SwapAction) -> Action:
    if a.kind == swap.DISPOSE:
        return Action(QUARANTINE_FILE, str(a.path), f"swap pass {a.pass_no}: {a.reason}")
    return Action(RENAME, str(a.path), f"swap pass {a.pass_no}: {a.reason}", target=str(a.target))
