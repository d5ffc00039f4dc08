"""Publishing a write (log layer): staged segments get their final offsets by shifting whole
segments and are renamed into the log dir — a new partition dir in one rename, an append
segment by segment, an overwrite by one directory exchange (see :mod:`.writer`).

The shift happens in the staging folder, before the log dir changes, at the batch positions the
stagers recorded (no walk of the files)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..codec import layout as L
from ..codec.files import naming as N
from ..errors import CorruptRecordError, InvalidOptionError, Location, LogDirError
from ..storage import storage_for
from ..storage.atomic import disk_errors
from .discovery import _scan_partition_dir
from .model import PartitionDir
from .partition_files import (PartitionWrite, Step, say, update_log_dir_checkpoints,
                              write_partition_files)
from .segment_info import describe_segment
from .staging import StagedPartition, StagedSegment

WRITE_MODES = ("append", "error", "overwrite")


@dataclass
class _Plan:
    """One partition's publication, checked before anything is moved."""

    topic: str
    partition: int
    pdir: Path
    existing: PartitionDir | None
    replace: bool
    outputs: list[tuple[StagedPartition, int]]  # (staged output, offset shift), in offset order
    first_offset: int
    next_offset: int


def publish(log_dir: str | os.PathLike[str], staged: Iterable[StagedPartition], *, mode: str,
            leader_epoch: int, topic_ids: dict[str, str] | None = None,
            staging: str | os.PathLike[str], step: Step | None = None) -> list[PartitionWrite]:
    """Publish staged segments into ``log_dir`` (the caller holds its ``.lock``).

    Every partition is checked first (leftovers of an interrupted operation, an unclean last
    segment, ``mode='error'`` conflicts, kept offsets below the log end offset or overlapping
    between outputs), so a refusal changes nothing; then partitions are published one by one
    in (topic, partition) order as the module docstring describes, and finally the log dir's
    checkpoints are updated.

    Parameters
    ----------
    log_dir : path
        The target log dir (created if missing).
    staged : iterable of StagedPartition
        Outputs of the stagers; outputs of one partition are ordered by ``order`` (provisional
        offsets) or by their first offset (kept offsets).
    mode : {"append", "error", "overwrite"}
        See :func:`write_log`.
    leader_epoch : int
        Recorded in ``leader-epoch-checkpoint`` at the first new offset (``-1``: none).
    topic_ids : dict, optional
        ``{topic: base64url id}`` for new ``partition.metadata`` files.
    staging : path
        The write's staging folder (replacement dirs are assembled there).
    step : callable, optional
        ``step(label)`` before each change to the log dir (see :func:`write_log`).

    Returns
    -------
    list of PartitionWrite
        One per partition that received records, in (topic, partition) order.

    Raises
    ------
    LogDirError
        A refusal (nothing changed), or a failed rename/write naming the file; what a failure
        part way leaves is what a crash there leaves (module docstring).
    """
    if mode not in WRITE_MODES:
        raise InvalidOptionError(f"mode must be one of {', '.join(WRITE_MODES)}; got {mode!r}")
    log_dir = Path(log_dir)
    by_partition: dict[tuple[str, int], list[StagedPartition]] = {}
    for s in staged:
        if s.segments:
            by_partition.setdefault((s.topic, s.partition), []).append(s)
    plans = [_plan(log_dir, t, p, outputs, mode) for (t, p), outputs in sorted(by_partition.items())]
    storage_for(log_dir).make_dirs(log_dir, exist_ok=True)
    _shift_staged(plans, step)
    assembly = Path(staging) / "_publish"
    written = []
    for plan in plans:
        with disk_errors("publishing", plan.pdir):
            written.append(_apply(plan, log_dir, assembly, leader_epoch,
                                  (topic_ids or {}).get(plan.topic), step))
    with disk_errors("updating the log dir checkpoints", log_dir):
        update_log_dir_checkpoints(log_dir, written, step)
    return written


def _plan(log_dir: Path, topic: str, partition: int, outputs: list[StagedPartition],
          mode: str) -> _Plan:
    pdir = log_dir / N.partition_dir_name(topic, partition)
    existing = _existing(pdir)
    if existing is not None and existing.segments and mode == "error":
        raise LogDirError("partition already has segments (mode='error')", Location(str(pdir)))
    replace = mode == "overwrite" and existing is not None
    start = 0 if replace else _log_end_offset(existing)
    fixed = {o.offsets_fixed for o in outputs}
    if len(fixed) > 1:
        raise InvalidOptionError(f"{topic}-{partition}: some outputs kept offsets and some not")
    placed: list[tuple[StagedPartition, int]] = []
    nxt = start
    if fixed.pop():
        for o in sorted(outputs, key=lambda o: (o.first_offset, o.order)):
            if o.first_offset < nxt:
                what = "the log end offset" if not placed else "the previous output's end"
                raise InvalidOptionError(
                    f"{topic}-{partition}: offset column starts at {o.first_offset}, below "
                    f"{what} {nxt}")
            placed.append((o, 0))
            nxt = o.next_offset
    else:
        for o in sorted(outputs, key=lambda o: o.order):
            placed.append((o, nxt - o.first_offset))
            nxt += o.next_offset - o.first_offset
    return _Plan(topic, partition, pdir, existing, replace, placed,
                 placed[0][0].first_offset + placed[0][1], nxt)


