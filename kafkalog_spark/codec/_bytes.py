"""Byte primitives for kernels (codec layer): big-endian loads/stores and Kafka varints.

Plain functions compiled with numba; with ``NUMBA_DISABLE_JIT=1`` they run as ordinary Python
over numpy ``uint8`` arrays, so both paths execute the same code. Varint decoders return
``(value, new_position)``; a new position of ``-1`` means "malformed or runs past ``end``"
(kernels turn that into a status code, never an exception).
"""

from __future__ import annotations

import numpy as np

from ._jit import njit

_JIT = dict(cache=True, nogil=True)


@njit(**_JIT)
def load_i8(buf, p):
    v = np.int64(buf[p])
    return v - 256 if v >= 128 else v


@njit(**_JIT)
def load_i16(buf, p):
    v = (np.int64(buf[p]) << 8) | np.int64(buf[p + 1])
    return v - 65536 if v >= 32768 else v


@njit(**_JIT)
def load_u32(buf, p):
    return (np.int64(buf[p]) << 24) | (np.int64(buf[p + 1]) << 16) | (np.int64(buf[p + 2]) << 8) | np.int64(buf[p + 3])


@njit(**_JIT)
def load_i32(buf, p):
    v = load_u32(buf, p)
    return v - 4294967296 if v >= 2147483648 else v


@njit(**_JIT)
def load_i64(buf, p):
    hi = load_u32(buf, p)
    lo = load_u32(buf, p + 4)
    if hi >= 2147483648:
        hi -= 4294967296
    return (hi << 32) | lo


@njit(**_JIT)
def store_i16(buf, p, v):
    buf[p] = (v >> 8) & 0xFF
    buf[p + 1] = v & 0xFF


@njit(**_JIT)
def store_i32(buf, p, v):
    buf[p] = (v >> 24) & 0xFF
    buf[p + 1] = (v >> 16) & 0xFF
    buf[p + 2] = (v >> 8) & 0xFF
    buf[p + 3] = v & 0xFF


@njit(**_JIT)
def store_i64(buf, p, v):
    store_i32(buf, p, (v >> 32) & 0xFFFFFFFF)
    store_i32(buf, p + 4, v & 0xFFFFFFFF)


@njit(**_JIT)
def read_varint(buf, p, end):
    """Zig-zag varint (int32), Kafka's rules: at most 5 bytes, bits above 32 dropped."""
    u = 0
    shift = 0
    while True:
        if p >= end or shift > 28:
            return 0, -1
        b = np.int64(buf[p])
        p += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    u &= 0xFFFFFFFF
    return (u >> 1) ^ -(u & 1), p


@njit(**_JIT)
def read_varlong(buf, p, end):
    """Zig-zag varlong (int64): at most 10 bytes. Unsigned 64-bit arithmetic so the JIT and the
    plain-Python path wrap identically."""
    u = np.uint64(0)
    shift = 0
    while True:
        if p >= end or shift > 63:
            return np.int64(0), -1
        b = np.int64(buf[p])
        p += 1
        u |= np.uint64(b & 0x7F) << np.uint64(shift)
        if b < 0x80:
            break
        shift += 7
    return np.int64(u >> np.uint64(1)) ^ -np.int64(u & np.uint64(1)), p


@njit(**_JIT)
def size_of_varint(v):
    u = ((v << 1) ^ (v >> 31)) & 0xFFFFFFFF
    n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


@njit(**_JIT)
def _zigzag64(v):
    x = np.int64(v)
    return np.uint64(x << np.int64(1)) ^ np.uint64(x >> np.int64(63))


@njit(**_JIT)
def size_of_varlong(v):
    u = _zigzag64(v)
    n = 1
    while u >= np.uint64(0x80):
        u >>= np.uint64(7)
        n += 1
    return n


@njit(**_JIT)
def write_varint(buf, p, v):
    u = ((v << 1) ^ (v >> 31)) & 0xFFFFFFFF
    while u >= 0x80:
        buf[p] = (u & 0x7F) | 0x80
        u >>= 7
        p += 1
    buf[p] = u
    return p + 1


@njit(**_JIT)
def write_varlong(buf, p, v):
    u = _zigzag64(v)
    while u >= np.uint64(0x80):
        buf[p] = np.uint8((u & np.uint64(0x7F)) | np.uint64(0x80))
        u >>= np.uint64(7)
        p += 1
    buf[p] = np.uint8(u)
    return p + 1
