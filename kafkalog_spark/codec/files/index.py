"""Segment index files (codec layer): ``.index``, ``.timeindex``, ``.txnindex`` — parse, write,
look up and sanity-check. Rebuilding them from a ``.log`` buffer as ``LogSegment.recover`` does
is in :mod:`.index_rebuild`.

Offset index ``.index`` (KAFKA_FORMATS §9.2), 8-byte entries, no header::

    0  int32  relativeOffset   offset - segment base offset (last offset of the indexed batch)
    4  int32  position         byte position of that batch's start in the .log

Time index ``.timeindex`` (§9.3), 12-byte entries, no header::

    0  int64  timestamp        max timestamp seen up to and including the batch below
    8  int32  relativeOffset   last offset of the batch carrying that max timestamp

Transaction index ``.txnindex`` (§9.4), 34-byte ``AbortedTxn`` entries, no header::

    0  int16  version          0 (Kafka reads only the first byte)
    2  int64  producerId
    10 int64  firstOffset      first offset of the aborted transaction
    18 int64  lastOffset       offset of the ABORT marker
    26 int64  lastStableOffset LSO when the abort completed

The numpy dtypes below are the one definition of these layouts. ``.index``/``.timeindex`` files
may carry a preallocated zero tail (§9.1): ``entries_in_file`` is Kafka's view
(``length // entry size``), ``valid_entries`` the robust one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import CorruptIndexError, Location
from .. import layout as L
from ..records.scan import as_uint8

OFFSET_INDEX_DTYPE = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
TIME_INDEX_DTYPE = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])
ABORTED_TXN_DTYPE = np.dtype([("version", ">i2"), ("producer_id", ">i8"), ("first_offset", ">i8"),
                              ("last_offset", ">i8"), ("last_stable_offset", ">i8")])
OFFSET_INDEX_ENTRY_SIZE = OFFSET_INDEX_DTYPE.itemsize  # 8
TIME_INDEX_ENTRY_SIZE = TIME_INDEX_DTYPE.itemsize  # 12
ABORTED_TXN_SIZE = ABORTED_TXN_DTYPE.itemsize  # 34

DEFAULT_INDEX_INTERVAL_BYTES = 4096  # index.interval.bytes
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024  # segment.index.bytes


def _loc(file: str | None, position: int | None = None, base_offset: int | None = None) -> Location:
    return Location(file=file, position=position, base_offset=base_offset)


def _entries(data, dtype: np.dtype, strict: bool, file: str | None, base_offset: int) -> np.ndarray:
    buf = as_uint8(data)
    n = len(buf) // dtype.itemsize
    if strict and len(buf) % dtype.itemsize:
        raise CorruptIndexError(
            f"index length {len(buf)} is not a multiple of {dtype.itemsize} (the entry size)",
            _loc(file, n * dtype.itemsize, base_offset))
    return np.frombuffer(buf[: n * dtype.itemsize].tobytes(), dtype=dtype)


def _zero_tail_start(*columns: np.ndarray) -> int:
    """Index of the first entry of the trailing run of all-zero entries (the preallocated tail)."""
    nonzero = np.zeros(len(columns[0]), dtype=bool)
    for col in columns:
        nonzero |= col != 0
    hits = np.flatnonzero(nonzero)
    return int(hits[-1]) + 1 if len(hits) else 0


def _first_violation(bad: np.ndarray) -> int:
    hits = np.flatnonzero(bad)
    return int(hits[0]) if len(hits) else len(bad)


# ------------------------------------------------------------------------------------------
# offset index
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OffsetIndex:
    """An offset index as stored (all ``length // 8`` entries) plus its robust valid prefix.

    ``valid_entries`` stops at the zero tail and at the first entry whose relative offset or
    position does not strictly increase (Kafka never writes such an entry, and never writes the
    all-zero entry (0, 0) because the first batch of a segment is never indexed).
    """

    base_offset: int
    relative_offset: np.ndarray  # int64, every entry in the file (Kafka's view)
    position: np.ndarray  # int64
    file_length: int
    valid_entries: int

    @property
    def entries_in_file(self) -> int:
        return len(self.relative_offset)

    @property
    def has_zero_tail(self) -> bool:
        return self.valid_entries < self.entries_in_file

    @property
    def offsets(self) -> np.ndarray:
        """Absolute offsets of the valid entries."""
        return self.relative_offset[: self.valid_entries] + self.base_offset

    @property
    def positions(self) -> np.ndarray:
        return self.position[: self.valid_entries]

    @property
    def dump_entries(self) -> int:
        """Entries DumpLogSegments prints: it stops at the first ``i > 0`` with relative offset 0."""
        hits = np.flatnonzero(self.relative_offset[1:] == 0)
        return int(hits[0]) + 1 if len(hits) else self.entries_in_file

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """Largest valid entry with offset ≤ ``target_offset`` as ``(offset, position)``;
        ``(base_offset, 0)`` when there is none (``OffsetIndex.lookup``)."""
        rel = self.relative_offset[: self.valid_entries]
        slot = int(np.searchsorted(rel, target_offset - self.base_offset, side="right")) - 1
        if slot < 0:
            return self.base_offset, 0
        return int(rel[slot]) + self.base_offset, int(self.position[slot])

    def sanity_check(self, file: str | None = None) -> None:
        """``OffsetIndex.sanityCheck``: raise :class:`CorruptIndexError` when the last entry in the
        file (Kafka's view) lies below the base offset or the length is not a multiple of 8."""
        n = self.entries_in_file
        if n and int(self.relative_offset[-1]) < 0:
            raise CorruptIndexError(
                f"corrupt offset index: last offset {int(self.relative_offset[-1]) + self.base_offset} "
                f"is below the base offset", _loc(file, (n - 1) * 8, self.base_offset))
        if self.file_length % OFFSET_INDEX_ENTRY_SIZE:
            raise CorruptIndexError(
                f"corrupt offset index: length {self.file_length} is not a multiple of 8",
                _loc(file, n * 8, self.base_offset))

    def to_bytes(self) -> bytes:
        """The trimmed file content: the valid entries only."""
        return offset_index_bytes(self.relative_offset[: self.valid_entries],
                                  self.position[: self.valid_entries])


def offset_index_bytes(relative_offset, position) -> bytes:
    """Encode offset-index entries (relative offsets and positions) as file bytes."""
    out = np.empty(len(relative_offset), dtype=OFFSET_INDEX_DTYPE)
    out["relative_offset"] = relative_offset
    out["position"] = position
    return out.tobytes()


def read_offset_index(data, base_offset: int, *, strict: bool = False,
                      file: str | None = None) -> OffsetIndex:
    """Parse ``.index`` bytes (may carry a zero tail).

    Parameters
    ----------
    data : bytes-like
        The file content.
    base_offset : int
        The segment's base offset (from the file name).
    strict : bool
        Raise :class:`CorruptIndexError` when the length is not a multiple of 8 (Kafka itself
        rounds down; :meth:`OffsetIndex.sanity_check` flags it either way).
    file : str, optional
        File name for error messages.
    """
    arr = _entries(data, OFFSET_INDEX_DTYPE, strict, file, base_offset)
    rel = arr["relative_offset"].astype(np.int64)
    pos = arr["position"].astype(np.int64)
    valid = _zero_tail_start(rel, pos)
    bad = (rel[:valid] < 0) | (pos[:valid] < 0)
    bad[1:] |= (np.diff(rel[:valid]) <= 0) | (np.diff(pos[:valid]) <= 0)
    valid = min(valid, _first_violation(bad))
    return OffsetIndex(base_offset, rel, pos, len(as_uint8(data)), valid)


# ------------------------------------------------------------------------------------------
# time index
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TimeIndex:
    """A time index as stored plus its robust valid prefix (timestamps strictly increasing,
    offsets non-decreasing, zero tail excluded)."""

    base_offset: int
    timestamp: np.ndarray  # int64, every entry in the file
    relative_offset: np.ndarray  # int64
    file_length: int
    valid_entries: int

    @property
    def entries_in_file(self) -> int:
        return len(self.timestamp)

    @property
    def has_zero_tail(self) -> bool:
        return self.valid_entries < self.entries_in_file

    @property
    def timestamps(self) -> np.ndarray:
        return self.timestamp[: self.valid_entries]

    @property
    def offsets(self) -> np.ndarray:
        return self.relative_offset[: self.valid_entries] + self.base_offset

    @property
    def dump_entries(self) -> int:
        """Entries DumpLogSegments prints: it stops at the first ``i > 0`` with relative offset 0."""
        hits = np.flatnonzero(self.relative_offset[1:] == 0)
        return int(hits[0]) + 1 if len(hits) else self.entries_in_file

    def last_entry(self) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last valid entry, ``(-1, base_offset)`` when empty."""
        if self.valid_entries == 0:
            return L.NO_TIMESTAMP, self.base_offset
        i = self.valid_entries - 1
        return int(self.timestamp[i]), int(self.relative_offset[i]) + self.base_offset

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """Largest valid entry with timestamp ≤ ``target_timestamp`` as ``(timestamp, offset)``;
        ``(-1, base_offset)`` when there is none (``TimeIndex.lookup``)."""
        ts = self.timestamp[: self.valid_entries]
        slot = int(np.searchsorted(ts, target_timestamp, side="right")) - 1
        if slot < 0:
            return L.NO_TIMESTAMP, self.base_offset
        return int(ts[slot]), int(self.relative_offset[slot]) + self.base_offset

    def sanity_check(self, file: str | None = None) -> None:
        """``TimeIndex.sanityCheck`` over Kafka's view of the file: the last timestamp must not be
        below the first, the last offset not below the base offset, and the length a multiple of
        12. A zero tail after real entries fails the first test."""
        n = self.entries_in_file
        if n and int(self.timestamp[-1]) < int(self.timestamp[0]):
            raise CorruptIndexError(
                f"corrupt time index: last timestamp {int(self.timestamp[-1])} is less than the "
                f"first timestamp {int(self.timestamp[0])}", _loc(file, (n - 1) * 12, self.base_offset))
        if n and int(self.relative_offset[-1]) < 0:
            raise CorruptIndexError(
                f"corrupt time index: last offset {int(self.relative_offset[-1]) + self.base_offset} "
                f"is below the base offset", _loc(file, (n - 1) * 12, self.base_offset))
        if self.file_length % TIME_INDEX_ENTRY_SIZE:
            raise CorruptIndexError(
                f"corrupt time index: length {self.file_length} is not a multiple of 12",
                _loc(file, n * 12, self.base_offset))

    def to_bytes(self) -> bytes:
        return time_index_bytes(self.timestamp[: self.valid_entries],
                                self.relative_offset[: self.valid_entries])


def time_index_bytes(timestamp, relative_offset) -> bytes:
    """Encode time-index entries (timestamps and relative offsets) as file bytes."""
    out = np.empty(len(timestamp), dtype=TIME_INDEX_DTYPE)
    out["timestamp"] = timestamp
    out["relative_offset"] = relative_offset
    return out.tobytes()


def read_time_index(data, base_offset: int, *, strict: bool = False,
                    file: str | None = None) -> TimeIndex:
    """Parse ``.timeindex`` bytes (may carry a zero tail); see :func:`read_offset_index`.

    A trailing all-zero entry is taken as preallocated tail. The only real entry that is all
    zero — timestamp 0 at the base offset — would be misread as tail; Kafka's own dump tool has
    the same blind spot for offset 0 entries after the first.
    """
    arr = _entries(data, TIME_INDEX_DTYPE, strict, file, base_offset)
    ts = arr["timestamp"].astype(np.int64)
    rel = arr["relative_offset"].astype(np.int64)
    valid = _zero_tail_start(ts, rel)
    bad = rel[:valid] < 0
    bad[1:] |= (np.diff(ts[:valid]) <= 0) | (np.diff(rel[:valid]) < 0)
    valid = min(valid, _first_violation(bad))
    return TimeIndex(base_offset, ts, rel, len(as_uint8(data)), valid)


# ------------------------------------------------------------------------------------------
# transaction index
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TxnIndex:
    """Aborted transactions of one segment (struct of arrays, one row per ``AbortedTxn``)."""

    base_offset: int
    version: np.ndarray  # int16
    producer_id: np.ndarray  # int64
    first_offset: np.ndarray  # int64
    last_offset: np.ndarray  # int64
    last_stable_offset: np.ndarray  # int64
    trailing_bytes: int = 0  # a partial entry at the end, ignored as Kafka does

    def __len__(self) -> int:
        return len(self.producer_id)

    def sanity_check(self, file: str | None = None) -> None:
        """``TransactionIndex.sanityCheck``: every entry's lastOffset ≥ the base offset."""
        bad = np.flatnonzero(self.last_offset < self.base_offset)
        if len(bad):
            i = int(bad[0])
            raise CorruptIndexError(
                f"corrupt transaction index: aborted transaction last offset "
                f"{int(self.last_offset[i])} is below the base offset",
                _loc(file, i * ABORTED_TXN_SIZE, self.base_offset))

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[tuple[int, int]], bool]:
        """``TransactionIndex.collectAbortedTxns``: ``(producer_id, first_offset)`` of entries with
        ``lastOffset ≥ fetch_offset`` and ``firstOffset < upper_bound_offset``, and whether the
        search is complete (an entry's LSO reached ``upper_bound_offset``)."""
        out: list[tuple[int, int]] = []
        for i in range(len(self)):
            if self.last_offset[i] >= fetch_offset and self.first_offset[i] < upper_bound_offset:
                out.append((int(self.producer_id[i]), int(self.first_offset[i])))
            if self.last_stable_offset[i] >= upper_bound_offset:
                return out, True
        return out, False

    def to_bytes(self) -> bytes:
        out = np.empty(len(self), dtype=ABORTED_TXN_DTYPE)
        for name in ABORTED_TXN_DTYPE.names:
            out[name] = getattr(self, name)
        return out.tobytes()

    @classmethod
    def from_entries(cls, base_offset: int, entries) -> "TxnIndex":
        """Build from ``(producer_id, first_offset, last_offset, last_stable_offset)`` tuples."""
        rows = np.array(list(entries), dtype=np.int64).reshape(-1, 4)
        return cls(base_offset, np.zeros(len(rows), np.int16), rows[:, 0].copy(), rows[:, 1].copy(),
                   rows[:, 2].copy(), rows[:, 3].copy())


def read_txn_index(data, base_offset: int, *, strict: bool = False,
                   file: str | None = None) -> TxnIndex:
    """Parse ``.txnindex`` bytes.

    Raises :class:`CorruptIndexError` for an entry whose version (first byte, as Kafka reads
    it) is not 0, and — with ``strict`` — for a partial trailing entry.
    """
    arr = _entries(data, ABORTED_TXN_DTYPE, strict, file, base_offset)
    raw = as_uint8(data)
    first_bytes = raw[0: len(arr) * ABORTED_TXN_SIZE: ABORTED_TXN_SIZE]
    bad = np.flatnonzero(first_bytes != 0)
    if len(bad):
        i = int(bad[0])
        raise CorruptIndexError(f"unexpected aborted transaction version {int(first_bytes[i])}",
                                _loc(file, i * ABORTED_TXN_SIZE, base_offset))
    return TxnIndex(base_offset, arr["version"].astype(np.int16), arr["producer_id"].astype(np.int64),
                    arr["first_offset"].astype(np.int64), arr["last_offset"].astype(np.int64),
                    arr["last_stable_offset"].astype(np.int64),
                    trailing_bytes=len(raw) - len(arr) * ABORTED_TXN_SIZE)
