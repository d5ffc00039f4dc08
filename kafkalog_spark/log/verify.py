"""Verification (log layer): can this log dir be trusted? Every problem located to the byte.

Checks, per segment (the unit of parallel work, :func:`verify_segment`):

* **structure** — the shallow entry walk reaches the end of every ``.log`` (partial tails,
  zero-filled preallocated tails, sizes below the minimum, unknown magic);
* **crc** — every batch / message checksum (CRC-32C for v2, CRC-32 for v0/v1);
* **offsets** — offsets strictly increase, every batch lies at or above its segment's base
  offset and within ``Integer.MAX_VALUE`` of it;
* **records** (``deep=True``) — every batch decompresses and its records parse exactly;
* **index** / **timeindex** / **txnindex** — every entry of ``.index``/``.timeindex`` points
  where Kafka's rules say it must, preallocated zero tails, the time index's last entry versus
  the segment's largest timestamp, ``.txnindex`` sanity.

Per partition (:func:`check_segment_sequence`, :func:`check_leader_epochs`,
:func:`verify_producer_state`): offsets increase across segments; ``leader-epoch-checkpoint``
parses and no epoch starts beyond the log end; the ``.txnindex`` of every segment equals what the ABORT markers in the log
produce (§6.5); every producer snapshot's CRC, and its contents against a replay of the batch
headers (§10); leftovers of interrupted operations and orphaned indexes.

Per log dir (:func:`verify_log_dir_files`): checkpoint files parse and are sane — recovery point
and high watermark ≤ log end, log start within the log, cleaner checkpoint in range (§11.3).

Read-only: files are memory-mapped read-only and nothing is written. :func:`verify` runs it all
in this process; :mod:`kafkalog_spark.recovery.verify_job` runs the same functions as a Spark job.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from ..codec import checkpoints as C
from ..codec import layout as L
from ..codec.crc import verify_crcs
from ..codec.decode import DecodeOptions, decode_entries
from ..codec.index import (ABORTED_TXN_SIZE, OffsetIndex, TimeIndex, TxnIndex, read_offset_index,
                           read_time_index, read_txn_index)
from ..codec.scan import STOP_END, EntryTable, scan_entries
from ..codec.snapshot import (PRODUCER_ENTRY, SNAPSHOT_HEADER, ProducerSnapshot,
                              ProducerStateTracker, read_snapshot)
from ..errors import KafkaLogError
from . import naming as N
from .atomic import read_checkpoint_file
from .discovery import LogDir, PartitionDir, Segment, discover
from .mapped import mapped_file

ERROR, WARNING = "error", "warning"


@dataclass(frozen=True)
class Problem:
    """One finding: how bad, which check, what, and exactly where."""

    severity: str  # "error" | "warning"
    check: str
    message: str
    file: str | None = None
    position: int | None = None
    base_offset: int | None = None


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


@dataclass(slots=True)
class SegmentCheck:
    """What :func:`verify_segment` found in one segment, plus the facts the partition-level
    checks need (so they never re-read a segment's headers to learn them)."""

    problems: list[Problem]
    bytes: int
    batches: int
    records: int | None
    first_offset: int | None  # first entry's first offset (legacy: its last offset)
    first_position: int | None
    last_offset: int | None  # last valid entry's last offset
    valid_bytes: int  # end of the last entry before the first structure/CRC problem
    producer_batches: bool  # any v2 batch with a producer id (needs the producer replay)
    readable: bool = True  # False: the .log could not be opened (reported, nothing else checked)

    @property
    def next_offset(self) -> int | None:
        return None if self.last_offset is None else self.last_offset + 1


def verify(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
           deep: bool = False, check_indexes: bool = True) -> VerifyReport:
    """Verify log dirs, partition dirs or single ``.log`` files.

    Parameters
    ----------
    paths : path or sequence of paths
        What to check (as :func:`~kafkalog_spark.log.discovery.discover` accepts).
    deep : bool
        Also decompress every batch and parse every record.
    check_indexes : bool
        Check ``.index``, ``.timeindex`` and ``.txnindex`` against their logs.

    Returns
    -------
    VerifyReport
        ``report.ok`` is False when any error-severity problem was found.
    """
    found = discover(paths)

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


def partition_bounds(part: PartitionDir, checks: Sequence[SegmentCheck]) -> tuple[int, int]:
    """``(first segment base offset, log end offset)``; the log end is ``readNextOffset`` of
    the last segment (its base offset when it holds no valid entry)."""
    if not part.segments:
        return 0, 0
    last = checks[-1].next_offset
    return part.segments[0].base_offset, part.segments[-1].base_offset if last is None else last


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
        if path.exists():
            try:
                values[name] = read_checkpoint_file(path, C.parse_offset_checkpoint)
            except KafkaLogError as exc:
                problems.append(_from_error(exc, "checkpoint"))
    for path in log_dir.leftovers:
        problems.append(Problem(WARNING, "files", "leftover temporary file of an "
                                "interrupted checkpoint write", str(path)))
    for path in log_dir.unknown:
        if path.is_dir():
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
                                        f"base offset {first} (ignored by a broker)", file, None,
                                        offset))
            elif name == N.CLEANER_OFFSET_CHECKPOINT and offset > leo:
                problems.append(Problem(ERROR, "checkpoint", f"{where}, beyond the log end offset "
                                        f"{leo}", file, None, offset))
            elif name == N.CLEANER_OFFSET_CHECKPOINT and offset < log_start:
                problems.append(Problem(WARNING, "checkpoint", f"{where}, below the log start "
                                        f"offset {log_start} (the cleaner resets it)", file, None,
                                        offset))
    return problems


