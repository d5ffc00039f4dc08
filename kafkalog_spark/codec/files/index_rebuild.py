"""Rebuilding segment indexes from a ``.log`` buffer (codec layer): ``.index`` and ``.timeindex``
exactly as ``LogSegment.recover`` does, and ``.txnindex`` from the transaction markers.

The index formats themselves (and their readers/writers) are in :mod:`.index`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import CorruptIndexError
from .. import layout as L
from .._jit import njit
from ..records.crc import verify_crcs
from ..records.scan import as_uint8, scan_entries
from .index import DEFAULT_INDEX_INTERVAL_BYTES, OffsetIndex, TimeIndex, TxnIndex, _loc

_OK = 0
_INDEX_OFFSET_NOT_INCREASING = 1  # OffsetIndex.append: InvalidOffsetException
_TIME_OFFSET_DECREASING = 2  # TimeIndex.maybeAppend: InvalidOffsetException


@njit(cache=True, nogil=True)
def _recover_entries(position, entry_size, last_offset, max_timestamp, n, base_offset, interval,
                     idx_rel, idx_pos, ts_ts, ts_rel):
    """The index part of ``LogSegment.recover`` over the first ``n`` valid entries.

    Returns ``(n_offset_entries, n_time_entries, failing_entry, status)``.
    """
    n_idx = 0
    n_ts = 0
    valid_bytes = 0
    last_index_entry = 0
    max_ts = -1  # TimestampOffset.UNKNOWN
    max_ts_offset = -1
    last_idx_offset = base_offset
    last_ts = -1  # an empty time index's lastEntry is (-1, baseOffset)
    last_ts_offset = base_offset
    for i in range(n):
        lo = last_offset[i]
        if max_timestamp[i] > max_ts:
            max_ts = max_timestamp[i]
            max_ts_offset = lo
        if valid_bytes - last_index_entry > interval:
            if n_idx > 0 and lo <= last_idx_offset:
                return n_idx, n_ts, i, _INDEX_OFFSET_NOT_INCREASING
            idx_rel[n_idx] = lo - base_offset
            idx_pos[n_idx] = valid_bytes
            n_idx += 1
            last_idx_offset = lo
            if n_ts > 0 and max_ts_offset < last_ts_offset:
                return n_idx, n_ts, i, _TIME_OFFSET_DECREASING
            if max_ts > last_ts:
                ts_ts[n_ts] = max_ts
                ts_rel[n_ts] = max_ts_offset - base_offset
                n_ts += 1
                last_ts = max_ts
                last_ts_offset = max_ts_offset
            last_index_entry = valid_bytes
        valid_bytes += entry_size[i]
    # the final entry a closed/recovered segment always gets (skipFullCheck = true)
    if n_ts > 0 and max_ts_offset < last_ts_offset:
        return n_idx, n_ts, n, _TIME_OFFSET_DECREASING
    if max_ts > last_ts:
        ts_ts[n_ts] = max_ts
        ts_rel[n_ts] = max_ts_offset - base_offset
        n_ts += 1
    return n_idx, n_ts, n, _OK


@dataclass(frozen=True)
class RecoveredIndexes:
    """What ``LogSegment.recover`` leaves behind for the offset and time indexes.

    ``valid_bytes`` is where recovery truncates the ``.log`` (the end of the last valid entry);
    ``next_offset`` the offset after its last valid entry (the base offset when none is);
    ``stop_reason`` says why the walk ended early, ``None`` when every byte was valid.
    """

    offset_index: OffsetIndex
    time_index: TimeIndex
    valid_bytes: int
    entries: int
    stop_reason: str | None
    next_offset: int


def build_indexes(data, base_offset: int, *, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                  verify_crc: bool = True, file: str | None = None) -> RecoveredIndexes:
    """Rebuild ``.index`` and ``.timeindex`` from a whole ``.log`` buffer as recovery does.

    Entry rule (§9.5/§12.5): ``validBytes − lastIndexEntry > index_interval_bytes`` adds
    ``(batch lastOffset, validBytes)`` plus a time entry for the max timestamp so far (only if it
    strictly increased); the max-timestamp entry is appended once more at the end. The walk stops
    at the first entry that fails ``ensureValid`` (size, magic, CRC when ``verify_crc``) or at a
    partial tail — the bytes recovery would truncate. A v0-only segment gets an empty time index.

    Not modelled: a marker that fails to parse also stops Kafka's walk (after its own index
    entry); see :func:`build_txn_index`, which raises on it instead.

    Raises
    ------
    CorruptIndexError
        An offset outside ``[base, base + 2^31 − 1]`` (Kafka: LogSegmentOffsetOverflowException,
        the segment must be split, §12.6) or an offset that does not increase where an index
        entry is due (Kafka: InvalidOffsetException, the segment is emptied, §12.4).
    """
    buf = as_uint8(data)
    table = scan_entries(buf)
    n = len(table)
    stop_reason = None if table.stop_code == 0 else table.stop_reason
    if verify_crc and n:
        bad = np.flatnonzero(~verify_crcs(buf, table))
        if len(bad):
            n, stop_reason = int(bad[0]), "checksum mismatch"
    last = table.last_offset[:n]
    rel = last - base_offset
    overflow = np.flatnonzero((rel < 0) | (rel > L.INT32_MAX))
    if len(overflow):
        i = int(overflow[0])
        raise CorruptIndexError(
            f"offset {int(last[i])} cannot be stored relative to the segment base offset "
            f"(offset overflow; the segment needs splitting)", _loc(file, int(table.position[i]), base_offset))
    idx_rel = np.empty(n, np.int64)
    idx_pos = np.empty(n, np.int64)
    ts_ts = np.empty(n + 1, np.int64)
    ts_rel = np.empty(n + 1, np.int64)
    n_idx, n_ts, failed, status = _recover_entries(
        table.position, table.entry_size.astype(np.int64), last.astype(np.int64),
        table.max_timestamp, n, base_offset, index_interval_bytes, idx_rel, idx_pos, ts_ts, ts_rel)
    if status != _OK:
        what = ("offset index entry offset does not increase" if status == _INDEX_OFFSET_NOT_INCREASING
                else "time index entry offset decreases")
        pos = int(table.position[failed]) if failed < n else int(table.stop_position)
        raise CorruptIndexError(f"{what} (Kafka would empty this segment)", _loc(file, pos, base_offset))
    valid_bytes = int(table.position[n - 1] + table.entry_size[n - 1]) if n else 0
    oi = OffsetIndex(base_offset, idx_rel[:n_idx].copy(), idx_pos[:n_idx].copy(), n_idx * 8, n_idx)
    ti = TimeIndex(base_offset, ts_ts[:n_ts].copy(), ts_rel[:n_ts].copy(), n_ts * 12, n_ts)
    next_offset = int(last[n - 1]) + 1 if n else base_offset
    return RecoveredIndexes(oi, ti, valid_bytes, n, stop_reason, next_offset)


def build_txn_index(data, base_offset: int, *, ongoing_txns: dict[int, int] | None = None,
                    file: str | None = None) -> TxnIndex:
    """Rebuild ``.txnindex`` from a ``.log`` buffer as recovery does (§6.5, §12.5).

    Parameters
    ----------
    data : bytes-like
        The segment's ``.log`` content (valid entries; a partial tail is ignored).
    base_offset : int
        The segment's base offset.
    ongoing_txns : dict, optional
        Transactions still open when the segment starts: producer id → first offset (from the
        producer state at the segment's base offset). Needed for correct lastStableOffsets.
    file : str, optional
        File name for error messages.

    Returns
    -------
    TxnIndex
        One ``AbortedTxn`` per ABORT marker that closed a non-empty transaction, with
        ``lastStableOffset`` = first offset of the earliest still-open transaction of another
        producer, else marker offset + 1.
    """
    from .snapshot import ProducerStateTracker

    tracker = ProducerStateTracker()
    for pid, first in (ongoing_txns or {}).items():
        tracker.open_transaction(pid, first)
    aborted = tracker.apply(data, file=file)
    return TxnIndex.from_entries(base_offset, [(t.producer_id, t.first_offset, t.last_offset,
                                                t.last_stable_offset) for t in aborted])
