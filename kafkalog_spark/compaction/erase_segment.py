"""Erasing from one segment (log-management layer).

Scan a segment for the records a matcher selects, rewrite it without them (copying unmatched batches' bytes, rebuilding those
with matches), and swap the rewrite in through the crash-safe ``.cleaned → .swap → live``
replacement. :mod:`.erase` runs it over partitions locally, :mod:`.erase_spark` as Spark
tasks; the rules are in :mod:`.erase`'s docstring."""


from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..codec.records.decode import DecodeOptions, decode_to_table
from ..codec.records.scan import scan_segment
from ..log.discovery import discover
from ..log.model import PartitionDir, Segment
from ..log.swap import NewSegment, replace_segments
from ..storage import mapped_file, storage_for
from ..storage.atomic import disk_errors
from .cleaned import cleaned_path
from .erase_select import Matcher
from .rewrite import batch_spec, windows
from .window_output import WindowOutput

Step = Callable[[str], None]
_ROWS = DecodeOptions(include_headers=True, include_metadata=True, include_control=True)


@dataclass
class PartitionErase:
    """The audit of one partition."""

    partition: str
    records_removed: int = 0
    segments_scanned: int = 0
    segments_rewritten: list[str] = field(default_factory=list)
    offset_ranges: list[list[int]] = field(default_factory=list)  # [first, last] per segment

    def add(self, seg: Segment, hits: np.ndarray) -> None:
        """Count one scanned segment and the offsets of its matches."""
        self.segments_scanned += 1
        if len(hits):
            self.records_removed += len(hits)
            self.offset_ranges.append([int(hits.min()), int(hits.max())])
            self.segments_rewritten.append(seg.name)

    def to_dict(self) -> dict:
        return {"partition": self.partition, "records_removed": self.records_removed,
                "segments_scanned": self.segments_scanned,
                "segments_rewritten": self.segments_rewritten,
                "offset_ranges": self.offset_ranges}


def rescan(part: PartitionDir) -> PartitionDir:
    """The partition as its dir holds it now (after swaps)."""
    return discover([part.path]).partitions[0]


def erase_segment(topic: str, partition: int, seg: Segment, matcher: Matcher, *,
                  last_segment: bool, out: Path | None = None, step: Step | None = None
                  ) -> tuple[np.ndarray, bool]:
    """The offsets of ``seg``'s records that ``matcher`` selects and whether the segment
    without them was written to ``out`` (streamed and fsynced; only when ``out`` is given and
    there are matches)."""
    with mapped_file(seg.log) as buf:
        rows = decode_to_table(buf, topic=topic, partition=partition, options=matcher.options,
                               file=str(seg.log))
        hits = rows.column("offset").to_numpy()[matcher.select(rows, str(seg.log))]
        if out is None or not len(hits):
            return hits, False
        fs = storage_for(out)
        if step is not None:
            step(f"write {out}")
        with disk_errors("writing an erased segment", out):
            f = fs.open_write(out)
            try:
                _rewrite(buf, seg, topic, partition, np.sort(hits), f,
                         last_segment=last_segment)
            except BaseException:
                f.close()
                fs.remove(out, missing_ok=True)
                raise
            fs.close_durably(f)
        return hits, True


def _rewrite(buf: np.ndarray, seg: Segment, topic: str, partition: int, erased: np.ndarray,
             out: BinaryIO, *, last_segment: bool) -> None:
    """Write the segment without the records at the sorted ``erased`` offsets (module
    docstring); runs of batches without a match are copied in one write. The log's last batch
    is kept (empty) when every record of it goes, so the log end offset does not move back."""
    t = scan_segment(buf, str(seg.log))
    lasts = t.last_offset
    firsts = np.concatenate(([seg.base_offset], lasts[:-1] + 1))  # legacy: after the previous
    firsts = np.where(t.magic == 2, t.offset, firsts)
    hit = np.searchsorted(erased, firsts) < np.searchsorted(erased, lasts, side="right")
    horizon_flag = t.has_delete_horizon()
    copy_from = 0  # bytes from here up to the next rebuilt batch are copied as they are
    for i0, i1, start, stop in windows(t):
        if not hit[i0:i1].any():
            continue
        # one decode per window holding matches (not one per batch)
        rows = decode_to_table(buf, topic=topic, partition=partition, options=_ROWS,
                               start=start, end=stop, file=str(seg.log))
        offsets = rows.column("offset").to_numpy()
        entry = np.searchsorted(lasts, rows.column("batchLastOffset").to_numpy())
        row_start = np.searchsorted(entry, np.arange(i0, i1 + 1))
        pos_e = np.searchsorted(erased, offsets)
        keep = ~((pos_e < len(erased)) & (erased[np.minimum(pos_e, len(erased) - 1)] == offsets))
        window = WindowOutput(buf, rows)
        for i in (i0 + np.flatnonzero(hit[i0:i1])).tolist():
            pos = int(t.position[i])
            window.copy(copy_from, pos)
            copy_from = pos + int(t.entry_size[i])
            lo, hi = int(row_start[i - i0]), int(row_start[i - i0 + 1])
            idx = lo + np.flatnonzero(keep[lo:hi])
            magic = int(t.magic[i])
            if len(idx):
                base = int(t.offset[i]) if magic == 2 else int(offsets[idx[0]])
                # the batch keeps its last offset (a legacy wrapper's is its own offset)
                window.rebuild(idx, batch_spec(
                    t, i, base=base, empty=False, last_delta=int(lasts[i]) - base,
                    horizon=int(t.base_timestamp[i]) if horizon_flag[i] else None))
            elif (magic == 2 and int(t.producer_id[i]) >= 0) or (last_segment and i == len(t) - 1):
                window.empty(batch_spec(t, i, base=int(t.offset[i]), horizon=None,
                                        last_delta=int(t.last_offset_delta[i]), empty=True))
        window.write(out)
    out.write(buf[copy_from:int(t.stop_position)])


def swap_in(pdir: Path, seg: Segment, step: Step | None) -> None:
    """Replace ``seg`` by its rewritten ``<base>.log.cleaned`` in ``pdir`` (mapped, not read
    into memory) through the crash-safe swap, keeping the segment's transaction index (erasing
    changes no offset and no aborted transaction)."""
    path = cleaned_path(pdir, seg.base_offset)
    txn = None
    if seg.txnindex is not None:
        txn = storage_for(seg.txnindex).read_bytes(seg.txnindex)
    mapped = storage_for(path).map_readonly(path)  # None: an empty file
    try:
        log = memoryview(mapped) if mapped is not None else b""
        replace_segments(pdir, [NewSegment(seg.base_offset, log, txnindex=txn, mtime=seg.mtime,
                                           log_written=True)], [seg.base_offset], step=step)
    finally:
        if mapped is not None:
            with contextlib.suppress(BufferError):
                mapped.close()
