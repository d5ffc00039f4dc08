"""Salvage (recovery layer): ``kafkalog recover --salvage`` keeps every valid batch after damage.

Kafka's recovery cuts a partition at its first invalid entry and deletes every later segment:
right for a broker that re-fetches from a replica, fatal offline when these bytes are the only
copy. Salvage walks each segment as recovery does (:func:`~.validity.first_invalid_entry`:
structure, CRC, offsets increasing and inside the segment's int32 range — offsets are not
checksummed, so an entry outside it is damage; a segment that overflows before any damage is
split first, :mod:`~kafkalog_spark.recovery.split`); at an invalid entry it
searches forward for the next position where a whole, checksum-valid entry starts
(:func:`~kafkalog_spark.codec.records.resync.next_entry`) whose offsets follow the last kept one, and
goes on from there. Only the damaged byte ranges are dropped: an entry whose checksum is valid
but whose offsets go backwards or overlap is dropped with them. The result is the original log
minus exactly the damaged entries, with an offset gap where each was — brokers load logs with
gaps (compacted topics have them) — and nothing invented: every kept byte is an original entry
that checks out.

A damaged segment is rewritten without its damaged ranges through Kafka's
``.cleaned → .swap`` protocol (:func:`~kafkalog_spark.log.swap.replace_segments`); the damaged
ranges are copied into the quarantine with their byte positions and the offsets around them,
and the old segment file is moved there whole. Then the ordinary recovery runs on the result
(indexes, transaction index, producer snapshot, leader epochs, checkpoints), so a run killed
anywhere is finished by the next one: the swap passes complete or roll back the rewrite.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..codec.records.resync import DEFAULT_MAX_ENTRY_BYTES, next_entry
from ..codec.records.scan import STOP_PARTIAL_ENTRY, scan_entries
from ..log.model import PartitionDir, Segment
from ..log.swap import NewSegment, replace_segments
from ..storage import mapped_file
from .quarantine import Quarantine, write_ranges
from .validity import first_invalid_entry


@dataclass(frozen=True)
class Damage:
    """One damaged byte range of a segment, and the offsets around it: ``after`` is the last
    offset kept before it (``None``: none in this partition yet), ``resumes_at`` the first
    offset kept after it (``None``: nothing valid follows in this segment)."""

    file: str
    start: int
    end: int
    reason: str
    after: int | None
    resumes_at: int | None

    def to_dict(self) -> dict:
        return {"file": self.file, "start": self.start, "end": self.end, "bytes": self.end - self.start,
                "reason": self.reason, "last_offset_before": self.after,
                "first_offset_after": self.resumes_at}


@dataclass
class SegmentSalvage:
    """What salvage keeps of one segment: byte ranges of valid entries, and the damage."""

    segment: Segment
    keep: list[tuple[int, int]] = field(default_factory=list)
    damage: list[Damage] = field(default_factory=list)
    kept_entries: int = 0
    last_offset: int | None = None

    @property
    def kept_bytes(self) -> int:
        return sum(e - s for s, e in self.keep)

    @property
    def rewrite(self) -> bool:
        """Whether the segment must be rewritten: damage with valid entries after it (damage
        only at the end is a plain cut, as default recovery makes)."""
        return any(d.resumes_at is not None for d in self.damage)


WALK_WINDOW_BYTES = 64 << 20
"""Entries are checked window by window, so a segment with many damaged regions is walked
(and checksummed) once, not once per region."""


def salvage_segment(buf: np.ndarray, seg: Segment, prev_last: int | None, *,
                    max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES) -> SegmentSalvage:
    """Walk ``buf`` (the segment's bytes), keeping every valid entry (module docstring)."""
    out = SegmentSalvage(seg)
    pos, size = 0, len(buf)
    while pos < size:
        end = min(size, pos + WALK_WINDOW_BYTES)
        found, table, k = first_invalid_entry(buf[pos:end], seg.base_offset, prev_last)
        if k:
            out.keep.append((pos, pos + int(table.position[k - 1] + table.entry_size[k - 1])))
            out.kept_entries += k
            prev_last = int(table.last_offset[k - 1])
        if found is None:
            pos = end
            continue
        if end < size and table.stop_code == STOP_PARTIAL_ENTRY and found[0] == table.stop_position:
            # the window ends inside an entry: not damage, the next window starts with it
            nxt = pos + table.stop_position
            if nxt > pos:
                pos = nxt
                continue
            end = size  # an entry larger than the window: check it against the whole segment
            found, table, k = first_invalid_entry(buf[pos:end], seg.base_offset, prev_last)
            if found is None or found[0] > 0:
                continue  # valid after all: the next round keeps it
        bad = pos + found[0]
        restart = _restart(buf, bad, seg.base_offset, prev_last, max_entry_bytes)
        first_after = None if restart is None else int(scan_entries(buf, restart,
                                                                    max_entries=1).offset[0])
        out.damage.append(Damage(str(seg.log), bad, size if restart is None else restart,
                                 found[1], prev_last, first_after))
        if restart is None:
            break
        pos = restart
    out.last_offset = prev_last
    out.keep = _merged(out.keep)
    return out


def _restart(buf: np.ndarray, bad: int, base: int, prev_last: int | None,
             max_entry_bytes: int) -> int | None:
    """The next position after ``bad`` where a checksum-valid entry with offsets following
    ``prev_last`` starts; valid entries whose offsets do not follow are passed over."""
    p = bad + 1
    while True:
        p = next_entry(buf, p, max_entry_bytes=max_entry_bytes)
        if p is None:
            return None
        one = scan_entries(buf, p, max_entries=1)
        entry = buf[p:p + int(one.entry_size[0])]
        if first_invalid_entry(entry, base, prev_last)[2]:  # checks out, offsets included
            return p
        p += 1


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in ranges:
        if out and out[-1][1] == s:
            out[-1] = (out[-1][0], e)
        elif e > s:
            out.append((s, e))
    return out


def plan_partition_salvage(part: PartitionDir, *,
                           max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES
                           ) -> list[SegmentSalvage]:
    """Salvage every segment of ``part`` in offset order (the offsets of each segment must
    follow those kept before it)."""
    plans: list[SegmentSalvage] = []
    prev_last: int | None = None
    for seg in part.segments:
        with mapped_file(seg.log) as buf:
            plan = salvage_segment(buf, seg, prev_last, max_entry_bytes=max_entry_bytes)
        plans.append(plan)
        prev_last = plan.last_offset if plan.last_offset is not None else prev_last
    return plans


def estimate(part: PartitionDir) -> dict:
    """What salvage would keep of a partition (the report of a default ``recover`` run that
    cuts)."""
    plans = plan_partition_salvage(part)
    return {"entries": sum(p.kept_entries for p in plans),
            "bytes": sum(p.kept_bytes for p in plans),
            "damaged_ranges": sum(len(p.damage) for p in plans)}


def execute_salvage(part: PartitionDir, plan: SegmentSalvage, quarantine: Quarantine,
                    step=None) -> None:
    """Rewrite one segment without its damaged ranges (module docstring): the damaged ranges
    are copied into the quarantine first, the kept ranges are written as ``<base>.log.cleaned``
    and swapped in; the old segment files go to the quarantine."""
    seg, log = plan.segment, Path(plan.segment.log)
    for d in plan.damage:
        quarantine.save_range(log, d.start, d.end, f"damaged: {d.reason} (offsets after "
                              f"{d.after}, resuming at {d.resumes_at})")
    cleaned = log.with_name(f"{log.name}.cleaned")
    write_ranges(log, plan.keep, cleaned, step)
    with mapped_file(cleaned) as written:
        replace_segments(part.path, [NewSegment(seg.base_offset, written, mtime=seg.mtime,
                                                log_written=True)],
                         [seg.base_offset],
                         dispose=lambda p, why: quarantine.move_file(p, f"salvage: {why}"),
                         step=step)
