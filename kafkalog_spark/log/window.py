"""Segment windows (log layer): the bytes one read of a segment needs, and decoding them as
they arrive.

On a local disk a window is the segment's memory map. On an object store it is an array as long
as the object holding just the byte range the offset index narrows the read to
(:func:`read_window`), and a whole-segment read streams: parts arrive in the background while
the front is decoded (:func:`decode_window`), so fetching and decoding overlap.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..codec.records.decode import BadRange, DecodeResult
from ..codec.records.scan import scan_entries
from ..storage import is_local, mapped_file, storage_for
from ..storage.remote_io import FetchProgress
from .lookup import check_offset_entry, offset_index
from .model import Segment

STREAM_STEP_BYTES = 16 << 20
"""A streamed window is decoded in pieces of about this many bytes, each as soon as it is
there."""


@dataclass
class Window:
    """A segment's bytes for one read: ``buf`` holds them at their file positions; the read
    stops at ``stop`` (``None``: the end of the file); ``progress`` is set while the bytes are
    still arriving (``None``: all there)."""

    buf: np.ndarray
    stop: int | None = None
    progress: FetchProgress | None = None


@contextmanager
def read_window(segment: Segment, *, start: int = 0, end: int | None = None,
                min_offset: int | None = None, max_offset: int | None = None,
                first_offset: int | None = None, next_offset: int | None = None
                ) -> Iterator[Window]:
    """The segment's ``.log`` for a read of offsets ``[min_offset, max_offset]`` inside bytes
    ``[start, end)``, and where that read must stop.

    On a local disk that is the whole memory map. On an object store only the bytes the offset
    index narrows the read to are fetched: from the index entry at or below ``min_offset`` to
    the entry after the first one past ``max_offset`` (it ends after every entry holding
    ``max_offset``). The lookups the readers make are the ones :func:`position_for_offset`
    makes: for ``min_offset`` when it lies past ``first_offset`` (default: the base offset), for
    ``max_offset`` when it lies before ``next_offset - 1``. The fetched bytes are checked as
    those lookups check them (the index entries fit, the entries walk cleanly to the stop); if
    anything does not fit, or there is no index, the whole object is fetched, so a lookup's
    fall-back walk from byte 0 reads real bytes. A read of the whole object with no lookup
    streams (:class:`Window` ``progress``; decode it with :func:`decode_window`).
    """
    fs = storage_for(segment.log)
    if is_local(fs):
        with mapped_file(segment.log) as buf:
            yield Window(buf)
        return
    size = segment.log_size
    lo, hi = start, size if end is None else min(end, size)
    first = segment.base_offset if first_offset is None else first_offset
    seek = min_offset is not None and min_offset > first
    max_lookup = max_offset is not None and (next_offset is None or max_offset < next_offset - 1)
    lookups = seek or max_lookup  # the readers will walk from an index entry (or byte 0)
    index = offset_index(segment) if lookups or max_offset is not None else None
    checks: list[tuple[int, int]] = []  # the index entries the readers' lookups will use
    if index is not None and len(index.offsets):
        offsets, positions = index.offsets, index.positions
        if seek:
            k = int(np.searchsorted(offsets, min_offset, side="right")) - 1
            if k >= 0:
                checks.append((int(offsets[k]), int(positions[k])))
                lo = max(lo, int(positions[k]))  # where the read starts
            else:
                lo = 0  # no entry at or below it: the lookup walks from byte 0
        if max_offset is not None:
            k = int(np.searchsorted(offsets, max_offset, side="right")) - 1
            if max_lookup:
                if k >= 0:
                    checks.append((int(offsets[k]), int(positions[k])))
                else:
                    lo = 0
            after = k + 2  # past the first entry beyond max_offset: that entry is whole
            hi = min(hi, int(positions[after]) if after < len(positions) else size)
        lo = min([lo] + [p for _, p in checks])  # a lookup walks from its entry's position
    elif lookups:
        lo, hi = 0, size  # no index: a lookup walks from byte 0
    if lo <= 0 and hi >= size:  # all of it: nothing to check, as on a local disk
        if lookups:
            with fs.mapped(segment.log) as buf:  # the lookups need every byte first
                yield Window(buf)
        else:
            with fs.mapped_streaming(segment.log, size) as (buf, progress):
                yield Window(buf, None, progress)
        return
    with fs.mapped_ranges(segment.log, [(lo, max(lo, hi))], size) as buf:
        walk = scan_entries(buf, start=lo, end=max(lo, hi))
        if walk.clean and all(check_offset_entry(index, o, p, scan_entries(buf, p, hi),
                                                 size) is None for o, p in checks):
            yield Window(buf, hi)
            return
    with mapped_file(segment.log) as buf:
        yield Window(buf)


def decode_window(window: Window, decode: Callable[[int, int | None], DecodeResult],
                  start: int, end: int | None, bad: list[BadRange]) -> Iterator[pa.RecordBatch]:
    """Decode ``window`` from ``start`` to ``end`` with ``decode(start, end)`` (a
    ``decode_entries`` over ``window.buf``); bad ranges it skips are appended to ``bad``.

    A streaming window is decoded in pieces that end at entry boundaries inside what has
    arrived; an entry that is not whole yet, or not valid, waits for the last piece, which
    decodes (and reports) it as a single read would."""
    final = len(window.buf) if end is None else end
    pos = start
    while window.progress is not None:
        there = window.progress.wait(min(final, pos + STREAM_STEP_BYTES))
        if there >= final:
            break
        boundary = scan_entries(window.buf, start=pos, end=there).stop_position
        if boundary > pos:
            yield from _decoded(decode(pos, boundary), bad)
            pos = boundary
    yield from _decoded(decode(pos, end), bad)


def _decoded(result: DecodeResult, bad: list[BadRange]) -> Iterator[pa.RecordBatch]:
    yield from result
    bad.extend(result.bad_ranges)
