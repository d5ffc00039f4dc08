"""The bytes a rewrite writes for one window of a segment (log-management layer): source bytes
copied as they are, batches rebuilt from some of the window's decoded rows, and empty batches —
in segment order, the rebuilt ones encoded together in one call when the window is written.

Compaction and erase rebuild thousands of batches per segment; encoding each with its own
:func:`~kafkalog_spark.codec.records.encode.encode_batch` call cost ~0.3 ms of Python and Arrow per
batch whatever its size, most of a compaction's time.
"""

from __future__ import annotations

from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..codec.records.encode import BatchSpec, encode_batch, encode_batches


def timestamps_ms(ts: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Arrow µs timestamps as int64 ms, null (no timestamp) as -1."""
    arr = pc.fill_null(pc.divide(ts.cast(pa.int64()), 1000), -1)
    return np.asarray(arr.to_numpy(zero_copy_only=False), np.int64)


class WindowOutput:
    """Collects one window's output in order; :meth:`write` encodes and writes it.

    ``buf`` is the source segment's bytes; ``rows`` the window's decoded rows (``key``,
    ``value``, ``headers``, ``timestamp``, ``offset``), which rebuilt batches take records
    from by row index.
    """

    def __init__(self, buf: np.ndarray, rows: pa.Table) -> None:
        self.buf = buf
        self.rows = rows
        self._pieces: list[tuple[int, int, int]] = []  # (kind, a, b)
        self._empties: list[bytes] = []
        self._specs: list[BatchSpec] = []
        self._rows: list[np.ndarray] = []

    def copy(self, start: int, stop: int) -> None:
        """Source bytes ``[start, stop)`` as they are (joined with a copy ending at ``start``)."""
        if stop <= start:
            return
        if self._pieces and self._pieces[-1][0] == _COPY and self._pieces[-1][2] == start:
            self._pieces[-1] = (_COPY, self._pieces[-1][1], stop)
        else:
            self._pieces.append((_COPY, start, stop))

    def rebuild(self, rows: np.ndarray, spec: BatchSpec) -> None:
        """A batch with header ``spec`` holding the window's rows at indices ``rows`` (sorted,
        at least one)."""
        self._pieces.append((_REBUILT, len(self._specs), 0))
        self._specs.append(spec)
        self._rows.append(rows)

    def empty(self, spec: BatchSpec) -> None:
        """Kafka's empty batch with header ``spec`` (``max_timestamp`` set)."""
        self._pieces.append((_EMPTY, len(self._empties), 0))
        self._empties.append(encode_batch([], [], [], spec=spec))

    def write(self, out: BinaryIO) -> None:
        """Encode the rebuilt batches (one call) and write everything in order."""
        encoded = None
        if self._specs:
            idx = np.concatenate(self._rows)
            take = pa.array(idx)
            encoded = encode_batches(
                self.rows.column("key").take(take), self.rows.column("value").take(take),
                timestamps_ms(self.rows.column("timestamp").take(take)),
                self.rows.column("offset").to_numpy()[idx],
                specs=self._specs, counts=[len(r) for r in self._rows],
                headers=self.rows.column("headers").take(take))
        for kind, a, b in self._pieces:
            if kind == _COPY:
                out.write(self.buf[a:b])
            elif kind == _REBUILT:
                assert encoded is not None
                out.write(encoded.batch(a))
            else:
                out.write(self._empties[a])
        self._pieces.clear()
        self._empties.clear()
        self._specs.clear()
        self._rows.clear()


_COPY, _REBUILT, _EMPTY = 0, 1, 2
