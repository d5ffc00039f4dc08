"""What a broker's log load does to one partition (recovery layer): which segments it recovers
and where it leaves producer snapshots — a model over offsets that reads no file;
:mod:`.plan` plans from it.

Kafka 4.1's ``LogLoader.load`` (``storage/.../internals/log/LogLoader.java``), in order:

1. ``loadSegmentFiles`` opens the segments in offset order. ``LogSegment.sanityCheck`` fails for a
   segment whose ``.index`` is missing (``NoSuchFileException``) or whose ``.txnindex`` has an
   entry ending below its base offset (``TransactionIndex.sanityCheck``, a
   ``CorruptIndexException``), and the loader recovers that segment at once, whatever the
   recovery point and the clean-shutdown marker (``recoverSegment``). It checks nothing else: a
   missing ``.timeindex`` is created empty, a missing ``.txnindex`` stays missing.
2. ``recoverLog``, without the clean-shutdown marker, recovers the segment holding the recovery
   point and every later one (``LogSegments.values(recoveryPoint, Long.MAX_VALUE)``).
3. ``recoverSegment``: ``UnifiedLog.rebuildProducerState`` up to the segment's base —
   ``ProducerStateManager.truncateAndReload`` deletes every snapshot above that base or at or
   below the checkpointed log start, the replay from the latest one left takes a snapshot at
   each of the (loaded) log's last two segment bases it passes, then one at the base — then
   ``LogSegment.recover`` rebuilds the ``.index``, ``.timeindex`` and ``.txnindex`` from the
   batches, and a snapshot is taken at the segment's end (after its last v2 batch).
4. ``removeStraySnapshots`` deletes the snapshots at no segment base, but the largest one when
   it lies above the last base (the one a clean shutdown writes at the log end); the final
   ``rebuildProducerState`` to the log end does as in 3 with the log start offset — or, after a
   clean shutdown that left no snapshot at all, takes (empty) ones at the last two bases and the
   log end.

``ProducerStateManager.takeSnapshot`` writes only above the latest snapshot it loaded or wrote.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field


def recovered_from_recovery_point(bases: Sequence[int], recovery_point: int | None) -> list[int]:
    """Step 2: the indexes of the segments ``recoverLog`` recovers — from the one holding the
    recovery point on (the last one whose base is at or below it: the active segment even when
    the recovery point is the log end), all when it is below the first base, none after a
    clean shutdown (``recovery_point`` ``None``)."""
    if recovery_point is None or not bases:
        return []
    return list(range(max(bisect_right(bases, recovery_point) - 1, 0), len(bases)))


@dataclass
class LoadedSnapshots:
    """Where the load leaves producer snapshots, which of the existing ones it leaves as they
    are, and why it deletes the others."""

    offsets: list[int] = field(default_factory=list)  # a snapshot at each after the load
    kept: set[int] = field(default_factory=set)  # existing ones never deleted
    deleted: dict[int, str] = field(default_factory=dict)  # an existing one gone -> why
    # existing ones whose state the load's replays go on from: the kept ones, and those a
    # producer-state rebuild loads before a later one deletes them
    read: set[int] = field(default_factory=set)
    # where a producer-state rebuild loads a snapshot, existing or one the load took (each
    # recovered segment has a ProducerStateManager of its own): expired producers go there
    reloads: set[int] = field(default_factory=set)


class _Files:
    """The snapshot files on disk (sorted offsets), as the load's producer-state managers
    change them."""

    def __init__(self, existing: Sequence[int]):
        self.offsets = sorted(set(existing))
        self.existing = frozenset(existing)
        self.deleted: dict[int, str] = {}
        self.read: set[int] = set()
        self.reloads: set[int] = set()

    def delete(self, offsets: Sequence[int], why: str) -> None:
        for o in offsets:
            if o in self.existing:
                self.deleted.setdefault(o, why)

    def keep_range(self, low: int, high: int, why_low: str, why_high: str) -> None:
        """Delete those at or below ``low`` and above ``high``."""
        lo, hi = bisect_right(self.offsets, low), bisect_right(self.offsets, high)
        self.delete(self.offsets[hi:], why_high)
        del self.offsets[hi:]
        if lo:
            self.delete(self.offsets[:lo], why_low)
            del self.offsets[:lo]

    def write(self, offset: int) -> None:
        i = bisect_left(self.offsets, offset)
        if i == len(self.offsets) or self.offsets[i] != offset:
            self.offsets.insert(i, offset)


class _Manager:
    """One ``ProducerStateManager``: its map end offset and last snapshot offset."""

    def __init__(self, files: _Files):
        self.files = files
        self.map_end = 0
        self.last_snap = 0

    def take_snapshot(self) -> None:
        if self.map_end > self.last_snap:
            self.files.write(self.map_end)
            self.last_snap = self.map_end

    def rebuild(self, bases: Sequence[int], last: int, log_start: int, why: str) -> None:
        """``UnifiedLog.rebuildProducerState`` over the loaded segments ``bases`` up to
        ``last``."""
        self.files.keep_range(log_start, last, f"at or below the log start offset {log_start} "
                              "(the loader's ProducerStateManager.truncateAndReload deletes it)",
                              why)
        offsets = self.files.offsets
        self.map_end = self.last_snap = offsets[-1] if offsets else log_start
        if offsets:
            self.files.reloads.add(offsets[-1])  # loadFromSnapshot
        if offsets and offsets[-1] in self.files.existing and offsets[-1] not in self.files.deleted:
            self.files.read.add(offsets[-1])  # an existing file, as it was
        if last > self.map_end:
            # the replay passes the segments from the one holding the map end offset to
            # ``last`` (LogSegments.values); it snapshots at the start of the last two
            start = self.map_end
            for base in bases[-2:]:
                i = bisect_right(bases, base)  # the index after this segment
                if base < last and (i == len(bases) or bases[i] > start):
                    self.map_end = max(base, self.map_end, log_start)
                    self.take_snapshot()
        self.map_end = last
        self.take_snapshot()


def loaded_snapshots(bases: Sequence[int], segment_ends: Sequence[int], log_end: int, *,
                     log_start_checkpoint: int, log_start: int, repaired: Sequence[int],
                     recovered: Sequence[int], clean_shutdown: bool,
                     existing: Sequence[int]) -> LoadedSnapshots:
    """Steps 1-4 of the module docstring over offsets.

    Parameters
    ----------
    bases, segment_ends : sequences of int
        Each segment's base offset, and the offset after its last v2 batch (its base if none).
    log_end : int
        The log end offset.
    log_start_checkpoint, log_start : int
        The partition's ``log-start-offset-checkpoint`` entry (0 without one; what
        ``recoverSegment`` uses) and the log start offset the load ends with.
    repaired : sequence of int
        Indexes of the segments step 1 recovers (their ``.index`` missing, their ``.txnindex``
        failing the sanity check).
    recovered : sequence of int
        Indexes of the segments step 2 recovers (:func:`recovered_from_recovery_point`).
    clean_shutdown : bool
        The log dir has the clean-shutdown marker.
    existing : sequence of int
        Offsets of the snapshots the partition has (readable ones).
    """
    files = _Files(existing)
    # step 1 runs while the segments load (those before the one recovered are loaded), step 2
    # over all of them
    for i, loaded in [*((i, bases[:i]) for i in sorted(repaired)),
                      *((i, bases) for i in recovered)]:
        manager = _Manager(files)
        manager.rebuild(loaded, bases[i], log_start_checkpoint,
                        f"above the base offset {bases[i]} of a segment the broker's load "
                        "recovers (ProducerStateManager.truncateAndReload deletes it)")
        manager.map_end = max(manager.map_end, segment_ends[i])
        manager.take_snapshot()
    at_bases = set(bases)
    strays = [o for o in files.offsets if o not in at_bases]
    if strays and strays[-1] > bases[-1]:
        strays.pop()  # the largest stray above the last base is kept
    files.delete(strays, "at no segment's base offset (the loader's removeStraySnapshots "
                 "deletes it)")
    gone = set(strays)
    files.offsets = [o for o in files.offsets if o not in gone]
    final = _Manager(files)
    if clean_shutdown and not files.offsets:
        for o in (*bases[-2:], log_end):
            final.map_end = o
            final.take_snapshot()
    else:
        final.rebuild(bases, log_end, log_start, f"beyond the log end offset {log_end}")
    # one deleted and taken again at the same offset is there after the load, with the state
    # the load replayed
    after = set(files.offsets)
    kept = set(files.existing) - set(files.deleted)
    return LoadedSnapshots(files.offsets, kept,
                           {o: why for o, why in files.deleted.items() if o not in after},
                           kept | files.read, files.reloads)
