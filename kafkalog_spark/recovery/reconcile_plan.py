"""Replica reconciliation, the plan (recovery layer): which batches of a partition's replicas
(the same topic-partition on several brokers' disks) make the reconciled log, read-only.

Per replica, the *valid entries* are those salvage keeps (:mod:`~.salvage`: damage skipped, so a
replica corrupt in the middle still counts up to and after its damage), with their leader epochs;
its epoch cache is its ``leader-epoch-checkpoint`` with every batch's epoch assigned on top (as
recovery rebuilds it).

1. **Reference**: the replica Kafka would have kept — the one holding the highest leader epoch
   (the last leader, or a follower of it), the longest of those, the first named on a tie.
2. **Divergence point** of every other replica F against the reference R, as a follower
   truncates (``OffsetsForLeaderEpoch``, ``LeaderEpochFileCache.endOffsetFor``): R answers F's
   latest epoch with the largest epoch ``e`` it knows that is not above it and where ``e`` ends
   in R's log; F keeps offsets below ``min(R's end of e, F's own end of e)`` — except that when
   ``e`` is R's latest epoch F's whole run in it is kept (the same leader wrote it; R only lost
   its end). Without leader epochs (v0/v1 data) the point is where F's log ends. Then the
   batches below the point are checked against R's byte for byte where both hold the same
   offsets (replicas copy batches verbatim, so equal batches are equal bytes): the first batch
   that differs moves the point down to it.
3. **The reconciled log** is R's valid entries plus, from every other replica in reference
   order, each batch below its divergence point that R lacks and that overlaps nothing already
   taken (filling R's damage, its missing segments, a shorter end) — never below the log start
   offset (the highest log-start checkpoint of the replicas: records deleted by retention or
   DeleteRecords stay deleted). Every batch of F at or past its divergence point that is not
   byte-identical to one kept is *divergent*: reported, and copied to the quarantine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..codec.files import checkpoints as C
from ..codec.files import naming as N
from ..codec.records.scan import scan_entries
from ..errors import KafkaLogError
from ..log.model import PartitionDir
from ..storage import mapped_file
from ..storage.atomic import read_checkpoint_file
from .salvage import plan_partition_salvage


@dataclass
class Replica:
    """One replica's valid entries (arrays in offset order) and what its log dir says of it."""

    index: int  # position in the reconcile's list of log dirs
    log_dir: Path
    part: PartitionDir
    seg: np.ndarray  # int32: index into part.segments
    position: np.ndarray  # int64 byte position in that segment's .log
    size: np.ndarray
    first: np.ndarray  # first offset (v0/v1: the message's offset)
    last: np.ndarray
    epoch: np.ndarray  # partition leader epoch (-1: none, v0/v1)
    epochs: list[C.EpochEntry]
    log_start: int | None  # from the log dir's log-start-offset-checkpoint
    high_watermark: int | None
    damaged_ranges: int = 0

    @property
    def log_end(self) -> int:
        return int(self.last[-1]) + 1 if len(self.last) else (
            self.part.segments[0].base_offset if self.part.segments else 0)

    @property
    def latest_epoch(self) -> int:
        return self.epochs[-1].epoch if self.epochs else -1

    def end_offset_for(self, epoch: int) -> tuple[int, int] | None:
        """``LeaderEpochFileCache.endOffsetFor(epoch, logEndOffset)``: ``(epoch found, its end
        offset)``, ``None`` for an epoch above every known one (or no epochs)."""
        if not self.epochs:
            return None
        if epoch == self.latest_epoch:
            return epoch, self.log_end
        higher = [e for e in self.epochs if e.epoch > epoch]
        if not higher:
            return None
        floor = [e for e in self.epochs if e.epoch <= epoch]
        return (floor[-1].epoch if floor else epoch), higher[0].start_offset


