"""What recovery does to one partition (recovery layer).

:func:`plan_partition` walks its segments
as Kafka's ``LogLoader`` does — leftovers, the first invalid entry, indexes, producer snapshots,
leader epochs — and plans the actions; :func:`plan_checkpoints` the log dir's offset checkpoints.
Nothing is changed here: :mod:`.recover` runs the plan."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..codec.files import checkpoints as C
from ..codec.files import naming as N
from ..codec.files.index import read_txn_index
from ..codec.files.index_rebuild import DEFAULT_INDEX_INTERVAL_BYTES
from ..codec.records.scan import scan_entries
from ..errors import KafkaLogError
from ..log.model import PartitionDir, Segment
from ..storage import mapped_file, storage_for
from ..storage.atomic import read_checkpoint_file
from .actions import CUT_TAIL, QUARANTINE_FILE, WRITE_FILE, Action
from .loader import LoadedSnapshots, loaded_snapshots, recovered_from_recovery_point
from .rebuild import index_path, plan_segment_indexes, plan_txn_index, read_snapshots, replay_partition
from .validity import first_invalid_entry


@dataclass
class PartitionOutcome:
    """One partition's plan and what the log looks like after it."""

    name: str
    path: str
    actions: list[Action] = field(default_factory=list)
    first_base: int = 0
    log_end: int = 0
    cut: dict | None = None  # {"file", "position", "base_offset", "reason"}
    damage: list[dict] = field(default_factory=list)  # --salvage: the ranges dropped, gaps
    salvage_would_keep: dict | None = None  # default run with a cut: what --salvage keeps
    # what recover leaves as the broker's load does (an index the load trusts), and how to fix it
    left: list[str] = field(default_factory=list)



# --- one partition -------------------------------------------------------------------------------


