"""Fuzzing mutators (tests): seeded byte-level damage to valid inputs.

Every mutator is ``f(rng, data) -> bytes`` with ``rng`` a :class:`random.Random`; the same seed
gives the same bytes. Structure-aware mutators (length fields, batch duplication/reordering) walk
the ``.log`` entry prefix (offset int64, size int32) themselves, so they keep working on inputs
that ``scan_entries`` would reject.
"""

from __future__ import annotations

import random
import struct
from typing import Callable

Mutator = Callable[[random.Random, bytes], bytes]

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
LOG_OVERHEAD = 12  # offset int64 + size int32 (codec/layout.py LOG_OVERHEAD)


def entry_bounds(data: bytes, limit: int = 10_000) -> list[tuple[int, int]]:
    """``(start, end)`` of each whole entry of a ``.log`` buffer, walking the size fields."""
    out: list[tuple[int, int]] = []
    p = 0
    while p + LOG_OVERHEAD <= len(data) and len(out) < limit:
        size = struct.unpack_from(">i", data, p + 8)[0]
        end = p + LOG_OVERHEAD + size
        if size < 0 or end > len(data):
            break
        out.append((p, end))
        p = end
    return out


def bit_flip(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 4))):
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    return bytes(b)


def byte_set(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 3))):
        b[rng.randrange(len(b))] = rng.choice((0x00, 0xFF, 0x7F, 0x80, 0x01, rng.randrange(256)))
    return bytes(b)


def truncate(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    return data[:rng.randrange(len(data))]


def _extreme(rng: random.Random, width: int, past_end: int) -> int:
    if width == 8:
        return rng.choice((0, -1, 2**63 - 1, -(2**63), INT32_MAX, past_end))
    if width == 2:
        return rng.choice((0, -1, 2**15 - 1, -(2**15), 1))
    return rng.choice((0, -1, INT32_MAX, INT32_MIN, past_end, past_end - 1, 1))


def extreme_field(rng: random.Random, data: bytes) -> bytes:
    """An int16/int32/int64 at a random (often entry-relative, length-like) position set to an
    extreme: 0, -1, max, min, or just past the end of the data."""
    if len(data) < 2:
        return data
    width = rng.choice((4, 4, 4, 2, 8))
    if len(data) < width:
        width = 2
    entries = entry_bounds(data)
    if entries and rng.random() < 0.7:
        start, end = rng.choice(entries)
        # size (8), v2 lastOffsetDelta (23), producer epoch (51), records count (57), or any
        # field inside the entry: key/value/record lengths live at unaligned spots
        rel = rng.choice((8, 8, 23, 51, 57, 18, 26, rng.randrange(max(1, end - start))))
        pos = min(start + rel, len(data) - width)
        past_end = len(data) - start - LOG_OVERHEAD + 1
    else:
        pos = rng.randrange(len(data) - width + 1)
        past_end = len(data) - pos + 1
    fmt = {2: ">h", 4: ">i", 8: ">q"}[width]
    lo, hi = {2: (-(2**15), 2**15 - 1), 4: (INT32_MIN, INT32_MAX), 8: (-(2**63), 2**63 - 1)}[width]
    value = max(lo, min(hi, _extreme(rng, width, past_end)))
    b = bytearray(data)
    struct.pack_into(fmt, b, pos, value)
    return bytes(b)


def _zigzag_varint(value: int) -> bytes:
    z = (value << 1) ^ (value >> 63)
    z &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = z & 0x7F
        z >>= 7
        if z:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def varint_extreme(rng: random.Random, data: bytes) -> bytes:
    """A zig-zag varint (v2 record length, key/value/header lengths, deltas) overwritten with an
    extreme: -1, -2, 0, INT32_MAX, INT32_MIN, INT64 min/max, or an unterminated run of 0xFF."""
    if not data:
        return data
    entries = entry_bounds(data)
    if entries and rng.random() < 0.8:
        start, end = rng.choice(entries)
        # v2 records start at 61 (record length varint there); elsewhere hit any varint
        pos = start + 61 if rng.random() < 0.3 and end - start > 61 else rng.randrange(start, end)
    else:
        pos = rng.randrange(len(data))
    if rng.random() < 0.15:
        enc = b"\xff" * rng.choice((5, 10, 11))
    else:
        enc = _zigzag_varint(rng.choice((-1, -2, 0, INT32_MAX, INT32_MIN, 2**63 - 1, -(2**63),
                                         len(data), len(data) - pos)))
    return data[:pos] + enc + data[pos + len(enc):]


def duplicate_entry(rng: random.Random, data: bytes) -> bytes:
    entries = entry_bounds(data)
    if not entries:
        return data + data[: rng.randrange(len(data) + 1)]
    start, end = rng.choice(entries)
    at = rng.choice([e for _, e in entries] + [0])
    return data[:at] + data[start:end] + data[at:]


def reorder_entries(rng: random.Random, data: bytes) -> bytes:
    entries = entry_bounds(data)
    if len(entries) < 2:
        return data
    tail = data[entries[-1][1]:]
    parts = [data[s:e] for s, e in entries]
    if rng.random() < 0.5:
        i, j = rng.sample(range(len(parts)), 2)
        parts[i], parts[j] = parts[j], parts[i]
    else:
        rng.shuffle(parts)
    return b"".join(parts) + tail


def drop_entry(rng: random.Random, data: bytes) -> bytes:
    entries = entry_bounds(data)
    if not entries:
        return data
    s, e = rng.choice(entries)
    return data[:s] + data[e:]


def insert_garbage(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data) + 1)
    n = rng.choice((1, 3, 8, 12, 17, 61, rng.randrange(1, 300)))
    junk = bytes(rng.randrange(256) for _ in range(n))
    return data[:at] + junk + data[at:]