# --- per partition -----------------------------------------------------------------------------


def _partition_file_problems(part: PartitionDir) -> list[Problem]:
    problems = []
    if part.kind == N.DELETE_DIR:
        problems.append(Problem(WARNING, "files", "partition dir queued for deletion (a broker "
                                "deletes it after file.delete.delay.ms)", str(part.path)))
    for path in part.leftovers:
        problems.append(Problem(WARNING, "files", "leftover of an interrupted segment "
                                "operation (run `kafkalog recover`)", str(path)))
    for path in part.orphan_indexes:
        problems.append(Problem(WARNING, "files", "index file without its .log "
                                "(a broker deletes it at load)", str(path)))
    return problems


def check_leader_epochs(part: PartitionDir, log_end: int) -> list[Problem]:
    """``leader-epoch-checkpoint`` parses, and no epoch starts beyond the log end offset (a
    broker truncates such entries at load; they mean the file is stale or the log was cut)."""
    path = part.path / N.LEADER_EPOCH_CHECKPOINT
    if not path.exists():
        return []
    try:
        entries = read_checkpoint_file(path, C.parse_leader_epoch_checkpoint)
    except KafkaLogError as exc:
        return [_from_error(exc, "checkpoint")]
    return [Problem(ERROR, "checkpoint", f"leader epoch {e.epoch} starts at offset "
                    f"{e.start_offset}, beyond the log end offset {log_end}", str(path), None,
                    e.start_offset) for e in entries if e.start_offset > log_end]


def check_segment_sequence(segments: Sequence[Segment], checks: Sequence[SegmentCheck]) -> list[Problem]:
    """Offsets increase across segment boundaries: each segment's first entry follows the
    previous segment's last valid entry."""
    problems = []
    prev_last: int | None = None
    for seg, c in zip(segments, checks):
        if c.first_offset is not None and prev_last is not None and c.first_offset <= prev_last:
            problems.append(Problem(ERROR, "offsets", f"offset {c.first_offset} does not follow "
                                    f"the previous segment's last offset {prev_last}",
                                    str(seg.log), c.first_position, c.first_offset))
        if c.last_offset is not None:
            prev_last = c.last_offset
    return problems


