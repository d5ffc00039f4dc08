"""Compaction planning (log-management layer): what to clean and the per-batch transaction facts
(KAFKA_FORMATS §15.2, §15.5, §15.6, §15.8). Reads batch headers only (and control records).

Per partition::

    firstDirty        cleaner checkpoint, reset to the log start when outside [start, LEO]
    firstUncleanable  max(firstDirty, min(LSO <= HW, active segment base,
                          first segment newer than min.compaction.lag.ms))
    eligible          dirty ratio > min.cleanable.dirty.ratio, or max.compaction.lag.ms passed
                      with cleanable bytes, or force (with cleanable bytes)
    end offset        = firstUncleanable, or lower when the key map fills (key_map.py): then
                      :func:`limit_plan` narrows the round and later passes clean the rest
    rewrite range     every segment with base < end offset, grouped by size (groupSegmentsBySize)

Per batch of the rewrite range: ``can_discard`` (``CleanedTransactionMetadata``: aborted data,
markers whose transaction has no data left, emptied control batches) and ``last_of_producer``
(the last data batch of each producer in the producer state, or its marker when it has no data
batch); and the aborted transactions whose kept marker the cleaned ``.txnindex`` lists
(:mod:`.txn_index`). The producer state is replayed from the first segment; a producer counts
as active unless it has expired as ``ProducerStateManager.isProducerExpired`` decides at
``now``: no open transaction and ``now - its last timestamp >= producer.id.expiration.ms``
(a broker removes those from its producer state, so the cleaner no longer keeps their last
batch). A broker notices expiry at its next check (producer.id.expiration.check.interval.ms,
10 minutes by default); offline, expiry is applied exactly at ``now``.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..codec.files.snapshot import CompletedTxn, ProducerStateTracker
from ..codec.records.decode import DecodeOptions, decode_to_table
from ..codec.records.scan import scan_entries, scan_segment
from ..log.partition_state import PartitionState, SegmentState
from ..log.topic_config import TopicConfig
from ..storage import mapped_file
from .txn_index import IndexedAbort, indexed_aborts

INT32_MAX = 2**31 - 1
# runs a partition planner, (partition dir, topic config) -> CleaningPlan | Skipped, over a list
# of those pairs, returning the results in order (here, or as Spark tasks: spark_job.plan_spark)
PlanAll = Callable[[Callable[..., Any], list[tuple[Any, Any]]], list[Any]]
CONTROL_ABORT, CONTROL_COMMIT = 0, 1


@dataclass(frozen=True)
class SourceSegment:
    """One segment to rewrite and the per-batch facts its task needs (picklable)."""

    base_offset: int
    log: str
    mtime: float
    retain_legacy_deletes: bool
    can_discard: frozenset[int]  # batch last offsets
    last_of_producer: frozenset[int]  # batch last offsets


@dataclass(frozen=True)
class GroupTask:
    """One output segment: a group of consecutive source segments (picklable task)."""

    topic: str
    partition: int
    group: int
    sources: tuple[SourceSegment, ...]
    first_dirty: int
    end_offset: int  # the round's end (endOffset): records at or past it are kept as they are
    now_ms: int
    delete_retention_ms: int
    upper_bound: int  # firstUncleanable: the batch ending here is kept, even emptied
    keep_last_batch: bool = False  # the last group of a pass cut short: see limit_plan

    @property
    def base_offset(self) -> int:
        return self.sources[0].base_offset


@dataclass(frozen=True)
class RoundFacts:
    """The batch facts of a whole round, decided once over the log as it was when the round
    began (the passes of a round whose key map filled all use them, so their result is the
    one-pass result): batch last offsets that ``can_discard`` and that are the
    ``last_of_producer``, the legacy delete horizon (ms), and the aborted transactions the
    cleaned ``.txnindex`` files list."""

    can_discard: tuple[int, ...]  # sorted
    last_of_producer: tuple[int, ...]  # sorted
    legacy_horizon: int
    aborts_indexed: tuple[IndexedAbort, ...] = ()  # the cleaned .txnindex entries (txn_index.py)

    def of_segment(self, lo: int, hi: int) -> tuple[frozenset[int], frozenset[int]]:
        """``(can_discard, last_of_producer)`` of the batches ending in ``[lo, hi)``."""
        return tuple(frozenset(xs[bisect.bisect_left(xs, lo):bisect.bisect_left(xs, hi)])
                     for xs in (self.can_discard, self.last_of_producer))


@dataclass
class CleaningPlan:
    """One partition's cleaning round."""

    state: PartitionState
    config: TopicConfig
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    cleanable_bytes: int
    reason: str
    groups: list[GroupTask] = field(default_factory=list)
    end: int | None = None  # set by limit_plan when the key map filled before firstUncleanable
    facts: RoundFacts | None = None

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0

    @property
    def end_offset(self) -> int:
        """The round's end offset: the new cleaner checkpoint."""
        return self.first_uncleanable if self.end is None else self.end

    def to_dict(self) -> dict:
        return {"partition": f"{self.state.topic}-{self.state.partition}",
                "first_dirty_offset": self.first_dirty,
                "first_uncleanable_offset": self.first_uncleanable,
                "end_offset": self.end_offset,
                "clean_bytes": self.clean_bytes, "cleanable_bytes": self.cleanable_bytes,
                "dirty_ratio": round(self.ratio, 6), "reason": self.reason,
                "groups": [[s.base_offset for s in g.sources] for g in self.groups]}


