"""Cutting one segment into the splits of a scan (datasource layer), for the driver's planner
(:mod:`.plan`).

A segment read as stored (local, on an object store, LocalTieredStorage) is cut at byte
positions of offset-index entries, each checked against the log by a small probe of its bytes
(:func:`_probed_cuts`). A segment a tier restores from stored chunks (Aiven: its storage has
``read_unit``) is cut by offsets from its index alone (:func:`_offset_cuts`): a probe there would
restore whole chunks on the driver, and its executors check the entries instead. When its chunks
are fetched whole (zstd, AES-GCM), the cuts lie at chunk boundaries, at least
:data:`MIN_CHUNKS_PER_SPLIT` chunks apart.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..codec.files.index import OffsetIndex, read_offset_index
from ..codec.records.scan import scan_entries
from ..log.lookup import check_offset_entry
from ..log.model import Segment
from ..storage import mapped_file, storage_for
from .splits import KafkaLogSplit

# entries walked from an offset-index entry to validate it as a cut point (<=3.9 brokers index
# one entry per append, which may hold several batches)
_CUT_CHECK_ENTRIES = 64
_CUT_PROBE_BYTES = 64 << 10  # bytes read at a candidate cut to check its index entry
MIN_CHUNKS_PER_SPLIT = 10
"""A ``.log`` fetched in whole chunks (a tier's zstd or AES-GCM chunks) is cut into splits of at
least this many chunks: each cut costs one chunk that both neighbouring splits fetch."""


def cut_segment(seg: Segment, topic: str, partition: int, max_bytes: int) -> list[KafkaLogSplit]:
    """A segment's splits of at most about ``max_bytes`` (a tier's chunked segment: see
    :func:`_chunk_aligned`), cut at offset-index entries (module docstring)."""
    whole = KafkaLogSplit(topic, partition, seg, 0, None, seg.base_offset, None)
    if seg.log_size <= max_bytes:  # a whole split however the file is read (a chunked file's
        return [whole]             # step below is at least max_bytes)
    unit = _read_unit(seg)
    step = max_bytes if unit is None else _chunk_aligned(max_bytes, unit)
    if seg.log_size <= step or seg.index is None or not seg.index_size:
        return [whole]
    with mapped_file(seg.index) as ibuf:
        index = read_offset_index(ibuf, seg.base_offset, file=str(seg.index))
    if unit is None:
        return _probed_cuts(whole, index, max_bytes)
    return _offset_cuts(whole, index, step, unit)


def _read_unit(seg: Segment) -> int | None:
    """What a ranged read of the segment's ``.log`` rounds out to when a tier restores it from
    stored chunks (1: byte ranges fetched as asked); ``None`` for a file read as stored."""
    fs = storage_for(seg.log)
    # an optional method of the storage seam: only a tier's restored files have it
    unit = getattr(fs, "read_unit", None)
    return None if unit is None else int(unit(seg.log))


def _chunk_aligned(max_bytes: int, unit: int) -> int:
    """Split size for a ``.log`` fetched in whole chunks of ``unit`` bytes: a multiple of the
    chunk, and at least :data:`MIN_CHUNKS_PER_SPLIT` chunks, so the one chunk both neighbours
    of a cut fetch costs at most about a tenth."""
    if unit <= 1:
        return max_bytes
    return max(-(-max_bytes // unit), MIN_CHUNKS_PER_SPLIT) * unit


def _probed_cuts(whole: KafkaLogSplit, index: OffsetIndex, max_bytes: int
                 ) -> list[KafkaLogSplit]:
    """Byte ranges at batch boundaries from the offset index; each cut is checked against the
    log (a failing one is dropped: a longer split)."""
    seg = whole.segment
    positions, offsets = index.positions, index.offsets
    cuts: list[tuple[int, int]] = []  # (position, offset bound of the entry there)
    targets = range(max_bytes, seg.log_size, max_bytes)
    ks = np.searchsorted(positions, np.asarray(targets, np.int64), side="right") - 1
    # the entry headers at each candidate cut is all the check reads: on an object store only
    # those bytes are fetched, not the segment
    probes = [(int(positions[k]), int(positions[k]) + _CUT_PROBE_BYTES) for k in ks if k >= 0]
    with storage_for(seg.log).mapped_ranges(seg.log, probes, seg.log_size) as buf:
        for k in ks:
            k = int(k)
            if k >= 0 and (not cuts or positions[k] > cuts[-1][0]) and positions[k] > 0:
                o, p = int(offsets[k]), int(positions[k])
                table = scan_entries(buf, start=p, max_entries=_CUT_CHECK_ENTRIES)
                if check_offset_entry(index, o, p, table, len(buf)) is None:
                    first_known = int(table.magic[0]) == 2
                    cuts.append((p, int(table.offset[0]) if first_known else -1))
    splits = []
    bounds = [(0, seg.base_offset)] + cuts
    for i, (p, first) in enumerate(bounds):
        nxt = bounds[i + 1] if i + 1 < len(bounds) else None
        lower = first if first >= 0 else splits[-1].first_offset
        # the entry at the next cut starts after every record of this split (a legacy
        # wrapper's header offset is its last offset: still an exclusive upper bound)
        upper = None if nxt is None or nxt[1] < 0 else nxt[1]
        splits.append(replace(whole, start_position=p,
                              end_position=None if nxt is None else nxt[0],
                              first_offset=lower, next_offset=upper))
    return splits


def _offset_cuts(whole: KafkaLogSplit, index: OffsetIndex, step: int, unit: int
                 ) -> list[KafkaLogSplit]:
    """Splits by offsets, from the offset index alone (no ``.log`` byte read on the driver).

    At index entry ``(o, p)`` (the append at byte ``p`` ends at offset ``o``) one split ends
    with offset ``o`` and the next starts with ``o + 1``: each split is an offset range
    (``by_offset``), so every offset belongs to exactly one, whatever the bytes at ``p`` hold.
    Its executor finds its records by the validated lookups of an offset window (the entry is
    checked against the log there, and a read that does not fit fetches the whole segment and
    walks it), so a damaged entry costs bytes, never records. ``p`` is where the split's bytes
    start. With chunks fetched whole (``unit`` > 1) the cut is the first entry at or after a
    chunk boundary: both neighbours then fetch only the chunk holding it."""
    seg = whole.segment
    positions, offsets = index.positions, index.offsets
    targets = np.arange(step, seg.log_size, step, dtype=np.int64)
    ks = (np.searchsorted(positions, targets, side="left") if unit > 1
          else np.searchsorted(positions, targets, side="right") - 1)
    at = [int(k) for k in np.unique(ks[(ks >= 0) & (ks < len(positions))]) if positions[k] > 0]
    if not at:
        return [whole]
    splits = []
    for i, k in enumerate([None, *at]):
        nxt = at[i] if i < len(at) else None
        after = None if nxt is None else int(offsets[nxt]) + 1
        split = replace(whole, end_position=None if nxt is None else int(positions[nxt]),
                        next_offset=after, max_offset=None if after is None else after - 1,
                        by_offset=True)
        if k is not None:
            # first_offset bounds what the bytes from p hold (past the entry before); below
            # min_offset, so the executor looks min_offset up and checks the entry
            split = replace(split, start_position=int(positions[k]),
                            first_offset=int(offsets[k - 1]) + 1 if k else seg.base_offset,
                            min_offset=int(offsets[k]) + 1)
        splits.append(split)
    return splits