# --- per segment -------------------------------------------------------------------------------


def verify_segment(seg: Segment, *, deep: bool = False, check_indexes: bool = True,
                   active: bool = False, topic: str | None = None,
                   partition: int | None = None) -> SegmentCheck:
    """Check one segment's ``.log`` (structure, CRCs, offsets, optionally records) and its
    ``.index``/``.timeindex``/``.txnindex`` (file-local checks only).

    Parameters
    ----------
    seg : Segment
        As discovered.
    deep : bool
        Decompress every batch and parse every record.
    check_indexes : bool
        Check the index files against the log.
    active : bool
        The partition's last segment (a preallocated index tail is only a warning there).
    topic, partition : optional
        Written into decoded rows (``deep``) only.

    Returns
    -------
    SegmentCheck
    """
    file = str(seg.log)
    try:
        with open(seg.log, "rb"):
            pass
    except OSError as exc:  # unreadable (permissions, I/O error): a problem, not a crash
        return SegmentCheck([Problem(ERROR, "file", f"cannot read: {exc.strerror or exc}", file,
                                     None, seg.base_offset)], seg.log_size, 0, None, None, None,
                            None, 0, False, readable=False)
    problems: list[Problem] = []
    records = None
    with mapped_file(seg.log) as buf:
        table = scan_entries(buf)
        valid_bytes = table.stop_position
        if table.stop_code != STOP_END:
            zero = not buf[table.stop_position:].any()
            reason = ("zero-filled tail (a preallocated segment not trimmed: unclean shutdown)"
                      if zero else table.stop_reason)
            problems.append(Problem(ERROR, "structure",
                                    f"{reason}; {len(buf) - table.stop_position} bytes after the "
                                    "last valid entry", file, table.stop_position,
                                    _base_at(table, len(table) - 1)))
        bad = np.flatnonzero(~verify_crcs(buf, table))
        for i in bad.tolist():
            problems.append(Problem(ERROR, "crc", f"checksum mismatch (stored {int(table.crc[i])})",
                                    file, int(table.position[i]), int(table.offset[i])))
        if len(bad):
            valid_bytes = int(table.position[bad[0]])
        _check_offsets(table, seg, problems)
        if deep:
            records = _deep_check(buf, table, topic, partition, seg, problems)
        n = len(table)
        producer_batches = bool(((table.magic == 2) & (table.producer_id >= 0)).any())
    if check_indexes:
        _check_indexes(seg, table, problems, active=active)
    first = None
    if n:
        first = int(table.offset[0]) if table.magic[0] == 2 else int(table.last_offset[0])
    valid = table.position < valid_bytes
    return SegmentCheck(
        problems=problems, bytes=seg.log_size, batches=n, records=records,
        first_offset=first, first_position=int(table.position[0]) if n else None,
        last_offset=int(table.last_offset[valid][-1]) if valid.any() else None,
        valid_bytes=valid_bytes, producer_batches=producer_batches)


def _base_at(table: EntryTable, i: int) -> int | None:
    return int(table.offset[i]) if 0 <= i < len(table) else None