def load_replica(index: int, log_dir: Path, part: PartitionDir) -> Replica:
    """The valid entries of one replica (salvage's walk) and its checkpoints."""
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("seg", "position", "size", "first",
                                                         "last", "epoch")}
    plans = plan_partition_salvage(part)
    for i, plan in enumerate(plans):
        with mapped_file(plan.segment.log) as buf:
            for start, end in plan.keep:
                t = scan_entries(buf, start, end)
                cols["seg"].append(np.full(len(t), i, np.int32))
                cols["position"].append(t.position.astype(np.int64))
                cols["size"].append(t.entry_size.astype(np.int64))
                cols["first"].append(np.where(t.magic == 2, t.offset, t.last_offset))
                cols["last"].append(t.last_offset)
                cols["epoch"].append(np.where(t.magic == 2, t.leader_epoch, -1).astype(np.int64))
    arrays = {k: (np.concatenate(v) if v else np.zeros(0, np.int64)) for k, v in cols.items()}
    epochs = _checkpoint(part.path / N.LEADER_EPOCH_CHECKPOINT, C.parse_leader_epoch_checkpoint)
    cache = C.load_leader_epochs(epochs or [])
    change = np.flatnonzero(np.diff(arrays["epoch"], prepend=-2) != 0)
    for k in change.tolist():
        if arrays["epoch"][k] >= 0:
            cache = C.assign_leader_epoch(cache, int(arrays["epoch"][k]), int(arrays["first"][k]))
    tp = (part.topic, part.partition)
    starts = _checkpoint(log_dir / N.LOG_START_OFFSET_CHECKPOINT, C.parse_offset_checkpoint) or {}
    hws = _checkpoint(log_dir / N.REPLICATION_OFFSET_CHECKPOINT, C.parse_offset_checkpoint) or {}
    return Replica(index, log_dir, part, arrays["seg"].astype(np.int32), arrays["position"],
                   arrays["size"], arrays["first"], arrays["last"], arrays["epoch"], cache,
                   starts.get(tp), hws.get(tp), sum(len(p.damage) for p in plans))


def _checkpoint(path: Path, parse):
    try:
        return read_checkpoint_file(path, parse)
    except (KafkaLogError, OSError):
        return None  # missing or unreadable: a broker treats it as empty


@dataclass(frozen=True)
class Take:
    """Entries ``rows`` of replica ``replica`` that go into the reconciled log."""

    replica: int
    rows: np.ndarray


@dataclass
class PartitionPlan:
    """The reconciled log of one topic-partition, and what became of every replica."""

    topic: str
    partition: int
    replicas: list[Replica]
    reference: int  # index into replicas
    log_start: int
    divergence: dict[int, tuple[int, str]] = field(default_factory=dict)  # replica -> (offset, why)
    takes: list[Take] = field(default_factory=list)
    divergent: dict[int, np.ndarray] = field(default_factory=dict)  # replica -> entry rows
    conflicts: list[str] = field(default_factory=list)

    @property
    def log_end(self) -> int:
        ends = [int(self.replicas[t.replica].last[t.rows[-1]]) + 1 for t in self.takes if len(t.rows)]
        return max(ends, default=self.replicas[self.reference].log_end)

    def ordered(self) -> list[tuple[Replica, int]]:
        """Every kept entry as ``(replica, row)``, in offset order."""
        pairs = [(self.replicas[t.replica], int(r)) for t in self.takes for r in t.rows]
        return sorted(pairs, key=lambda p: int(p[0].first[p[1]]))

    def to_dict(self) -> dict:
        ref = self.replicas[self.reference]
        out = {"topic": self.topic, "partition": self.partition, "reference": str(ref.part.path),
               "log_start_offset": self.log_start, "log_end_offset": self.log_end,
               "replicas": []}
        for i, r in enumerate(self.replicas):
            taken = [t.rows for t in self.takes if t.replica == i]
            rows = np.concatenate(taken) if taken else np.zeros(0, np.int64)
            div = self.divergent.get(i, np.zeros(0, np.int64))
            point = self.divergence.get(i)
            out["replicas"].append({
                "path": str(r.part.path), "latest_epoch": r.latest_epoch, "log_end_offset": r.log_end,
                "damaged_ranges": r.damaged_ranges,
                "divergence_offset": None if point is None else point[0],
                "divergence_reason": None if point is None else point[1],
                "batches_kept": int(len(rows)), "bytes_kept": int(r.size[rows].sum()),
                "batches_divergent": int(len(div)), "bytes_divergent": int(r.size[div].sum()),
                "divergent_offsets": [[int(r.first[a]), int(r.last[b])] for a, b in _runs(div)]})
        out["conflicts"] = self.conflicts
        return out


