"""Index and producer-state rebuild (recovery layer): ``.index``, ``.timeindex``, ``.txnindex`` and
producer snapshots as Kafka's segment recovery builds them (KAFKA_FORMATS §9.5, §12.5, §12.7),
planned as :class:`~kafkalog_spark.recovery.actions.Action` s.

The byte work is :func:`~kafkalog_spark.codec.files.index.build_indexes` and
:class:`~kafkalog_spark.codec.files.snapshot.ProducerStateTracker`; this module decides which files need
rewriting. A file is rewritten only when it is missing (with content to hold), its segment was
truncated, or :mod:`~kafkalog_spark.inspect.verify` finds it inconsistent with the log — or always
with ``force``. A valid index a broker wrote is therefore kept even where its entries differ
from recovery's (a broker restarted mid-segment, §9.5), which keeps repairs minimal and a second
run a no-op; so is a cleaned segment's ``.txnindex``, whose entries for transactions the cleaner
removed the data of no replay gives. ``recover`` calls it for the segments a broker's load
recovers (:mod:`.loader`) with ``force``, writing what ``LogSegment.recover`` writes, and leaves
the others' files as the load does (:mod:`.plan`); this command is how those are repaired.

:func:`rebuild_indexes` is ``kafkalog rebuild-index``: a dry run unless ``execute``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..codec.files import naming as N
from ..codec.files.index import TxnIndex, read_offset_index, read_time_index
from ..codec.files.index_rebuild import build_indexes
from ..codec.files.snapshot import (CompletedTxn, ProducerEntry, ProducerSnapshot,
                                    ProducerStateTracker, read_snapshot)
from ..codec.records.scan import scan_entries
from ..errors import KafkaLogError
from ..inspect.verify_partitions import compare_snapshot, compare_txn_index
from ..inspect.verify_segments import ERROR, Problem, check_offset_index, check_time_index
from ..log.discovery import discover
from ..log.model import PartitionDir, Segment
from ..log.selection import require_kafka_data
from ..storage import mapped_file, storage_for
from ..storage.lock import ensure_local, ensure_not_locked, hold_lock
from .actions import WRITE_FILE, Action, execute
from .quarantine import Quarantine

INDEX_KINDS = (N.INDEX, N.TIME_INDEX, N.TXN_INDEX)


def index_path(seg: Segment, kind: str) -> Path:
    """Where ``seg``'s index file of ``kind`` is (whether or not it exists)."""
    return seg.log.with_name(N.segment_file_name(seg.base_offset, kind))


def _inconsistent(data: np.ndarray, seg: Segment, kind: str, path: Path, active: bool) -> bool:
    """Whether verify finds the existing offset/time index wrong for ``data`` (the valid log)."""
    table = scan_entries(data)
    problems: list[Problem] = []
    try:
        raw = storage_for(path).read_bytes(path)
        if kind == N.INDEX:
            check_offset_index(read_offset_index(raw, seg.base_offset, strict=True), table,
                               str(path), problems, active=active)
        else:
            check_time_index(read_time_index(raw, seg.base_offset, strict=True), table,
                             str(path), problems, active=active)
    except KafkaLogError:
        return True
    return bool(problems)


