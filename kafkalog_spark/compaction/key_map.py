"""The cleaner's bounded key map (log-management layer): 128-bit key digest -> latest dirty
offset in a fixed memory budget, built as Kafka's ``Cleaner.buildOffsetMap`` builds its
``SkimpyOffsetMap`` (KAFKA_FORMATS §15.3, §15.4).

Memory. An entry is a 16-byte digest and an 8-byte offset (24 bytes, as Kafka's slots); a map
of ``memory`` bytes has ``memory // 24`` slots and holds at most ``slots * 0.9`` keys
(``log.cleaner.io.buffer.load.factor``). Default ``memory``: Kafka's
``log.cleaner.dedupe.buffer.size``, 128 MiB. The table is allocated once per pass, no larger
than the pass can fill (the dirty range's keyed records, counted from batch headers, bound the
keys it can hold), so small partitions do not pay for the whole budget and the budget is never
exceeded (no rehashing).

Filling (:meth:`KeyMap.put`): keyed, not-aborted records from the first dirty offset in offset
order; when the map holds its most keys the next record stops the pass — even one whose key is
already in the map, as Kafka's ``map.size < maxDesiredMapSize`` check does. The pass then covers
``[first dirty, end)`` with ``end = latest + 1``: ``latest`` follows Kafka's ``latestOffset``
(the last put record, the last offset of each fully read batch, the offset before the next
segment after a fully read segment). What lies beyond ``end`` is cleaned by the next pass.

The table is open addressing with linear probing over three numpy arrays, indexed by the high
32 bits of the digest's low half scaled to the table size; two numba kernels put and look up a
whole column of digests at a time.
"""

from __future__ import annotations

import numpy as np

from ..codec._jit import njit

ENTRY_BYTES = 24  # 16-byte digest + 8-byte offset (SkimpyOffsetMap's slot)
LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor
DEFAULT_MEMORY = 128 << 20  # log.cleaner.dedupe.buffer.size
MIN_MEMORY = 2 * ENTRY_BYTES  # the smallest map accepted: two slots, one key


@njit(cache=True, nogil=True)
def _slot(lo, cap):
    return np.int64(((np.uint64(lo) >> np.uint64(32)) * np.uint64(cap)) >> np.uint64(32))


@njit(cache=True, nogil=True)
def _put(k1s, k2s, offs, size, limit, hi, lo, offsets):
    """Put ``(hi[i], lo[i]) -> offsets[i]`` in order until the map holds ``limit`` keys; returns
    ``(rows put, new size)``."""
    cap = len(offs)
    for i in range(len(hi)):
        if size >= limit:
            return i, size
        h = _slot(lo[i], cap)
        while True:
            if offs[h] < 0:
                k1s[h] = hi[i]
                k2s[h] = lo[i]
                offs[h] = offsets[i]
                size += 1
                break
            if k1s[h] == hi[i] and k2s[h] == lo[i]:
                offs[h] = offsets[i]  # records come in offset order: the latest wins
                break
            h += 1
            if h == cap:
                h = 0
    return len(hi), size


@njit(cache=True, nogil=True)
def _get(k1s, k2s, offs, hi, lo, out):
    cap = len(offs)
    for i in range(len(hi)):
        h = _slot(lo[i], cap)
        found = -1
        while offs[h] >= 0:
            if k1s[h] == hi[i] and k2s[h] == lo[i]:
                found = offs[h]
                break
            h += 1
            if h == cap:
                h = 0
        out[i] = found


