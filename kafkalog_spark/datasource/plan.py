"""Driver-side scan planning of the ``kafkalog`` data source (datasource layer): the splits of
each partition's offset window (from the options), and their packing into tasks.

The driver (:func:`plan_scan`) reads only directory listings and small metadata: offset indexes
(to cut large segments, :mod:`.cuts`, and start inside one), time indexes plus the headers of a
few batches (timestamp bounds), and, for ``read_committed``, ``.txnindex`` files, the newest
producer snapshot and the batch headers after it (:mod:`kafkalog_spark.log.transactions`). It
never decodes record data, except the one batch where a timestamp bound lands, to find the
exact offset as Kafka's ``ListOffsets`` does.

Splits (one segment, or a byte range of a large one) are packed into Spark tasks by
:func:`pack_splits` — many small segments per task, like Spark's file source packs small files —
of equal work: a byte weighs by its segment's codec (:func:`codec_weights`, from the first batch
header of a few segments a partition). The tasks read them with
:func:`kafkalog_spark.datasource.reader.read_split`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..codec.layout import CODEC_NAMES
from ..codec.records.decode import DecodeOptions, decode_entries
from ..errors import InvalidOptionError
from ..log.discovery import discover, found_again
from ..log.history import check_history, segment_max_offset, with_remote_tier
from ..log.lookup import find_timestamp
from ..log.model import LogDirs, PartitionDir, Segment
from ..log.partition_state import at_log_start, checkpointed_log_starts
from ..log.selection import check_selection, readable_partitions
from ..log.segment_info import segment_codecs
from ..log.transactions import transaction_view
from ..storage import is_local, storage_for
from .cuts import cut_segment
from .options import DEFAULT_MIN_PARTITIONS, EARLIEST, LATEST, ReadOptions, parse_read_options
from .splits import KafkaLogSplit, KafkaLogTask, split_bytes

OPEN_COST_BYTES = 1 << 20  # weight of opening one split when packing (Spark: openCostInBytes)


@dataclass
class ScanPlan:
    """What :func:`plan_scan` decided: the splits (task order), the segments they read, and
    per partition the offset window ``[start, end)`` and how it was reached."""

    splits: list[KafkaLogSplit] = field(default_factory=list)
    partitions: dict[str, dict] = field(default_factory=dict)

    @property
    def segments(self) -> list[str]:
        """Paths of the segments the tasks open, in order."""
        return list(dict.fromkeys(str(s.segment.log) for s in self.splits))


def pack_splits(splits: Sequence[KafkaLogSplit], max_bytes: int, *,
                min_tasks: int = DEFAULT_MIN_PARTITIONS, open_cost: int = OPEN_COST_BYTES,
                cost: Sequence[float] | None = None) -> list[KafkaLogTask]:
    """Group consecutive splits into Spark tasks, as Spark's file source packs small files.

    Each split weighs its bytes plus ``open_cost`` (times its ``cost`` when given, one a split:
    its work per byte relative to uncompressed data, :func:`codec_weights`). The splits, in
    order, are cut into ``n`` runs of about ``total / n`` weight each (a split goes to the run
    its middle falls in), ``n`` the smallest multiple of ``min_tasks`` with
    ``total / n <= max_bytes``; a task never holds more than ``max_bytes`` (a heavier split is
    a task of its own). So small inputs keep ``min_tasks``-way parallelism, and with
    ``min_tasks`` the session's parallelism (its slots) the tasks fill the slots in waves that
    end together (closing a task when the next split would pass ``total / n`` made 130 tasks
    for 128 slots: a third wave of two tasks). With at most ``min_tasks`` splits every split
    is its own task.
    Why packed: a Spark task of a Python data source costs fixed time (launch to finish 11 ms
    in a local session, ~60 ms with Spark's default loopback TCP and pyspark's daemon:
    BENCHMARKS.md, "Python workers: 40 ms a task"), more than reading a small segment; one
    task per segment made a log dir of thousands of small segments take minutes.
    """
    if len(splits) <= min_tasks:
        return [KafkaLogTask((s,)) for s in splits]
    weights = [split_bytes(s) + open_cost for s in splits]
    if cost is not None:
        weights = [int(w * c) for w, c in zip(weights, cost)]
    total = sum(weights)
    n = min_tasks * -(-total // (max_bytes * min_tasks))  # waves of min_tasks, each <= max
    tasks: list[KafkaLogTask] = []
    current: list[KafkaLogSplit] = []
    weight = done = run = 0
    for split, w in zip(splits, weights):
        its_run = min(n - 1, (2 * done + w) * n // (2 * total))  # where its middle falls
        if current and (its_run != run or weight + w > max_bytes):
            tasks.append(KafkaLogTask(tuple(current)))
            current, weight = [], 0
        current.append(split)
        weight += w
        done += w
        run = its_run
    if current:
        tasks.append(KafkaLogTask(tuple(current)))
    return tasks


SCAN_CODEC_COST = {"none": 1.0, "lz4": 1.08, "snappy": 1.16, "zstd": 2.0, "gzip": 2.65}
"""A scan task's work per ``.log`` byte by the codec of the segment it reads, relative to
uncompressed batches: the mean of the medians of the ``scan-all`` and ``scan-2col`` tasks of the
4 GiB bench_scaling log (ns per byte of the tasks of one codec,
``benchmarks/bench_task_codec_cost.py``; BENCHMARKS.md, "Scan tasks weighed by codec"). A
write's read (``df.write.format("kafkalog")``) is planned with it too: its tasks measured
flatter (zstd 1.68, gzip 1.74), as migrate's are (``delta.spark_job.LOG_CODEC_COST``)."""