def plan_segment_indexes(seg: Segment, data: np.ndarray, *, truncated: bool = False,
                         force: bool = False, kinds: Sequence[str] = (N.INDEX, N.TIME_INDEX),
                         index_interval_bytes: int = 4096) -> list[Action]:
    """Actions rewriting one segment's ``.index``/``.timeindex`` from ``data`` (its valid
    ``.log`` bytes) with recovery's entry rule.

    Parameters
    ----------
    seg : Segment
        The segment (its index paths are derived from its ``.log`` name).
    data : numpy.ndarray
        The ``.log`` content recovery keeps (``uint8``).
    truncated : bool
        The ``.log`` is being cut to ``data``: rewrite whatever differs.
    force : bool
        Rewrite every index whose bytes differ from the rebuilt ones.
    kinds : sequence of str
        Which of ``"index"``, ``"timeindex"``.
    """
    built = build_indexes(data, seg.base_offset, index_interval_bytes=index_interval_bytes,
                          file=str(seg.log))
    content = {N.INDEX: built.offset_index.to_bytes(), N.TIME_INDEX: built.time_index.to_bytes()}
    actions = []
    for kind in kinds:
        path = index_path(seg, kind)
        fs = storage_for(path)
        if fs.exists(path):
            if fs.stat(path).st_size == len(content[kind]) and \
                    fs.read_bytes(path) == content[kind]:
                continue
            if not (truncated or force or _inconsistent(data, seg, kind, path, active=False)):
                continue
            why = "rebuilt as segment recovery builds it (the old one does not match the log)"
        else:
            why = "missing; built as segment recovery builds it"
        actions.append(Action(WRITE_FILE, str(path), why, content=content[kind]))
    return actions


def plan_txn_index(seg: Segment, aborted: Sequence[CompletedTxn], *,
                   keep_consistent: bool = False, bare: Sequence[tuple[int, int]] = (),
                   why: str = "") -> list[Action]:
    """Action writing ``.txnindex`` as ``LogSegment.recover`` rebuilds it — the aborted
    transactions the segment's markers close — when it differs (no file is created for a
    segment without aborts).

    With ``keep_consistent`` (a segment the broker's load does not recover) a file that
    :func:`~kafkalog_spark.inspect.verify_partitions.compare_txn_index` finds consistent with
    the log is kept as it is: the cleaner's entries for transactions whose data it removed
    (``bare``: the segment's ABORT markers that closed no open transaction) make it differ
    from a rebuilt one, and only a segment's recovery drops them. ``why``: what made the
    broker's load recover the segment, for the reason."""
    expected = TxnIndex.from_entries(seg.base_offset, [(t.producer_id, t.first_offset, t.last_offset,
                                                        t.last_stable_offset) for t in aborted])
    content = expected.to_bytes()
    path = index_path(seg, N.TXN_INDEX)
    fs = storage_for(path)
    if fs.exists(path) and fs.read_bytes(path) == content:
        return []
    if not fs.exists(path) and not content:
        return []
    if keep_consistent:
        problems = compare_txn_index(seg, list(aborted), bare)
        if not problems:
            return []
        reason = (f"{problems[0].message}; rebuilt from the segment's markers "
                  f"({len(expected)} entries)")
    else:
        reason = (f"aborted transactions of the segment's markers ({len(expected)} entries), "
                  "as the segment's recovery rebuilds it" + (f" ({why})" if why else ""))
    return [Action(WRITE_FILE, str(path), reason, content=content)]


# --- producer state replay ---------------------------------------------------------------------


@dataclass
class Replay:
    """Producer state replayed over a partition's kept data."""

    aborted: list[list[CompletedTxn]] = field(default_factory=list)  # per segment
    # per segment: (producer id, offset) of ABORT markers that closed no open transaction
    bare: list[list[tuple[int, int]]] = field(default_factory=list)
    states: dict[int, ProducerSnapshot] = field(default_factory=dict)  # offset -> state there
    trusted: set[int] = field(default_factory=set)  # snapshots that agree with the log
    distrusted: dict[int, str] = field(default_factory=dict)  # snapshot offset -> why not
    error: KafkaLogError | None = None  # a marker the broker cannot parse (position in file)
    error_segment: int | None = None


def _with(tracker: ProducerStateTracker, expired: list[ProducerEntry]) -> ProducerStateTracker:
    """``tracker`` with the producers its load left out as expired (those the replay has met
    since as it has them): the state a snapshot taken without expiring would hold."""
    if not expired:
        return tracker
    view = ProducerStateTracker()
    view.load_snapshot(ProducerSnapshot((*expired, *tracker.snapshot().entries)))
    return view


