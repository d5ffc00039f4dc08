"""Kafka's default partitioner: murmur2 against the Java client's vectors and kafka-python."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from kafkalog_spark.codec.records.partitioner import default_partitions, murmur2
from kafkalog_spark.errors import InvalidOptionError

# org.apache.kafka.common.utils.UtilsTest#testMurmur2
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    bytes([ord("a"), ord("b"), ord("c")]): 479470107,
}


@pytest.mark.parametrize("key,expected", list(JAVA_VECTORS.items()))
def test_java_utils_test_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_matches_kafka_python_on_random_keys_of_every_tail_length() -> None:
    from kafka.partitioner.default import murmur2 as reference

    rng = random.Random(7)
    keys = [bytes(rng.randrange(256) for _ in range(n)) for n in range(0, 33) for _ in range(8)]
    for key in keys:
        want = reference(key)
        assert murmur2(key) & 0xFFFFFFFF == want & 0xFFFFFFFF, key
    parts, nulls = default_partitions(pa.array(keys, pa.binary()), 12)
    assert nulls == 0
    assert parts.tolist() == [(reference(k) & 0x7FFFFFFF) % 12 for k in keys]


def test_strings_hash_as_utf8_and_sliced_arrays_use_their_offset() -> None:
    keys = pa.array(["ключ", "k1", "", "k2"])
    as_bytes = pa.array([k.encode() for k in keys.to_pylist()], pa.binary())
    assert default_partitions(keys, 5)[0].tolist() == default_partitions(as_bytes, 5)[0].tolist()
    sliced = default_partitions(keys.slice(1, 2), 5)[0].tolist()
    assert sliced == default_partitions(as_bytes, 5)[0].tolist()[1:3]
    chunked = pa.chunked_array([keys.slice(0, 2), keys.slice(2)])
    assert default_partitions(chunked, 5)[0].tolist() == default_partitions(keys, 5)[0].tolist()


def test_null_keys_go_round_robin_from_the_start_given() -> None:
    keys = pa.array([None, b"x", None, None, None], pa.binary())
    parts, nulls = default_partitions(keys, 3, null_start=2)
    assert nulls == 4
    expected_x = (murmur2(b"x") & 0x7FFFFFFF) % 3
    assert parts.tolist() == [2, expected_x, 0, 1, 2]
    all_null = default_partitions(pa.nulls(4), 4, null_start=1)[0]
    assert all_null.tolist() == [1, 2, 3, 0]
    assert parts.dtype == np.int32


def test_bad_partition_counts_and_key_types() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(InvalidOptionError, match="numPartitions"):
            default_partitions(pa.array([b"a"]), bad)
    with pytest.raises(InvalidOptionError, match="key column"):
        default_partitions(pa.array([1, 2]), 3)
