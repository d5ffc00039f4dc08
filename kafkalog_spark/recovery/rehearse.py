"""Dry-run rehearsal of segment rewrites (recovery layer): the segments ``recover --execute``
would leave after its splits and ``--salvage`` rewrites, so a dry run plans the rest from them.

The rest of the recovery (cut, indexes, producer snapshot, leader epochs, checkpoints) is then
planned from the log as it will be, and the dry run's plan lists every action the execute run
takes. A rewritten segment is written, new segment by new segment (its byte ranges of the old
``.log``, with the ``.index``/``.timeindex`` that
:func:`~kafkalog_spark.log.swap.replace_segments` builds for it), into a private temporary
folder, never into the log dir; the partition's view then holds those segments instead of the
old one. The plan made from that view names the scratch files: :func:`real_paths` puts the
partition dir's path back in every action and report entry before anyone sees it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from ..codec.files import naming as N
from ..codec.files.index_rebuild import build_indexes
from ..log.model import PartitionDir, Segment
from ..storage import LOCAL, mapped_file
from .actions import Action
from .quarantine import write_ranges

Piece = tuple[int, Sequence[tuple[int, int]]]  # a new segment: base offset, old byte ranges


def rehearse(view: PartitionDir, rewrites: dict[int, Sequence[Piece]], scratch: Path
             ) -> PartitionDir:
    """``view`` with each segment whose base offset ``rewrites`` names replaced by its new
    segments, written under ``scratch`` (a private temporary folder the caller removes; see
    the module docstring)."""
    if not rewrites:
        return view
    folder = scratch / f"{len(LOCAL.listdir(scratch))}-{view.path.name}"
    LOCAL.make_dirs(folder)
    segments: list[Segment] = []
    for seg in view.segments:
        pieces = rewrites.get(seg.base_offset)
        if pieces is None:
            segments.append(seg)
            continue
        for base, ranges in pieces:
            name = N.segment_file_name(base, N.LOG)
            write_ranges(seg.log, list(ranges), folder / name)
            with mapped_file(folder / name) as buf:
                built = build_indexes(buf, base)
                size = len(buf)
            index, timeindex = built.offset_index.to_bytes(), built.time_index.to_bytes()
            LOCAL.write_whole(folder / N.segment_file_name(base, N.INDEX), index)
            LOCAL.write_whole(folder / N.segment_file_name(base, N.TIME_INDEX), timeindex)
            segments.append(Segment(base, folder, name, size, seg.mtime, len(index),
                                    len(timeindex)))
    segments.sort(key=lambda s: s.base_offset)
    return dataclasses.replace(view, segments=tuple(segments))


def real_paths(actions: list[Action], entries: Sequence[dict | None], scratch: Path,
               pdir: Path) -> list[Action]:
    """``actions`` (and, in place, the ``"file"`` of each report entry) with every path under
    ``scratch`` moved to the partition dir ``pdir`` where ``--execute`` finds the file."""
    def real(path: str | None) -> str | None:
        if path is None or not Path(path).is_relative_to(scratch):
            return path
        return str(pdir / Path(path).name)

    for entry in entries:
        if entry is not None and "file" in entry:
            entry["file"] = real(entry["file"])
    return [dataclasses.replace(a, path=real(a.path), target=real(a.target)) for a in actions]