def slots_for(memory: int) -> int:
    """Slots of a map of ``memory`` bytes (Kafka: ``memory / 24``)."""
    return max(2, memory // ENTRY_BYTES)


class KeyMap:
    """Key digest -> latest offset, at most :attr:`limit` keys (module docstring).

    Parameters
    ----------
    memory : int
        The budget in bytes (``log.cleaner.dedupe.buffer.size``).
    most_keys : int, optional
        An upper bound on the keys the pass can put (its keyed records): the table is made no
        larger than that needs.
    """

    def __init__(self, memory: int = DEFAULT_MEMORY, most_keys: int | None = None) -> None:
        if memory < MIN_MEMORY:
            raise ValueError(f"a key map needs at least {MIN_MEMORY} bytes, not {memory}")
        slots = slots_for(memory)
        self.limit = max(1, int(slots * LOAD_FACTOR))
        if most_keys is not None and most_keys < self.limit:
            slots = max(2, int(most_keys / LOAD_FACTOR) + 1)
        self.k1 = np.empty(slots, np.int64)
        self.k2 = np.empty(slots, np.int64)
        self.off = np.full(slots, -1, np.int64)
        self.size = 0

    @property
    def full(self) -> bool:
        return self.size >= self.limit

    @property
    def nbytes(self) -> int:
        return self.k1.nbytes + self.k2.nbytes + self.off.nbytes

    def put(self, hi: np.ndarray, lo: np.ndarray, offsets: np.ndarray) -> int:
        """Put the digests ``(hi, lo)`` with their ``offsets`` (increasing) in order; returns
        how many rows went in — fewer than given when the map filled up (module docstring)."""
        n, self.size = _put(self.k1, self.k2, self.off, self.size, self.limit,
                            np.ascontiguousarray(hi, np.int64), np.ascontiguousarray(lo, np.int64),
                            np.ascontiguousarray(offsets, np.int64))
        return int(n)

    def get(self, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
        """The offset of each digest, -1 where the key is not in the map."""
        out = np.empty(len(hi), np.int64)
        _get(self.k1, self.k2, self.off, np.ascontiguousarray(hi, np.int64),
             np.ascontiguousarray(lo, np.int64), out)
        return out


@njit(cache=True, nogil=True)
def _combine(k1, k2, offsets, dirty, pieces, table, group_of_row, g_k1, g_k2, g_off, g_piece,
             g_n, g_dirty):
    """Group rows by digest: per key its largest offset and that row's piece, its row count and
    whether a row is dirty; ``group_of_row`` gets each row's key number. Returns the keys."""
    cap = len(table)
    n_groups = 0
    for i in range(len(k1)):
        h = _slot(k2[i], cap)
        while True:
            g = table[h]
            if g < 0:
                g = n_groups
                n_groups += 1
                table[h] = g
                g_k1[g] = k1[i]
                g_k2[g] = k2[i]
                g_off[g] = offsets[i]
                g_piece[g] = pieces[i]
                g_n[g] = 1
                g_dirty[g] = dirty[i]
                break
            if g_k1[g] == k1[i] and g_k2[g] == k2[i]:
                g_n[g] += 1
                g_dirty[g] |= dirty[i]
                if offsets[i] > g_off[g]:
                    g_off[g] = offsets[i]
                    g_piece[g] = pieces[i]
                break
            h += 1
            if h == cap:
                h = 0
        group_of_row[i] = g
    return n_groups


def combine_keys(k1: np.ndarray, k2: np.ndarray, offsets: np.ndarray, dirty: np.ndarray,
                 pieces: np.ndarray) -> dict[str, np.ndarray]:
    """Combine key rows per key (the Spark key pass, both sides of its shuffle; any order): one
    row per key — its largest offset, that record's ``piece``, ``n`` = its row count, ``dirty``
    = any row dirty — except keys with several rows none of them dirty, whose rows stay as they
    are (``n`` = 1 each): such a key keeps all its records unless another task saw it dirty.
    Returns the columns ``k1, k2, offset, piece, n, dirty``."""
    n = len(k1)
    table = np.full(max(2, int(n / LOAD_FACTOR) + 1), -1, np.int64)
    group_of_row = np.empty(n, np.int64)
    g_k1, g_k2, g_off = (np.empty(n, np.int64) for _ in range(3))
    g_piece, g_n = np.empty(n, np.int32), np.empty(n, np.int64)
    g_dirty = np.empty(n, np.bool_)
    k = _combine(np.ascontiguousarray(k1, np.int64), np.ascontiguousarray(k2, np.int64),
                 np.ascontiguousarray(offsets, np.int64), np.ascontiguousarray(dirty, np.bool_),
                 np.ascontiguousarray(pieces, np.int32), table, group_of_row, g_k1, g_k2, g_off,
                 g_piece, g_n, g_dirty)
    del table
    single = g_dirty[:k] | (g_n[:k] == 1)
    rows = np.flatnonzero(~single[group_of_row])  # rows of keys seen several times, all clean
    keys = np.flatnonzero(single)
    return {"k1": np.concatenate([g_k1[keys], k1[rows]]),
            "k2": np.concatenate([g_k2[keys], k2[rows]]),
            "offset": np.concatenate([g_off[keys], offsets[rows]]),
            "piece": np.concatenate([g_piece[keys], pieces[rows]]).astype(np.int32),
            "n": np.concatenate([g_n[keys], np.ones(len(rows), np.int64)]),
            "dirty": np.concatenate([g_dirty[keys], np.zeros(len(rows), np.bool_)])}
