"""Offset and timestamp lookups (log layer): through ``.index``/``.timeindex``, checked against
the ``.log``.

Kafka's semantics (KAFKA_FORMATS §2, §9):

* **by offset** (``LogSegment.translateOffset``): take the segment with the greatest base offset
  ≤ target, the greatest offset-index entry ≤ target, then scan entries forward from its
  position for the first entry whose **last offset ≥ target**; if the segment has none, the
  next segment's first such entry.
* **by timestamp** (``UnifiedLog.fetchOffsetByTimestamp``): the first segment whose largest
  timestamp ≥ target, the time-index entry ``(T, O)`` with greatest ``T`` ≤ target, the
  offset-index position for ``O``, then the first entry from there whose max timestamp ≥
  target.

An index is a hint written by a broker that may have crashed, so every entry used is checked
against the log before it is trusted: the position must be inside the file and start a valid
entry, that entry must lie after the previous index entry, and the append it starts must end
exactly at the indexed offset (time index: the entry holding that offset must carry that
timestamp). A failed check falls back to walking the segment from byte 0 and says why in
:attr:`EntryHit.index_problem`. Only entry headers are read; the record inside a batch is left
to the record decoder.

On an object store a lookup fetches only the bytes its walks cover (:class:`LogBytes`): each
walk from an index entry's position fetches a little and more only while its entry is not
found, so a lookup by timestamp over many segments reads their indexes and a few ranges, not
whole segments.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from ..codec.files.index import OffsetIndex, TimeIndex, read_offset_index, read_time_index
from ..codec.records.scan import (STOP_END, STOP_PARTIAL_ENTRY, STOP_SHORT_TAIL, EntryTable,
                                  scan_entries)
from ..storage import is_local, mapped_file, storage_for
from .model import PartitionDir, Segment


@dataclass(frozen=True)
class EntryHit:
    """The entry (v2 batch or legacy message/wrapper) a lookup lands on.

    ``offset`` is the entry's header offset (v2 base offset; legacy: the message offset, which
    for a compressed wrapper is its last offset), so the requested offset can lie inside the
    entry: readers skip records below it. ``index_used`` says the index narrowed the walk;
    ``index_problem`` says why an index present was not trusted.
    """

    segment: Segment
    position: int
    size: int
    offset: int
    last_offset: int
    max_timestamp: int
    index_used: bool
    index_problem: str | None = None


def find_offset(segments: PartitionDir | Sequence[Segment], offset: int) -> EntryHit | None:
    """The entry holding ``offset``, or the first entry after it (a compacted gap).

    Parameters
    ----------
    segments : PartitionDir or sequence of Segment
        The partition's segments (any order).
    offset : int
        Target offset. Below the first segment's base offset the first entry of the log is
        returned (Kafka would answer "offset out of range").

    Returns
    -------
    EntryHit or None
        ``None`` when no entry has a last offset ≥ ``offset`` (at or past the log end).
    """
    segs = _sorted(segments)
    bases = [s.base_offset for s in segs]
    first = max(0, int(np.searchsorted(bases, offset, side="right")) - 1)
    for seg in segs[first:]:
        hit = _find_offset_in_segment(seg, offset)
        if hit is not None:
            return hit
    return None


def find_timestamp(segments: PartitionDir | Sequence[Segment], timestamp: int) -> EntryHit | None:
    """The first entry whose max timestamp ≥ ``timestamp`` (``fetchOffsetsByTimestamp``).

    The first record with timestamp ≥ target lies inside the returned entry; which one needs
    the records' own timestamps (for a v1 uncompressed message the entry is that record).

    Parameters
    ----------
    segments : PartitionDir or sequence of Segment
        The partition's segments (any order).
    timestamp : int
        Target timestamp, milliseconds since the epoch.

    Returns
    -------
    EntryHit or None
        ``None`` when no entry has a timestamp ≥ ``timestamp``.
    """
    for seg in _sorted(segments):
        hit = _find_timestamp_in_segment(seg, timestamp)
        if hit is not None:
            return hit
    return None


# --- by offset -------------------------------------------------------------------------------


def position_for_offset(segment: Segment, offset: int, *,
                        log_buffer: np.ndarray | None = None) -> int:
    """Byte position in ``segment``'s ``.log`` where reading ``offset`` starts.

    The start of the first entry whose last offset ≥ ``offset`` (found through the validated
    offset index); when the segment has none, the end of its valid entries, so a reader
    starting there sees only what follows (nothing, or the corrupt tail).

    Parameters
    ----------
    segment : Segment
        The segment to read.
    offset : int
        Target offset.
    log_buffer : numpy.ndarray, optional
        The ``.log`` content if the caller has it mapped already.
    """
    if log_buffer is None:
        with log_bytes(segment) as log:
            return _position(segment, log, offset)
    return _position(segment, LogBytes(log_buffer), offset)


def _position(segment: Segment, log: LogBytes, offset: int) -> int:
    hit = _offset_in(segment, log, offset_index(segment), offset)
    return hit.position if hit is not None else log.walk(0).stop_position


def _find_offset_in_segment(seg: Segment, target: int) -> EntryHit | None:
    with log_bytes(seg) as log:
        return _offset_in(seg, log, offset_index(seg), target)


def _offset_in(seg: Segment, log: LogBytes, index: OffsetIndex | None,
               target: int) -> EntryHit | None:
    def reached(table: EntryTable) -> bool:
        return bool(len(table)) and int(table.last_offset[-1]) >= target

    problem = None
    if index is not None:
        o, p = index.lookup(target)
        if (o, p) != (seg.base_offset, 0):  # a real index entry, not the empty answer
            table = log.walk(p, reached)
            problem = check_offset_entry(index, o, p, table, log.size)
            if problem is None:
                return _first(seg, table, table.last_offset >= target, True, None)
    table = log.walk(0, reached)
    return _first(seg, table, table.last_offset >= target, False, problem)


def check_offset_entry(index: OffsetIndex, o: int, p: int, table: EntryTable,
                        log_size: int) -> str | None:
    """Why index entry ``(o, p)`` does not fit the log walked from ``p`` (``None``: it fits)."""
    where = f"offset index entry ({o}, {p})"
    if p >= log_size:
        return f"{where} points past the end of the log ({log_size} bytes)"
    if len(table) == 0:
        return f"{where}: no valid entry starts there ({table.stop_reason})"
    earlier = index.offsets[index.offsets < o]
    if len(earlier) and int(table.last_offset[0]) <= int(earlier[-1]):
        return (f"{where}: the entry there ends at offset {int(table.last_offset[0])}, not after "
                f"the previous index entry's offset {int(earlier[-1])}")
    # the append starting at p (one batch, or several for <=3.9 follower appends) ends at o
    reach = np.flatnonzero(table.last_offset >= o)
    if len(reach) == 0 or int(table.last_offset[reach[0]]) != o:
        return f"{where}: no entry from that position ends at offset {o}"
    return None


# --- by timestamp ----------------------------------------------------------------------------


def _find_timestamp_in_segment(seg: Segment, target: int) -> EntryHit | None:
    with log_bytes(seg) as log:
        return _timestamp_in(seg, log, target)


def _timestamp_in(seg: Segment, log: LogBytes, target: int) -> EntryHit | None:
    def reached(table: EntryTable) -> bool:
        return bool((table.max_timestamp >= target).any())

    oindex = offset_index(seg)
    tindex = _time_index(seg)
    problem = None
    start = 0
    if tindex is not None and tindex.valid_entries:
        # the last entry is the segment's largest timestamp (LogSegment.largestTimestamp)
        last_t, last_o = tindex.last_entry()
        problem, last_hit = _check_time_entry(seg, log, oindex, last_t, last_o)
        if problem is None:
            assert last_hit is not None
            later = log.walk(last_hit.position).max_timestamp
            if (later > last_t).any():
                problem = (f"time index ends at timestamp {last_t} but the log reaches "
                           f"{int(later.max())}")
        if problem is None and last_t < target:
            return None
        t, o = tindex.lookup(target)
        if problem is None and t >= 0:
            problem, hit = _check_time_entry(seg, log, oindex, t, o)
            if hit is not None and problem is None:
                # batch o is the first to reach t <= target: nothing before it qualifies
                start = hit.position
    table = log.walk(start, reached)
    return _first(seg, table, table.max_timestamp >= target, start > 0, problem)


def _check_time_entry(seg: Segment, log: LogBytes, oindex: OffsetIndex | None, t: int,
                      o: int) -> tuple[str | None, EntryHit | None]:
    """Check time-index entry ``(t, o)`` against the log: the entry holding offset ``o`` must
    carry max timestamp ``t``. Returns ``(problem or None, that entry)``.

    Kafka 4.x stores the batch's last offset; older brokers (seen from 2.1) stored the offset
    of a record inside it, so any offset of the batch is accepted.
    """
    hit = _offset_in(seg, log, oindex, o)
    if hit is None:
        return f"time index entry ({t}, {o}): the log ends before offset {o}", None
    if hit.max_timestamp != t:
        return (f"time index entry ({t}, {o}): the entry holding offset {o} has max "
                f"timestamp {hit.max_timestamp}"), hit
    return None, hit


# --- the bytes a lookup walks ----------------------------------------------------------------

FIRST_WALK_BYTES = 64 << 10
"""An object-store walk fetches this much from its start first, then four times more each time
its entry is not found yet."""


@dataclass
class LogBytes:
    """A segment's ``.log`` for lookups: ``buf`` holds it at file positions. Locally (``fetch``
    ``None``) that is the whole memory map; on an object store ``buf`` is zeros until a walk
    fetches the ranges it covers (``fetch(ranges)`` reads ``[start, end)`` ranges into it)."""

    buf: np.ndarray
    fetch: Callable[[list[tuple[int, int]]], list[bytes]] | None = None
    _have: list[tuple[int, int]] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.buf)

    def walk(self, start: int, enough: Callable[[EntryTable], bool] | None = None
             ) -> EntryTable:
        """:func:`~kafkalog_spark.codec.records.scan.scan_entries` from ``start``. On an object store
        the walk may end early, once ``enough(table)`` holds (``None``: walk to the end)."""
        if self.fetch is None:
            return scan_entries(self.buf, start=start)
        step = FIRST_WALK_BYTES
        while True:
            end = min(self.size, start + step)
            self._ensure(start, end)
            table = scan_entries(self.buf, start=start, end=end)
            cut_by_end = table.stop_code in (STOP_END, STOP_PARTIAL_ENTRY, STOP_SHORT_TAIL)
            if end >= self.size or not cut_by_end or (enough is not None and enough(table)):
                return table
            step *= 4

    def _ensure(self, start: int, end: int) -> None:
        missing, at = [], start
        for lo, hi in sorted(self._have):
            if hi <= at or lo >= end:
                continue
            if lo > at:
                missing.append((at, lo))
            at = max(at, hi)
        if at < end:
            missing.append((at, end))
        if not missing:
            return
        assert self.fetch is not None
        for (lo, hi), data in zip(missing, self.fetch(missing)):
            self.buf[lo:lo + len(data)] = np.frombuffer(data, np.uint8)
        self._have.extend(missing)


@contextmanager
def log_bytes(seg: Segment) -> Iterator[LogBytes]:
    """The segment's :class:`LogBytes`: mapped whole locally, fetched as walked remotely."""
    fs = storage_for(seg.log)
    if is_local(fs):
        with mapped_file(seg.log) as buf:
            yield LogBytes(buf)
        return
    yield LogBytes(np.zeros(seg.log_size, np.uint8),
                   lambda ranges: fs.read_ranges(seg.log, ranges))


