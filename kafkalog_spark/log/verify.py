"""Verification (log layer): can this log dir be trusted? Every problem located to the byte.

Checks, per partition (segments in offset order):

* **structure** — the shallow entry walk reaches the end of every ``.log`` (partial tails,
  zero-filled preallocated tails, sizes below the minimum, unknown magic);
* **crc** — every batch / message checksum (CRC-32C for v2, CRC-32 for v0/v1);
* **offsets** — offsets strictly increase across batches and segments, every batch lies at or
  above its segment's base offset and within ``Integer.MAX_VALUE`` of it;
* **records** (``deep=True``) — every batch decompresses and its records parse exactly;
* **index** / **timeindex** / **txnindex** — every entry of ``.index``/``.timeindex`` points
  where Kafka's rules say it must, preallocated zero tails, the time index's last entry versus
  the segment's largest timestamp, ``.txnindex`` entries against the segment base;
* **files** — leftovers of interrupted operations, orphaned indexes, a missing ``.index``,
  unreadable checkpoint files.

Read-only: files are memory-mapped read-only and nothing is written.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from ..codec import checkpoints as C
from ..codec import layout as L
from ..codec.crc import verify_crcs
from ..codec.decode import DecodeOptions, decode_entries
from ..codec.index import OffsetIndex, TimeIndex, read_offset_index, read_time_index, read_txn_index
from ..codec.scan import STOP_END, EntryTable, scan_entries
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
    report = VerifyReport(records=0 if deep else None)
    for log_dir in found.log_dirs:
        _check_log_dir_files(log_dir, report)
    for part in found.all_partition_dirs():
        _verify_partition(part, report, deep=deep, check_indexes=check_indexes)
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


# --- per log dir / partition ----------------------------------------------------------------


def _check_log_dir_files(log_dir: LogDir, report: VerifyReport) -> None:
    for name in N.CHECKPOINT_FILES:
        path = log_dir.path / name
        if path.exists():
            try:
                read_checkpoint_file(path, C.parse_offset_checkpoint)
            except KafkaLogError as exc:
                report.problems.append(_from_error(exc, "checkpoint"))
    for path in log_dir.leftovers:
        report.problems.append(Problem(WARNING, "files", "leftover temporary file of an "
                                       "interrupted checkpoint write", str(path)))


def _verify_partition(part: PartitionDir, report: VerifyReport, *, deep: bool,
                      check_indexes: bool) -> None:
    report.partitions += 1
    for path in part.leftovers:
        report.problems.append(Problem(WARNING, "files", "leftover of an interrupted segment "
                                       "operation (run `kafkalog recover`)", str(path)))
    for path in part.orphan_indexes:
        report.problems.append(Problem(WARNING, "files", "index file without its .log "
                                       "(a broker deletes it at load)", str(path)))
    prev_last: int | None = None
    segments = part.segments
    for i, seg in enumerate(segments):
        report.segments += 1
        report.bytes += seg.log_size
        active = i == len(segments) - 1
        prev_last = _verify_segment(part, seg, prev_last, report, deep=deep,
                                    check_indexes=check_indexes, active=active)


def _verify_segment(part: PartitionDir, seg: Segment, prev_last: int | None,
                    report: VerifyReport, *, deep: bool, check_indexes: bool,
                    active: bool) -> int | None:
    file = str(seg.log)
    problems = report.problems
    with mapped_file(seg.log) as buf:
        table = scan_entries(buf)
        report.batches += len(table)
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
        prev_last = _check_offsets(table, seg, prev_last, problems)
        if deep:
            report.records = (report.records or 0) + _deep_check(buf, table, part, seg, problems)
    if check_indexes:
        _check_indexes(seg, table, problems, active=active)
    return prev_last


def _base_at(table: EntryTable, i: int) -> int | None:
    return int(table.offset[i]) if 0 <= i < len(table) else None


def _check_offsets(table: EntryTable, seg: Segment, prev_last: int | None,
                   problems: list[Problem]) -> int | None:
    """Offsets strictly increase; batches sit in ``[base, base + 2^31 - 1]`` of the segment.

    A v2 batch's first offset is its base offset; a legacy entry's is only known after
    decompression, so for legacy entries the (last) offset itself must increase."""
    n = len(table)
    if n == 0:
        return prev_last
    file = str(seg.log)
    first = np.where(table.magic == 2, table.offset, table.last_offset)
    last = table.last_offset
    previous = np.empty(n, np.int64)
    previous[0] = np.iinfo(np.int64).min if prev_last is None else prev_last
    previous[1:] = last[:-1]
    for i in np.flatnonzero(first <= previous).tolist():
        problems.append(Problem(ERROR, "offsets", f"offset {int(first[i])} does not follow the "
                                f"previous entry's last offset {int(previous[i])}", file,
                                int(table.position[i]), int(table.offset[i])))
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
    return int(last[-1])


def _deep_check(buf: np.ndarray, table: EntryTable, part: PartitionDir, seg: Segment,
                problems: list[Problem]) -> int:
    """Decode every record (CRC already checked); returns the number of records."""
    options = DecodeOptions(verify_crc=False, on_error="skip", include_control=True,
                            allow_partial_tail=True)
    end = table.stop_position  # the structure check already reported what follows
    result = decode_entries(buf, topic=part.topic or "", partition=part.partition or 0,
                            options=options, end=end, file=str(seg.log))
    records = sum(b.num_rows for b in result)
    for bad in result.bad_ranges:
        problems.append(Problem(ERROR, "records", bad.reason, bad.file, bad.start,
                                bad.base_offset))
    return records


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
    found = (at < len(starts)) & (starts[np.minimum(at, len(starts) - 1)] == positions)
    # the first entry at/after `at` whose last offset reaches O must end exactly at O
    last = table.last_offset
    reach = np.searchsorted(last, offsets)  # last offsets increase in a healthy log
    ends_ok = (reach < len(last)) & (last[np.minimum(reach, len(last) - 1)] == offsets) & (reach >= at)
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