def read_snapshots(part: PartitionDir) -> tuple[dict[int, tuple[Path, ProducerSnapshot]], dict[int, tuple[Path, str]]]:
    """``(valid, corrupt)`` producer snapshots of a partition by offset."""
    valid, corrupt = {}, {}
    for path in part.snapshots:
        offset = N.offset_from_file_name(path.name)
        try:
            raw = storage_for(path).read_bytes(path)
            valid[offset] = (path, read_snapshot(raw, file=str(path)))
        except KafkaLogError as exc:
            corrupt[offset] = (path, exc.reason)
    return valid, corrupt


def replay_partition(segments: Sequence[Segment], ends: Sequence[int],
                     snapshots: dict[int, tuple[Path, ProducerSnapshot]],
                     targets: Sequence[int] = (), now_ms: int | None = None,
                     reloads: Sequence[int] = ()) -> Replay:
    """Replay v2 batch headers of ``segments[i].log[:ends[i]]`` like ``rebuildProducerState``.

    Starts from the snapshot at the first segment's base offset if any. At every other offset
    holding a snapshot the replayed state is compared with it (:func:`compare_snapshot`): one
    that agrees is loaded and trusted from there on (it knows producers of removed segments),
    one that does not is reported in ``distrusted``. ``states`` holds the state at each of
    ``targets`` (and at every snapshot offset). A marker Kafka cannot parse stops the replay
    (``error``, located in its file). With ``now_ms``, at each of ``reloads`` (where the
    broker's load reads a snapshot, :mod:`.loader`) the producers it expires at that time go
    (``loadFromSnapshot``); they still count when a later snapshot is compared with the log.
    """
    out = Replay()
    if not segments:
        return out
    first = segments[0].base_offset
    tracker = ProducerStateTracker()
    expired: list[ProducerEntry] = []  # expired since the last snapshot loaded
    reloads = set(reloads) if now_ms is not None else set()
    if first in snapshots:
        tracker.load_snapshot(snapshots[first][1])
        out.trusted.add(first)
        if first in reloads:
            expired = tracker.expire(now_ms)
    marks = sorted({o for o in (*snapshots, *targets, *reloads)
                    if o > first or (o == first and o not in snapshots)})

    def mark(offset: int) -> None:
        nonlocal tracker, expired
        if offset in snapshots and offset != first:
            path, snap = snapshots[offset]
            bad = [p for p in compare_snapshot(snap, _with(tracker, expired), first, str(path))
                   if p.severity == ERROR]
            if bad:
                out.distrusted[offset] = bad[0].message
            else:
                tracker = ProducerStateTracker()
                tracker.load_snapshot(snap)
                expired = []
                out.trusted.add(offset)
        # in the order the broker's HashMap of producers writes them (the entries it loaded
        # first, then those the replay met, by bucket); a snapshot there is the state before a
        # load reads it, and expires producers
        out.states[offset] = tracker.snapshot(order="java_hashmap")
        if offset in reloads:
            expired += tracker.expire(now_ms)

    for i, (seg, end) in enumerate(zip(segments, ends)):
        aborted: list[CompletedTxn] = []
        bare: list[tuple[int, int]] = []
        with mapped_file(seg.log) as buf:
            data = buf[:end]
            table = scan_entries(data)
            lo = 0
            seg_end = int(table.last_offset[-1]) + 1 if len(table) else seg.base_offset
            while marks and marks[0] <= seg_end:  # later marks belong to later segments
                offset = marks.pop(0)
                k = int(np.searchsorted(table.last_offset, offset, side="left"))
                try:
                    aborted += tracker.apply_entries(data, table, lo, k, file=str(seg.log))
                except KafkaLogError as exc:
                    out.error, out.error_segment = exc, i
                    return out
                lo = k
                bare += tracker.bare_aborts  # mark() may start a new tracker
                tracker.bare_aborts = []
                mark(offset)
            try:
                aborted += tracker.apply_entries(data, table, lo, len(table), file=str(seg.log))
            except KafkaLogError as exc:
                out.error, out.error_segment = exc, i
                return out
        bare += tracker.bare_aborts
        tracker.bare_aborts = []
        out.aborted.append(aborted)
        out.bare.append(bare)
    return out


