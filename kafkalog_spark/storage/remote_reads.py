"""Reading objects (storage layer).

Whole objects and byte ranges as read-only ``uint8`` arrays, fetched as coalesced, parallel ranged GETs (large reads split in :data:`PART_BYTES`
parts, :data:`FETCH_THREADS` at once) or streamed while the caller walks them — the read
methods :class:`~.remote.RemoteStorage` has."""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, BinaryIO

from ..errors import Location, LogDirError
from .options import refuse
from .paths import ObjectPath
from .remote_io import FetchProgress, coalesce

if TYPE_CHECKING:
    import numpy as np

PART_BYTES = 8 << 20
"""Large reads are split into ranged GETs of this size..."""
FETCH_THREADS = 8
"""...of which this many run at once (pyarrow's clients release the GIL while they wait)."""


class RemoteReads:
    """The read methods of an object store's storage (mixed into ``RemoteStorage``, which
    provides ``arrow_fs``, ``requests`` and ``_call``)."""

    # --- reading ------------------------------------------------------------------------------

    def read_bytes(self, path: ObjectPath | str, limit: int | None = None) -> bytes:
        return self.read_ranges(path, [(0, limit)])[0]

    def read_ranges(self, path: ObjectPath | str, ranges: Sequence[tuple[int, int | None]]
                    ) -> list[bytes]:
        """The bytes ``[start, end)`` of each range (``end`` ``None``: to the end of the object;
        clipped at the end): one HEAD for the size, then one ranged GET per range."""
        p = _obj(path)

        def read() -> list[bytes]:
            self.requests.count("head")
            with self.arrow_fs.open_input_file(p.arrow_path) as f:
                size = f.size()
                out = []
                for start, end in ranges:
                    n = max(0, min(size if end is None else end, size) - start)
                    if n:
                        self.requests.count("get", n, p.suffix)
                    out.append(f.read_at(n, start) if n else b"")
                return out

        return self._call(p, "read", read)

    def read_text(self, path: ObjectPath | str, encoding: str = "utf-8") -> str:
        return self.read_bytes(path).decode(encoding)

    def open_read(self, path: ObjectPath | str) -> BinaryIO:
        p = _obj(path)
        self.requests.count("head")
        return self._call(p, "open", lambda: self.arrow_fs.open_input_file(p.arrow_path))

    @contextmanager
    def mapped(self, path: ObjectPath | str) -> Iterator[np.ndarray]:
        """The whole object as a read-only ``uint8`` array (an empty object gives an empty
        array); large objects are fetched in parallel ranged GETs. Errors become
        :class:`LogDirError` naming the URI."""
        with self.mapped_ranges(path, [(0, 1 << 62)]) as buf:
            yield buf

    @contextmanager
    def mapped_ranges(self, path: ObjectPath | str, ranges: Sequence[tuple[int, int]],
                      size: int | None = None) -> Iterator[np.ndarray]:
        """An array as long as the object in which only the byte ranges ``[start, end)`` of
        ``ranges`` are fetched (ranges closer than ``COALESCE_BYTES`` are joined); every other
        byte reads as zero and must not be used. Pages never fetched take no memory (the zeroed
        array is allocated lazily by the OS); a range over the whole object is read into an
        uninitialised one. Parts of :data:`PART_BYTES` are fetched by up to
        :data:`FETCH_THREADS` ranged GETs at once."""
        import numpy as np

        p = _obj(path)
        try:
            self.requests.count("head")
            with self._call(p, "open", lambda: self.arrow_fs.open_input_file(p.arrow_path)) as f:
                size = self._call(p, "stat", f.size) if size is None else size
                wanted = coalesce(ranges, size)
                whole = wanted == [(0, size)]
                buf = np.empty(size, np.uint8) if whole else np.zeros(size, np.uint8)
                self._fetch_into(p, f, buf, wanted)
        except OSError as exc:
            raise LogDirError(f"cannot read object: {exc.strerror}",
                              Location(file=str(path))) from None
        buf.flags.writeable = False
        yield buf

    @contextmanager
    def mapped_streaming(self, path: ObjectPath | str, size: int
                         ) -> Iterator[tuple[np.ndarray, FetchProgress]]:
        """The whole object as an array filling in the background (:data:`PART_BYTES` parts,
        :data:`FETCH_THREADS` GETs at a time, front to back; :class:`FetchProgress` says how
        much is there), so decoding the front overlaps fetching the rest."""
        from concurrent.futures import ThreadPoolExecutor

        import numpy as np

        p = _obj(path)
        parts = [(s, min(size, s + PART_BYTES)) for s in range(0, size, PART_BYTES)]
        progress = FetchProgress(parts)
        buf = np.empty(size, np.uint8)
        self.requests.count("head")
        try:
            f = self._call(p, "open", lambda: self.arrow_fs.open_input_file(p.arrow_path))
        except OSError as exc:
            raise LogDirError(f"cannot read object: {exc.strerror}",
                              Location(file=str(path))) from None
        pool = ThreadPoolExecutor(FETCH_THREADS)
        stopped = False

        def fetch(i: int) -> None:
            if stopped:
                return progress.done(i)
            try:
                self._fetch_into(p, f, buf, [parts[i]])
            except BaseException as exc:  # handed to whoever waits
                error = LogDirError(f"cannot read object: {getattr(exc, 'strerror', exc)}",
                                    Location(file=str(path)))
                return progress.done(i, error)
            progress.done(i)

        try:
            for i in range(len(parts)):
                pool.submit(fetch, i)
            yield buf, progress
        finally:
            stopped = True
            pool.shutdown(wait=True)
            f.close()

    def _fetch_into(self, p: ObjectPath, f: Any, buf: np.ndarray,
                    ranges: Sequence[tuple[int, int]]) -> None:
        import numpy as np

        parts = [(s, min(e, s + PART_BYTES)) for start, e in ranges
                 for s in range(start, e, PART_BYTES)]

        def fetch(part: tuple[int, int]) -> None:
            start, end = part
            data = self._call(p, "read", lambda: f.read_at(end - start, start))
            if len(data) != end - start:
                raise OSError(errno.EIO, f"the object ended at byte {start + len(data)} while "
                              f"{end} were expected (truncated or replaced while reading)",
                              str(p))
            self.requests.count("get", len(data), p.suffix)
            buf[start:end] = np.frombuffer(data, np.uint8)

        if len(parts) <= 1:
            for part in parts:
                fetch(part)
            return
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(FETCH_THREADS, len(parts))) as pool:
            list(pool.map(fetch, parts))

    def update_mapped(self, path: ObjectPath | str, update: Callable[[np.ndarray], None]) -> None:
        raise refuse(path, "change a file in place")


def _obj(path: ObjectPath | str, options: Mapping[str, str] | None = None) -> ObjectPath:
    return path if isinstance(path, ObjectPath) else ObjectPath(str(path), options)
