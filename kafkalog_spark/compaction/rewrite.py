"""Compaction byte work (log-management layer): key rows, the key map's pass over the dirty range
and the rewrite of a group into one cleaned segment (KAFKA_FORMATS §15.4, §15.6, §15.7).

Spark-free; the local path and the Spark tasks call the same functions.

Record rule for a record R at offset o in batch B of the rewrite range (end offset E: where the
key map stopped, firstUncleanable when every dirty key fitted)::

    B.can_discard and (B is data, or B's delete horizon <= now)   -> dropped with its batch
    B is a control batch                                         -> kept
    o >= E                                                       -> kept (beyond the round)
    R has no key                                                 -> dropped
    o < latest dirty offset of R's key                           -> dropped (superseded)
    R is a tombstone: v2 kept while B has no horizon or now < horizon;
                      v0/v1 kept iff the segment is newer than the legacy delete horizon

Batch outcome: every record kept, v2, no horizon to stamp -> the original bytes; some kept ->
rebuilt (same base offset, lastOffsetDelta, producer fields, epoch, codec, timestamp type;
horizon = now + delete.retention.ms when a kept tombstone or a discardable marker first needs
one); none kept and (last batch of an active producer, or the batch ending at firstUncleanable)
-> the 61-byte empty batch; otherwise dropped. Legacy entries are always rebuilt as v2 (Kafka 4.x, KIP-724).
A rebuilt LOG_APPEND_TIME batch gets every record's timestamp as the append time, so its record
deltas become 0: Kafka's cleaner does the same (DefaultRecord.readFrom reports the batch's
maxTimestamp for each record of such a batch; MemoryRecords.buildRetainedRecordsInto rebuilds
with the original timestamp type and logAppendTime = maxTimestamp).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..codec import layout as L
from ..codec.records.decode import DecodeOptions, decode_to_table
from ..codec.records.digest import key_digests
from ..codec.records.encode import BatchSpec
from ..codec.records.scan import scan_entries, scan_segment
from ..storage import mapped_file
from .key_map import KeyMap
from .plan import GroupTask, SourceSegment
from .window_output import WindowOutput

_DECODE = DecodeOptions(include_headers=True, include_metadata=True, include_control=True)
_KEYS = DecodeOptions(columns=("key", "offset", "batchLastOffset"))  # values are not copied


@dataclass
class GroupOutput:
    """The cleaned segment of one group, and counters. ``path`` names the file that already
    holds ``log`` when a task wrote it in place (``<base>.log.cleaned`` in the partition dir:
    the swap then renames it instead of writing the bytes again); ``end_offset`` set: its
    ``.index`` and ``.timeindex`` are staged beside it too (a Spark task built them), the
    offset after its last batch is ``end_offset``, and ``log`` is left empty (not read)."""

    base_offset: int
    log: bytes | bytearray | memoryview
    mtime: float
    stats: dict[str, int] = field(default_factory=dict)
    path: str | None = None
    end_offset: int | None = None


WINDOW_BYTES = 16 << 20  # batch bytes decoded at once: memory does not grow with segment size


def windows(t) -> Iterator[tuple[int, int, int, int]]:
    """Consecutive entry ranges ``[i0, i1)`` of a segment's scan ``t`` holding at most
    :data:`WINDOW_BYTES` (at least one entry each), with their byte range ``[start, end)``."""
    limit = WINDOW_BYTES
    ends = t.position + t.entry_size
    i, n = 0, len(t)
    while i < n:
        j = max(i + 1, int(np.searchsorted(ends, int(t.position[i]) + limit, side="right")))
        yield i, j, int(t.position[i]), int(ends[j - 1])
        i = j


def _segment_key_rows(task: GroupTask, src: SourceSegment, buf, lowest: int = -1
                      ) -> Iterator[pa.Table]:
    """``(key, offset)`` of the keyed records of one segment that the key map considers: data
    batches not discarded (aborted), offsets in ``[lowest, task.upper_bound)`` — window by
    window (:func:`_windows`)."""
    discard = np.fromiter(src.can_discard, np.int64) if src.can_discard else None
    for _, _, start, end in windows(scan_segment(buf, str(src.log))):
        t = decode_to_table(buf, topic=task.topic, partition=task.partition, options=_KEYS,
                            start=start, end=end, file=src.log)
        offsets = t.column("offset").to_numpy()
        keep = np.asarray(pc.is_valid(t.column("key")).to_numpy(zero_copy_only=False), bool)
        keep &= (offsets < task.upper_bound) & (offsets >= lowest)
        if discard is not None:
            keep &= ~np.isin(t.column("batchLastOffset").to_numpy(), discard)
        yield t.select(["key", "offset"]).filter(pa.array(keep))


def key_rows(task: GroupTask) -> pa.Table:
    """``(key, offset)`` of every keyed record the key map considers in the group's segments:
    data batches not discarded (aborted), offsets below the round's upper bound."""
    parts = []
    for src in task.sources:
        with mapped_file(src.log) as buf:
            parts += _segment_key_rows(task, src, buf)
    if not parts:
        return pa.table({"key": pa.array([], pa.binary()), "offset": pa.array([], pa.int64())})
    return pa.concat_tables(parts)


