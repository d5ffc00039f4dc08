"""Crash-safe segment replacement (log layer): Kafka's ``.cleaned → .swap → live`` protocol and
the load-time passes that finish or roll back an interrupted one.

Replacement, ``LocalLog.replaceSegments`` (KAFKA_FORMATS §12.8), as :func:`replace_segments`::

    1  write every new segment file as <name>.cleaned, fsync, set mtime; fsync the dir (a
       ``.log.cleaned`` a Spark task already wrote and fsynced in place is not written again)
    2  rename .cleaned -> .swap, new segments in DESCENDING base-offset order; fsync the dir
    3  rename every file of each old segment (ascending) to <name>.deleted
    4  rename .swap -> <name> (the .log first, as changeFileSuffixes does); fsync the dir
    5  rename the producer snapshot of each old segment whose base offset no new segment
       starts at to <name>.deleted (``UnifiedLog.replaceSegments`` → ``deleteProducerSnapshots``)
    6  dispose of the .deleted files (by default: remove them all, then fsync the dir once —
       a removal a crash undoes leaves a .deleted file, which pass 1 disposes of)

Load-time passes, ``LogLoader.load`` (§12.2), as :func:`plan_swap_recovery`::

    pass 1  dispose of *.deleted (not *.checkpoint.deleted); dispose of every .swap whose offset
            is >= the smallest .cleaned offset (its renames had not all happened), then of
            every .cleaned
    pass 2  for the .log.swap files left: dispose of every non-swap file whose offset lies in
            [min swap base offset, max swap next offset) — the old segments being replaced
    pass 3  rename every .swap to its live name

A crash at any point of (1)-(6) leaves a directory the passes bring to either the old segments
(before step 2 completed) or the new ones (after; an old snapshot step 5 had not renamed yet
is at no segment's base, and a broker's load drops it as a stray). Every pass action is one
rename or one disposal, and the passes are re-planned from the directory listing, so a crash
during the passes themselves is completed by planning again. "Dispose" is a callback: the
default removes the file; ``kafkalog recover`` moves it into its quarantine instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..codec.files import naming as N
from ..codec.files.index_rebuild import DEFAULT_INDEX_INTERVAL_BYTES, build_indexes
from ..codec.records.scan import scan_entries
from ..errors import InvalidOptionError, KafkaLogError, Location
from ..storage import mapped_file, storage_for
from ..storage.atomic import disk_errors

Dispose = Callable[[Path, str], None]
Step = Callable[[str], None]

DISPOSE, RENAME = "dispose", "rename"
_KRAFT_DELETED = f".{N.CHECKPOINT}.{N.DELETED}"  # left to the Raft layer (§8.5)


@dataclass(frozen=True)
class SwapAction:
    """One step of the load-time passes: dispose of ``path``, or rename it to ``target``."""

    kind: str  # DISPOSE | RENAME
    path: Path
    reason: str
    target: Path | None = None
    pass_no: int = 0


def remove_file(path: Path, reason: str) -> None:
    """The default disposal: delete ``path`` and make the deletion durable."""
    fs = storage_for(path)
    fs.remove(path)
    fs.fsync_dir(path.parent)


def remove_files(paths: Sequence[str | os.PathLike[str]], threads: int = 1) -> None:
    """Delete ``paths`` (one already gone is fine: another attempt got there first) and make the
    deletions durable with one fsync per folder — step 6 of a swap done later, by whoever
    holds the list of its ``.deleted`` files. ``threads``: removals at once (each waits on the
    file system's journal, not on Python)."""
    files = [Path(p) for p in paths]

    def remove(path: Path) -> None:
        with disk_errors("removing a replaced file", path):
            storage_for(path).remove(path, missing_ok=True)

    if threads > 1 and len(files) > 1:
        with ThreadPoolExecutor(max_workers=min(threads, len(files))) as pool:
            list(pool.map(remove, files))
    else:
        for path in files:
            remove(path)
    for folder in dict.fromkeys(path.parent for path in files):
        with disk_errors("making removals durable", folder):
            storage_for(folder).fsync_dir(folder)


def _listing(pdir: str | os.PathLike[str]) -> list[os.DirEntry[str]]:
    with storage_for(pdir).scandir(pdir) as it:
        return list(it)


def _offset(name: str) -> int | None:
    try:
        return N.offset_from_file_name(name)
    except KafkaLogError:
        return None


def _strip(name: str, suffix: str) -> str:
    return name[: -len(suffix) - 1]


def _next_offset(log: Path, base_offset: int) -> int:
    """``LogSegment.readNextOffset`` of a ``.log``: last entry's last offset + 1, else the base."""
    with mapped_file(log) as buf:
        table = scan_entries(buf)
        return int(table.last_offset[-1]) + 1 if len(table) else base_offset


def plan_swap_recovery(pdir: str | os.PathLike[str]) -> list[SwapAction]:
    """Plan ``LogLoader.load`` passes 1-3 for one partition dir (reads only listings and the
    ``.log.swap`` files).

    Parameters
    ----------
    pdir : path
        A partition directory.

    Returns
    -------
    list of SwapAction
        In the order they must run; empty when there is nothing to finish or roll back.
    """
    pdir = Path(pdir)
    files = sorted(pdir / e.name for e in _listing(pdir) if e.is_file())
    actions: list[SwapAction] = []
    gone: set[Path] = set()

    def dispose(p: Path, reason: str, pass_no: int) -> None:
        actions.append(SwapAction(DISPOSE, p, reason, None, pass_no))
        gone.add(p)

    # pass 1
    cleaned = [p for p in files if p.name.endswith("." + N.CLEANED)]
    swaps = [p for p in files if p.name.endswith("." + N.SWAP)]
    for p in files:
        if p.name.endswith("." + N.DELETED) and not p.name.endswith(_KRAFT_DELETED):
            dispose(p, "file scheduled for deletion (.deleted)", 1)
    cleaned_offsets = [o for o in (_offset(p.name) for p in cleaned) if o is not None]
    if cleaned_offsets:
        min_cleaned = min(cleaned_offsets)
        for p in swaps:
            o = _offset(p.name)
            if o is not None and o >= min_cleaned:
                dispose(p, f"swap file of an incomplete replacement (a .cleaned file at offset "
                        f"{min_cleaned} had not been renamed yet)", 1)
    for p in cleaned:
        dispose(p, "output of an interrupted compaction/split (.cleaned)", 1)
    swaps = [p for p in swaps if p not in gone]

    # pass 2
    log_swaps = [p for p in swaps if _strip(p.name, N.SWAP).endswith("." + N.LOG)]
    if log_swaps:
        bases = [N.offset_from_file_name(p.name) for p in log_swaps]
        min_swap = min(bases)
        max_swap = max(_next_offset(p, b) for p, b in zip(log_swaps, bases))
        for p in files:
            if p in gone or p.name.endswith("." + N.SWAP):
                continue
            o = _offset(p.name)
            if o is not None and min_swap <= o < max_swap:
                dispose(p, f"old file replaced by the swap segments covering offsets "
                        f"[{min_swap}, {max_swap})", 2)

    # pass 3: each .log before its index files — once a .log is live, pass 2 no longer sees its
    # range, so a crash in between cannot make pass 2 dispose of already renamed new indexes
    for p in sorted(swaps, key=lambda s: (not _strip(s.name, N.SWAP).endswith("." + N.LOG), s.name)):
        actions.append(SwapAction(RENAME, p, "complete the swap", p.with_name(_strip(p.name, N.SWAP)), 3))
    return actions


def apply_swap_actions(actions: Sequence[SwapAction], *, dispose: Dispose = remove_file,
                       step: Step | None = None) -> None:
    """Run planned :class:`SwapAction` s in order (each one rename or one disposal).

    ``step(label)`` is called before each action (progress, tests that simulate a crash).
    """
    dirs: set[Path] = set()
    for a in actions:
        if step is not None:
            step(f"swap pass {a.pass_no}: {a.kind} {a.path.name}")
        if a.kind == DISPOSE:
            dispose(a.path, a.reason)
        else:
            assert a.target is not None
            fs = storage_for(a.path)
            fs.rename(a.path, a.target)
            fs.fsync_dir(a.path.parent)
        dirs.add(a.path.parent)
    for d in dirs:
        storage_for(d).fsync_dir(d)


def complete_interrupted_swaps(pdir: str | os.PathLike[str], *, dispose: Dispose = remove_file,
                               step: Step | None = None) -> list[SwapAction]:
    """Plan and run passes 1-3 on ``pdir``; returns what was done (empty: nothing to do)."""
    actions = plan_swap_recovery(pdir)
    apply_swap_actions(actions, dispose=dispose, step=step)
    return actions


def view_after(pdir: str | os.PathLike[str], actions: Sequence[SwapAction]) -> dict[str, Path]:
    """The regular files of ``pdir`` as they will be named once ``actions`` have run: live name
    → the file that will carry it now (a ``.swap`` file for a pending rename). Lets a dry run
    plan the next steps on the outcome of the passes without performing them."""
    view = {e.name: Path(pdir) / e.name for e in _listing(pdir) if e.is_file()}
    for a in actions:
        view.pop(a.path.name, None)
        if a.kind == RENAME and a.target is not None:
            view[a.target.name] = a.path
    return view


# --- replacement -----------------------------------------------------------------------------


@dataclass(frozen=True)
class NewSegment:
    """A segment to swap in. Missing ``index``/``timeindex`` are built from ``log`` with
    recovery's rule; ``txnindex`` is written only when given (Kafka creates it lazily).
    ``log_written``: ``<base>.log.cleaned`` in the partition dir already holds ``log`` (written
    and fsynced by whoever produced it, e.g. a Spark task; ``log`` is then a map of that file),
    so step 1 only sets its mtime. ``indexes_written``: likewise ``<base>.index.cleaned`` and
    ``<base>.timeindex.cleaned`` (built by whoever wrote the ``.log``); with both and
    ``end_offset`` (the offset after the segment's last batch) ``log`` is not read at all and
    may be empty."""

    base_offset: int
    log: bytes | bytearray | memoryview
    index: bytes | None = None
    timeindex: bytes | None = None
    txnindex: bytes | None = None
    mtime: float | None = None  # Kafka gives cleaned segments the newest old segment's mtime
    log_written: bool = False
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES  # the topic's index.interval.bytes
    indexes_written: bool = False
    end_offset: int | None = None  # the offset after the last batch (default: read from log)

    def next_offset(self) -> int:
        """The offset after the segment's last batch (its base offset when it has none)."""
        if self.end_offset is not None:
            return self.end_offset
        table = scan_entries(self.log)
        return int(table.last_offset[-1]) + 1 if len(table) else self.base_offset


def _segment_files(seg: NewSegment) -> list[tuple[str, bytes | bytearray | memoryview | None]]:
    """``(kind, content)`` of each file of ``seg``; ``None``: already staged as ``.cleaned``."""
    index, timeindex = seg.index, seg.timeindex
    if not seg.indexes_written and (index is None or timeindex is None):
        built = build_indexes(seg.log, seg.base_offset,
                              index_interval_bytes=seg.index_interval_bytes)
        index = built.offset_index.to_bytes() if index is None else index
        timeindex = built.time_index.to_bytes() if timeindex is None else timeindex
    files = [(N.LOG, None if seg.log_written else seg.log), (N.INDEX, index),
             (N.TIME_INDEX, timeindex)]
    if seg.txnindex is not None:
        files.append((N.TXN_INDEX, seg.txnindex))
    return files  # the .log first in every rename sequence (see pass 3)


def replace_segments(pdir: str | os.PathLike[str], new: Sequence[NewSegment],
                     old_base_offsets: Sequence[int], *, dispose: Dispose | None = None,
                     step: Step | None = None) -> None:
    """Replace the segments at ``old_base_offsets`` by ``new`` with ``replaceSegments``' crash
    protocol (module docstring).

    Parameters
    ----------
    pdir : path
        The partition directory.
    new : sequence of NewSegment
        Replacement segments, non-overlapping; their offsets must cover every old segment's
        base offset (what pass 2 of a later load relies on to drop the old files).
    old_base_offsets : sequence of int
        Base offsets of the existing segments being replaced.
    dispose : callable, optional
        What to do with the old files once renamed ``.deleted`` (default: delete them, with
        one fsync of the folder for all: not one per file, as :func:`remove_file` makes it).
    step : callable, optional
        Called with a label before each file operation.

    Raises
    ------
    InvalidOptionError
        Overlapping new segments, an old segment outside the new range, or no such old segment.
    """
    pdir = Path(pdir)
    fs = storage_for(pdir)
    news = sorted(new, key=lambda s: s.base_offset)
    if not news:
        raise InvalidOptionError("replace_segments needs at least one new segment")
    ends = [seg.next_offset() for seg in news]
    for a, b, end in zip(news, news[1:], ends):
        if b.base_offset < end:
            raise InvalidOptionError(f"new segments overlap: {a.base_offset} runs to {end}, the "
                                     f"next starts at {b.base_offset}")
    lo, hi = news[0].base_offset, max(max(ends), news[-1].base_offset + 1)
    old = sorted(set(old_base_offsets))
    for base in old:
        if not lo <= base < hi:
            raise InvalidOptionError(f"old segment {base} is outside the new segments' range "
                                     f"[{lo}, {hi}); a crash could not be recovered consistently")
        if not fs.exists(pdir / N.segment_file_name(base, N.LOG)):
            raise KafkaLogError("no such segment to replace",
                                Location(str(pdir / N.segment_file_name(base, N.LOG)), None, base))

    def say(label: str) -> None:
        if step is not None:
            step(label)

    # a full disk or a file removed by someone else: a typed error naming the file; the
    # load-time passes bring what was done so far back to the old or the new segments
    with disk_errors("replacing segments", pdir):
        # 1: stage as .cleaned
        staged: list[list[tuple[Path, Path]]] = []  # per new segment: (cleaned, final)
        for seg in news:
            pairs = []
            for kind, content in _segment_files(seg):
                final = pdir / N.segment_file_name(seg.base_offset, kind)
                cleaned = final.with_name(f"{final.name}.{N.CLEANED}")
                if content is None:
                    if not fs.is_file(cleaned):
                        raise KafkaLogError("the cleaned segment a task wrote is missing",
                                            Location(str(cleaned), None, seg.base_offset))
                else:
                    say(f"write {cleaned.name}")
                    fs.write_whole(cleaned, memoryview(content))
                if seg.mtime is not None:
                    fs.set_mtime(cleaned, seg.mtime)
                pairs.append((cleaned, final))
            staged.append(pairs)
        fs.fsync_dir(pdir)
        # 2: .cleaned -> .swap, newest segment first
        swapped: list[list[tuple[Path, Path]]] = []
        for pairs in reversed(staged):
            out = []
            for cleaned, final in pairs:
                swap = final.with_name(f"{final.name}.{N.SWAP}")
                say(f"rename {cleaned.name} -> {swap.name}")
                fs.rename(cleaned, swap)
                out.append((swap, final))
            swapped.append(out)
        fs.fsync_dir(pdir)
        # 3: old segment files -> .deleted (which exist: one listing, not a stat per file)
        present = {entry.name for entry in _listing(pdir)}
        deleted: list[Path] = []
        for base in old:
            for kind in (N.LOG, *N.INDEX_KINDS):
                p = pdir / N.segment_file_name(base, kind)
                if p.name in present:
                    target = p.with_name(f"{p.name}.{N.DELETED}")
                    say(f"rename {p.name} -> {target.name}")
                    fs.rename(p, target)
                    deleted.append(target)
        fs.fsync_dir(pdir)
        # 4: .swap -> live (the .log of each segment first)
        for pairs in reversed(swapped):
            for swap, final in pairs:
                say(f"rename {swap.name} -> {final.name}")
                fs.rename(swap, final)
        fs.fsync_dir(pdir)
        # 5: the snapshots of the segments no new one replaces at their base (a crash before
        # this leaves them at no segment's base: the loader's removeStraySnapshots drops them)
        kept = {seg.base_offset for seg in news}
        for base in old:
            p = pdir / N.segment_file_name(base, N.SNAPSHOT)
            if base not in kept and p.name in present:
                target = p.with_name(f"{p.name}.{N.DELETED}")
                say(f"rename {p.name} -> {target.name}")
                fs.rename(p, target)
                deleted.append(target)
        fs.fsync_dir(pdir)
        # 6: the replaced files
        for p in deleted:
            say(f"dispose {p.name}")
            if dispose is None:
                fs.remove(p)
            else:
                dispose(p, "replaced segment")
        if dispose is None:
            fs.fsync_dir(pdir)
