"""What the ``mode=jdbc`` tests share: configs for the test PostgreSQL, a task run
in-process with its background stage, and polling a task until it has read all."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc

from eos.api import SourceRecord, SourceTaskContext
from services.connectors.spark.task import SparkSourceTask
from tests.integration.test_spark_harness import MemoryOffsets, as_records, spark_resources
from tests.postgres_server import PASSWORD, USER, PostgresServer


def jdbc_config(postgres: PostgresServer, database: str, **extra: str) -> dict[str, str]:
    """A SparkSource ``mode=jdbc`` config for ``database`` (``extra`` as settings:
    ``jdbc_mode="bulk"`` is ``jdbc.mode=bulk``)."""
    return {
        "mode": "jdbc",
        "connection.url": postgres.url(database),
        "connection.user": USER,
        "connection.password": PASSWORD,
        "topic.prefix": "t-",
        "poll.interval.ms": "100",
        "lineage.headers": "true",
        **{k.replace("_", "."): v for k, v in extra.items()},
    }


class Background:
    """``context.start_soon`` as the runtime gives it: a failure is kept, not raised."""

    def __init__(self, group: anyio.abc.TaskGroup) -> None:
        self._group = group
        self.failed: Exception | None = None
        self.failure = anyio.Event()

    def start_soon(self, func: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        async def guarded() -> None:
            try:
                await func(*args)
            except Exception as exc:
                self.failed = exc
                self.failure.set()

        self._group.start_soon(guarded)


@asynccontextmanager
async def running_task(
    config: Mapping[str, str], offsets: MemoryOffsets | None = None
) -> AsyncIterator[tuple[SparkSourceTask, MemoryOffsets, Background]]:
    """A started SparkSource task on the test process's Spark session (an error of its
    start or of the body is raised as it is, not in an exception group)."""
    offsets = offsets if offsets is not None else MemoryOffsets()
    try:
        async with anyio.create_task_group() as group:
            background = Background(group)
            task = SparkSourceTask()
            context = SourceTaskContext("c", 0, offsets, spark_resources(), background=background)
            await task.start(config, context)
            try:
                yield task, offsets, background
            finally:
                await task.stop()
                group.cancel_scope.cancel()
    except BaseExceptionGroup as group_error:
        if len(group_error.exceptions) == 1:
            raise group_error.exceptions[0] from None
        raise


async def read_all(
    task: SparkSourceTask, offsets: MemoryOffsets, background: Background, timeout: float = 60
) -> list[SourceRecord]:
    """Every record the task delivers until it is idle, committed to ``offsets`` poll by poll."""
    got: list[SourceRecord] = []
    with anyio.fail_after(timeout):
        while True:
            if background.failed is not None:
                raise background.failed
            records = as_records(await task.poll())
            offsets.commit(records)
            got += records
            if not records and task.idle:
                return got


async def failure_of(background: Background, task: SparkSourceTask, timeout: float = 60) -> str:
    """The message the task's background stage failed with (polling meanwhile)."""
    with anyio.fail_after(timeout):
        while background.failed is None:
            await task.poll()
    return str(background.failed)


def committed(bootstrap: str, topic: str, timeout: float = 60) -> list[tuple[int, Any, Any]]:
    """(partition, key, value) of every record of ``topic`` a read_committed
    confluent-kafka consumer sees (a client the worker does not use), JSON-decoded, in
    each partition's order; reads until every partition's position reaches its end."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in partitions}  # fmt: skip
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        got: list[tuple[int, Any, Any]] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=0.5):
                if message.error() is None:
                    key, value = message.key(), message.value()
                    got.append((message.partition() or 0, _json(key), _json(value)))
            positions = consumer.position([TopicPartition(topic, p) for p in partitions])
            if all(tp.offset >= ends[tp.partition] for tp in positions if ends[tp.partition]):
                return got
        raise AssertionError(f"{topic} not read to its end ({ends}) within {timeout}s")
    finally:
        consumer.close()


def _json(data: bytes | None) -> Any:
    return None if data is None else json.loads(data)


def end_offsets(bootstrap: str, topic: str) -> int:
    """The sum of ``topic``'s partitions' end offsets (records and markers, committed or not)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in partitions
        )
    finally:
        consumer.close()
