"""Test doubles for running SparkSource tasks without the eos runtime, and their checks.

- :class:`LocalResources`: a :class:`~eos.api.WorkerResources` with a real bounded
  thread pool and a shared-object registry; one Spark session (``local[2]``) per
  test process (:func:`spark_resources`).
- :class:`KafkaOffsets`: an offset reader over an offsets topic (read_committed),
  in the runtime's format: key ``[connector, partition]``, value the offset.
- :func:`run_task`: the exactly-once loop of docs/exactly-once.md in miniature: each non-empty
  poll is one transaction holding the records and the latest offset of each source
  partition; ``crash_after`` stops in the middle of a transaction without
  committing, as a SIGKILL would.
"""

from __future__ import annotations

import atexit
import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import pytest

from eos.api import RecordBlock, SourcePartition, SourceRecord, SourceTaskContext
from eos.kafka import ClientConfig, read_to_end
from eos.runtime.resources import SharedResources
from eos.runtime.task.producers import ProducerClient, TaskProducer, make_task_producer
from eos.runtime.task.producers.base import expand_blocks
from services.connectors.spark.task import SparkSourceTask
from tests import spark_cds

T = TypeVar("T")
pytestmark = pytest.mark.integration

SPARK_SETTINGS = {
    "spark.master": "local[2]",
    "spark.app.name": "eos-tests",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.driver.memory": "1g",
    "spark.lakehouse": "delta,iceberg",
    "spark.jdbc.drivers": "postgresql,mariadb",
    "spark.driver.extraJavaOptions": spark_cds.JAVA_OPTIONS,
}


class LocalResources(SharedResources):
    """The worker's own resources (bounded thread pool, shared objects), counting the
    blocking calls; closed when the test process exits."""

    def __init__(self, settings: Mapping[str, str], threads: int = 4) -> None:
        super().__init__(settings, threads)
        self.blocking_calls = 0

    def shared(self, key: str, factory: Callable[[], T], close: Callable[[T], None]) -> T:
        obj = super().shared(key, factory, close)
        if self is _resources:
            # atexit runs the last registered first: close the session before the exit
            # handler its factory registered stops the JVM (not after, on a dead gateway)
            atexit.unregister(self.close)
            atexit.register(self.close)
        return obj

    async def run_blocking(self, func: Callable[..., T], *args: Any) -> T:
        self.blocking_calls += 1
        return await super().run_blocking(func, *args)

    def close(self) -> None:
        anyio.run(self.aclose)


_resources: LocalResources | None = None


def spark_resources() -> LocalResources:
    """The test process's resources; the Spark session starts on first use."""
    global _resources
    if _resources is None:
        warehouse = tempfile.mkdtemp(prefix="eos-spark-warehouse-")
        settings = {
            **SPARK_SETTINGS,
            "spark.sql.warehouse.dir": warehouse,
            "spark.lakehouse.iceberg.warehouse": f"{warehouse}/iceberg",
        }
        _resources = LocalResources(settings, threads=4)
        atexit.register(_resources.close)
    return _resources


def session_of(resources: LocalResources) -> Any:
    from services.connectors.spark.session import worker_session

    return worker_session(resources)


class MemoryOffsets:
    """Offsets kept in a dict (for tests that need no Kafka)."""

    def __init__(self, offsets: Mapping[str, dict[str, Any]] | None = None) -> None:
        self.data: dict[str, dict[str, Any]] = dict(offsets or {})

    async def offset(self, partition: SourcePartition) -> dict[str, Any] | None:
        return self.data.get(json.dumps(partition, sort_keys=True))

    async def offsets(self, partitions: Sequence[SourcePartition]) -> list[dict[str, Any] | None]:
        return [await self.offset(p) for p in partitions]

    def commit(self, records: Sequence[SourceRecord]) -> None:
        for record in records:
            if record.source_offset is not None:
                key = json.dumps(record.source_partition, sort_keys=True)
                self.data[key] = dict(record.source_offset)


class KafkaOffsets:
    def __init__(self, config: ClientConfig, topic: str, connector: str) -> None:
        self._config, self._topic, self._connector = config, topic, connector

    async def offset(self, partition: SourcePartition) -> dict[str, Any] | None:
        return (await self.offsets([partition]))[0]

    async def offsets(self, partitions: Sequence[SourcePartition]) -> list[dict[str, Any] | None]:
        latest: dict[str, dict[str, Any] | None] = {}
        for record in await read_to_end(self._config, self._topic, timeout=30):
            assert record.key is not None
            connector, partition = json.loads(record.key)
            if connector == self._connector:
                key = json.dumps(partition, sort_keys=True)
                latest[key] = None if record.value is None else json.loads(record.value)
        return [latest.get(json.dumps(p, sort_keys=True)) for p in partitions]


