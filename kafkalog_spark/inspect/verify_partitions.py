"""Per-partition verification (inspect layer): offsets across segment boundaries,
``leader-epoch-checkpoint``, leftover files, and the producer state — each ``.txnindex`` and
producer snapshot against a replay of the partition's batch headers.

Per partition (:func:`check_segment_sequence`, :func:`check_leader_epochs`,
:func:`verify_producer_state`): offsets increase across segments; ``leader-epoch-checkpoint``
parses and no epoch starts beyond the log end; the ``.txnindex`` of every segment equals what
the ABORT markers in the log produce (§6.5); every producer snapshot's CRC, and its contents
against a replay of the batch headers (§10); leftovers of interrupted operations and orphaned
indexes.

They work from the :class:`~kafkalog_spark.inspect.verify_segments.SegmentCheck` of each segment,
so a segment's headers are read again only for the producer replay. Read-only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..codec.files import checkpoints as C
from ..codec.files import naming as N
from ..codec.files.index import ABORTED_TXN_SIZE, TxnIndex, read_txn_index
from ..codec.files.snapshot import (PRODUCER_ENTRY, SNAPSHOT_HEADER, ProducerSnapshot,
                                    ProducerStateTracker, read_snapshot)
from ..codec.records.scan import scan_entries
from ..errors import KafkaLogError
from ..log.model import PartitionDir, Segment
from ..storage import mapped_file, storage_for
from ..storage.atomic import read_checkpoint_file
from .verify_segments import ERROR, WARNING, Problem, SegmentCheck, _from_error

# --- per partition -----------------------------------------------------------------------------


def partition_bounds(part: PartitionDir, checks: Sequence[SegmentCheck]) -> tuple[int, int]:
    """``(first segment base offset, log end offset)``; the log end is ``readNextOffset`` of
    the last segment (its base offset when it holds no valid entry)."""
    if not part.segments:
        return 0, 0
    last = checks[-1].next_offset
    return part.segments[0].base_offset, part.segments[-1].base_offset if last is None else last


def _partition_file_problems(part: PartitionDir) -> list[Problem]:
    problems = []
    if part.kind == N.DELETE_DIR:
        problems.append(Problem(WARNING, "files", "partition dir queued for deletion (a broker "
                                "deletes it after file.delete.delay.ms)", str(part.path)))
    for path in part.leftovers:
        # .deleted is no interruption: a live broker renames a segment it deletes (retention,
        # cleaning, DeleteRecords) and removes it file.delete.delay.ms later, or at its next load
        reason = ("segment file the broker deleted, left for file.delete.delay.ms (a broker "
                  "removes it at load; `kafkalog recover` quarantines it)"
                  if path.name.endswith(f".{N.DELETED}") else
                  "leftover of an interrupted segment operation (run `kafkalog recover`)")
        problems.append(Problem(WARNING, "files", reason, str(path)))
    for path in part.orphan_indexes:
        problems.append(Problem(WARNING, "files", "index file without its .log "
                                "(a broker deletes it at load)", str(path)))
    return problems + _remote_tier_problems(part)


def _remote_tier_problems(part: PartitionDir) -> list[Problem]:
    """How the partition's remote segments join its local ones (log.history): overlapping
    remote segments and offsets in no segment are errors (reads refuse them), a remote segment
    running into the local log and remote segments left out are warnings."""
    h, where = part.remote, str(part.path)
    if h is None:
        return []
    out = [Problem(ERROR, "remote tier", f"remote segments overlap each other: {line}", where)
           for line in h.conflicts]
    out += [Problem(ERROR, "remote tier", f"offsets {a}..{b} are in no segment, neither in "
                    f"{h.tier} nor in the log dir", where, None, a) for a, b in h.gaps]
    out += [Problem(WARNING, "remote tier", line, where) for line in h.overlaps]
    out += [Problem(WARNING, "remote tier", f"not read: {line}", where) for line in h.not_read]
    return out


def check_leader_epochs(part: PartitionDir, log_end: int) -> list[Problem]:
    """``leader-epoch-checkpoint`` parses, and no epoch starts beyond the log end offset (a
    broker truncates such entries at load; they mean the file is stale or the log was cut)."""
    path = part.path / N.LEADER_EPOCH_CHECKPOINT
    if not storage_for(path).exists(path):
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
            # a remote segment the local log overlaps is read only up to its last_offset
            # (reported by _remote_tier_problems)
            prev_last = c.last_offset if seg.last_offset is None else \
                min(c.last_offset, seg.last_offset)
    return problems


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
                problems.extend(compare_txn_index(seg, aborted))
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
        bare, tracker.bare_aborts = tracker.bare_aborts, []
        if check_indexes:
            problems.extend(compare_txn_index(seg, aborted, bare))
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
        # the snapshot knows a later batch of the producer than the log holds before its
        # offset: the cleaner removed it after the snapshot was taken (seen on a Kafka 4.1
        # broker: a snapshot taken at a roll, the producer's batches before it cleaned away
        # but its last one), and the broker goes on from the snapshot's state
        ahead = e.last_offset > r.last_offset
        fields = [f for f in _COMPARED if getattr(e, f) != getattr(r, f)
                  and not (f in ("last_sequence", "last_offset", "offset_delta")
                           and (r.last_offset < 0 or ahead))
                  # the cleaner rebuilds a batch it removes records from with the largest
                  # timestamp of those it keeps, after a snapshot took the batch's old one (seen
                  # on a Kafka 4.1 broker: snapshot 1795704235441, cleaned batch ...440)
                  and not (f == "timestamp" and e.timestamp > r.timestamp)
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


def compare_txn_index(seg: Segment, aborted: list,
                       bare: Sequence[tuple[int, int]] = ()) -> list[Problem]:
    """The segment's ``.txnindex`` against the transactions its ABORT markers close. An entry
    for a ``bare`` marker (one that closed no open transaction: the cleaner removed the data
    and kept the marker) may be there or not — the cleaner keeps it in the round that removes
    the data and drops it in a later one (KAFKA_FORMATS §15.8); only its producer and last
    offset can be checked against the log. Likewise an entry whose first or last stable offset
    lies before the replayed one: the cleaner copies the source segment's entry as it was after
    removing batches — the transaction's first ones, or another transaction's open at its
    marker (an earlier last stable offset only makes a fetch scan further)."""
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
    want = [tuple(int(getattr(expected, c)[i]) for c in cols) for i in range(len(expected))]
    optional = set(bare)
    j, extra = 0, None  # next expected entry; first entry no marker accounts for
    for i in range(len(found)):
        a = tuple(int(getattr(found, c)[i]) for c in cols)
        if j < len(want) and (a[0], a[2]) == (want[j][0], want[j][2]) and \
                a[1] <= want[j][1] and a[3] <= want[j][3]:
            j += 1
        elif (a[0], a[2]) in optional and a[1] <= a[2]:
            optional.discard((a[0], a[2]))
        elif j < len(want):
            return [Problem(ERROR, "txnindex", f"entry {i} (producer, first, last, LSO) = {a}; "
                            f"the markers in the log say {want[j]}", file, i * ABORTED_TXN_SIZE,
                            seg.base_offset)]
        else:
            extra = i
            break
    if extra is not None or j < len(want):
        kept = f" (and {len(bare)} kept by the cleaner may be listed)" if bare else ""
        at = len(found) if extra is None else extra
        return [Problem(ERROR, "txnindex", f"{len(found)} aborted transactions indexed; the "
                        f"markers in the log abort {len(want)}{kept}", file,
                        at * ABORTED_TXN_SIZE, seg.base_offset)]
    return []
