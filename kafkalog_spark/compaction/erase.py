"""Erase (log-management layer): ``kafkalog erase LOG_DIR --topic T --keys FILE`` (or
``--where PREDICATE``) removes every matching record from a stopped broker's log dir, for good.

Per partition of the topic (``-delete`` dirs and the metadata log aside), every segment —
the active one too: the log dir's ``.lock`` says no broker holds it — is scanned for matching
records (:mod:`.erase_select`: keys by 128-bit MurmurHash3 digest, confirmed byte for byte; a
predicate through DataFusion). A segment with no match is not touched. A segment with matches
is rewritten:

* a batch with no match: its bytes, unchanged;
* a batch with matches: rebuilt without them, with every other record's offset (an offset gap
  where each erased record was) and the batch's header (base offset, last offset, leader
  epoch, codec, timestamp type, producer id/epoch/sequence, transactional flag, delete
  horizon) — a v0/v1 entry is rebuilt as a v2 batch, as Kafka's cleaner does since KIP-724;
* a batch whose every record matches: dropped, unless it carries a producer id, in which case
  the 61-byte empty batch keeps the producer's epoch and sequence, as the cleaner keeps it
  (and the log's last batch stays, empty, so the log end offset does not move back);
* control batches (transaction markers) are never erased;

through the crash-safe ``.cleaned → .swap → live`` replacement (the old files are deleted:
erasure means gone), with the indexes rebuilt and the transaction index kept (offsets and
aborted transactions do not change). A run killed anywhere is finished by the next one: the
swap passes complete or roll back the replacement, and a second scan finds what is left.

The key set is read ``max_keys`` at a time; more keys mean one more pass over the log per
chunk (memory bounded like the cleaner's dedupe buffer). The audit report never holds a key,
a value or the predicate: per partition the records removed, segments rewritten, offset ranges
touched, and a SHA-256 of the sorted key set (or of the predicate). ``check`` only scans and
reports what is left. :mod:`.erase_spark` runs the per-segment work as Spark tasks.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..codec.decode import DecodeOptions, decode_to_table
from ..codec.scan import scan_segment
from ..log.discovery import discover
from ..log.lock import ensure_local, ensure_not_locked, hold_lock
from ..log.model import PartitionDir, Segment
from ..log.selection import command_partitions
from ..log.atomic import disk_errors
from ..log.storage import mapped_file, storage_for
from ..log.swap import NewSegment, complete_interrupted_swaps, replace_segments
from .erase_select import DEFAULT_MAX_KEYS, Matcher, Selection
from .rewrite import batch_spec, cleaned_path, windows
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


def erase(log_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], topic: str,
          keys: Sequence[bytes] | None = None, *, where: str | None = None,
          execute_plan: bool = False, max_keys: int = DEFAULT_MAX_KEYS,
          step: Step | None = None, spark: Any = None) -> dict:
    """Erase the records of ``topic`` whose key is in ``keys``, or that ``where`` (a SQL
    predicate, :class:`.erase_select.Predicate`) selects (module docstring); with ``spark``,
    every segment is scanned and rewritten by a Spark task (:mod:`.erase_spark`).

    A dry run unless ``execute_plan`` (as every operation that changes a log dir in place).
    Returns the audit report: ``{"executed", "topic", "key_set_sha256", "keys"`` (or
    ``"predicate_sha256"``) ``, "records_removed", "partitions": [...]}``; without
    ``execute_plan`` (the plan, and what ``--check`` runs) nothing changes and the counts are
    what is there to erase.

    Raises
    ------
    InvalidOptionError
        No keys, both or neither of keys and ``where``, a predicate that does not parse, or a
        path that is not a log dir.
    LogDirLockedError
        A live broker holds a log dir.
    """
    return erase_selected(log_dirs, topic, Selection(keys, where, max_keys),
                          execute_plan=execute_plan, step=step, spark=spark)


def erase_selected(log_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                   topic: str, selection: Selection, *, execute_plan: bool = False,
                   step: Step | None = None, spark: Any = None) -> dict:
    """:func:`erase` of a :class:`.erase_select.Selection`."""
    ensure_local(log_dirs)
    found = discover(log_dirs)
    parts = [p for p in command_partitions(found, topics=[topic])
             if p.topic == topic and p.kind is None]
    roots = sorted({p.path.parent for p in parts})
    for root in roots:
        ensure_not_locked(root)
    with contextlib.ExitStack() as stack:
        if execute_plan:
            for root in roots:
                stack.enter_context(hold_lock(root))
            parts = [_finish_interrupted(p, step) for p in parts]
        if spark is not None:
            from .erase_spark import erase_spark

            audits = erase_spark(spark, parts, selection, execute_plan, step)
        else:
            audits = [_erase_partition(p, selection, execute_plan, step) for p in parts]
    return {"executed": execute_plan, "topic": topic, **selection.audit(),
            "records_removed": sum(a.records_removed for a in audits),
            "partitions": [a.to_dict() for a in audits]}


def _finish_interrupted(part: PartitionDir, step: Step | None) -> PartitionDir:
    """The partition after a killed run's replacement is completed or rolled back."""
    complete_interrupted_swaps(part.path, step=step)
    return rescan(part)


def rescan(part: PartitionDir) -> PartitionDir:
    """The partition as its dir holds it now (after swaps)."""
    return discover([part.path]).partitions[0]


def _erase_partition(part: PartitionDir, selection: Selection, execute: bool,
                     step: Step | None) -> PartitionErase:
    audit = PartitionErase(part.name)
    for matcher in selection.matchers():
        for seg in part.segments:
            out = cleaned_path(part.path, seg.base_offset) if execute else None
            hits, written = erase_segment(part.topic or "", part.partition or 0, seg, matcher,
                                          last_segment=seg is part.segments[-1], out=out,
                                          step=step)
            audit.add(seg, hits)
            if written:
                swap_in(part.path, seg, step)
        if execute:
            part = rescan(part)
    return audit


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