def _json(value: Any) -> bytes | None:
    return None if value is None else json.dumps(value, separators=(",", ":")).encode()


def _key(connector: str, partition: SourcePartition) -> bytes:
    return json.dumps([connector, partition], separators=(",", ":")).encode()


class Crash(Exception):
    """Raised inside a transaction to leave it open, as a killed process would."""


class Progress:
    """Lets a test wait until committed work satisfies a condition."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = anyio.Event()

    async def wait_until(self, condition: Callable[[], bool], timeout: float = 60) -> None:
        with anyio.fail_after(timeout):
            while not condition():
                await self._event.wait()


@dataclass
class TaskRun:
    batches: int = 0
    records: int = 0
    partitions: set[str] = field(default_factory=set)
    progress: Progress = field(default_factory=Progress)

    def committed(self, records: int) -> None:
        self.batches += 1
        self.records += records
        self.progress.notify()


async def run_task(
    config: Mapping[str, str],
    *,
    client_config: ClientConfig,
    offsets_topic: str,
    connector: str,
    task_id: int = 0,
    resources: LocalResources | None = None,
    crash_after: int | None = None,
    stop: anyio.Event | None = None,
    run: TaskRun | None = None,
    max_seconds: float = 120,
    producer_client: ProducerClient = "aiokafka",
) -> TaskRun:
    """Run one task until it is idle, or until ``stop`` is set when given; crash (leave
    a transaction open) after ``crash_after`` committed batches. The task writes through
    the task-producer port of ``producer_client``."""
    resources = resources or spark_resources()
    async with anyio.create_task_group() as background:
        reader = KafkaOffsets(client_config, offsets_topic, connector)
        context = SourceTaskContext(connector, task_id, reader, resources, background=background)
        try:
            producer = make_task_producer(
                producer_client,
                client_config,
                per_record=False,
                transactional_id=f"{connector}-{task_id}",
                enable_idempotence=True,
            )
            done = await _run_task(
                config, context, producer, offsets_topic, crash_after, stop, run, max_seconds
            )
        finally:
            background.cancel_scope.cancel()
    return done


async def _run_task(
    config: Mapping[str, str],
    context: SourceTaskContext,
    producer: TaskProducer,
    offsets_topic: str,
    crash_after: int | None,
    stop: anyio.Event | None,
    run: TaskRun | None,
    max_seconds: float,
) -> TaskRun:
    connector = context.connector
    task = SparkSourceTask()
    run = run or TaskRun()
    await producer.start()
    await task.start(config, context)
    try:
        with anyio.fail_after(max_seconds):
            while True:
                records = as_records(await task.poll())
                if stop is not None and stop.is_set():
                    return run
                if not records:
                    if stop is None and task.idle:
                        return run
                    continue
                await producer.begin()
                latest: dict[str, tuple[SourcePartition, Any]] = {}
                for r in records:
                    key = json.dumps(r.source_partition, sort_keys=True)
                    latest[key] = (r.source_partition, r.source_offset)
                    run.partitions.add(key)
                await producer.send(records, _convert, per_record=False)
                await producer.send_offsets(
                    offsets_topic,
                    [(_key(connector, p), _json(offset)) for p, offset in latest.values()],
                )
                if crash_after is not None and run.batches >= crash_after:
                    await producer.flush()
                    raise Crash()
                await producer.commit()
                run.committed(len(records))
    except Crash:
        return run
    finally:
        await task.stop()
        await producer.close()


def _convert(r: SourceRecord) -> tuple[bytes | None, bytes | None]:
    if r.encoded:
        return r.key, r.value
    return _json(r.key), _json(r.value)


def as_records(items: Sequence[SourceRecord | RecordBlock] | None) -> list[SourceRecord]:
    """What a poll returned, with every block replaced by its rows."""
    return expand_blocks(items or [])


def value_of(record: SourceRecord) -> Any:
    """A record's value as JSON data, whether Spark encoded it or not."""
    if record.encoded:
        return None if record.value is None else json.loads(record.value)
    return record.value


async def output(config: ClientConfig, topic: str) -> list[tuple[Any, Any, dict[str, bytes]]]:
    """(key, value, headers) of every committed record of ``topic``, JSON-decoded."""
    return [
        (
            None if r.key is None else json.loads(r.key),
            None if r.value is None else json.loads(r.value),
            dict(r.headers),
        )
        for r in await read_to_end(config, topic, timeout=30)
    ]


# -------------------------------------------------------------- self-checks


async def test_memory_offsets_keep_latest() -> None:
    offsets = MemoryOffsets()
    record = SourceRecord({"file": "a"}, {"row": 3}, "t", None)
    offsets.commit([record, SourceRecord({"file": "a"}, {"row": 4}, "t", None)])
    assert await offsets.offsets([{"file": "a"}, {"file": "b"}]) == [{"row": 4}, None]
