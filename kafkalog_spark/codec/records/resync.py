"""Finding the next entry after damage (codec layer): the byte position where a valid entry
(v2 batch or v0/v1 message) starts again inside a damaged ``.log`` buffer.

Kafka stops at the first invalid entry; salvage (``kafkalog recover --salvage``) instead looks
for the next position whose bytes are a whole entry: a header that parses with plausible fields
and a checksum that matches (v2: CRC-32C from the attributes to the end; v0/v1: CRC-32 from the
magic byte to the end). :func:`next_entry` walks positions one byte at a time with a numba
kernel that applies the cheap header checks (:func:`_candidates`), and computes a checksum only
for the rare positions that pass them, so the work stays linear in the bytes scanned: a
checksum is computed over at most ``max_entry_bytes`` per candidate, and random or zeroed bytes
almost never pass the header checks (a size that fits the buffer, a known magic, attribute bits
Kafka defines, non-negative deltas and counts).
"""

from __future__ import annotations

import numpy as np

from .. import layout as L
from .._bytes import load_i8, load_i16, load_i32, load_i64, load_u32
from .._jit import njit
from .crc import compute_crcs_at
from .scan import as_uint8

DEFAULT_MAX_ENTRY_BYTES = 64 << 20
"""Entries declaring more bytes than this are not taken as the restart (Kafka's default
``message.max.bytes`` is 1 MiB; raise it for topics configured larger)."""

_CANDIDATES = 256  # positions handed from the kernel to the checksum step at a time


@njit(cache=True, nogil=True)
def _candidates(buf, start, end, max_size, out):
    """Positions in ``[start, end)`` whose bytes parse as a plausible entry header, in order, at
    most ``len(out)`` of them; returns ``(count, position the walk stopped at)``."""
    n = 0
    p = start
    last = end - (L.HEADER_SIZE_UP_TO_MAGIC + 1)
    while p <= last and n < len(out):
        size = load_i32(buf, p + L.SIZE_OFFSET)
        mg = load_i8(buf, p + L.MAGIC_OFFSET)
        ok = (0 <= mg <= 2 and L.RECORD_OVERHEAD_V0 <= size <= max_size
              and p + L.LOG_OVERHEAD + size <= end and load_i64(buf, p) >= 0)
        if ok and mg == 2:
            if size < L.RECORD_BATCH_OVERHEAD - L.LOG_OVERHEAD:
                ok = False
            else:
                attributes = load_i16(buf, p + L.ATTRIBUTES_OFFSET)
                delta = load_i32(buf, p + L.LAST_OFFSET_DELTA_OFFSET)
                count = load_i32(buf, p + L.RECORDS_COUNT_OFFSET)
                ok = ((attributes & ~0x7F) == 0 and (attributes & L.CODEC_MASK) <= 4
                      and delta >= 0 and 0 <= count <= delta + 1
                      and load_i32(buf, p + L.PARTITION_LEADER_EPOCH_OFFSET) >= -1
                      and load_i16(buf, p + L.PRODUCER_EPOCH_OFFSET) >= -1
                      and load_i32(buf, p + L.BASE_SEQUENCE_OFFSET) >= -1)
        elif ok:
            attributes = load_i8(buf, p + L.LEGACY_ATTRIBUTES_OFFSET)
            ok = ((attributes & L.LEGACY_CODEC_MASK) <= 4 and (attributes & 0xF0) == 0
                  and (mg == 1 or (attributes & L.LEGACY_TIMESTAMP_TYPE_MASK) == 0)
                  and (mg == 0 or size >= L.RECORD_OVERHEAD_V1))
            if ok:  # key and value lengths must add up to the message size exactly
                q = p + L.LEGACY_ATTRIBUTES_OFFSET + 1 + (8 if mg == 1 else 0)
                stop = p + L.LOG_OVERHEAD + size
                key = load_i32(buf, q)
                ok = key >= -1 and q + 8 + max(key, 0) <= stop
                if ok:
                    value = load_i32(buf, q + 4 + max(key, 0))
                    ok = value >= -1 and q + 8 + max(key, 0) + max(value, 0) == stop
        if ok:
            out[n] = p
            n += 1
        p += 1
    return n, p


def next_entry(data, start: int, end: int | None = None, *,
               max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES,
               work: dict[str, int] | None = None) -> int | None:
    """The first position in ``[start, end)`` where a whole, checksum-valid entry starts, or
    ``None``.

    Parameters
    ----------
    data
        ``.log`` bytes (bytes, memoryview, mmap or a numpy ``uint8`` array).
    start, end
        The range searched (``end`` defaults to the end of ``data``); the entry must end
        inside it.
    max_entry_bytes : int
        Larger declared sizes are not considered (see :data:`DEFAULT_MAX_ENTRY_BYTES`).
    work : dict, optional
        Adds up ``scanned`` bytes, ``candidates`` checksummed and ``checksummed`` bytes (what
        the tests bound).
    """
    buf = as_uint8(data)
    end = len(buf) if end is None else min(end, len(buf))
    out = np.empty(_CANDIDATES, np.int64)
    p = start
    while p < end:
        n, p = _candidates(buf, p, end, max_entry_bytes, out)
        if n == 0:
            break
        found = out[:n]
        sizes = np.array([load_size(buf, q) for q in found], np.int64) + L.LOG_OVERHEAD
        magics = buf[found + L.MAGIC_OFFSET].view(np.int8)
        stored = np.array([stored_crc(buf, q, m) for q, m in zip(found, magics)], np.uint32)
        hits = np.flatnonzero(compute_crcs_at(buf, found, sizes, magics) == stored)
        if work is not None:
            checked = int(hits[0]) + 1 if len(hits) else n
            work["candidates"] = work.get("candidates", 0) + checked
            work["checksummed"] = work.get("checksummed", 0) + int(sizes[:checked].sum())
        if len(hits):
            found_at = int(found[hits[0]])
            _add(work, "scanned", found_at - start)
            return found_at
    _add(work, "scanned", end - start)
    return None


def _add(work: dict[str, int] | None, key: str, n: int) -> None:
    if work is not None:
        work[key] = work.get(key, 0) + n


def load_size(buf: np.ndarray, p: int) -> int:
    return int(load_i32(buf, p + L.SIZE_OFFSET))


def stored_crc(buf: np.ndarray, p: int, magic: int) -> int:
    return int(load_u32(buf, p + (L.CRC_OFFSET if magic == 2 else L.LEGACY_CRC_OFFSET)))