def codec_weights(splits: Sequence[KafkaLogSplit], table: Mapping[str, float],
                  known: Mapping[str, int] | None = None) -> list[float]:
    """``cost`` for :func:`pack_splits`: each split's work per byte, ``table``'s entry for the
    codec of its segment's first entry (:func:`~kafkalog_spark.log.segment_info.segment_codecs`:
    a few header reads a partition; the splits in plan order, each partition's together).
    Segments not on the local file system are not read (a range request each on an object
    store): their partition's codec in ``known`` (partition dir → codec id: migrate's, from the
    log ends it reads anyway) or else none; an unknown codec weighs as uncompressed."""
    out: list[float] = []
    for start, end in _partition_runs(splits):
        folder = splits[start].segment.dir
        fallback = (known or {}).get(str(folder))
        segments: list[Segment] = []  # the run's distinct segments, in order
        which = []  # each split's index in segments
        for split in splits[start:end]:
            if not segments or split.segment is not segments[-1]:
                segments.append(split.segment)
            which.append(len(segments) - 1)
        codecs = [fallback] * len(segments)
        if is_local(storage_for(folder)):
            local = [i for i, seg in enumerate(segments) if seg.remote_id is None]
            for i, codec in zip(local, segment_codecs([segments[i] for i in local])):
                codecs[i] = codec
        factors = [1.0 if c is None else table.get(CODEC_NAMES.get(c, "none"), 1.0)
                   for c in codecs]
        out += [factors[i] for i in which]
    return out


def _partition_runs(splits: Sequence[KafkaLogSplit]) -> list[tuple[int, int]]:
    """``[start, end)`` of each run of consecutive splits of one partition dir."""
    runs, start = [], 0
    for i in range(1, len(splits) + 1):
        if i == len(splits) or splits[i].segment.dir != splits[start].segment.dir:
            runs.append((start, i))
            start = i
    return runs


# --- planning --------------------------------------------------------------------------------


def plan_scan(options: ReadOptions | Mapping[str, str], *, found: LogDirs | None = None
              ) -> ScanPlan:
    """Plan a scan: the splits Spark runs as tasks, from listings and small metadata only.

    Parameters
    ----------
    options : ReadOptions or mapping
        Parsed options, or the raw option map (parsed strictly).
    found : LogDirs, optional
        An earlier discovery holding the options' paths as partition dirs (migrate's of
        its log dirs): the read is planned from it, not listed again
        (:func:`~kafkalog_spark.log.discovery.found_again`); else, or when a path is not one
        of its partition dirs, the paths are discovered here.

    Returns
    -------
    ScanPlan

    Raises
    ------
    KafkaLogError
        Paths with no Kafka data, loose segments without ``looseTopic``/``loosePartition``
        (:mod:`kafkalog_spark.log.selection`); :class:`InvalidOptionError` for a subscribed or
        assigned topic that is not there, or a starting timestamp no record reaches with
        ``startingOffsetsByTimestampStrategy=error``.
    """
    opts = options if isinstance(options, ReadOptions) else parse_read_options(options)
    plan = ScanPlan()
    found = None if found is None else found_again(found, opts.paths)
    if found is None:
        found = discover(list(opts.paths))
    live = readable_partitions(found, loose_topic=opts.loose_topic,
                               loose_partition=opts.loose_partition)
    check_selection(live, opts.paths, topics=opts.topics, pattern=opts.topic_pattern,
                    assign=opts.assign)
    selected = [part for part in live if part.topic is not None and part.partition is not None
                and opts.wants(part.topic, part.partition)]
    check_named_partitions(opts, {(p.topic or "", p.partition or 0) for p in selected})
    selected = with_remote_tier(selected, opts.remote_tier, found)
    log_starts = checkpointed_log_starts(selected)
    for part in selected:
        if part.segments:
            _plan_partition(plan, part, opts, log_starts.get(part.path))
    return plan


