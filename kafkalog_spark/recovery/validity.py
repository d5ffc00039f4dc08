"""Where a segment's valid prefix ends (recovery layer): Kafka's ``LogSegment.recover`` walk —
``ensureValid`` per entry (structure, checksum), offsets in order and inside the segment's
range — shared by recovery, salvage and the overflow split."""

from __future__ import annotations

import numpy as np

from ..codec import layout as L
from ..codec.records.crc import verify_crcs
from ..codec.records.scan import STOP_END, scan_entries


def first_invalid_entry(buf: np.ndarray, base_offset: int, prev_last: int | None, *,
                        overflow_ok: bool = False):
    """Where recovery must cut one segment (``overflow_ok``: offsets beyond the segment's int32
    range are not invalid — :mod:`~kafkalog_spark.recovery.split` splits such segments).

    Returns ``(found, table, k)``: ``found`` is ``(position, reason, base offset of the entry)``
    of the first entry failing ``ensureValid`` (structure, CRC), offset order (against
    ``prev_last``, the previous segment's last offset) or the segment's offset range, ``None``
    when all of it is valid; ``table`` the scan of ``buf``; ``k`` the number of valid entries.
    """
    table = scan_entries(buf)
    n = len(table)
    bad = ~verify_crcs(buf, table) if n else np.zeros(0, bool)
    first = np.where(table.magic == 2, table.offset, table.last_offset)
    last = table.last_offset
    previous = np.empty(n, np.int64)
    if n:
        previous[0] = np.iinfo(np.int64).min if prev_last is None else prev_last
        previous[1:] = last[:-1]
    order = (first <= previous) | (last < first)  # last < first: a negative lastOffsetDelta
    outside = (first < base_offset) | (last < 0)
    if not overflow_ok:
        outside |= last - base_offset > L.INT32_MAX
    hits = np.flatnonzero(bad | order | outside)
    if len(hits):
        k = int(hits[0])
        reason = ("checksum mismatch" if bad[k] else
                  f"last offset {int(last[k])} is before the base offset {int(first[k])}"
                  if last[k] < first[k] else
                  f"offset {int(first[k])} does not follow {int(previous[k])}" if order[k] else
                  f"offsets {int(first[k])}..{int(last[k])} outside the segment's range")
        return (int(table.position[k]), reason, int(table.offset[k])), table, k
    if table.stop_code != STOP_END:
        zero = not buf[table.stop_position:].any()
        reason = "zero-filled preallocated tail" if zero else table.stop_reason
        return (table.stop_position, reason, None), table, n
    return None, table, n