def zero_tail(rng: random.Random, data: bytes) -> bytes:
    """Zeros appended (preallocated index/log tail) or overwriting the end of the data."""
    n = rng.choice((1, 8, 12, 64, 4096))
    if data and rng.random() < 0.5:
        at = rng.randrange(len(data))
        return data[:at] + bytes(len(data) - at)
    return data + bytes(n)


def splice(rng: random.Random, data: bytes) -> bytes:
    """A copy of one region of the data over another (plausible-looking but misplaced bytes)."""
    if len(data) < 4:
        return data
    n = rng.randrange(1, min(len(data), 256))
    src = rng.randrange(len(data) - n + 1)
    dst = rng.randrange(len(data) - n + 1)
    b = bytearray(data)
    b[dst:dst + n] = data[src:src + n]
    return bytes(b)


MUTATORS: dict[str, Mutator] = {
    "bit_flip": bit_flip,
    "byte_set": byte_set,
    "truncate": truncate,
    "extreme_field": extreme_field,
    "varint_extreme": varint_extreme,
    "duplicate_entry": duplicate_entry,
    "reorder_entries": reorder_entries,
    "drop_entry": drop_entry,
    "insert_garbage": insert_garbage,
    "zero_tail": zero_tail,
    "splice": splice,
}
# bit flips, extremes and truncations find most; the others mostly make valid-looking logs
_WEIGHTS = {"bit_flip": 4, "byte_set": 2, "truncate": 2, "extreme_field": 4, "varint_extreme": 3,
            "duplicate_entry": 1,
            "reorder_entries": 1, "drop_entry": 1, "insert_garbage": 1, "zero_tail": 1, "splice": 1}


def restamp_crcs(data: bytes) -> bytes:
    """Every whole entry's checksum recomputed (CRC-32C for v2, CRC-32 for v0/v1), computed
    here independently of the package, so damage gets past CRC checks into the parsers."""
    import zlib

    import crc32c

    b = bytearray(data)
    for start, end in entry_bounds(data):
        if end - start < 22:
            continue
        magic = b[start + 16]
        if magic == 2 and end - start >= 61:
            struct.pack_into(">I", b, start + 17, crc32c.crc32c(bytes(b[start + 21:end])))
        elif magic in (0, 1):
            struct.pack_into(">I", b, start + 12, zlib.crc32(bytes(b[start + 16:end])))
    return bytes(b)


def mutate(rng: random.Random, data: bytes) -> tuple[bytes, list[str]]:
    """Apply one to three weighted mutators, then (one time in three) restamp the checksums;
    returns the bytes and the mutator names used."""
    names = rng.choices(list(_WEIGHTS), weights=list(_WEIGHTS.values()), k=rng.choice((1, 1, 2, 3)))
    for name in names:
        data = MUTATORS[name](rng, data)
    if names and rng.random() < 1 / 3:
        data = restamp_crcs(data)
        names.append("restamp_crcs")
    return data, names
