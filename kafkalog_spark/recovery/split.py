"""Offset-overflow split (recovery layer): Kafka's ``LocalLog.splitOverflowedSegment``
(KAFKA_FORMATS §12.6, KAFKA-6264) for legacy segments whose offsets run more than
``Integer.MAX_VALUE`` past their base offset.

An index entry stores an offset relative to its segment's base offset as an int32, so such a
segment cannot be indexed; a broker's loader splits it instead of cutting it, and so does
``kafkalog recover`` (before cutting anything: a split keeps every byte). The segment's entries
are copied, in order, into new segments: each new segment starts at the base offset of its first
entry (for a compressed legacy wrapper, its first inner offset) and takes entries while their
last offset fits, ``lastOffset - base <= Integer.MAX_VALUE``. The new segments' sizes add up to
the old one's, and they replace it through the ``.cleaned → .swap`` protocol
(:func:`~kafkalog_spark.log.swap.replace_segments`); the old segment file goes to the quarantine.

Two deliberate details: the first new segment keeps the old segment's name (Kafka names it after
its first entry's base offset, which is the same in every log Kafka wrote; keeping the name lets
a load after a crash drop the old files by the swap protocol's range rule), and the split covers
the segment's valid entries — bytes after the first entry that fails its checks go, untouched,
into the last new segment, where the ordinary recovery (or ``--salvage``) then deals with them.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..codec import layout as L
from ..codec.files import naming as N
from ..codec.records.decode import DecodeOptions, decode_to_table
from ..codec.records.scan import STOP_END, scan_entries
from ..errors import Location, LogDirError
from ..log.model import PartitionDir, Segment
from ..log.swap import NewSegment, replace_segments
from ..storage import mapped_file
from .quarantine import Quarantine, write_ranges
from .validity import first_invalid_entry


@dataclass(frozen=True)
class Piece:
    """One new segment of a split: its base offset and the old segment's bytes ``[start, end)``."""

    base_offset: int
    start: int
    end: int
    entries: int


@dataclass(frozen=True)
class SegmentSplit:
    """How one overflowed segment is split."""

    segment: Segment
    pieces: tuple[Piece, ...]

    def describe(self) -> str:
        return (f"offsets overflow the segment's int32 range: split into {len(self.pieces)} "
                "segments at base offsets " + ", ".join(str(p.base_offset) for p in self.pieces)
                + f" ({self.segment.log_size} bytes, nothing cut)")

    def to_dict(self) -> dict:
        return {"file": str(self.segment.log), "pieces": [
            {"base_offset": p.base_offset, "start": p.start, "end": p.end, "entries": p.entries}
            for p in self.pieces]}


def plan_segment_split(buf: np.ndarray, seg: Segment, table, k: int) -> SegmentSplit | None:
    """The split of one segment whose first ``k`` entries of ``table`` (its scan) are valid, or
    ``None`` when they fit the segment's base offset."""
    last = table.last_offset[:k]
    if not k or int(last[-1]) - seg.base_offset <= L.INT32_MAX:
        return None
    pieces: list[Piece] = []
    i, base = 0, seg.base_offset
    while i < k:
        # the entries from i on that fit `base`: last offsets increase, so a prefix
        j = i + int(np.searchsorted(last[i:], base + L.INT32_MAX, side="right"))
        if j == i:
            raise LogDirError(f"entry offsets {base}..{int(last[i])} do not fit one segment; "
                              "cannot split", Location(str(seg.log), int(table.position[i]), base))
        start = int(table.position[i])
        end = int(table.position[j]) if j < k else len(buf)
        pieces.append(Piece(base, start, end, j - i))
        i = j
        if i < k:
            base = _entry_base_offset(buf, table, i, seg)
    return SegmentSplit(seg, tuple(pieces))


def _entry_base_offset(buf: np.ndarray, table, i: int, seg: Segment) -> int:
    """``RecordBatch.baseOffset`` of entry ``i``: v2 and uncompressed legacy entries carry it in
    the header; a compressed legacy wrapper's is its first inner offset (decoded)."""
    if table.magic[i] == 2 or table.codec[i] == L.CODEC_NONE:
        return int(table.offset[i])
    start = int(table.position[i])
    rows = decode_to_table(buf, topic="", partition=0, start=start,
                           end=start + int(table.entry_size[i]), file=str(seg.log),
                           options=DecodeOptions(columns=("batchBaseOffset",),
                                                 include_control=True))
    return int(rows.column(0)[0].as_py()) if rows.num_rows else int(table.offset[i])


def plan_partition_splits(part: PartitionDir) -> tuple[list[SegmentSplit], int]:
    """Every segment of ``part`` that needs splitting, in offset order, and the log end offset
    once split (the first invalid entry ends the walk: what follows it is recovery's, or
    salvage's, business)."""
    out: list[SegmentSplit] = []
    if not any(_overflows(seg) for seg in part.segments):
        return out, 0  # every recover asks: a header scan, no checksums, in the common case
    prev_last: int | None = None
    end = 0
    for seg in part.segments:
        end = seg.base_offset
        with mapped_file(seg.log) as buf:
            _, table, k = first_invalid_entry(buf, seg.base_offset, prev_last, overflow_ok=True)
            plan = plan_segment_split(buf, seg, table, k)
        if plan is not None:
            out.append(plan)
        if k:
            prev_last = int(table.last_offset[k - 1])
        if k < len(table) or table.stop_code != STOP_END:
            break
    return out, max(end, prev_last + 1) if prev_last is not None else end


def _overflows(seg: Segment) -> bool:
    """Whether an entry header of the segment has offsets beyond its int32 range."""
    with mapped_file(seg.log) as buf:
        t = scan_entries(buf)
    return bool(len(t)) and bool((t.last_offset - seg.base_offset > L.INT32_MAX).any())


def execute_split(part: PartitionDir, plan: SegmentSplit, quarantine: Quarantine,
                  step=None) -> None:
    """Write the pieces as ``<base>.log.cleaned`` and swap them in for the old segment, whose
    files go to the quarantine (module docstring)."""
    seg, log = plan.segment, Path(plan.segment.log)
    written: list[Path] = []
    for piece in plan.pieces:
        cleaned = part.path / f"{N.segment_file_name(piece.base_offset, N.LOG)}.{N.CLEANED}"
        write_ranges(log, [(piece.start, piece.end)], cleaned, step)
        written.append(cleaned)
    with ExitStack() as stack:
        bufs = [stack.enter_context(mapped_file(p)) for p in written]
        replace_segments(part.path, [NewSegment(p.base_offset, b, mtime=seg.mtime, log_written=True)
                                     for p, b in zip(plan.pieces, bufs)],
                         [seg.base_offset],
                         dispose=lambda p, why: quarantine.move_file(p, f"offset overflow split: {why}"),
                         step=step)