# the per-partition JSON options and the sentinel hint of each (Spark's wording)
_PER_PARTITION_OPTIONS = (("startingOffsets", "starting_offsets", "-2 = earliest"),
                          ("endingOffsets", "ending_offsets", "-1 = latest"),
                          ("startingOffsetsByTimestamp", "starting_by_timestamp", None),
                          ("endingOffsetsByTimestamp", "ending_by_timestamp", None))


def check_named_partitions(opts: ReadOptions, selected: set[tuple[str, int]]) -> None:
    """A per-partition JSON option must name exactly the partitions the read selects, as
    Spark's Kafka source asserts for a batch query ("you must specify all TopicPartitions"):
    a partition left out would otherwise be read from its log start (or to its end) without
    a word.

    Raises
    ------
    InvalidOptionError
        Naming the option, the partitions it leaves out and those it names that the read
        does not select.
    """
    for name, attr, sentinel in _PER_PARTITION_OPTIONS:
        given = getattr(opts, attr)
        if given is None:
            continue
        named = {(t, p) for t, parts in given.items() for p in parts}
        if named == selected:
            continue
        problems = []
        if selected - named:
            problems.append(f"leaves out {_partition_list(selected - named)}")
        if named - selected:
            problems.append(f"names {_partition_list(named - selected)}, which the read does "
                            f"not select")
        fill = f" ({sentinel} for a partition you do not want to bound)" if sentinel else ""
        raise InvalidOptionError(
            f"{name} {' and '.join(problems)}: like Spark's Kafka source, it must name every "
            f"partition the read selects{fill}, or narrow the read with subscribe or assign")


def _partition_list(parts: set[tuple[str, int]], most: int = 10) -> str:
    shown = [f"{t}-{p}" for t, p in sorted(parts)]
    more = f" and {len(shown) - most} more" if len(shown) > most else ""
    return ", ".join(shown[:most]) + more


def _plan_partition(plan: ScanPlan, part: PartitionDir, opts: ReadOptions,
                    log_start: int | None) -> None:
    topic, partition = part.topic or "", part.partition or 0
    info: dict = {"path": str(part.path)}
    plan.partitions[f"{topic}-{partition}"] = info
    lo = _start_offset(part, opts, info)
    if lo is None or lo >= 0:  # -1: a starting timestamp no record reaches
        lo = at_log_start(lo, log_start)
    end = _end_offset(part, opts)
    view = None
    if opts.read_committed:
        view = transaction_view(part)
        info["last_stable_offset"] = view.last_stable_offset
        if view.last_stable_offset is not None:
            end = view.last_stable_offset if end is None else min(end, view.last_stable_offset)
    info["start"], info["end"] = lo, end
    if lo is not None and lo < 0:  # a starting timestamp no record reaches
        return
    hi = None if end is None else end - 1
    if hi is not None and lo is not None and hi < lo:
        return
    check_history(part, lo, hi)
    segs = part.segments
    for i, seg in enumerate(segs):
        next_base = segs[i + 1].base_offset if i + 1 < len(segs) else None
        if seg.last_offset is not None:  # a remote segment the local log overlaps: its
            next_base = None              # offsets run past the next base (log.history)
        if lo is not None and next_base is not None and next_base <= lo:
            continue
        if end is not None and seg.base_offset >= end:
            break
        for split in cut_segment(seg, topic, partition, opts.max_bytes_per_partition):
            windowed = _in_window(split, lo, hi, view, next_base)
            if windowed is not None:
                plan.splits.append(windowed)