def map_keys(tasks: list[GroupTask], key_map: KeyMap) -> int:
    """Kafka's pass 1 (``buildOffsetMap``, KAFKA_FORMATS §15.4): put the digest and offset of
    every keyed record of the dirty range ``[first dirty, upper bound)`` of a partition's tasks
    into ``key_map``, in offset order, until it is full. Returns the round's end offset
    (``latestOffset + 1``): the upper bound when every key fitted, else where the map stopped
    (:mod:`kafkalog_spark.compaction.key_map`)."""
    sources = [(t, s) for t in tasks for s in t.sources]
    first_dirty, upper = tasks[0].first_dirty, tasks[0].upper_bound
    latest = -1
    for i, (task, src) in enumerate(sources):
        next_base = sources[i + 1][1].base_offset if i + 1 < len(sources) else upper
        if next_base <= first_dirty:
            continue  # a clean segment
        with mapped_file(src.log) as buf:
            for rows in _segment_key_rows(task, src, buf, lowest=first_dirty):
                offsets = rows.column("offset").to_numpy()
                hi, lo = key_digests(rows.column("key"))
                put = key_map.put(hi, lo, offsets)
                if put < len(offsets):  # full: the last put record, or the last batch read
                    lasts = scan_entries(buf).last_offset
                    b = int(np.searchsorted(lasts, offsets[put]))
                    if b > 0 and lasts[b - 1] >= first_dirty:
                        latest = max(latest, int(lasts[b - 1]))
                    if put:
                        latest = max(latest, int(offsets[put - 1]))
                    return latest + 1
        latest = next_base - 1
    return latest + 1


KEY_COLUMNS = ["key"]  # exact keys: the full key bytes
DIGEST_COLUMNS = ["k1", "k2"]  # default: the key's 128-bit digest, high and low halves


def key_columns(exact_keys: bool = False) -> list[str]:
    """The columns that identify a key in key rows: the key bytes, or its two digest halves."""
    return KEY_COLUMNS if exact_keys else DIGEST_COLUMNS


def keyed_rows(rows: pa.Table, exact_keys: bool = False) -> pa.Table:
    """``rows`` (with a ``key`` column, as :func:`key_rows` gives them) with the key as
    :func:`key_columns` names it: unchanged for exact keys, else ``key`` replaced by its
    MurmurHash3 x64_128 digest ``(k1, k2)`` (:func:`kafkalog_spark.codec.records.digest.key_digests`)."""
    if exact_keys or "key" not in rows.column_names:
        return rows
    k1, k2 = key_digests(rows.column("key"))
    at = rows.column_names.index("key")
    return (rows.remove_column(at).add_column(at, "k2", pa.array(k2))
            .add_column(at, "k1", pa.array(k1)))


def retained_offsets_local(rows: pa.Table, first_dirty: int, exact_keys: bool = False
                           ) -> np.ndarray:
    """Offsets of keyed records that are the latest for their key among the dirty range (or whose
    key is absent from it): the Spark-free equivalent of the shuffle. ``rows`` holds ``offset``
    and either ``key`` or the digest columns (:func:`keyed_rows`); a key is its 128-bit digest,
    or with ``exact_keys`` its full bytes (:mod:`kafkalog_spark.codec.records.digest` on collisions).

    One aggregation per key, no join: a key seen in the dirty range, or seen once, keeps its
    largest offset (clean offsets precede dirty ones); a key with several clean records and no
    dirty one (an uncompacted clean range) keeps all of them (a semi-join on the key columns)."""
    if rows.num_rows == 0:
        return np.zeros(0, np.int64)
    cols = key_columns(exact_keys)
    rows = keyed_rows(rows, exact_keys).select([*cols, "offset"])
    offsets = rows.column("offset")
    agg = (rows.append_column("dirty", pc.greater_equal(offsets, first_dirty))
           .group_by(cols).aggregate([("offset", "max"), ("offset", "count"), ("dirty", "any")]))
    single = pc.or_(agg.column("dirty_any"), pc.equal(agg.column("offset_count"), 1))
    kept = np.asarray(agg.column("offset_max").filter(single).to_numpy(), np.int64)
    multi = agg.select(cols).filter(pc.invert(single))
    if multi.num_rows:
        extra = rows.join(multi, cols, join_type="left semi").column("offset")
        kept = np.concatenate([kept, np.asarray(extra.to_numpy(), np.int64)])
    return np.sort(kept)