# --- kafkalog rebuild-index ----------------------------------------------------------------------


@dataclass
class RebuildReport:
    """What :func:`rebuild_indexes` planned and (with ``execute``) did."""

    actions: list[Action] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    executed: bool = False
    segments: int = 0
    bytes: int = 0
    quarantine: str | None = None

    def to_dict(self) -> dict:
        return {"executed": self.executed, "segments": self.segments, "bytes": self.bytes,
                "quarantine": self.quarantine, "notes": self.notes,
                "actions": [a.to_dict() for a in self.actions]}


def rebuild_indexes(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
                    execute_plan: bool = False, force: bool = False,
                    kinds: Sequence[str] = INDEX_KINDS, quarantine_dir: str | None = None,
                    step=None) -> RebuildReport:
    """Rebuild index files of log dirs, partition dirs or single ``.log`` files.

    Parameters
    ----------
    paths : path or sequence of paths
        As :func:`~kafkalog_spark.log.discovery.discover` accepts.
    execute_plan : bool
        Write the files (default: only plan — a dry run).
    force : bool
        Rewrite every index whose bytes differ from recovery's, even when consistent.
    kinds : sequence of str
        Any of ``"index"``, ``"timeindex"``, ``"txnindex"``.
    quarantine_dir : str, optional
        Where replaced index contents go (default next to the log dir).

    Returns
    -------
    RebuildReport
        The planned writes; a segment with an invalid tail gets indexes over its valid part
        and a note (``kafkalog recover`` cuts the tail).

    Raises
    ------
    LogDirLockedError
        A running broker holds a log dir's ``.lock``.
    """
    ensure_local(paths)
    found = discover(paths)
    require_kafka_data(found)
    report = RebuildReport(executed=execute_plan)
    for log_dir in found.log_dirs:
        ensure_not_locked(log_dir.path)
    for part in found.partitions:
        ensure_not_locked(part.path.parent)
    by_log_dir: dict[Path, list[Action]] = {}
    for part in found.all_partition_dirs():
        ends = []
        for i, seg in enumerate(part.segments):
            report.segments += 1
            report.bytes += seg.log_size
            with mapped_file(seg.log) as buf:
                built_end = build_indexes(buf, seg.base_offset).valid_bytes
                if built_end < len(buf):
                    report.notes.append(f"{seg.log}: indexes cover the first {built_end} of "
                                        f"{len(buf)} bytes (invalid data after; run `kafkalog recover`)")
                idx_kinds = [k for k in kinds if k != N.TXN_INDEX]
                acts = plan_segment_indexes(seg, buf[:built_end], force=force, kinds=idx_kinds)
            by_log_dir.setdefault(part.path.parent, []).extend(acts)
            ends.append(built_end)
        if N.TXN_INDEX in kinds and part.segments:
            valid, _ = read_snapshots(part)
            replay = replay_partition(part.segments, ends, valid)
            if replay.error is not None:
                report.notes.append(f"transaction index not rebuilt: {replay.error}")
            for seg, aborted, bare in zip(part.segments, replay.aborted, replay.bare):
                by_log_dir.setdefault(part.path.parent, []).extend(
                    plan_txn_index(seg, aborted, keep_consistent=not force, bare=bare))
    for acts in by_log_dir.values():
        report.actions.extend(acts)
    if execute_plan:
        for log_dir, acts in by_log_dir.items():
            if not acts:
                continue
            lock_dir = log_dir if storage_for(log_dir).exists(log_dir / N.LOCK_FILE) else None
            q = Quarantine(log_dir, quarantine_dir, step=step)
            if lock_dir is not None:
                with hold_lock(lock_dir):
                    q.resume()
                    execute(acts, q, step)
            else:
                q.resume()
                execute(acts, q, step)
            q.finish()
            if q.run is not None:
                report.quarantine = str(q.run)
    return report