def _in_window(split: KafkaLogSplit, lo: int | None, hi: int | None, view,
               next_base: int | None) -> KafkaLogSplit | None:
    """``split`` with the read window ``[lo, hi]`` (and the aborted transactions in it), or
    ``None`` when none of its offsets is in the window. A split by offsets keeps its own
    ``min_offset`` / ``max_offset`` inside the window. ``next_base``: the next segment's base,
    which bounds a split without a ``next_offset`` of its own (a read window reaching past it
    then needs no index lookup to find where to stop)."""
    first = split.first_offset if split.min_offset is None else split.min_offset
    nxt = next_base if split.next_offset is None else split.next_offset
    if lo is not None and nxt is not None and nxt <= lo:
        return None
    if hi is not None and first > hi:
        return None
    aborted = () if view is None else view.aborted_in(
        max(first, lo or 0), hi if nxt is None else nxt - 1 if hi is None else min(hi, nxt - 1))
    top = segment_max_offset(split.segment, hi)
    return replace(split, next_offset=nxt, aborted=aborted,  # one copy: 4,146 a 4 GiB log
                   min_offset=_bound(max, lo, split.min_offset),
                   max_offset=_bound(min, top, split.max_offset))


def _bound(pick, a: int | None, b: int | None) -> int | None:
    """``pick(a, b)`` of the bounds given (``None``: unbounded)."""
    return b if a is None else a if b is None else pick(a, b)


def _start_offset(part: PartitionDir, opts: ReadOptions, info: dict) -> int | None:
    """Inclusive start offset (``None``: the log start; ``-1``: nothing to read)."""
    key = (part.topic or "", part.partition or 0)
    lo: int | None = None
    if opts.starting_offsets is not None:
        v = opts.starting_offsets.get(key[0], {}).get(key[1])
        lo = None if v in (None, EARLIEST) else v
    ts = opts.starting_timestamp
    if opts.starting_by_timestamp is not None:
        ts = opts.starting_by_timestamp.get(key[0], {}).get(key[1])
    if ts is not None:
        at = offset_for_timestamp(part, ts)
        info["starting_timestamp_offset"] = at
        if at is None:
            if opts.starting_timestamp_strategy == "error":
                raise InvalidOptionError(
                    f"no record of {key[0]}-{key[1]} has a timestamp >= {ts} (starting "
                    f"timestamp); set startingOffsetsByTimestampStrategy=latest to read nothing "
                    f"from such partitions")
            return -1
        lo = at
    return lo


def _end_offset(part: PartitionDir, opts: ReadOptions) -> int | None:
    """Exclusive end offset (``None``: the log end)."""
    key = (part.topic or "", part.partition or 0)
    end: int | None = None
    if opts.ending_offsets is not None:
        v = opts.ending_offsets.get(key[0], {}).get(key[1])
        end = None if v in (None, LATEST) else v
    ts = opts.ending_timestamp
    if opts.ending_by_timestamp is not None:
        ts = opts.ending_by_timestamp.get(key[0], {}).get(key[1])
    if ts is not None:
        end = offset_for_timestamp(part, ts)  # none reaches it: read to the end, as Spark
    return end


def offset_for_timestamp(part: PartitionDir | Sequence[Segment], timestamp_ms: int) -> int | None:
    """The first offset whose record timestamp ≥ ``timestamp_ms`` (Kafka's ``ListOffsets`` for
    a timestamp): the entry through the validated time index, then its records.

    Returns ``None`` when no record reaches the timestamp.
    """
    hit = find_timestamp(part, timestamp_ms)
    if hit is None:
        return None
    log = hit.segment.log
    end = hit.position + hit.size
    with storage_for(log).mapped_ranges(log, [(hit.position, end)], hit.segment.log_size) as buf:
        result = decode_entries(buf, topic="", partition=0, start=hit.position,
                                end=end, file=str(log),
                                options=DecodeOptions(include_control=True))
        for batch in result:
            reached = pc.fill_null(pc.greater_equal(batch.column("timestamp").cast(pa.int64()),
                                                    timestamp_ms * 1000), False)
            rows = np.flatnonzero(reached.to_numpy(zero_copy_only=False))
            if len(rows):
                return int(batch.column("offset")[int(rows[0])].as_py())
    return hit.offset