def _members(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """``np.isin`` for a sorted ``sorted_set``: a binary search per value (np.isin hashes the
    whole set on every call, and a group's set spans all its segments)."""
    if len(sorted_set) == 0:
        return np.zeros(len(values), bool)
    pos = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[pos] == values


def batch_spec(t, i: int, *, base: int, horizon: int | None, last_delta: int | None,
               empty: bool) -> BatchSpec:
    """The header of entry ``i`` of scan ``t`` rebuilt as a v2 batch at ``base`` (a legacy
    entry gets no producer fields; ``empty``: Kafka's empty batch keeping producer state)."""
    magic = int(t.magic[i])
    attrs = int(t.attributes[i])
    ts_type = L.LOG_APPEND_TIME if attrs & L.TIMESTAMP_TYPE_MASK else L.CREATE_TIME
    max_ts = int(t.max_timestamp[i])
    return BatchSpec(
        base_offset=base, partition_leader_epoch=int(t.leader_epoch[i]),
        codec=L.CODEC_NONE if empty else attrs & L.CODEC_MASK, timestamp_type=ts_type,
        log_append_time=max_ts if ts_type == L.LOG_APPEND_TIME else None,
        producer_id=int(t.producer_id[i]) if magic == 2 else L.NO_PRODUCER_ID,
        producer_epoch=int(t.producer_epoch[i]) if magic == 2 else L.NO_PRODUCER_EPOCH,
        base_sequence=int(t.base_sequence[i]) if magic == 2 else L.NO_SEQUENCE,
        is_transactional=bool(attrs & L.TRANSACTIONAL_FLAG_MASK) and magic == 2,
        is_control=bool(attrs & L.CONTROL_FLAG_MASK) and magic == 2,
        delete_horizon_ms=None if empty else horizon, last_offset_delta=last_delta,
        max_timestamp=max_ts if empty else None)


def _latest(retained: np.ndarray | KeyMap, rows: pa.Table, offsets: np.ndarray) -> np.ndarray:
    """Which records are the latest of their key: listed in the sorted ``retained`` offsets,
    or (a key map) at or past the offset the map holds for their key (-1 when absent)."""
    if isinstance(retained, KeyMap):
        hi, lo = key_digests(rows.column("key"))
        return offsets >= retained.get(hi, lo)
    return _members(offsets, retained)


def _rewrite_segment(task: GroupTask, src: SourceSegment, retained: np.ndarray | KeyMap,
                     out: BinaryIO, stats: dict[str, int]) -> None:
    now, end = task.now_ms, task.end_offset
    with mapped_file(src.log) as buf:
        t = scan_segment(buf, str(src.log))
        stats["bytes_read"] += int(t.stop_position)
        n_entries = len(t)
        lasts = t.last_offset
        horizon_flag = t.has_delete_horizon()
        horizon = np.where(horizon_flag, t.base_timestamp, np.iinfo(np.int64).max)
        discard = np.isin(lasts, np.fromiter(src.can_discard, np.int64)) if src.can_discard \
            else np.zeros(n_entries, bool)
        control_entry = t.is_control()
        drop_batch = discard & (~control_entry | (horizon_flag & (horizon <= now)))
        for i0, i1, start, stop in windows(t):
            rows = decode_to_table(buf, topic=task.topic, partition=task.partition,
                                   options=_DECODE, start=start, end=stop, file=src.log)
            stats["records_read"] += rows.num_rows
            entry_of_row = np.searchsorted(lasts, rows.column("batchLastOffset").to_numpy())
            offsets = rows.column("offset").to_numpy()
            has_key = np.asarray(pc.is_valid(rows.column("key")).to_numpy(zero_copy_only=False),
                                 bool)
            tombstone = np.asarray(pc.is_null(rows.column("value"))
                                   .to_numpy(zero_copy_only=False), bool)
            is_control = rows.column("isControl").to_numpy(zero_copy_only=False)
            # record rule (module docstring)
            latest = _latest(retained, rows, offsets)
            keep_tomb = np.where(t.magic[entry_of_row] == 2, now < horizon[entry_of_row],
                                 src.retain_legacy_deletes)
            keep = is_control | (offsets >= end) | (has_key & latest & (~tombstone | keep_tomb))
            keep &= ~drop_batch[entry_of_row]
            local, m = entry_of_row - i0, i1 - i0
            per_entry = np.bincount(local, minlength=m)
            kept_per_entry = np.bincount(local, weights=keep, minlength=m).astype(np.int64)
            kept_tomb = np.bincount(local, weights=keep & tombstone & ~is_control,
                                    minlength=m) > 0
            row_start = np.concatenate([[0], np.cumsum(per_entry)])
            window = WindowOutput(buf, rows)
            for i in range(i0, i1):
                k = i - i0
                last = int(lasts[i])
                pos, size = int(t.position[i]), int(t.entry_size[i])
                magic = int(t.magic[i])
                retain_empty = ((magic == 2 and int(t.producer_id[i]) >= 0
                                 and last in src.last_of_producer)
                                or last + 1 == task.upper_bound
                                or (task.keep_last_batch and i == n_entries - 1
                                    and src is task.sources[-1]))
                if drop_batch[i] and not retain_empty:
                    continue
                kept = int(kept_per_entry[k])
                need_horizon = ((kept_tomb[k] or (discard[i] and control_entry[i]))
                                and not horizon_flag[i])
                if kept and kept == per_entry[k] and magic == 2 and not need_horizon:
                    window.copy(pos, pos + size)
                    stats["batches_copied"] += 1
                elif kept:
                    lo, hi = int(row_start[k]), int(row_start[k + 1])
                    idx = lo + np.flatnonzero(keep[lo:hi])
                    base = int(t.offset[i]) if magic == 2 else int(offsets[idx[0]])
                    h = (now + task.delete_retention_ms) if need_horizon else (
                        int(horizon[i]) if horizon_flag[i] else None)
                    window.rebuild(idx, batch_spec(
                        t, i, base=base, horizon=h, empty=False,
                        last_delta=int(t.last_offset_delta[i]) if magic == 2 else None))
                    stats["batches_rebuilt"] += 1
                elif retain_empty and magic == 2:
                    window.empty(batch_spec(t, i, base=int(t.offset[i]), horizon=None,
                                            last_delta=int(t.last_offset_delta[i]), empty=True))
                    stats["batches_emptied"] += 1
                else:
                    continue
                stats["records_kept"] += kept
            window.write(out)


def rewrite_group(task: GroupTask, retained: np.ndarray | KeyMap, sink: BinaryIO | None = None
                  ) -> GroupOutput:
    """Rewrite one group of segments into one cleaned segment.

    Parameters
    ----------
    task : GroupTask
        From :func:`kafkalog_spark.compaction.plan.plan_partition`.
    retained : numpy int64 array or KeyMap
        Offsets of the group's keyed records that are the latest for their key
        (:func:`retained_offsets_local` or the Spark shuffle), or the partition's key map
        (:func:`map_keys`: a record is the latest of its key at or past the map's offset).
    sink : binary file, optional
        Where the cleaned bytes go, batch by batch (a Spark task streams them into the
        ``.cleaned`` file, so its memory does not grow with the group); default: memory.

    Returns
    -------
    GroupOutput
        The segment's ``.log`` bytes (empty when written to ``sink``; base offset = the
        group's first segment's) and the last source segment's mtime (the ``.txnindex`` is
        derived by the driver, which sees the groups in order).
    """
    stats = dict.fromkeys(("bytes_read", "records_read", "records_kept", "batches_copied",
                           "batches_rebuilt", "batches_emptied"), 0)
    out = io.BytesIO() if sink is None else sink
    start = out.tell()
    if not isinstance(retained, KeyMap):
        retained = np.sort(np.asarray(retained, np.int64))
    for src in task.sources:
        _rewrite_segment(task, src, retained, out, stats)
    stats["bytes_written"] = out.tell() - start
    log = out.getbuffer() if sink is None else b""
    return GroupOutput(task.base_offset, log, task.sources[-1].mtime, stats)