def _check_offsets(table: EntryTable, seg: Segment, problems: list[Problem]) -> None:
    """Offsets strictly increase; batches sit in ``[base, base + 2^31 - 1]`` of the segment.

    A v2 batch's first offset is its base offset; a legacy entry's is only known after
    decompression, so for legacy entries the (last) offset itself must increase."""
    n = len(table)
    if n == 0:
        return
    file = str(seg.log)
    first = np.where(table.magic == 2, table.offset, table.last_offset)
    last = table.last_offset
    previous = np.empty(n, np.int64)
    previous[0] = np.iinfo(np.int64).min
    previous[1:] = last[:-1]
    for i in np.flatnonzero(first <= previous).tolist():
        problems.append(Problem(ERROR, "offsets", f"offset {int(first[i])} does not follow the "
                                f"previous entry's last offset {int(previous[i])}", file,
                                int(table.position[i]), int(table.offset[i])))
    # a v2 lastOffsetDelta < 0: the batch's own offsets run backwards
    for i in np.flatnonzero(last < first).tolist():
        problems.append(Problem(ERROR, "offsets", f"last offset {int(last[i])} is before the base "
                                f"offset {int(first[i])}", file, int(table.position[i]),
                                int(table.offset[i])))
    rel = last - seg.base_offset
    outside = (first < seg.base_offset) | (rel > L.INT32_MAX)
    for i in np.flatnonzero(outside).tolist():
        problems.append(Problem(ERROR, "offsets", f"entry offsets {int(first[i])}..{int(last[i])} "
                                f"are outside the segment's range from base offset "
                                f"{seg.base_offset}", file, int(table.position[i]),
                                int(table.offset[i])))
    if (last < 0).any():
        i = int(np.flatnonzero(last < 0)[0])
        problems.append(Problem(ERROR, "offsets", "negative offset", file, int(table.position[i]),
                                int(table.offset[i])))


def _deep_check(buf: np.ndarray, table: EntryTable, topic: str | None, partition: int | None,
                seg: Segment, problems: list[Problem]) -> int:
    """Decode every record (CRC already checked); returns the number of records."""
    options = DecodeOptions(verify_crc=False, on_error="skip", include_control=True,
                            allow_partial_tail=True)
    end = table.stop_position  # the structure check already reported what follows
    result = decode_entries(buf, topic=topic or "", partition=partition or 0,
                            options=options, end=end, file=str(seg.log))
    records = sum(b.num_rows for b in result)
    for bad in result.bad_ranges:
        problems.append(Problem(ERROR, "records", bad.reason, bad.file, bad.start,
                                bad.base_offset))
    return records


# --- producer state: .txnindex against the markers, producer snapshots -------------------------


def verify_producer_state(part: PartitionDir, checks: Sequence[SegmentCheck], *,
                          check_indexes: bool = True) -> list[Problem]:
    """Replay the batch headers of a partition's valid entries with the broker's producer-state
    rules and compare: each segment's ``.txnindex`` with the aborted transactions its ABORT
    markers close (§6.5), each producer snapshot with the replayed state at its offset (§10).

    The replay starts from a valid snapshot at the first segment's base offset when there is
    one (state from segments retention removed), else from nothing; it stops after the first
    segment with a structure or CRC problem. Producers a snapshot holds but the replay never
    met are accepted when their last offset lies before the first segment; producers the replay
    met but a snapshot lacks are warnings (a broker drops expired producers).
    """
    problems: list[Problem] = []
    snaps = _read_snapshots(part, problems)
    if not part.segments:
        return problems
    first_base, leo = partition_bounds(part, checks)
    for off, path in sorted((o, p) for o, p, s in snaps if s is not None and o > leo):
        problems.append(Problem(ERROR, "snapshot", f"producer snapshot at offset {off} is beyond "
                                f"the log end offset {leo}", str(path), None, off))
    valid = {o: (p, s) for o, p, s in snaps if s is not None and o <= leo}
    has_txn_files = check_indexes and any(s.txnindex is not None for s in part.segments)
    if not (any(c.producer_batches for c in checks) or valid or has_txn_files):
        return problems
    tracker = ProducerStateTracker()
    if first_base in valid:
        tracker.load_snapshot(valid[first_base][1])
    pending = sorted(o for o in valid if o > first_base)
    for seg, c in zip(part.segments, checks):
        if not c.readable:
            break  # reported by verify_segment; nothing after it can be replayed
        aborted: list = []
        if not c.producer_batches:
            # no v2 batch with a producer id: replaying it changes nothing and closes no
            # transaction, so the segment is not read again (a quarter of verify's time on
            # such data); snapshots taken inside it compare with the state as it stands
            end = seg.base_offset if c.next_offset is None else c.next_offset
            while pending and pending[0] <= end:
                path, snap = valid[pending.pop(0)]
                problems.extend(compare_snapshot(snap, tracker, first_base, str(path)))
            if check_indexes:
                problems.extend(_compare_txn_index(seg, aborted))
            if c.valid_bytes < c.bytes:
                break
            continue
        try:
            with mapped_file(seg.log) as buf:
                data = buf[:c.valid_bytes]
                table = scan_entries(data)
                end = seg.base_offset if c.next_offset is None else c.next_offset
                cut = 0
                while pending and pending[0] <= end:
                    snap_offset = pending.pop(0)
                    k = int(np.searchsorted(table.last_offset, snap_offset, side="left"))
                    aborted += tracker.apply_entries(data, table, cut, k, file=str(seg.log))
                    cut = k
                    path, snap = valid[snap_offset]
                    problems.extend(compare_snapshot(snap, tracker, first_base, str(path)))
                aborted += tracker.apply_entries(data, table, cut, len(table), file=str(seg.log))
        except KafkaLogError as exc:
            problems.append(_from_error(exc, "txnindex"))
            return problems
        if check_indexes:
            problems.extend(_compare_txn_index(seg, aborted))
        if c.valid_bytes < c.bytes:
            break  # the state after a damaged segment means nothing
    return problems