def _runs(rows: np.ndarray) -> list[tuple[int, int]]:
    """Consecutive row numbers as ``(first row, last row)`` runs."""
    if not len(rows):
        return []
    cut = np.flatnonzero(np.diff(rows) != 1)
    starts = np.concatenate(([0], cut + 1))
    ends = np.concatenate((cut, [len(rows) - 1]))
    return [(int(rows[a]), int(rows[b])) for a, b in zip(starts, ends)]


def plan_partition(topic: str, partition: int, replicas: list[Replica]) -> PartitionPlan:
    """Reconcile one partition's replicas (module docstring)."""
    order = sorted(range(len(replicas)),
                   key=lambda i: (-replicas[i].latest_epoch, -replicas[i].log_end, i))
    ref = replicas[order[0]]
    starts = [r.log_start for r in replicas if r.log_start is not None]
    log_start = max(starts) if starts else min(
        (int(r.first[0]) for r in replicas if len(r.first)), default=0)
    plan = PartitionPlan(topic, partition, replicas, order[0], log_start)
    keep = np.arange(len(ref.first))  # the reference's own bytes below the log start stay too
    plan.takes.append(Take(order[0], keep))
    lo, hi = ref.first[keep], ref.last[keep]  # intervals taken so far, kept sorted
    for i in order[1:]:
        f = replicas[i]
        point, why = _epoch_divergence(ref, f)
        point, why = _byte_divergence(ref, f, point, why, plan.conflicts)
        plan.divergence[i] = (point, why)
        below = np.flatnonzero((f.first < point) & (f.first >= log_start))
        free = below[~_overlaps(f.first[below], f.last[below], lo, hi)]
        if len(free):
            plan.takes.append(Take(i, free))
            lo, hi = _union(lo, hi, f.first[free], f.last[free])
        past = np.flatnonzero(f.first >= point)
        plan.divergent[i] = past[~_same_as_reference(ref, f, past)]
    return plan


def _epoch_divergence(ref: Replica, f: Replica) -> tuple[int, str]:
    if not ref.epochs or not f.epochs:
        return f.log_end, "no leader epochs (v0/v1 data): compared byte for byte"
    answer = ref.end_offset_for(f.latest_epoch)
    if answer is None:
        return f.log_end, f"epoch {f.latest_epoch} is above every epoch of the reference"
    epoch, ref_end = answer
    if epoch == ref.latest_epoch:  # the same leader wrote both: keep F's whole run in it
        return f.log_end, f"same latest leader epoch {epoch} as the reference"
    mine = f.end_offset_for(epoch)
    f_end = mine[1] if mine is not None else f.log_end
    point = min(ref_end, f_end)
    return point, (f"leader epoch {epoch} ends at offset {ref_end} in the reference "
                   f"(at {f_end} here); later epochs here diverge")