@dataclass(frozen=True)
class Skipped:
    """A compacted partition with nothing to clean this round, and why."""

    topic: str
    partition: int
    reason: str

    def to_dict(self) -> dict:
        return {"partition": f"{self.topic}-{self.partition}", "reason": self.reason}


NO_HIGH_WATERMARK = ("no high watermark known (no replication-offset-checkpoint entry), so "
                     "nothing is cleanable, as in Kafka; for a copied log dir that no broker "
                     "will load again, --high-watermark log-end takes the log end instead")


def _overlapping(segs: list[SegmentState], ends: list[int], lo: int, hi: int) -> list[int]:
    return [i for i, s in enumerate(segs) if s.base_offset < hi and ends[i] > lo]


def _first_batch_timestamp(seg: SegmentState) -> int:
    with mapped_file(seg.segment.log) as buf:
        t = scan_entries(buf, max_entries=1)
        return int(t.max_timestamp[0]) if len(t) else -1


def choose_range(state: PartitionState, config: TopicConfig, *, cleaner_checkpoint: int | None,
                 last_stable_offset: int, now_ms: int, force: bool
                 ) -> tuple[int, int, int, int, str | None, str | None]:
    """§15.2: ``(first_dirty, first_uncleanable, clean_bytes, cleanable_bytes, reason,
    why_not)``; ``reason`` says why the partition is eligible, ``why_not`` (when ``reason`` is
    ``None``) why it is not."""
    segs = list(state.segments)
    nexts = [s.base_offset for s in segs[1:]] + [state.log_end_offset]
    first_dirty = state.log_start_offset if cleaner_checkpoint is None else cleaner_checkpoint
    if not state.log_start_offset <= first_dirty <= state.log_end_offset:
        first_dirty = state.log_start_offset
    active_base = segs[-1].base_offset
    # (offset, rank, why cleaning stops there): the lowest bound limits; of equal bounds the
    # lowest rank is the most telling explanation
    hw = state.high_watermark
    bounds = [(active_base, 4, f"nothing dirty below the active segment (cleaned up to offset "
                               f"{first_dirty})"),
              (last_stable_offset, 1, f"an open transaction keeps the last stable offset at "
                                      f"{last_stable_offset}"),
              (hw, 3, f"the high watermark {hw} is not above the first dirty offset "
                      f"{first_dirty}") if state.high_watermark_known else (hw, 0, NO_HIGH_WATERMARK)]
    if config.min_compaction_lag_ms > 0:
        for i in _overlapping(segs, nexts, first_dirty, 2**63 - 1):
            if i < len(segs) - 1 and segs[i].largest_timestamp > now_ms - config.min_compaction_lag_ms:
                bounds.append((segs[i].base_offset, 2, f"min.compaction.lag.ms "
                               f"{config.min_compaction_lag_ms} has not passed for segment "
                               f"{segs[i].base_offset}"))
                break
    bound = min(bounds)[0]
    first_uncleanable = max(first_dirty, bound)
    clean = sum(segs[i].size for i in _overlapping(segs, nexts, -1, first_dirty))
    floor = max((i for i, s in enumerate(segs) if s.base_offset <= first_uncleanable), default=0)
    unclean_base = segs[floor].base_offset
    cleanable = sum(segs[i].size for i in _overlapping(segs, nexts, min(first_dirty, unclean_base),
                                                        unclean_base))
    found = first_dirty, first_uncleanable, clean, cleanable
    if first_uncleanable <= first_dirty or cleanable == 0:
        return (*found, None, min(bounds)[2])
    if force:
        return (*found, "forced", None)
    ratio = cleanable / (clean + cleanable)
    if ratio > config.min_cleanable_dirty_ratio:
        return (*found, f"dirty ratio {ratio:.3f} > min.cleanable.dirty.ratio "
                        f"{config.min_cleanable_dirty_ratio}", None)
    if config.max_compaction_lag_ms < 2**63 - 1:
        stamps = [t for i in _overlapping(segs, nexts, first_dirty, 2**63 - 1)[:-1]
                  if (t := _first_batch_timestamp(segs[i])) > 0]
        if stamps and min(stamps) < now_ms - config.max_compaction_lag_ms:
            return (*found, "max.compaction.lag.ms passed", None)
    return (*found, None, f"dirty ratio {ratio:.3f} <= min.cleanable.dirty.ratio "
                          f"{config.min_cleanable_dirty_ratio}")