def plan_partition(part: PartitionDir, *, log_start_checkpoint: int = 0,
                   recovery_point: int | None = 0, tiered: bool = False,
                   repair_trusted: bool = False, check_all: bool = False,
                   index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                   now_ms: int | None = None) -> PartitionOutcome:
    """Plan steps 2-6 of the module docstring for one partition (swap passes already applied or
    simulated in ``part``). ``recovery_point``: its ``recovery-point-offset-checkpoint`` entry
    (0 without one), ``None`` after a clean shutdown (the broker's load then recovers only the
    segments its sanity check fails: :mod:`.loader`). ``tiered``: part of its history is in a
    remote tier (:mod:`kafkalog_spark.log.tiered_topics`), whose offsets keep their leader
    epochs. ``repair_trusted``: also rebuild a missing or inconsistent index of a segment the
    load does not recover (a log dir we have just written); otherwise it is left as the load
    leaves it and listed in ``left``. ``check_all`` (implied by ``repair_trusted``; ``recover
    --salvage``): cut at the first invalid entry in any segment, not only in those the load
    recovers. ``index_interval_bytes``: the topic's, for the indexes of the segments the load
    recovers. ``now_ms``: the time of the load, whose snapshot loads leave expired producers
    out (:meth:`~kafkalog_spark.codec.files.snapshot.ProducerStateTracker.expire`)."""
    out = PartitionOutcome(part.name, str(part.path))
    for p in part.leftovers:
        if not p.name.endswith(f".{N.CHECKPOINT}.{N.DELETED}"):
            out.actions.append(Action(QUARANTINE_FILE, str(p), "leftover of an interrupted write"))
    for p in part.orphan_indexes:
        out.actions.append(Action(QUARANTINE_FILE, str(p), "index file without its .log "
                                  "(LogLoader deletes it)"))
    segs = list(part.segments)
    if not segs:
        return out
    out.first_base = segs[0].base_offset
    failing = {i: why for i, seg in enumerate(segs) if (why := load_sanity_check(seg))}
    # the load checks the batches of the segments it recovers only; a log dir just written
    # (repair_trusted) or salvaged is checked everywhere
    checked = set(range(len(segs))) if repair_trusted or check_all else {
        *failing, *recovered_from_recovery_point([s.base_offset for s in segs], recovery_point)}
    ends, epochs, v2_ends, cut, unchecked = _valid_prefix(segs, checked)
    valid, corrupt = read_snapshots(part)
    while True:  # a marker Kafka cannot parse moves the cut earlier; replay again
        kept = segs[:len(ends)]
        leo = _log_end(kept[-1], ends[-1])
        # with remote storage on the loader keeps the checkpointed log start below the local log
        log_start = min(log_start_checkpoint if tiered
                        else max(log_start_checkpoint, out.first_base), leo)
        bases = [s.base_offset for s in kept]
        recovered = recovered_from_recovery_point(bases, recovery_point)
        repaired = [i for i in failing if i < len(kept)]
        loaded = loaded_snapshots(bases, v2_ends, leo, log_start_checkpoint=log_start_checkpoint,
                                  log_start=log_start, repaired=repaired, recovered=recovered,
                                  clean_shutdown=recovery_point is None, existing=sorted(valid))
        # the replay goes on from the snapshots the load's replays go on from, not from
        # those it deletes first (and may take again)
        usable = {o: v for o, v in valid.items() if o in loaded.read}
        replay = replay_partition(kept, ends, usable, targets=loaded.offsets, now_ms=now_ms,
                                  reloads=sorted(loaded.reloads))
        if replay.error is None:
            break
        i, pos = replay.error_segment, replay.error.position or 0
        ends = ends[:i + 1]
        ends[i] = pos
        epochs, v2_ends = epochs[:i + 1], v2_ends[:i + 1]
        cut = (i, pos, replay.error.reason, replay.error.base_offset)
        with mapped_file(segs[i].log) as buf:
            t = scan_entries(buf, end=pos)
        epochs[i], v2_ends[i] = _v2_batches(t, len(t), segs[i].base_offset)
    out.log_end = leo
    # 3: later segments (index files first), snapshots beyond the end, then the tail
    if cut is not None:
        i, pos, reason, base = cut
        out.cut = {"file": str(segs[i].log), "position": pos, "base_offset": base, "reason": reason}
        for seg in reversed(segs[i + 1:]):
            for p in (seg.index, seg.timeindex, seg.txnindex, seg.log):
                if p is not None:
                    out.actions.append(Action(QUARANTINE_FILE, str(p), f"segment after the "
                                              f"truncation point ({reason} in {segs[i].log.name} "
                                              f"at byte {pos})"))
    if cut is not None and cut[1] < segs[cut[0]].log_size:
        seg = segs[cut[0]]
        out.actions.append(Action(CUT_TAIL, str(seg.log), f"{cut[2]} at byte {cut[1]}",
                                  start=cut[1], end=seg.log_size))
    # 4: indexes as the broker's load leaves them: a segment it recovers has all three rebuilt
    # from its batches (LogSegment.recover), the others keep theirs. Those of a segment the
    # load's sanity check fails come last: until they are written a killed run's successor
    # sees the same failure, so plans the same snapshots
    rebuilt = {i: failing.get(i, "") for i in (*recovered, *repaired)}
    if cut is not None:
        rebuilt.setdefault(cut[0], "")
    indexes: dict[bool, list[Action]] = {True: [], False: []}
    for i, seg in enumerate(kept):
        if i in unchecked:
            pos, reason, base = unchecked[i]
            out.left.append(f"{seg.log.name}: {reason} at byte {pos} (base offset {base}), left "
                            "as the broker's load leaves a segment it does not recover (it "
                            "serves it as it is, its consumers fail there); `kafkalog recover "
                            "--salvage --execute` drops the damaged bytes, keeping every valid "
                            "batch")
            continue
        if i not in rebuilt and not repair_trusted:
            indexes[False].extend(_as_the_load_leaves(seg, ends[i], replay, i, out.left))
            continue
        with mapped_file(seg.log) as buf:
            indexes[i in failing].extend(plan_segment_indexes(
                seg, buf[:ends[i]], truncated=cut is not None and i == cut[0],
                force=i in rebuilt, index_interval_bytes=index_interval_bytes))
        indexes[i in failing].extend(plan_txn_index(
            seg, replay.aborted[i], keep_consistent=i not in rebuilt, bare=replay.bare[i],
            why=rebuilt.get(i, "")))
    out.actions.extend(indexes[False])
    # 5: producer snapshots where the broker's load leaves them
    producers = any(len(e[0]) for e in epochs) and _has_producers(kept, ends)
    if producers or valid or corrupt:
        out.actions.extend(_plan_snapshot_writes(part, replay, loaded, set(bases), leo))
    # only now the other snapshots go: deciding step 5 must not depend on whether a killed
    # run had already moved them (a snapshot written in step 5 is replaced by the write itself)
    after_load = set(loaded.offsets)
    for o, (p, why) in sorted(corrupt.items()):
        if o not in after_load:
            out.actions.append(Action(QUARANTINE_FILE, str(p), f"corrupt producer snapshot: {why}"))
    for o, (p, _) in sorted(valid.items()):
        if o in loaded.deleted:
            why = f"beyond the log end offset {leo}" if o > leo else loaded.deleted[o]
            out.actions.append(Action(QUARANTINE_FILE, str(p), f"producer snapshot {why}"))
    out.actions.extend(indexes[True])
    # 6: leader epochs
    # with remote storage on, the broker's loader keeps the log start checkpointed below the
    # local log and truncates the epochs from the start only there: the remote offsets' epochs
    # are what its RemoteLogManager fetches and expires remote segments by
    out.actions.extend(_plan_leader_epochs(part, epochs, leo, log_start))
    return out


