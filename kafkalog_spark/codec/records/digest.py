"""128-bit key digests for compaction's key map (codec layer): MurmurHash3 x64_128 of every key
of an Arrow binary column, two int64 columns out, one numba kernel over the Arrow buffers.

Compaction keeps the latest record per key. Grouping by full key bytes shuffles every
variable-length key through Spark's JVM (and hashes and compares it there); grouping by a
fixed-width 16-byte digest of the key moves two ``long`` columns instead, whatever the key
size. The digest is **MurmurHash3 x64_128, seed 0** (Austin Appleby's reference
``MurmurHash3_x64_128``; the ``mmh3`` package computes the same): fast (a few cycles per byte,
no cryptographic rounds), well mixed, and with a reference implementation to test against.

Output halves. The reference writes its digest as two little-endian 64-bit words ``h1, h2``;
read as one little-endian 128-bit integer (what ``mmh3.hash128(key, 0, True, signed=False)``
returns) that is ``(h2 << 64) | h1``. :func:`key_digests` returns ``(high, low) = (h2, h1)``,
each reinterpreted as signed int64 (Spark has no unsigned ``long``).

Collisions. Two distinct keys of one partition that share a digest would be treated as one key
and the older record dropped. With 128 bits the birthday bound puts the chance of any collision
among ``n`` distinct keys at about ``n**2 / 2**129``: 10^12 distinct keys in one partition give
~1.5e-15, far below the odds of undetected hardware or disk errors over the same data. Kafka's
own cleaner makes the same trade: its key map (``kafka.log.SkimpyOffsetMap``, used by
``LogCleaner``) stores 16-byte MD5 digests of keys, never the keys, and compares digests.
MurmurHash3 is not collision-resistant against an adversary who chooses keys (collisions can be
constructed; neither is MD5 in practice): where producers are untrusted and a forged key must
never shadow another, compact with exact keys (``compact(..., exact_keys=True)``,
``kafkalog compact --exact-keys``), which groups by the full key bytes.

Nothing per record runs in Python: :func:`key_digests` takes numpy views of each chunk's offsets
and data buffers (``arr.offset`` respected; ``binary``, ``large_binary``, ``string`` and
``large_string``) and calls :func:`murmur3_128` once per chunk. Null entries (callers filter
them out) get the digest ``(0, 0)``. With ``NUMBA_DISABLE_JIT=1`` the same kernel runs as plain
Python over numpy ``uint64`` scalars (wrap-around overflow warnings silenced).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .._jit import njit

_C1 = np.uint64(0x87C37B91114253D5)
_C2 = np.uint64(0x4CF5AD432745937F)
_F1 = np.uint64(0xFF51AFD7ED558CCD)
_F2 = np.uint64(0xC4CEB9FE1A85EC53)
_M5 = np.uint64(5)
_N1 = np.uint64(0x52DCE729)
_N2 = np.uint64(0x38495AB5)
_S = tuple(np.uint64(i) for i in range(65))  # shift counts as uint64 (numba: no float mixing)


@njit(cache=True, nogil=True)
def _rotl(x, r):
    return (x << _S[r]) | (x >> _S[64 - r])


@njit(cache=True, nogil=True)
def _fmix(k):
    k ^= k >> _S[33]
    k *= _F1
    k ^= k >> _S[33]
    k *= _F2
    k ^= k >> _S[33]
    return k


@njit(cache=True, nogil=True)
def _mix1(k):
    """The first lane's scrambling of an 8-byte block (or tail) before it enters ``h1``."""
    return _rotl(k * _C1, 31) * _C2


@njit(cache=True, nogil=True)
def _mix2(k):
    """The second lane's scrambling of an 8-byte block (or tail) before it enters ``h2``."""
    return _rotl(k * _C2, 33) * _C1


@njit(cache=True, nogil=True)
def _load(data, p, n):
    """``n`` (0..8) bytes of ``data`` from ``p`` as a little-endian uint64."""
    v = np.uint64(0)
    for i in range(n):
        v |= np.uint64(data[p + i]) << _S[8 * i]
    return v


@njit(cache=True, nogil=True)
def murmur3_128(offsets, data, start, hi, lo):
    """MurmurHash3 x64_128 (seed 0) of entries ``start .. start + len(hi)`` of an Arrow binary
    layout (``offsets`` int32/int64, ``data`` uint8) into ``hi`` / ``lo`` (uint64: h2, h1)."""
    for j in range(len(hi)):
        p = np.int64(offsets[start + j])
        n = np.int64(offsets[start + j + 1]) - p
        h1 = np.uint64(0)
        h2 = np.uint64(0)
        for b in range(n // 16):
            q = p + 16 * b
            h1 ^= _mix1(_load(data, q, 8))
            h1 = _rotl(h1, 27)
            h1 += h2
            h1 = h1 * _M5 + _N1
            h2 ^= _mix2(_load(data, q + 8, 8))
            h2 = _rotl(h2, 31)
            h2 += h1
            h2 = h2 * _M5 + _N2
        tail = n & 15
        q = p + n - tail
        if tail > 8:
            h2 ^= _mix2(_load(data, q + 8, tail - 8))
        if tail > 0:
            h1 ^= _mix1(_load(data, q, min(tail, 8)))
        length = np.uint64(n)
        h1 ^= length
        h2 ^= length
        h1 += h2
        h2 += h1
        h1 = _fmix(h1)
        h2 = _fmix(h2)
        h1 += h2
        h2 += h1
        hi[j] = h2
        lo[j] = h1


def _chunk_digests(arr: pa.Array, hi: np.ndarray, lo: np.ndarray) -> None:
    """Digests of one chunk into ``hi`` / ``lo`` (uint64 views of the output, same length)."""
    n = len(arr)
    if n == 0:
        return
    large = pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type)
    if not (large or pa.types.is_binary(arr.type) or pa.types.is_string(arr.type)):
        raise TypeError(f"key digests need a binary or string column, not {arr.type}")
    _, obuf, dbuf = arr.buffers()
    offsets = np.frombuffer(obuf, np.int64 if large else np.int32)
    data = np.frombuffer(dbuf, np.uint8) if dbuf is not None else np.zeros(0, np.uint8)
    with np.errstate(over="ignore"):  # only NUMBA_DISABLE_JIT: uint64 wrap-around is intended
        murmur3_128(offsets, data, arr.offset, hi, lo)
    if arr.null_count:
        nulls = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), bool)
        hi[nulls] = 0
        lo[nulls] = 0


def key_digests(keys: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """MurmurHash3 x64_128 (seed 0) of every key: ``(high, low)`` int64 arrays, the high and low
    64 bits of ``mmh3.hash128(key, 0, True, signed=False)`` (module docstring), each read as a
    signed int64. Null keys get ``(0, 0)``."""
    chunks = keys.chunks if isinstance(keys, pa.ChunkedArray) else [keys]
    total = sum(len(c) for c in chunks)
    hi = np.zeros(total, np.uint64)
    lo = np.zeros(total, np.uint64)
    at = 0
    for c in chunks:
        _chunk_digests(c, hi[at:at + len(c)], lo[at:at + len(c)])
        at += len(c)
    return hi.view(np.int64), lo.view(np.int64)