def group_segments(segs: list[SegmentState], end_offset: int, segment_bytes: int,
                   max_index_bytes: int, upper_bound: int | None = None
                   ) -> list[list[SegmentState]]:
    """``groupSegmentsBySize`` over the segments with base < ``end_offset`` (§15.5); the last
    one's offsets are taken to end at ``upper_bound`` (firstUncleanable; default
    ``end_offset``)."""
    segs = [s for s in segs if s.base_offset < end_offset]
    nexts = [s.base_offset for s in segs[1:]] + [end_offset if upper_bound is None
                                                  else upper_bound]
    groups: list[list[SegmentState]] = []
    i = 0
    while i < len(segs):
        group = [segs[i]]
        log_size = segs[i].size
        index = segs[i].segment.index_size or 0
        timeindex = segs[i].segment.timeindex_size or 0
        i += 1
        while i < len(segs):
            s = segs[i]
            if (log_size + s.size > segment_bytes
                    or index + (s.segment.index_size or 0) > max_index_bytes
                    or timeindex + (s.segment.timeindex_size or 0) > max_index_bytes
                    or (s.size != 0 and nexts[i] - 1 - group[0].base_offset > INT32_MAX)):
                break
            group.append(s)
            log_size += s.size
            index += s.segment.index_size or 0
            timeindex += s.segment.timeindex_size or 0
            i += 1
        groups.append(group)
    return groups


def replay_producers(segs: list[SegmentState]) -> ProducerStateTracker:
    """The producer state at the log end, replayed from the first segment."""
    tracker = ProducerStateTracker()
    for s in segs:
        with mapped_file(s.segment.log) as buf:
            tracker.apply(buf, file=str(s.segment.log))
    return tracker


