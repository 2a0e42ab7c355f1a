"""Fakes for the task runners' unit tests: a scripted producer implementing the producer
port (:mod:`eos.runtime.task.producers.base`) over an in-memory "broker" that keeps only what
was committed, an offset reader reading that broker back, a scripted source of numbered
records, and an observer that remembers what it was told. No I/O, no sleeping."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from eos.api import RecordBlock, RecordMetadata, SourceRecord, SourceTask, SourceTaskContext
from eos.converters import JsonConverter
from eos.kafka.clients import ClientConfig
from eos.runtime.clock import ManualClock
from eos.runtime.observer import AbortReason, FailureOutcome, NullTaskObserver
from eos.runtime.resources import SharedResources
from eos.runtime.task.exactly_once_task import boundary_policy
from eos.runtime.task.producers import base as port
from eos.runtime.task.source_task import TaskDeps
from eos.state import State

OFFSETS_TOPIC = "offsets"
TOPIC = "out"


@dataclass
class Written:
    """A committed record as a reader sees it."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass
class Broker:
    """What a read_committed reader sees: committed records and offsets records."""

    records: list[tuple[str, bytes | None]] = field(default_factory=list)
    written: list[Written] = field(default_factory=list)
    """The committed records with their keys and headers too."""
    offsets: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    transactions: int = 0

    def values(self) -> list[Any]:
        return [json.loads(value) for _, value in self.records if value is not None]

    def offset(self, partition: Mapping[str, Any]) -> Any:
        """The latest committed offset of ``partition`` (any connector), or None."""
        latest = None
        for key, value in self.offsets:
            if json.loads(key)[1] == partition and value is not None:
                latest = json.loads(value)
        return latest


class _Sent:
    def __init__(self, offset: int) -> None:
        self.offset = offset

    def metadata(self) -> RecordMetadata | None:
        return RecordMetadata(TOPIC, 0, self.offset, None)


class FakeProducer:
    """The task-producer port, scripted: ``fail[call]`` raises at the next ``call``,
    ``slow[call]`` moves the clock on while it runs;
    ``reject`` names record values the broker rejects (their send fails at the flush of
    the commit, before EndTxn, as the real producers do). ``calls`` is the call log."""

    client: port.ProducerClient = "aiokafka"

    def __init__(self, broker: Broker, clock: ManualClock, fixed: Mapping[str, Any]) -> None:
        self.broker = broker
        self.clock = clock
        self.fixed = dict(fixed)
        self.calls: list[str] = []
        self.fail: dict[str, BaseException] = {}
        self.slow: dict[str, float] = {}
        """Seconds the clock moves on while a call runs (a slow commit, say)."""
        self.reject: set[Any] = set()
        self._open: list[tuple[str, bytes | None]] = []
        self._open_full: list[Written] = []
        self._offsets: port.OffsetRecords = []
        self._failed: port.SendFailed | None = None
        self.in_transaction = False

    def _step(self, call: str) -> None:
        self.calls.append(call)
        self.clock.advance(self.slow.get(call, 0.0))
        error = self.fail.pop(call, None)
        if error is not None:
            raise error

    async def start(self) -> None:
        self._step("start")

    async def begin(self) -> None:
        self._step("begin")
        assert not self.in_transaction, "begin inside a transaction"
        self.in_transaction = True

    async def send(
        self, items: Sequence[port.Outgoing], convert: port.Convert, *, per_record: bool
    ) -> port.SegmentSent:
        self._step(f"send {len(items)}")
        sent = port.SegmentSent()
        for item in items:
            if isinstance(item, RecordBlock):  # encoded rows
                assert item.encoded
                assert not per_record
                for row in item.records():
                    self._queue(row, row.key, row.value)
                continue
            pair = convert(item)
            if pair is None:
                continue
            key, value = pair
            sent.nbytes += len(value or b"")
            if item.value in self.reject and self._failed is None:
                self._failed = port.SendFailed(item, RuntimeError("MessageSizeTooLargeError"))
            if per_record:
                sent.records.append((item, _Sent(len(self.broker.records) + len(self._open))))
            self._queue(item, key, value)
        return sent

    def _queue(self, record: SourceRecord, key: bytes | None, value: bytes | None) -> None:
        self._open.append((record.topic, value))
        self._open_full.append(Written(record.topic, key, value, list(record.headers)))

    def check(self) -> None:
        error = self.fail.pop("check", None)
        if error is not None:
            raise error

    async def flush(self) -> None:
        self._step("flush")
        if self._failed is not None:
            failed, self._failed = self._failed, None
            raise failed
        if not self.in_transaction:  # at-least-once: what is acknowledged is written
            self._deliver()
            self._open, self._open_full, self._offsets = [], [], []

    async def send_offsets(self, topic: str, records: port.OffsetRecords) -> None:
        assert topic == OFFSETS_TOPIC
        self._step("send_offsets")
        self._offsets += records

    async def commit(self) -> None:
        await self.flush()  # a rejected batch fails the commit before EndTxn
        self._step("end_txn commit")
        self._deliver()
        self.broker.transactions += 1
        self._end()

    def _deliver(self) -> None:
        self.broker.records += self._open
        self.broker.written += self._open_full
        self.broker.offsets += self._offsets

    async def abort(self) -> None:
        self._step("end_txn abort")
        self._end()

    def _end(self) -> None:
        self._open, self._open_full, self._offsets, self._failed = [], [], [], None
        self.in_transaction = False

    async def close(self) -> None:
        self.calls.append("close")

    def stats(self) -> port.ProducerStats:
        """What reached the broker, as the client's figures."""
        return port.ProducerStats(records_sent=len(self.broker.records), requests=len(self.calls))


