"""Transaction visibility (log layer): aborted transactions and the last stable offset of a
partition, for ``read_committed`` reads (Spark-free; also meant for the Delta migration).

What a ``read_committed`` consumer sees (KAFKA_FORMATS §6.5, §9.4): a record of a transactional
batch from producer ``P`` at offset ``o`` is hidden when ``P``'s transaction holding ``o`` ended
with an ABORT marker, i.e. an aborted transaction ``(P, first, last)`` has ``first <= o < last``
(``last`` is the marker's offset); control records are never shown; and nothing at or after the
**last stable offset** (the first offset of the earliest transaction still open at the end of
the log) is returned.

Where the facts come from, cheapest first, as a broker does when it loads a log:

* the newest readable producer snapshot ``<X>.snapshot`` gives the transactions open at offset
  ``X`` (a broker writes one at every segment roll and at shutdown);
* segments before ``X`` contribute their ``.txnindex`` entries (a broker writes one for every
  segment holding an ABORT marker, so a segment without one has no aborts);
* from ``X`` to the end (usually only the active segment) the batch headers are replayed with
  :class:`~kafkalog_spark.codec.files.snapshot.ProducerStateTracker`, which derives the aborted
  transactions from the ABORT/COMMIT markers themselves and leaves the transactions still open.

Without a usable snapshot the whole partition is replayed from its first batch, so a log written
by a tool that keeps neither snapshots nor transaction indexes is still read correctly. Replay
reads entry headers and the one record of each marker batch, never record data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..codec.files import naming as N
from ..codec.files.index import read_txn_index
from ..codec.files.snapshot import ProducerStateTracker, read_snapshot
from ..errors import CorruptIndexError, KafkaLogError
from ..storage import mapped_file
from .model import PartitionDir, Segment


@dataclass(frozen=True)
class AbortedTxn:
    """One aborted transaction: records of ``producer_id`` at offsets in
    ``[first_offset, last_offset)`` are hidden (``last_offset`` is the ABORT marker's)."""

    producer_id: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True)
class TransactionView:
    """What ``read_committed`` needs to know about one partition.

    Attributes
    ----------
    aborted : tuple of AbortedTxn
        Sorted by first offset.
    last_stable_offset : int or None
        First offset of the earliest transaction open at the end of the log; ``None`` when
        none is open (the log end is stable).
    replayed_from : int or None
        Offset from which batch headers were replayed (``None``: nothing replayed).
    snapshot : str or None
        The producer snapshot the replay started from.
    txnindex_segments : int
        Segments whose ``.txnindex`` was used.
    """

    aborted: tuple[AbortedTxn, ...] = ()
    last_stable_offset: int | None = None
    replayed_from: int | None = None
    snapshot: str | None = None
    txnindex_segments: int = 0

    def aborted_in(self, lo: int | None, hi: int | None) -> tuple[AbortedTxn, ...]:
        """The aborted transactions overlapping offsets ``[lo, hi]`` (``None``: unbounded)."""
        return tuple(a for a in self.aborted
                     if (lo is None or a.last_offset > lo) and (hi is None or a.first_offset <= hi))


def transaction_view(part: PartitionDir | Sequence[Segment],
                     snapshots: Sequence[str] | None = None) -> TransactionView:
    """Aborted transactions and last stable offset of one partition.

    Parameters
    ----------
    part : PartitionDir or sequence of Segment
        The partition (its producer snapshots are used when a ``PartitionDir`` is given).
    snapshots : sequence of path, optional
        Producer snapshot files to consider instead of the partition's own.

    Returns
    -------
    TransactionView

    Raises
    ------
    KafkaLogError
        A ``.txnindex`` that does not parse, or batches that break the transaction rules
        (a non-transactional batch inside an open transaction).
    """
    segs = sorted(part.segments if isinstance(part, PartitionDir) else part,
                  key=lambda s: s.base_offset)
    if not segs:
        return TransactionView()
    if snapshots is None:
        snapshots = [str(p) for p in part.snapshots] if isinstance(part, PartitionDir) else []
    tracker, start, used = _start_state(snapshots, segs[0].base_offset)
    aborted: list[AbortedTxn] = []
    indexed = 0
    for i, seg in enumerate(segs):
        next_base = segs[i + 1].base_offset if i + 1 < len(segs) else None
        if next_base is not None and next_base <= start:
            # wholly before the replay start: the broker's .txnindex holds its aborts
            entries = _txn_index(seg)
            indexed += entries is not None
            aborted += [a for a in entries or () if a.last_offset < start]
            continue
        if seg.base_offset < start:
            entries = _txn_index(seg)  # the part of this segment before the replay start
            indexed += entries is not None
            aborted += [a for a in entries or () if a.last_offset < start]
        aborted += _replay(tracker, seg, start)
    ongoing = tracker.ongoing
    return TransactionView(
        aborted=tuple(sorted(set(aborted), key=lambda a: (a.first_offset, a.producer_id))),
        last_stable_offset=min(ongoing.values()) if ongoing else None,
        replayed_from=start, snapshot=used, txnindex_segments=indexed)