def _control_type(buf: np.ndarray, position: int, size: int) -> int:
    table = decode_to_table(buf, topic="", partition=0, start=position, end=position + size,
                            options=DecodeOptions(include_control=True))
    key = table.column("key")[0].as_py() if table.num_rows else None
    return int.from_bytes(key[2:4], "big", signed=True) if key and len(key) >= 4 else -1


def active_producers(tracker: ProducerStateTracker, now_ms: int, expiration_ms: int
                     ) -> dict[int, tuple[int, int]]:
    """``{producer id: (last data offset, epoch)}`` of the producers that have not expired at
    ``now_ms`` (``ProducerStateManager.isProducerExpired``: no open transaction and ``now -
    lastTimestamp >= producer.id.expiration.ms``)."""
    return {pid: (p.last_offset, p.epoch) for pid, p in tracker.producers.items()
            if p.current_txn_first_offset >= 0 or now_ms - p.timestamp < expiration_ms}


def transaction_facts(segs: list[SegmentState], producers: dict[int, tuple[int, int]]
                      ) -> tuple[dict[int, tuple[frozenset[int], frozenset[int]]],
                                 list[CompletedTxn]]:
    """Per segment base offset: ``(can_discard, last_of_producer)`` batch last offsets
    (§15.6, §15.8); and the aborted transactions whose ABORT marker is kept because a batch of
    theirs was seen (what the cleaned ``.txnindex`` lists). ``producers`` as
    :func:`active_producers` gives them."""
    aborted_tracker = ProducerStateTracker()
    aborted = []
    for s in segs:
        with mapped_file(s.segment.log) as buf:
            aborted += aborted_tracker.apply(buf, file=str(s.segment.log))
    aborted.sort(key=lambda t: t.first_offset)
    ongoing_aborted: dict[int, list] = {}  # producer id -> [a data batch seen, the txn]
    committed: set[int] = set()
    k = 0
    out, indexed = {}, []
    for s in segs:
        discard, last_of = set(), set()
        with mapped_file(s.segment.log) as buf:
            t = scan_segment(buf, str(s.segment.log))  # damage refused here, not mid-rewrite
            lasts = t.last_offset
            control = t.is_control()
            txn = t.is_transactional()
            for i in range(len(t)):
                last = int(lasts[i])
                pid = int(t.producer_id[i])
                while k < len(aborted) and aborted[k].first_offset <= last:
                    ongoing_aborted.setdefault(aborted[k].producer_id, [False, aborted[k]])
                    k += 1
                if pid >= 0 and pid in producers:
                    last_data, epoch = producers[pid]
                    if (last == last_data if last_data >= 0
                            else bool(control[i]) and int(t.producer_epoch[i]) == epoch):
                        last_of.add(last)
                if control[i]:
                    if t.count[i] == 0:
                        discard.add(last)
                        continue
                    ctype = _control_type(buf, int(t.position[i]), int(t.entry_size[i]))
                    if ctype == CONTROL_ABORT:
                        seen, closed = ongoing_aborted.pop(pid, (False, None))
                        if seen:  # kept, and indexed
                            indexed.append(closed)
                        else:  # no data of it observed
                            discard.add(last)
                    elif ctype == CONTROL_COMMIT:
                        if pid in committed:
                            committed.discard(pid)
                        else:
                            discard.add(last)
                elif txn[i]:
                    if pid in ongoing_aborted:
                        ongoing_aborted[pid][0] = True
                        discard.add(last)
                    else:
                        committed.add(pid)
        out[s.base_offset] = (frozenset(discard), frozenset(last_of))
    return out, indexed