def _apply(plan: _Plan, log_dir: Path, assembly: Path, leader_epoch: int,
           topic_id: str | None, step: Step | None) -> PartitionWrite:
    in_place = plan.existing is not None and not plan.replace
    target = plan.pdir if in_place else assembly / plan.pdir.name
    fs = storage_for(target)
    fs.make_dirs(target, exist_ok=True)
    result = PartitionWrite(plan.topic, plan.partition, plan.first_offset, plan.next_offset, 0, 0,
                            replaced=plan.replace)
    moved: list[tuple[int, int]] = []  # (final base offset, bytes) of every new segment
    for output, shift in plan.outputs:
        for seg in output.segments:
            base = _move_segment(Path(output.directory), seg, seg.base_offset + shift, target,
                                 step)
            moved.append((base, seg.bytes))
            result.segments.append(base)
            result.records += seg.records
            result.batches += seg.batches
            result.bytes += seg.bytes
    if in_place:
        fs.fsync_dir(target)
        _check_segments(target, moved)
    old = None if plan.existing is None or not plan.replace else plan.existing
    if old is not None and not fs.exists(target / N.PARTITION_METADATA) and topic_id is None:
        old_meta = plan.pdir / N.PARTITION_METADATA
        if fs.exists(old_meta):
            fs.copy_file(old_meta, target / N.PARTITION_METADATA, durable=True)
    write_partition_files(target, plan.existing if in_place else None, result, leader_epoch,
                           topic_id, log_dir, step, unpublished=not in_place)
    if not in_place:
        fs.fsync_dir(target)  # its renames and new files, once, before it becomes visible
        say(step, f"exchange {plan.pdir.name} with its replacement" if plan.replace
             else f"rename {target.name} into the log dir")
        _check_segments(target, moved)  # the last look before the dir becomes visible
        if plan.replace:
            _swap_into_place(target, plan.pdir, assembly, step)
        else:
            fs.rename(target, plan.pdir)
        fs.fsync_dir(log_dir)
    return result


def _check_segments(target: Path, moved: list[tuple[int, int]]) -> None:
    """Every new segment is in ``target`` with the size it was staged with: a file removed or
    cut by someone else mid-write fails the write instead of publishing a log with a hole."""
    for base, size in moved:
        path = target / N.segment_file_name(base, N.LOG)
        try:
            found = storage_for(path).size(path)
        except FileNotFoundError:
            found = None
        if found != size:
            raise LogDirError(f"a new segment vanished or changed while publishing (staged "
                              f"{size} bytes, found {'none' if found is None else found})",
                              Location(str(path), 0, base))


def _move_segment(src_dir: Path, seg: StagedSegment, final: int, target: Path,
                  step: Step | None = None) -> int:
    """Rename one staged segment (already shifted) into ``target`` as the segment at ``final``,
    indexes first and ``.log`` last; returns ``final``."""
    dst_log = target / N.segment_file_name(final, N.LOG)
    fs = storage_for(target)
    if fs.exists(dst_log) and fs.size(dst_log):
        raise LogDirError("a non-empty segment already exists at this base offset",
                          Location(str(dst_log), 0, final))
    for kind in (N.INDEX, N.TIME_INDEX, N.LOG):
        say(step, f"rename {N.segment_file_name(final, kind)} into {target.name}")
        fs.rename(src_dir / N.segment_file_name(seg.base_offset, kind),
                   target / N.segment_file_name(final, kind))
    return final


def _shift_staged(plans: list[_Plan], step: Step | None) -> None:
    """Shift every staged segment that needs it to its final offsets (module docstring).

    One after another: a shift is mostly its fsync, and shifting on 4 threads measured slower
    (issue 33), the file system serialising the fsyncs anyway."""
    for plan in plans:
        for output, shift in plan.outputs:
            for seg in output.segments if shift else ():
                path = Path(output.directory) / N.segment_file_name(seg.base_offset, N.LOG)
                say(step, f"shift {path.name} by {shift}")
                shift_base_offsets(path, seg, shift)


