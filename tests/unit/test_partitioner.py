"""Kafka's default partitioner: the murmur2 hash the Java client uses."""

from __future__ import annotations

import random

import pytest
from aiokafka.partitioner import murmur2 as aiokafka_murmur2

from eos.runtime.task.partitioner import KeyPartitioner, murmur2, murmur2_many

# Kafka's own test vectors (clients UtilsTest.testMurmur2), signed 32-bit as Java has them
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), JAVA_VECTORS.items())
def test_murmur2_matches_kafka(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected & 0xFFFFFFFF


def test_murmur2_matches_aiokafka_for_every_length() -> None:
    rng = random.Random(7)
    for length in range(300):
        data = rng.randbytes(length)
        assert murmur2(data) == aiokafka_murmur2(data), length


def test_partition_is_positive_hash_modulo_count() -> None:
    partitioner = KeyPartitioner()
    partitions = [0, 1, 2, 3, 4, 5]
    for key in JAVA_VECTORS:
        expected = (murmur2(key) & 0x7FFFFFFF) % 6
        assert partitioner.partition(key, partitions) == expected
        assert partitioner.partition(key, partitions) == expected  # cached


def test_many_keys_hash_like_one_at_a_time() -> None:
    rng = random.Random(11)
    keys = [rng.randbytes(rng.randrange(300)) for _ in range(3000)]
    keys += [str(i).encode() for i in range(10_000)] + list(JAVA_VECTORS)
    assert murmur2_many(keys) == [murmur2(key) for key in keys]


def test_partitions_of_a_key_column() -> None:
    partitioner = KeyPartitioner()
    keys: list[bytes | None] = [None if i % 5 == 0 else str(i).encode() for i in range(500)]
    for partitions in ([0, 1, 2], [0, 1, 2, 3, 4, 5, 6], [2, 5, 9]):
        expected = [-1 if k is None else partitioner.partition(k, partitions) for k in keys]
        assert partitioner.partitions(keys, partitions) == expected
        every = [k for k in keys if k is not None]  # no None: the modulo in numpy
        assert partitioner.partitions(every, partitions) == [p for p in expected if p >= 0]