# --- helpers ---------------------------------------------------------------------------------


def _first(seg: Segment, table: EntryTable, mask: np.ndarray, index_used: bool,
           problem: str | None) -> EntryHit | None:
    rows = np.flatnonzero(mask)
    if len(rows) == 0:
        return None
    i = int(rows[0])
    return EntryHit(segment=seg, position=int(table.position[i]), size=int(table.entry_size[i]),
                    offset=int(table.offset[i]), last_offset=int(table.last_offset[i]),
                    max_timestamp=int(table.max_timestamp[i]), index_used=index_used,
                    index_problem=problem)


def _sorted(segments: PartitionDir | Sequence[Segment]) -> list[Segment]:
    segs = segments.segments if isinstance(segments, PartitionDir) else segments
    return sorted(segs, key=lambda s: s.base_offset)


_REMOTE_INDEXES: OrderedDict[tuple[str, int | None], OffsetIndex | TimeIndex] = OrderedDict()
_REMOTE_INDEXES_LOCK = threading.Lock()
_REMOTE_INDEXES_KEPT = 64  # parsed index files of object-store segments kept per process


def forget_remote_indexes() -> None:
    """Drop the parsed index files kept for object-store segments (benchmarks measure the
    first read of a segment with this)."""
    with _REMOTE_INDEXES_LOCK:
        _REMOTE_INDEXES.clear()