def aborted_mask(producer_id: np.ndarray, offset: np.ndarray, is_transactional: np.ndarray,
                 aborted: Sequence[AbortedTxn]) -> np.ndarray:
    """Which records belong to an aborted transaction.

    Parameters
    ----------
    producer_id, offset, is_transactional : numpy.ndarray
        Per record (the ``producerId``, ``offset`` and ``isTransactional`` columns).
    aborted : sequence of AbortedTxn
        As in :attr:`TransactionView.aborted` (any order).

    Returns
    -------
    numpy.ndarray of bool
        ``True`` for the records a ``read_committed`` consumer does not see.
    """
    mask = np.zeros(len(offset), dtype=bool)
    if not aborted or not len(offset):
        return mask
    pids = np.array([a.producer_id for a in aborted], dtype=np.int64)
    firsts = np.array([a.first_offset for a in aborted], dtype=np.int64)
    lasts = np.array([a.last_offset for a in aborted], dtype=np.int64)
    for pid in np.unique(pids).tolist():
        rows = np.flatnonzero(is_transactional & (producer_id == pid))
        if not len(rows):
            continue
        # one producer has at most one transaction open at a time: its ranges do not overlap
        mine = np.flatnonzero(pids == pid)
        order = mine[np.argsort(firsts[mine], kind="stable")]
        f, last = firsts[order], lasts[order]
        offs = offset[rows]
        slot = np.searchsorted(f, offs, side="right") - 1
        inside = slot >= 0
        hit = np.zeros(len(rows), dtype=bool)
        hit[inside] = offs[inside] < last[slot[inside]]
        mask[rows[hit]] = True
    return mask


# --- helpers ---------------------------------------------------------------------------------


def _start_state(snapshots: Sequence[str], log_start: int
                 ) -> tuple[ProducerStateTracker, int, str | None]:
    """The tracker seeded from the newest readable snapshot at or after the log start (a
    corrupt one is passed over, as ``ProducerStateManager`` does), with its offset."""
    found = []
    for path in snapshots:
        try:
            found.append((N.offset_from_file_name(path.rsplit("/", 1)[-1]), path))
        except KafkaLogError:
            continue  # not an <offset>.snapshot name: not a snapshot a broker would load
    for offset, path in sorted(found, reverse=True):
        if offset < log_start:
            break
        try:
            with mapped_file(path) as buf:
                snap = read_snapshot(buf, file=path)
        except CorruptIndexError:
            continue
        tracker = ProducerStateTracker()
        tracker.load_snapshot(snap)
        return tracker, offset, path
    return ProducerStateTracker(), log_start, None


def _txn_index(seg: Segment) -> list[AbortedTxn] | None:
    if seg.txnindex is None:
        return None
    with mapped_file(seg.txnindex) as buf:
        index = read_txn_index(buf, seg.base_offset, file=str(seg.txnindex))
    index.sanity_check(str(seg.txnindex))
    return [AbortedTxn(int(p), int(f), int(last)) for p, f, last in
            zip(index.producer_id, index.first_offset, index.last_offset)]


def _replay(tracker: ProducerStateTracker, seg: Segment, start: int) -> list[AbortedTxn]:
    with mapped_file(seg.log) as buf:
        position = 0
        if start > seg.base_offset:
            from .lookup import position_for_offset

            position = position_for_offset(seg, start, log_buffer=buf)
        try:
            done = tracker.apply(buf[position:], file=str(seg.log))
        except KafkaLogError as exc:
            raise exc.at(position_shift=position) from exc
    return [AbortedTxn(t.producer_id, t.first_offset, t.last_offset) for t in done]