def _read_snapshots(part: PartitionDir, problems: list[Problem]) -> list[tuple[int, object, ProducerSnapshot | None]]:
    out = []
    for path in part.snapshots:
        offset = N.offset_from_file_name(path.name)
        try:
            with mapped_file(path) as buf:
                snap = read_snapshot(buf, file=str(path))
        except KafkaLogError as exc:
            problems.append(Problem(ERROR, "snapshot", exc.reason, exc.file, exc.position, offset))
            snap = None
        out.append((offset, path, snap))
    return out


_COMPARED = ("producer_epoch", "last_sequence", "last_offset", "offset_delta", "timestamp",
             "coordinator_epoch", "current_txn_first_offset")


def compare_snapshot(snap: ProducerSnapshot, tracker: ProducerStateTracker, first_base: int,
                     file: str) -> list[Problem]:
    """Problems of ``snap`` against the state ``tracker`` replayed up to the snapshot's offset
    (tolerant of producers from before ``first_base``, see :func:`verify_producer_state`)."""
    replayed = {e.producer_id: e for e in tracker.snapshot().entries}
    problems = []
    for i, e in enumerate(snap.entries):
        pos = SNAPSHOT_HEADER.size + i * PRODUCER_ENTRY.size
        r = replayed.pop(e.producer_id, None)
        if r is None:
            if e.last_offset >= first_base or e.current_txn_first_offset >= first_base:
                problems.append(Problem(ERROR, "snapshot", f"producer {e.producer_id} has state at "
                                        f"offset {max(e.last_offset, e.current_txn_first_offset)} "
                                        "but no batch of it is in the log", file, pos))
            continue
        fields = [f for f in _COMPARED if getattr(e, f) != getattr(r, f)
                  and not (f in ("last_sequence", "last_offset", "offset_delta") and r.last_offset < 0)
                  and not (f == "coordinator_epoch" and r.coordinator_epoch < 0)
                  and not (f == "current_txn_first_offset" and r.current_txn_first_offset < 0
                           and e.current_txn_first_offset < first_base)]
        if fields:
            diff = ", ".join(f"{f} {getattr(e, f)} (log says {getattr(r, f)})" for f in fields)
            problems.append(Problem(ERROR, "snapshot", f"producer {e.producer_id}: {diff}", file, pos))
    for pid in sorted(replayed):
        problems.append(Problem(WARNING, "snapshot", f"producer {pid} of the log is not in the "
                                "snapshot (expired?)", file, None))
    return problems


