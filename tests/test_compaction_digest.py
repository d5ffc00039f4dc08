"""Compaction's 128-bit key digests (codec/digest.py) against the reference MurmurHash3 x64_128
(the ``mmh3`` package, a C port of Appleby's code): every key length around the 8- and 16-byte
block edges, sliced and chunked Arrow arrays, every binary/string type, nulls."""

from __future__ import annotations

import mmh3
import numpy as np
import pyarrow as pa
import pytest

from kafkalog_spark.codec.records.digest import key_digests


def reference(key: bytes) -> tuple[int, int]:
    """``(high, low)`` as signed int64: the high and low 64 bits of the 128-bit digest."""
    whole = mmh3.hash128(key, 0, True, signed=False)
    hi, lo = whole >> 64, whole & ((1 << 64) - 1)
    return tuple(int(np.int64(np.uint64(v).view(np.int64))) for v in (hi, lo))


def digests(arr) -> list[tuple[int, int]]:
    hi, lo = key_digests(arr)
    assert hi.dtype == lo.dtype == np.int64
    return list(zip(hi.tolist(), lo.tolist()))


def test_every_length_around_the_block_edges() -> None:
    rng = np.random.default_rng(7)
    keys = [bytes(rng.integers(0, 256, n, dtype=np.uint8)) for n in range(0, 70)]
    keys += [b"", b"a", b"key-00000001", b"\xff" * 33]
    assert digests(pa.array(keys, pa.binary())) == [reference(k) for k in keys]


@pytest.mark.parametrize("typ", [pa.binary(), pa.large_binary(), pa.string(), pa.large_string()])
def test_types_slices_chunks_and_nulls(typ) -> None:
    words = [f"k{i:03d}-{'x' * (i % 37)}" for i in range(200)]
    values = [w if typ in (pa.string(), pa.large_string()) else w.encode() for w in words]
    values[5] = values[77] = None
    arr = pa.array(values, typ)
    want = [reference(w.encode()) if v is not None else (0, 0) for w, v in zip(words, values)]
    assert digests(arr) == want
    assert digests(arr.slice(3, 150)) == want[3:153]  # the slice's offset is respected
    chunked = pa.chunked_array([arr.slice(0, 10), arr.slice(10, 0), arr.slice(10, 190)])
    assert digests(chunked) == want
    assert digests(pa.chunked_array([], typ)) == []


def test_distinct_keys_distinct_digests() -> None:
    keys = pa.array([b"key-%08d" % i for i in range(200_000)])
    hi, lo = key_digests(keys)
    pairs = np.stack([hi, lo], axis=1)
    assert len(np.unique(pairs, axis=0)) == len(keys)


def test_refuses_other_types() -> None:
    with pytest.raises(TypeError, match="binary or string"):
        key_digests(pa.array([1, 2, 3]))