def _as_the_load_leaves(seg: Segment, end: int, replay, i: int, left: list[str]) -> list[Action]:
    """A segment the broker's load does not recover keeps its index files as they are, but a
    missing ``.timeindex``, which ``LogSegment.sanityCheck`` creates empty. What differs from
    its batches goes to ``left`` (``kafkalog rebuild-index`` rebuilds it): the broker serves
    such an index as it is, and with a missing ``.txnindex`` its ``read_committed`` consumers
    receive the segment's aborted records."""
    actions = []
    if seg.timeindex is None:
        path = index_path(seg, N.TIME_INDEX)
        actions.append(Action(WRITE_FILE, str(path), "missing; created empty, as the broker's "
                              "load creates it for a segment it does not recover", content=b""))
        left.append(f"{path.name}: created empty as the broker's load does (time lookups and "
                    "retention.ms then go by the .log's modification time); `kafkalog "
                    f"rebuild-index --execute --force --kind timeindex {seg.log}` builds its "
                    "entries")
    with mapped_file(seg.log) as buf:
        stale = [a.path for a in plan_segment_indexes(seg, buf[:end])
                 if seg.timeindex is not None or not a.path.endswith(N.TIME_INDEX)]
    stale += [a.path for a in plan_txn_index(seg, replay.aborted[i], keep_consistent=True,
                                              bare=replay.bare[i])]
    for path in map(Path, stale):
        state = "inconsistent with its .log" if storage_for(path).exists(path) else "missing"
        left.append(f"{path.name}: {state}, left as the broker's load leaves a segment it does "
                    "not recover (it serves it as it is); `kafkalog rebuild-index --execute "
                    f"{seg.log}` rebuilds it")
    return actions


def load_sanity_check(seg: Segment) -> str | None:
    """Why the broker's load recovers ``seg`` whatever the recovery point
    (``LogSegment.sanityCheck`` in ``LogLoader.loadSegmentFiles``), or ``None``: its ``.index``
    is missing, or its ``.txnindex`` has an entry ending below the base offset
    (``TransactionIndex.sanityCheck``) or of a version Kafka does not know (which fails the
    load: recovering the segment is what makes it load)."""
    if seg.index is None:
        return "its .index is missing"
    if seg.txnindex is None:
        return None
    try:
        with mapped_file(seg.txnindex) as buf:
            read_txn_index(buf, seg.base_offset, file=str(seg.txnindex)).sanity_check(
                str(seg.txnindex))
    except KafkaLogError as exc:
        return f"its .txnindex fails the load's sanity check ({exc.reason})"
    return None


def _valid_prefix(segs: list[Segment], checked: set[int]):
    """Step 3's walk: each segment's valid bytes up to the first invalid entry, the leader
    epochs and base offsets of its v2 batches, the offset after its last v2 batch, and the cut
    ``(segment, position, reason, base offset)`` (``None`` when all is valid) — in a segment
    the broker's load recovers (``checked``). Damage in another is not cut (the load does not
    look at it) but returned as ``{segment: (position, reason, base offset)}``; that segment is
    read as far as its entries parse, as the broker reads it (a checksum is not checked), its
    leader epochs taken from its valid entries only."""
    unchecked: dict[int, tuple[int, str, int]] = {}
    ends: list[int] = []
    epochs: list[tuple[np.ndarray, np.ndarray]] = []  # (leader epoch, base offset) of v2 batches
    v2_ends: list[int] = []
    prev_last: int | None = None
    for i, seg in enumerate(segs):
        with mapped_file(seg.log) as buf:
            found, table, k = first_invalid_entry(buf, seg.base_offset, prev_last)
        e, v2_end = _v2_batches(table, k, seg.base_offset)
        epochs.append(e)
        if found is not None and i not in checked:
            unchecked[i] = found
            k = len(table)  # the entries that parse: what the broker reads of it
            _, v2_end = _v2_batches(table, k, seg.base_offset)
            ends.append(int(table.position[-1] + table.entry_size[-1]) if k else 0)
        elif found is not None:
            ends.append(found[0])
            v2_ends.append(v2_end)
            return ends, epochs, v2_ends, (i, found[0], found[1], found[2]), unchecked
        else:
            ends.append(seg.log_size)
        v2_ends.append(v2_end)
        if k:
            prev_last = int(table.last_offset[k - 1])
    return ends, epochs, v2_ends, None, unchecked


def _v2_batches(table, k: int, base_offset: int) -> tuple[tuple[np.ndarray, np.ndarray], int]:
    """``((leader epochs, base offsets), offset after the last)`` of the v2 batches among a
    scan's first ``k`` entries (the segment's base offset when it has none: where
    ``LogSegment.recover`` leaves the producer state's map end)."""
    v2 = table.magic[:k] == 2
    last = table.last_offset[:k][v2]
    return ((table.leader_epoch[:k][v2], table.offset[:k][v2]),
            int(last[-1]) + 1 if len(last) else base_offset)