def _compare_txn_index(seg: Segment, aborted: list) -> list[Problem]:
    expected = TxnIndex.from_entries(seg.base_offset, [(t.producer_id, t.first_offset, t.last_offset,
                                                        t.last_stable_offset) for t in aborted])
    file = str(seg.txnindex or seg.log.with_name(N.segment_file_name(seg.base_offset, N.TXN_INDEX)))
    if seg.txnindex is None:
        if len(expected):
            return [Problem(ERROR, "txnindex", f"missing .txnindex: the log's markers abort "
                            f"{len(expected)} transactions", file, None, seg.base_offset)]
        return []
    try:
        with mapped_file(seg.txnindex) as buf:
            found = read_txn_index(buf, seg.base_offset, file=file)
    except KafkaLogError:
        return []  # already reported by the file-local check
    cols = ("producer_id", "first_offset", "last_offset", "last_stable_offset")
    n = min(len(found), len(expected))
    for i in range(n):
        a = tuple(int(getattr(found, c)[i]) for c in cols)
        b = tuple(int(getattr(expected, c)[i]) for c in cols)
        if a != b:
            return [Problem(ERROR, "txnindex", f"entry {i} (producer, first, last, LSO) = {a}; "
                            f"the markers in the log say {b}", file, i * ABORTED_TXN_SIZE,
                            seg.base_offset)]
    if len(found) != len(expected):
        return [Problem(ERROR, "txnindex", f"{len(found)} aborted transactions indexed; the "
                        f"markers in the log abort {len(expected)}", file, n * ABORTED_TXN_SIZE,
                        seg.base_offset)]
    return []


# --- indexes --------------------------------------------------------------------------------


def _check_indexes(seg: Segment, table: EntryTable, problems: list[Problem], *,
                   active: bool) -> None:
    if seg.index is None:
        if seg.log_size:
            problems.append(Problem(WARNING, "index", "missing .index (a broker rebuilds it at "
                                    "load)", str(seg.log), None, seg.base_offset))
    else:
        index = _read(seg.index, read_offset_index, seg, problems, "index")
        if index is not None:
            check_offset_index(index, table, str(seg.index), problems, active=active)
    if seg.timeindex is not None:
        tindex = _read(seg.timeindex, read_time_index, seg, problems, "timeindex")
        if tindex is not None:
            check_time_index(tindex, table, str(seg.timeindex), problems, active=active)
    if seg.txnindex is not None:
        txn = _read(seg.txnindex, read_txn_index, seg, problems, "txnindex")
        if txn is not None:
            try:
                txn.sanity_check(file=str(seg.txnindex))
            except KafkaLogError as exc:
                problems.append(_from_error(exc, "txnindex"))


def _read(path, reader, seg: Segment, problems: list[Problem], check: str):
    try:
        with mapped_file(path) as buf:
            return reader(buf, seg.base_offset, file=str(path))
    except KafkaLogError as exc:
        problems.append(_from_error(exc, check))
        return None