def shift_base_offsets(path: str | os.PathLike[str], seg: StagedSegment, shift: int) -> None:
    """Add ``shift`` to the baseOffset of every batch of the staged ``.log`` at ``path``, in
    place, durably, at the positions its stager recorded (``seg``).

    The baseOffset (bytes 0-8 of a v2 batch) is outside the batch CRC (which covers
    ``[attributes, end)``), so the batches stay valid. The recorded positions are checked
    against the file before anything is changed: the batches tile the file exactly, each is v2
    without a producer id and holds the recorded base offset.

    Raises
    ------
    CorruptRecordError
        The file is not what its stager described (nothing changed).
    LogDirError
        The file could not be read or written.
    """
    positions, offsets = seg.batch_table()

    def add_shift(buf: np.ndarray) -> None:
        bad = _misplaced(buf, positions, offsets, seg)
        if bad is not None:
            del buf
            raise CorruptRecordError(f"staged segment does not hold the batches its stager "
                                     f"recorded ({bad[0]})", Location(str(path), *bad[1:]))
        at = (positions[:, None] + np.arange(8)).ravel()
        buf[at] = (offsets + shift).astype(">i8").view(np.uint8)

    with disk_errors("shifting a staged segment", path):
        storage_for(path).update_mapped(path, add_shift)


def _misplaced(buf: np.ndarray, positions: np.ndarray, offsets: np.ndarray,
               seg: StagedSegment) -> tuple[str, int, int | None] | None:
    """Why the batches of ``buf`` are not at ``positions`` with base ``offsets`` (reason,
    byte position, base offset), or ``None`` when they are."""
    if len(buf) != seg.bytes or len(positions) != seg.batches or len(offsets) != seg.batches:
        return (f"{len(positions)} positions for {seg.batches} batches, {len(buf)} bytes for "
                f"{seg.bytes}", 0, seg.base_offset)
    if not len(positions):
        return None
    if positions[0] != 0 or (np.diff(positions) < L.RECORD_BATCH_OVERHEAD).any() \
            or positions[-1] > len(buf) - L.RECORD_BATCH_OVERHEAD:
        return "batch positions out of order or outside the file", 0, seg.base_offset

    def field(offset: int, width: int, dtype: str) -> np.ndarray:
        return buf[(positions[:, None] + offset + np.arange(width)).ravel()].view(dtype)

    ends = positions + L.LOG_OVERHEAD + field(L.BATCH_LENGTH_OFFSET, 4, ">i4")
    checks = (("batch lengths do not tile the file", ends != np.r_[positions[1:], len(buf)]),
              ("not a v2 batch", buf[positions + L.MAGIC_OFFSET] != 2),
              ("a batch has a producer id",
               field(L.PRODUCER_ID_OFFSET, 8, ">i8") != L.NO_PRODUCER_ID),
              ("another base offset", field(L.OFFSET_OFFSET, 8, ">i8") != offsets))
    for reason, wrong in checks:
        if wrong.any():
            i = int(np.flatnonzero(wrong)[0])
            return reason, int(positions[i]), int(offsets[i])
    return None


def _swap_into_place(new: Path, pdir: Path, assembly: Path, step: Step | None = None) -> None:
    """Put ``new`` where ``pdir`` is; the old dir ends up under ``assembly`` and is deleted."""
    aside = assembly / (pdir.name + ".replaced")
    fs = storage_for(pdir)
    try:
        exchanged = fs.exchange(new, pdir)
    except OSError as exc:
        raise LogDirError(f"cannot exchange the partition dir: {exc.strerror}",
                          Location(str(pdir))) from exc
    if exchanged:
        fs.rename(new, aside)  # ``new`` now holds the old partition dir
    else:
        fs.rename(pdir, aside)
        say(step, f"rename the replacement of {pdir.name} into the log dir")
        fs.rename(new, pdir)
    fs.fsync_dir(pdir.parent)
    say(step, f"delete the replaced {pdir.name}")
    fs.remove_tree(aside)


def _existing(pdir: Path) -> PartitionDir | None:
    if not storage_for(pdir).exists(pdir):
        return None
    found = _scan_partition_dir(pdir, N.parse_partition_dir_name(pdir.name), root=pdir)
    if found.leftovers:
        names = ", ".join(sorted(p.name for p in found.leftovers))
        raise LogDirError(f"partition dir has leftovers of an interrupted operation ({names}); "
                          "run `kafkalog recover` first", Location(str(pdir)))
    return found


def _log_end_offset(existing: PartitionDir | None) -> int:
    if existing is None or not existing.segments:
        return 0
    info = describe_segment(existing.segments[-1])
    if not info.clean:
        raise LogDirError(f"last segment does not end cleanly ({info.stop_reason}); run "
                          "`kafkalog recover` first",
                          Location(str(info.path), info.valid_bytes, info.base_offset))
    return info.next_offset

