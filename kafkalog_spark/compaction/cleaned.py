"""Cleaned segment files (log-management layer): where a group's rewrite is written
(``<base>.log.cleaned``, step 1 of Kafka's swap), the write itself, and the staging of every
cleaned segment of a round before the swaps."""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..codec.files import naming as N
from ..storage import storage_for
from ..storage.atomic import disk_errors
from .key_map import KeyMap
from .plan import GroupTask
from .rewrite import GroupOutput, rewrite_group

# --- cleaned segment files ---------------------------------------------------------------------


def cleaned_path(pdir: str | os.PathLike[str], base_offset: int, kind: str = N.LOG) -> Path:
    """Where a group's cleaned segment (or with ``kind`` its index of that kind) is written:
    ``<base>.log.cleaned`` in the partition dir, the name step 1 of the swap uses."""
    return Path(pdir) / f"{N.segment_file_name(base_offset, kind)}.{N.CLEANED}"


def write_cleaned(task: GroupTask, retained: np.ndarray | KeyMap, pdir: str | os.PathLike[str], *,
                  path: str | os.PathLike[str] | None = None) -> GroupOutput:
    """Rewrite one group straight into its ``.cleaned`` file (fsynced), so memory holds a
    batch at a time, not the segment — or into ``path`` (a Spark task attempt's own file,
    which the driver renames to the ``.cleaned`` name). The output's ``path`` names the file;
    ``log`` is empty until :meth:`CleanedSegments.adopt` maps it."""
    path = cleaned_path(pdir, task.base_offset) if path is None else Path(path)
    fs = storage_for(path)
    with disk_errors("writing a cleaned segment", path):
        f = fs.open_write(path)
        try:
            out = rewrite_group(task, retained, sink=f)
        except BaseException:
            f.close()
            raise
        fs.close_durably(f)
    return replace(out, path=str(path))


class CleanedSegments:
    """The ``.cleaned`` files of a round, mapped read-only for the swaps (see
    :func:`cleaned_segments`)."""

    def __init__(self) -> None:
        self.written: list[str] = []
        self.maps: list[mmap.mmap] = []
        self.swapping = False  # set once a swap may have begun: files are then the swap's

    def track(self, path: str | os.PathLike[str]) -> None:
        """Count ``path`` as this round's (before it is written, so a failed write is removed)."""
        self.written.append(os.fspath(path))

    def adopt(self, out: GroupOutput) -> GroupOutput:
        """``out`` with ``log`` mapped from its file (``out.path``)."""
        assert out.path is not None
        m = storage_for(out.path).map_readonly(out.path)
        if m is None:  # an empty file
            return replace(out, log=b"")
        self.maps.append(m)
        return replace(out, log=memoryview(m))


@contextlib.contextmanager
def cleaned_segments() -> Iterator[CleanedSegments]:
    """Track a round's ``.cleaned`` files: unmapped on leaving; on an error before any swap
    began (``swapping`` not set) removed — they are only ours then, and Kafka's log loading
    would drop them too. Once swaps run, a half-done one is left to the load-time passes,
    which need every ``.cleaned`` file to roll it back."""
    files = CleanedSegments()
    try:
        yield files
    except BaseException:
        if not files.swapping:
            for path in files.written:
                storage_for(path).remove(path, missing_ok=True)
        raise
    finally:
        for m in files.maps:
            with contextlib.suppress(BufferError):
                m.close()