def offset_index(seg: Segment) -> OffsetIndex | None:
    """The segment's parsed offset index (``None``: it has none). An object-store segment's
    is kept (a few, by file and size): one read of a split looks it up twice, a GET each time
    otherwise."""
    if seg.index is None:
        return None
    return _kept(seg.index, seg.index_size,
                 lambda buf: read_offset_index(buf, seg.base_offset, file=str(seg.index)))


def _time_index(seg: Segment) -> TimeIndex | None:
    if seg.timeindex is None:
        return None
    return _kept(seg.timeindex, seg.timeindex_size,
                 lambda buf: read_time_index(buf, seg.base_offset, file=str(seg.timeindex)))


def _kept(path, size: int | None, parse):
    """``parse`` of the index file ``path`` (the parsed index holds copies, not views); kept
    per process for an object-store file (:data:`_REMOTE_INDEXES_KEPT`, by file and size)."""
    remote = not is_local(storage_for(path))
    key = (str(path), size)
    if remote:
        with _REMOTE_INDEXES_LOCK:
            if key in _REMOTE_INDEXES:
                _REMOTE_INDEXES.move_to_end(key)
                return _REMOTE_INDEXES[key]
    with mapped_file(path) as buf:
        index = parse(buf)
    if remote:
        with _REMOTE_INDEXES_LOCK:
            _REMOTE_INDEXES[key] = index
            while len(_REMOTE_INDEXES) > _REMOTE_INDEXES_KEPT:
                _REMOTE_INDEXES.popitem(last=False)
    return index
