"""Read-only file access (log layer): a file's bytes as a numpy ``uint8`` view, memory-mapped.

Reading through a read-only map changes no byte and no mtime, and lets the kernels work on the
page cache directly. Files up to :data:`READ_BELOW_BYTES` are read instead: mapping and
unmapping cost more than copying a few pages (a log dir of 40k small segments: ~50 µs per file
mapped). One helper so every reader (discovery, read_log, verify, dump) opens files
the same way and maps OS errors to :class:`~kafkalog_spark.errors.LogDirError`.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from ..errors import Location, LogDirError

READ_BELOW_BYTES = 256 << 10


@contextmanager
def mapped_file(path: str | os.PathLike[str]) -> Iterator[np.ndarray]:
    """Yield the whole file as a read-only ``uint8`` array (empty files give an empty array).

    The array must not outlive the ``with`` block: the map is closed on exit.
    """
    path = os.fspath(path)
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise LogDirError(f"cannot open file: {exc.strerror}", Location(file=str(path))) from exc
    with f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            yield np.zeros(0, np.uint8)
            return
        if size <= READ_BELOW_BYTES:
            try:
                data = f.read()
            except OSError as exc:
                raise LogDirError(f"cannot read file: {exc.strerror}",
                                  Location(file=str(path))) from exc
            yield np.frombuffer(data, np.uint8)
            return
        try:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:
            raise LogDirError(f"cannot map file: {exc}", Location(file=str(path))) from exc
        buf = np.frombuffer(mm, np.uint8)
        try:
            yield buf
        finally:
            del buf
            try:
                mm.close()
            except BufferError:
                # a caller kept a view alive; the map closes when that view is collected
                pass
