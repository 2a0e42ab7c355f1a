"""Small helpers shared by integration tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from aiokafka import AIOKafkaProducer, TopicPartition

from eos.kafka import ClientConfig, make_consumer, make_producer, read_to_end
from eos.runtime.task.partitioner import murmur2
from eos.storage.offset_log import decode_offset_record


@asynccontextmanager
async def producer(config: ClientConfig, **kwargs: object) -> AsyncIterator[AIOKafkaProducer]:
    p = make_producer(config, **kwargs)
    await p.start()
    try:
        yield p
    finally:
        await p.stop()


async def committed_values(config: ClientConfig, topic: str, timeout: float = 30) -> list[bytes]:
    """Every value a read_committed reader sees in ``topic``."""
    return [r.value for r in await read_to_end(config, topic, timeout=timeout)]


async def wait_committed(
    config: ClientConfig, topic: str, count: int, timeout: float = 15
) -> list[bytes]:
    """The committed values of ``topic`` once there are at least ``count``."""
    with anyio.fail_after(timeout):
        while len(values := await committed_values(config, topic)) < count:  # noqa: ASYNC110 - polls Kafka
            await anyio.sleep(0.2)
    return values


async def committed_offsets(config: ClientConfig, offsets_topic: str, name: str) -> list[Any]:
    """Every committed offset of connector ``name``, in commit order."""
    return [
        e[2]
        for r in await read_to_end(config, offsets_topic)
        if (e := decode_offset_record(r.key, r.value)) is not None and e[0] == name
    ]


def key_partition(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner (the Java client's): where a keyed record lands."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


async def read_uncommitted(config: ClientConfig, topic: str) -> list[Any]:
    """Every value in the log of ``topic`` (one partition), aborted ones included."""
    consumer = make_consumer(
        config,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_uncommitted",
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        values: list[Any] = []
        with anyio.fail_after(10):
            while await consumer.position(tp) < end:
                for record in (await consumer.getmany(tp, timeout_ms=100)).get(tp, []):
                    values.append(json.loads(record.value))
        return values
    finally:
        await consumer.stop()
