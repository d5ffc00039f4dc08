"""Kafka's default partitioner (codec layer): murmur2 of the key, as the Java client computes it.

``org.apache.kafka.common.utils.Utils.murmur2`` over the serialized key bytes, seed
``0x9747b28c``, mixing constant ``m = 0x5bd1e995``, ``r = 24``, little-endian 4-byte words,
32-bit two's-complement arithmetic; the partition is
``Utils.toPositive(murmur2(key)) % numPartitions`` where ``toPositive(h) = h & 0x7fffffff``
(``BuiltInPartitioner.partitionForKey``).

Null keys: the Java producer sends them to a "sticky" partition chosen per batch at run time,
which cannot be reproduced offline. Here a null-key row goes round-robin:
``(start + i) % numPartitions`` where ``i`` counts null-key rows seen so far by this writer and
``start`` is chosen by the caller (the Spark writer uses its task's partition id), so null-key
records spread evenly and the assignment is deterministic for a given input and task layout.

The kernel reads an Arrow binary/string array's offsets and data buffers directly.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ...errors import InvalidOptionError
from .._jit import njit
from .encode_columns import _binary

SEED = 0x9747B28C
M = 0x5BD1E995
R = 24
MASK32 = 0xFFFFFFFF


@njit(cache=True, nogil=True)
def _murmur2_range(data, lo, hi):
    """Utils.murmur2 of ``data[lo:hi]`` as an unsigned 32-bit value in an int64."""
    length = hi - lo
    h = (SEED ^ length) & MASK32
    n4 = length // 4
    for i in range(n4):
        p = lo + 4 * i
        k = (np.int64(data[p]) | (np.int64(data[p + 1]) << 8) | (np.int64(data[p + 2]) << 16)
             | (np.int64(data[p + 3]) << 24))
        k = (k * M) & MASK32
        k ^= k >> R
        k = (k * M) & MASK32
        h = (h * M) & MASK32
        h ^= k
    tail = lo + (length & ~3)
    rest = length % 4
    if rest == 3:
        h ^= np.int64(data[tail + 2]) << 16
    if rest >= 2:
        h ^= np.int64(data[tail + 1]) << 8
    if rest >= 1:
        h ^= np.int64(data[tail])
        h = (h * M) & MASK32
    h ^= h >> 13
    h = (h * M) & MASK32
    h ^= h >> 15
    return h


@njit(cache=True, nogil=True)
def _partition_kernel(offsets, data, validity, bit0, n, num_partitions, null_start, out):
    """Fill ``out[i]`` with the partition of row ``i``; returns how many null keys were met."""
    nulls = 0
    for i in range(n):
        if len(validity) > 0:
            bit = bit0 + i
            if (validity[bit >> 3] >> (bit & 7)) & 1 == 0:
                out[i] = (null_start + nulls) % num_partitions
                nulls += 1
                continue
        h = _murmur2_range(data, offsets[i], offsets[i + 1])
        out[i] = (h & 0x7FFFFFFF) % num_partitions
    return nulls


def murmur2(key: bytes) -> int:
    """``Utils.murmur2(key)`` as Java returns it (a signed 32-bit int).

    Parameters
    ----------
    key : bytes
        Serialized key bytes.

    Returns
    -------
    int
        The hash in ``[-2^31, 2^31)``.
    """
    buf = np.frombuffer(bytes(key), dtype=np.uint8)
    h = int(_murmur2_range(buf, 0, len(buf)))
    return h - (1 << 32) if h >= 1 << 31 else h


def default_partitions(keys: pa.Array | pa.ChunkedArray, num_partitions: int, *,
                       null_start: int = 0) -> tuple[np.ndarray, int]:
    """Kafka's default partition of every key (see the module docstring for null keys).

    Parameters
    ----------
    keys : pyarrow.Array or ChunkedArray
        Binary or string keys (strings are hashed as their UTF-8 bytes, as Kafka's
        ``StringSerializer`` would produce them).
    num_partitions : int
        Partition count of the topic, ``>= 1``.
    null_start : int
        Round-robin position of the first null key.

    Returns
    -------
    (numpy.ndarray, int)
        ``int32`` partitions, one per key, and the number of null keys (the caller adds it to
        ``null_start`` for the next chunk).

    Raises
    ------
    InvalidOptionError
        ``num_partitions < 1`` or keys that are not binary/string.
    """
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, (int, np.integer)) \
            or num_partitions < 1:
        raise InvalidOptionError(f"numPartitions must be an integer >= 1, got {num_partitions!r}")
    if isinstance(keys, pa.ChunkedArray):
        keys = pa.concat_arrays(keys.chunks) if keys.num_chunks != 1 else keys.chunk(0)
    n = len(keys)
    offsets, data, validity, bit0 = _binary(keys, "key column")
    if pa.types.is_null(keys.type):
        validity, bit0 = np.zeros(max(1, (n + 7) // 8), np.uint8), 0
    out = np.empty(n, np.int32)
    nulls = _partition_kernel(offsets, data, validity, bit0, n, int(num_partitions),
                              int(null_start), out)
    return out, int(nulls)
