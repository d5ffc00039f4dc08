"""The cleaned segments' ``.txnindex`` (log-management layer), as Kafka's cleaner writes it
(``CleanedTransactionMetadata``, KAFKA_FORMATS §15.8).

The cleaner carries the aborted transactions of the source segments' ``.txnindex`` through a
cleaning: when it keeps an ABORT marker because it saw (and dropped) a data batch of that
transaction in this cleaning, it appends the transaction's entry, as the source index lists it,
to the index of the cleaned segment the marker lands in — although the aborted data is gone. A
marker whose transaction had no batch left in the cleaning gets no entry (its data went in an
earlier cleaning). :func:`indexed_aborts` takes those entries when a round is planned (from the
source files, which later passes of the round replace), :func:`txn_indexes` lays them out over a
pass's cleaned segments. Both engines use them, so their ``.txnindex`` bytes are the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..codec.files.index import TxnIndex, read_txn_index
from ..codec.files.snapshot import CompletedTxn
from ..log.partition_state import SegmentState
from ..storage import storage_for

# (marker offset, producer id, first offset, last offset, last stable offset)
IndexedAbort = tuple[int, int, int, int, int]


def indexed_aborts(segs: Sequence[SegmentState], kept: Iterable[CompletedTxn]
                   ) -> tuple[IndexedAbort, ...]:
    """The ``.txnindex`` entries of the aborted transactions ``kept`` (those whose ABORT marker
    the cleaner keeps having seen their data), sorted by marker offset: the entry the source
    segments' ``.txnindex`` holds for the same producer and marker (Kafka copies it, its first
    and last stable offsets as they were), else the one replayed from the batch headers (a
    segment whose index is missing).

    Raises
    ------
    CorruptIndexError
        A source ``.txnindex`` that does not parse (names the file).
    """
    listed: dict[tuple[int, int], tuple[int, int]] = {}
    for s in segs:
        path = s.segment.txnindex
        if path is None:
            continue
        index = read_txn_index(storage_for(path).read_bytes(path), s.base_offset, file=str(path))
        for pid, first, last, lso in zip(index.producer_id.tolist(), index.first_offset.tolist(),
                                         index.last_offset.tolist(),
                                         index.last_stable_offset.tolist()):
            listed[(pid, last)] = (first, lso)
    out = []
    for t in kept:
        first, lso = listed.get((t.producer_id, t.last_offset),
                                (t.first_offset, t.last_stable_offset))
        out.append((t.last_offset, t.producer_id, first, t.last_offset, lso))
    return tuple(sorted(out))


def txn_indexes(entries: Sequence[IndexedAbort], bases: Sequence[int], end: int
                ) -> list[bytes | None]:
    """``.txnindex`` bytes of each cleaned segment of a pass (base offsets ``bases``; the pass
    rewrote the segments below ``end``): the ``entries`` whose marker lies in its offsets, in
    marker order; ``None`` for a segment with none (Kafka creates the file with its first
    entry)."""
    ordered = sorted(bases)
    ends = dict(zip(ordered, [*ordered[1:], end]))
    out: list[bytes | None] = []
    for base in bases:
        mine = [e[1:] for e in entries if base <= e[0] < ends[base]]
        out.append(TxnIndex.from_entries(base, mine).to_bytes() if mine else None)
    return out
