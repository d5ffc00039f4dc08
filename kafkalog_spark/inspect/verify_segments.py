"""Per-segment verification (inspect layer): a ``.log``'s structure, CRCs, offsets and records, and
its ``.index``/``.timeindex``/``.txnindex`` against it; also :class:`Problem`, the finding every
verify check reports, and :class:`SegmentCheck`, one segment's result.

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

Read-only: files are memory-mapped read-only and nothing is written. Used by
:func:`kafkalog_spark.inspect.verify.verify` and by the Spark job of
:mod:`kafkalog_spark.recovery.verify_job`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..codec import layout as L
from ..codec.files.index import (OffsetIndex, TimeIndex, read_offset_index, read_time_index,
                                 read_txn_index)
from ..codec.records.crc import verify_crcs
from ..codec.records.decode import DecodeOptions, decode_entries
from ..codec.records.scan import STOP_END, EntryTable, scan_entries
from ..errors import KafkaLogError
from ..log.model import Segment
from ..storage import mapped_file, storage_for

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


def _from_error(exc: KafkaLogError, check: str) -> Problem:
    return Problem(ERROR, check, exc.reason, exc.file, exc.position, exc.base_offset)


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
        storage_for(seg.log).open_read(seg.log).close()
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
        hint = ("; offset overflow: `kafkalog recover` splits the segment as Kafka's loader does"
                if rel[i] > L.INT32_MAX and first[i] >= seg.base_offset else "")
        problems.append(Problem(ERROR, "offsets", f"entry offsets {int(first[i])}..{int(last[i])} "
                                f"are outside the segment's range from base offset "
                                f"{seg.base_offset}{hint}", file, int(table.position[i]),
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
