"""Kafka's default partitioner: the murmur2 hash the Java client uses."""

from __future__ import annotations

import random

import pytest
from aiokafka.partitioner import murmur2 as aiokafka_murmur2

from eos.runtime.sending import KeyPartitioner, murmur2

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
