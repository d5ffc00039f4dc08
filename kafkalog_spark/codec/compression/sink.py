"""Where decompressed bytes land (codec layer): a growable byte array from Arrow's memory pool.

The decoders of :mod:`.framings` and :mod:`.zstd` write straight into a :class:`Sink`, so the
plain payloads of a whole decode chunk end side by side in one array — the decode kernels'
``aux`` — with no per-payload ``bytes`` object and no join. The pool keeps freed pages for
reuse; a fresh ``bytes`` of a chunk's size faults in new pages every time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

# growth beyond what is asked for is at most this much, so one byte more than a large
# capacity does not double it
_MAX_SLACK = 64 * 1024 * 1024


def _allocate(n: int) -> np.ndarray:
    return np.frombuffer(pa.allocate_buffer(n), np.uint8) if n else np.zeros(0, np.uint8)


class Sink:
    """Bytes written so far (``size``) at the front of a larger array.

    Writers either :meth:`append` bytes they already have, or take :meth:`reserve`'s view of the
    next ``n`` bytes, decode into it and :meth:`commit` what they wrote."""

    __slots__ = ("array", "size", "_view")

    def __init__(self, capacity: int = 0) -> None:
        self.array = _allocate(capacity)
        self._view = memoryview(self.array)
        self.size = 0

    def reserve(self, n: int) -> memoryview:
        """A writable view of the ``n`` bytes after the written ones (the array grows, keeping
        what is written, when they do not fit); nothing is counted until :meth:`commit`."""
        need = self.size + n
        if need > len(self.array):
            grown = _allocate(max(need, min(2 * len(self.array), need + _MAX_SLACK)))
            grown[:self.size] = self.array[:self.size]
            self.array = grown
            self._view = memoryview(grown)
        return self._view[self.size:need]

    def commit(self, n: int) -> None:
        """Count ``n`` more bytes, written into the last :meth:`reserve` view, as written."""
        self.size += n

    def append(self, data: Any) -> None:
        """Copy ``data`` (bytes-like) after the written bytes."""
        n = len(data)
        self.reserve(n)[:] = data
        self.size += n

    def data(self) -> np.ndarray:
        """The written bytes (a view, valid until the next write)."""
        return self.array[:self.size]

    def tobytes(self) -> bytes:
        return self.array[:self.size].tobytes()