def _byte_divergence(ref: Replica, f: Replica, point: int, why: str,
                     conflicts: list[str]) -> tuple[int, str]:
    """Move ``point`` down to F's first batch below it that differs from the reference's batch
    at the same offsets (or overlaps one differently)."""
    rows = np.flatnonzero(f.first < point)
    if not len(rows):
        return point, why
    j = np.searchsorted(ref.first, f.first[rows])
    same = (j < len(ref.first)) & (ref.first[np.minimum(j, len(ref.first) - 1)] == f.first[rows])
    k = np.minimum(j, max(len(ref.first) - 1, 0))
    bad_overlap = ~same & _overlaps(f.first[rows], f.last[rows], ref.first, ref.last)
    mismatch = same.copy()
    if same.any():
        mismatch[same] = ~_equal_entries(ref, k[same], f, rows[same])
    bad = np.flatnonzero(bad_overlap | mismatch)
    if not len(bad):
        return point, why
    first = int(f.first[rows[bad[0]]])
    return first, f"batch at offset {first} differs from the reference's"


def _same_as_reference(ref: Replica, f: Replica, rows: np.ndarray) -> np.ndarray:
    """For F's entries ``rows``: whether the reference holds the same batch (same bytes)."""
    out = np.zeros(len(rows), bool)
    if not len(rows) or not len(ref.first):
        return out
    j = np.minimum(np.searchsorted(ref.first, f.first[rows]), len(ref.first) - 1)
    cand = ref.first[j] == f.first[rows]
    if cand.any():
        out[cand] = _equal_entries(ref, j[cand], f, rows[cand])
    return out


def _equal_entries(a: Replica, a_rows: np.ndarray, b: Replica, b_rows: np.ndarray) -> np.ndarray:
    """Byte equality of entries pairwise: sizes first, then the bytes — of a whole run of
    entries at once where both sides are contiguous (replicas copy batches verbatim, so equal
    logs compare as a few long ranges)."""
    eq = a.size[a_rows] == b.size[b_rows]
    pairs = np.stack([a.seg[a_rows], b.seg[b_rows]], axis=1)
    for sa, sb in sorted({(int(x), int(y)) for x, y in pairs[eq]}):
        sel = np.flatnonzero(eq & (pairs[:, 0] == sa) & (pairs[:, 1] == sb))
        pa_, pb_, n = a.position[a_rows[sel]], b.position[b_rows[sel]], a.size[a_rows[sel]]
        # a run continues while both sides' next entry starts where this one ends
        cont = (pa_[1:] == pa_[:-1] + n[:-1]) & (pb_[1:] == pb_[:-1] + n[:-1])
        starts = np.concatenate(([0], np.flatnonzero(~cont) + 1))
        ends = np.concatenate((starts[1:], [len(sel)]))
        with mapped_file(a.part.segments[sa].log) as ba, mapped_file(b.part.segments[sb].log) as bb:
            for s, e in zip(starts.tolist(), ends.tolist()):
                x, y = int(pa_[s]), int(pb_[s])
                total = int(pa_[e - 1] + n[e - 1]) - x
                if _same_bytes(ba, x, bb, y, total):
                    continue
                for t in range(s, e):  # the run differs somewhere: entry by entry
                    x, y, m = int(pa_[t]), int(pb_[t]), int(n[t])
                    eq[sel[t]] = _same_bytes(ba, x, bb, y, m)
    return eq


COMPARE_CHUNK = 4 << 20
"""Bytes compared at a time (the comparison's temporary array is this size, not a segment's)."""


def _same_bytes(a: np.ndarray, x: int, b: np.ndarray, y: int, n: int) -> bool:
    for off in range(0, n, COMPARE_CHUNK):
        m = min(COMPARE_CHUNK, n - off)
        if not np.array_equal(a[x + off:x + off + m], b[y + off:y + off + m]):
            return False
    return True


def _overlaps(first: np.ndarray, last: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Whether each ``[first, last]`` overlaps one of the sorted, disjoint ``[lo, hi]``."""
    if not len(lo):
        return np.zeros(len(first), bool)
    j = np.searchsorted(lo, last, side="right") - 1  # the last interval starting at or before last
    return (j >= 0) & (hi[np.maximum(j, 0)] >= first)


def _union(lo, hi, first, last):
    lo2, hi2 = np.concatenate((lo, first)), np.concatenate((hi, last))
    order = np.argsort(lo2, kind="stable")
    return lo2[order], hi2[order]