def _plan_snapshot_writes(part: PartitionDir, replay, loaded: LoadedSnapshots, bases: set[int],
                          leo: int) -> list[Action]:
    """A snapshot of the replayed producer state where the load takes one (unless the one there
    already holds it) and where it keeps one that contradicts the log."""
    actions = []
    for o in loaded.offsets:
        if o in replay.trusted:
            continue
        path = part.path / N.segment_file_name(o, N.SNAPSHOT)
        content = replay.states[o].to_bytes()
        where = ("the log end offset" if o == leo else f"segment base offset {o}" if o in bases
                 else f"offset {o}")
        if o in loaded.kept:
            why = f" (the one there contradicts the log: {replay.distrusted[o]})"
        else:
            fs = storage_for(path)
            if fs.exists(path) and fs.read_bytes(path) == content:
                continue
            why = ", as the broker's load takes it"
        actions.append(Action(WRITE_FILE, str(path),
                              f"producer state at {where} replayed from the batch headers{why}",
                              content=content))
    return actions


def _log_end(seg, end: int) -> int:
    with mapped_file(seg.log) as buf:
        t = scan_entries(buf, end=end)
    return int(t.last_offset[-1]) + 1 if len(t) else seg.base_offset


def _has_producers(segs, ends) -> bool:
    for seg, end in zip(segs, ends):
        with mapped_file(seg.log) as buf:
            t = scan_entries(buf, end=end)
        if ((t.magic == 2) & (t.producer_id >= 0)).any():
            return True
    return False


def _plan_leader_epochs(part: PartitionDir, epochs, leo: int, log_start: int) -> list[Action]:
    path = part.path / N.LEADER_EPOCH_CHECKPOINT
    try:
        cache = C.load_leader_epochs(read_checkpoint_file(path, C.parse_leader_epoch_checkpoint))
    except KafkaLogError:
        cache = []
    # the entries at or after the log end go first (the loader's truncateFromEnd): the epoch a
    # broker started at the log end of a log it then wrote nothing to is above every batch's,
    # and assigning theirs after it would drop the entries before it (a cleaned log's first
    # batch is not at its epoch's start offset)
    cache = C.truncate_epochs_from_end(cache, leo)
    for ple, base in epochs:
        for e, o in zip(ple.tolist(), base.tolist()):
            if e >= 0:
                cache = C.assign_leader_epoch(cache, e, o)
    cache = C.truncate_epochs_from_start(cache, log_start)
    content = C.format_leader_epoch_checkpoint(cache).encode()
    fs = storage_for(path)
    if fs.exists(path) and fs.read_bytes(path) == content:
        return []
    if not fs.exists(path) and not cache:
        return []
    return [Action(WRITE_FILE, str(path), f"leader epochs from the batch headers ({len(cache)} "
                   "entries)", content=content)]


# --- log dir checkpoints -------------------------------------------------------------------------


def plan_checkpoints(log_dir: Path, ends: dict[tuple[str, int], tuple[int, int]]) -> list[Action]:
    """Offset checkpoint rewrites so every entry fits the recovered logs (see module docstring);
    a file that does not parse is rewritten with the entries a broker would read from it
    (none)."""
    actions = []
    starts = read_offsets(log_dir / N.LOG_START_OFFSET_CHECKPOINT)
    for name in N.CHECKPOINT_FILES:
        path = log_dir / name
        if not storage_for(path).exists(path):
            continue
        try:
            old = read_checkpoint_file(path, C.parse_offset_checkpoint)
            corrupt = False
        except KafkaLogError:
            old, corrupt = {}, True
        new = dict(old)
        for tp, (first, leo) in ends.items():
            if tp not in old:
                continue
            v = old[tp]
            if name in (N.RECOVERY_POINT_CHECKPOINT, N.REPLICATION_OFFSET_CHECKPOINT,
                        N.LOG_START_OFFSET_CHECKPOINT):
                new[tp] = min(v, leo)
            else:
                log_start = min(max(starts.get(tp, first), first), leo)
                if not log_start <= v <= leo:
                    new[tp] = log_start
        if new != old or corrupt:
            why = ("unreadable; rewritten with no entries, as a broker reads it" if corrupt
                   else "offsets capped to the recovered logs")
            actions.append(Action(WRITE_FILE, str(path), why,
                                  content=C.format_offset_checkpoint(new).encode()))
    return actions


def read_offsets(path: Path) -> dict[tuple[str, int], int]:
    try:
        return read_checkpoint_file(path, C.parse_offset_checkpoint)
    except KafkaLogError:
        return {}  # LogManager treats an unreadable checkpoint as empty