class BrokerOffsets:
    """The offset reader: answers from what the broker committed (at the last refresh)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.refreshes = 0

    async def refresh(self, timeout: float | None = None) -> None:
        self.refreshes += 1

    async def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.broker.offset(partition)
        return found

    async def offsets(self, partitions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any] | None]:
        return [await self.offset(p) for p in partitions]


PARTITION = {"p": 0}

Poll = Callable[["Source", int, SourceTaskContext], list[SourceRecord] | None]
"""A scripted poll: (source, next record number, context) → records (None: nothing)."""


class Source:
    """An external system of numbered records on one source partition, read ``batch`` at
    a time from the committed offset; ``on_poll`` may act (advance the clock, ask for a
    boundary) and ``stop`` is called once every record was polled."""

    def __init__(self, count: int, batch: int = 3) -> None:
        self.count = count
        self.batch = batch
        self.starts: list[int] = []
        """The record number each task instance started from."""
        self.on_poll: Callable[[int, SourceTaskContext, list[SourceRecord]], None] | None = None
        self.stop: Callable[[], None] = lambda: None
        self.committed: list[Any] = []
        """``commit_record`` calls (values), in order."""

    def task_class(self) -> type[SourceTask]:
        source = self

        class Task(SourceTask):
            async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
                self.context = context
                offset = await context.offset_reader.offset(PARTITION)
                self.next = 0 if offset is None else offset["n"] + 1
                source.starts.append(self.next)

            async def poll(self) -> list[SourceRecord] | None:
                if self.next >= source.count:
                    source.stop()
                    return None
                end = min(self.next + source.batch, source.count)
                records = [
                    SourceRecord(PARTITION, {"n": n}, TOPIC, n) for n in range(self.next, end)
                ]
                self.next = end
                if source.on_poll is not None:
                    source.on_poll(end, self.context, records)
                return records

            async def commit_record(self, record: SourceRecord, metadata: Any) -> None:
                source.committed.append(record.value)

            async def stop(self) -> None:
                pass

        return Task


class Batches:
    """A connector whose task polls the given batches once each, in order, then calls
    ``stop`` (set it to the runner's ``request_stop``)."""

    def __init__(self, *batches: Sequence[Any]) -> None:
        self.batches = list(batches)
        self.stop: Any = lambda: None

    def task_class(self) -> type[SourceTask]:
        source = self

        class Task(SourceTask):
            async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
                pass

            async def poll(self) -> Sequence[Any] | None:
                if not source.batches:
                    source.stop()
                    return None
                return source.batches.pop(0)

            async def stop(self) -> None:
                pass

        return Task


class Observer(NullTaskObserver):
    def __init__(self) -> None:
        self.committed: list[int] = []
        self.aborted: list[tuple[int, AbortReason]] = []
        self.fenced = 0
        self.commit_failures = 0
        self.dropped = 0
        self.failures: list[tuple[str, str]] = []

    def transaction_committed(
        self, records: int, commit_seconds: float, open_seconds: float
    ) -> None:
        self.committed.append(records)

    def transaction_aborted(self, records: int, reason: AbortReason) -> None:
        self.aborted.append((records, reason))

    def offset_commit_failed(self) -> None:
        self.commit_failures += 1

    def records_dropped(self, records: int) -> None:
        self.dropped += records

    def record_failed(self, stage: str, outcome: FailureOutcome) -> None:
        self.failures.append((stage, outcome))

    def producer_fenced(self) -> None:
        self.fenced += 1


@dataclass
class Harness:
    """One task's world: broker, producer(s), clock, statuses, observer."""

    broker: Broker = field(default_factory=Broker)
    clock: ManualClock = field(default_factory=ManualClock)
    observer: Observer = field(default_factory=Observer)
    statuses: list[tuple[State, str | None]] = field(default_factory=list)
    producers: list[FakeProducer] = field(default_factory=list)
    script: Callable[[FakeProducer], None] = lambda producer: None
    """Applied to each producer the task creates (to script failures)."""

    @property
    def producer(self) -> FakeProducer:
        return self.producers[-1]

    def make_producer(
        self, client: port.ProducerClient, config: ClientConfig, *, per_record: bool, **fixed: Any
    ) -> FakeProducer:
        producer = FakeProducer(self.broker, self.clock, fixed)
        self.script(producer)
        self.producers.append(producer)
        return producer

    async def status(self, state: State, trace: str | None) -> None:
        self.statuses.append((state, trace))

    def deps(
        self,
        boundary: Literal["poll", "interval", "connector"] = "poll",
        interval_ms: int = 1000,
        **more: Any,
    ) -> TaskDeps:
        settings: dict[str, Any] = {
            "client_config": ClientConfig({}),
            "group_id": "g",
            "offsets_topic": OFFSETS_TOPIC,
            "offset_reader": BrokerOffsets(self.broker),
            "key_converter": JsonConverter(),
            "value_converter": JsonConverter(),
            "status": self.status,
            "resources": SharedResources({}, 1),
            "graceful_timeout": 1.0,
            "flush_interval_ms": 1000,
            "transaction_timeout_ms": 60000,
            "boundary": boundary_policy(boundary, interval_ms, self.clock),
            "observer": self.observer,
            "clock": self.clock,
            "make_producer": self.make_producer,
        }
        settings.update(more)
        return TaskDeps(**settings)

    def states(self) -> list[State]:
        return [state for state, _ in self.statuses]