def check_offset_index(index: OffsetIndex, table: EntryTable, file: str,
                       problems: list[Problem], *, active: bool = False) -> None:
    """Every ``.index`` entry ``(O, P)``: ``P`` starts an entry of the log, and the append
    starting there (one batch, or several for ≤3.9 follower appends) ends exactly at offset
    ``O``; offsets and positions strictly increase (KAFKA_FORMATS §9.2, §9.5)."""
    base = index.base_offset
    _zero_tail(index, 8, "index", file, problems, active)
    offsets, positions = index.offsets, index.positions
    if len(offsets) == 0:
        return
    starts = table.position
    at = np.searchsorted(starts, positions)
    # an empty (or wholly corrupt) log has no entry to point at; it must not be indexed at -1
    found = (at < len(starts)) & (starts[np.minimum(at, len(starts) - 1)] == positions) \
        if len(starts) else np.zeros(len(offsets), bool)
    # the first entry at/after `at` whose last offset reaches O must end exactly at O
    last = table.last_offset
    reach = np.searchsorted(last, offsets)  # last offsets increase in a healthy log
    ends_ok = (reach < len(last)) & (last[np.minimum(reach, len(last) - 1)] == offsets) \
        & (reach >= at) if len(last) else np.zeros(len(offsets), bool)
    increasing = np.ones(len(offsets), bool)
    increasing[1:] = (np.diff(offsets) > 0) & (np.diff(positions) > 0)
    for i in np.flatnonzero(~(found & ends_ok & increasing)).tolist():
        o, p = int(offsets[i]), int(positions[i])
        if not found[i]:
            why = "its position is not the start of an entry of the log"
        elif not increasing[i]:
            why = "offsets/positions do not increase"
        else:
            why = "no append starting at that position ends at that offset"
        problems.append(Problem(ERROR, "index", f"entry {i} ({o}, {p}): {why}", file, i * 8, base))


def check_time_index(index: TimeIndex, table: EntryTable, file: str,
                     problems: list[Problem], *, active: bool = False) -> None:
    """Every ``.timeindex`` entry ``(T, O)``: timestamps strictly increase, offsets never
    decrease, the entry holding ``O`` has max timestamp ``T``; the last entry is the segment's
    largest timestamp, which retention relies on (KAFKA_FORMATS §9.3)."""
    base = index.base_offset
    _zero_tail(index, 12, "timeindex", file, problems, active)
    ts, offsets = index.timestamps, index.offsets
    if len(ts) == 0:
        return
    last = table.last_offset
    holder = np.minimum(np.searchsorted(last, offsets), max(len(last) - 1, 0))
    first = np.where(table.magic == 2, table.offset, table.last_offset)
    ok = np.zeros(len(ts), bool)
    if len(last):
        # brokers before 4.x stored an offset inside the batch, so any offset of it is accepted
        inside = (offsets <= last[holder]) & (offsets >= np.minimum(first[holder], last[holder]))
        ok = inside & (table.max_timestamp[holder] == ts)
    order = np.ones(len(ts), bool)
    order[1:] = (np.diff(ts) > 0) & (np.diff(offsets) >= 0)
    for i in np.flatnonzero(~(ok & order)).tolist():
        why = ("timestamps/offsets out of order" if not order[i]
               else "the entry holding that offset does not have that max timestamp")
        problems.append(Problem(ERROR, "timeindex", f"entry {i} ({int(ts[i])}, "
                                f"{int(offsets[i])}): {why}", file, i * 12, base))
    true_max = int(table.max_timestamp.max()) if len(table) else -1
    if true_max > int(ts[-1]):
        problems.append(Problem(WARNING if active else ERROR, "timeindex",
                                f"last entry's timestamp {int(ts[-1])} is below the segment's "
                                f"largest timestamp {true_max} (retention would use the lower "
                                "one)", file, (len(ts) - 1) * 12, base))


def _zero_tail(index: OffsetIndex | TimeIndex, entry_size: int, check: str, file: str,
               problems: list[Problem], active: bool) -> None:
    """A preallocated index left at full length: normal for the active segment of a broker that
    stopped uncleanly (it rebuilds it), wrong anywhere else."""
    if index.has_zero_tail:
        zeros = index.entries_in_file - index.valid_entries
        problems.append(Problem(WARNING if active else ERROR, check,
                                f"{zeros} zero-filled entries after {index.valid_entries} valid "
                                "ones (preallocated file not trimmed: unclean shutdown)", file,
                                index.valid_entries * entry_size, index.base_offset))


def _from_error(exc: KafkaLogError, check: str) -> Problem:
    return Problem(ERROR, check, exc.reason, exc.file, exc.position, exc.base_offset)