def plan_partition(state: PartitionState, config: TopicConfig, *, cleaner_checkpoint: int | None,
                   now_ms: int, force: bool = False, resume: CleaningPlan | None = None
                   ) -> CleaningPlan | Skipped:
    """Plan one partition's cleaning round, or say why it has nothing to clean. ``resume``: the
    pass before, of a round whose key map filled (the checkpoint is where it stopped): this
    pass cleans whatever the dirty ratio or cleanable bytes, up to firstUncleanable, with the
    round's batch facts (:class:`RoundFacts`)."""
    if len(state.segments) < 2:
        return Skipped(state.topic, state.partition,
                       "only the active segment, which is never cleaned")
    segs = list(state.segments)
    tracker = replay_producers(segs)
    lso = min(tracker.ongoing.values(), default=state.log_end_offset)
    first_dirty, first_unclean, clean, cleanable, reason, why_not = choose_range(
        state, config, cleaner_checkpoint=cleaner_checkpoint, last_stable_offset=lso,
        now_ms=now_ms, force=force)
    if resume is not None and first_unclean > first_dirty:
        reason = f"next pass from offset {first_dirty} (the key map filled)"
    if reason is None:
        return Skipped(state.topic, state.partition, why_not or "nothing to clean")
    plan = CleaningPlan(state, config, first_dirty, first_unclean, clean, cleanable, reason)
    groups = group_segments(segs, first_unclean, config.segment_bytes, config.segment_index_bytes)
    rewritten = [s for g in groups for s in g]
    if resume is not None and resume.facts is not None:
        plan.facts = resume.facts
    else:
        facts, kept_aborts = transaction_facts(
            rewritten, active_producers(tracker, now_ms, config.producer_id_expiration_ms))
        # retainLegacyDeletesAndTxnMarkers: newer than (last clean segment's mtime -
        # delete.retention.ms)
        clean_segs = [s for s in segs if s.base_offset < first_dirty and s is not segs[-1]]
        plan.facts = RoundFacts(
            tuple(sorted(x for d, _ in facts.values() for x in d)),
            tuple(sorted(x for _, p in facts.values() for x in p)),
            (clean_segs[-1].mtime_ms - config.delete_retention_ms) if clean_segs else 0,
            indexed_aborts(rewritten, kept_aborts))
    nexts = {s.base_offset: n.base_offset for s, n in zip(segs, segs[1:])}
    for n, g in enumerate(groups):
        sources = tuple(SourceSegment(s.base_offset, str(s.segment.log), s.segment.mtime,
                                      s.mtime_ms > plan.facts.legacy_horizon,
                                      *plan.facts.of_segment(s.base_offset,
                                                             nexts.get(s.base_offset, 2**63)))
                        for s in g)
        plan.groups.append(GroupTask(state.topic, state.partition, n, sources, first_dirty,
                                     first_unclean, now_ms, config.delete_retention_ms,
                                     first_unclean))
    return plan


def limit_plan(plan: CleaningPlan, end: int) -> CleaningPlan:
    """``plan`` cut to the round ``[first dirty, end)`` that a full key map covered (§15.5:
    ``groupSegmentsBySize(logSegments(0, endOffset), ..., firstUncleanableOffset)``): the
    segments with base < ``end`` regrouped, records from ``end`` on kept as they are.

    One departure from Kafka: the last batch of the pass's last segment is kept (empty if none
    of its records survives), so the cleaned segments reach into the last old segment they
    replace — else a crash in the swap could not tell that segment was replaced, and Kafka's
    recovery (delete the old segments within the ``.swap`` files' offset range) would bring
    its superseded records back. The next pass drops that empty batch again (it is no longer
    last), so the result is the one-pass result."""
    if end >= plan.first_uncleanable:
        return plan
    sources = {s.base_offset: s for g in plan.groups for s in g.sources}
    upper = plan.first_uncleanable
    groups = group_segments(list(plan.state.segments), end, plan.config.segment_bytes,
                            plan.config.segment_index_bytes, upper_bound=upper)
    template = plan.groups[0]
    tasks = [replace(template, group=n, sources=tuple(sources[s.base_offset] for s in g),
                     end_offset=end, keep_last_batch=n == len(groups) - 1)
             for n, g in enumerate(groups)]
    return replace(plan, end=end, groups=tasks)
