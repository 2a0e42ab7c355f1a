"""The source task actor: one connector task, one producer, one loop.

The loop is written once, as a template with named steps::

    start-up → task.start → RUNNING
    loop until stopped:
        prepare_to_poll()                       (interval commits / periodic flushes)
        poll()                                  (cancelled when a stop is requested)
        convert each record, send the batch         (record_boundary splits it)
        batch_dispatched()                      (batch boundary)
    final_commit()                              (bounded by the graceful-shutdown deadline)
    task.stop → producer closed

:class:`AtLeastOnceTask` (``exactly.once.source.support`` = disabled or
preparing) sends with an idempotent producer and flushes offsets periodically.
:class:`~eos.runtime.exactly_once_task.ExactlyOnceTask` overrides the steps to
send inside transactions and commit offsets in the same transaction.

Errors: a fenced producer (:class:`~eos.errors.FencedError`) means this
instance is a zombie: it stops at once, commits nothing and writes no status.
Any other error fails the task (status FAILED with the message), after the
open transaction is aborted where possible.
"""

from __future__ import annotations

import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import anyio.abc
import anyio.lowlevel
import structlog

from eos.api import RecordBlock, SourceRecord, SourceTask, SourceTaskContext
from eos.errors import ConversionError, EosError, FencedError, TaskError
from eos.kafka.clients import ClientConfig
from eos.runtime.boundaries import Action
from eos.runtime.clock import Clock, SystemClock
from eos.runtime.converters import Converter
from eos.runtime.observer import AbortReason, NullTaskObserver, TaskObserver
from eos.runtime.producers import (
    ProducerClient,
    SendFailed,
    Sent,
    TaskProducer,
    make_task_producer,
)
from eos.runtime.resources import SharedResources
from eos.runtime.sending import Outgoing, count_records, expand_blocks, where
from eos.state import State
from eos.storage.offset_log import CombinedOffsetReader, OffsetBatch

StatusSink = Callable[[State, str | None], Awaitable[None]]
"""Writes this task's status: (state, trace)."""
Explain = Callable[[BaseException], Awaitable[BaseException]]

OffsetsCommitted = Callable[[list[tuple[bytes, bytes | None]]], None]
"""Receives the offset records of each commit (the offset mirror); must not block."""

TopicDiscovered = Callable[[str], None]
"""Receives each topic the task writes to, the first time it does (KIP-558 active
topics); must not block (it is called on the send path)."""


class StartGate(Protocol):
    """The start-up checks of an exactly-once task (docs/exactly-once.md, "Starting a
    task"), done by the worker."""

    async def before_producer(self, connector: str, generation: int) -> bool:
        """Fencing round, config read, task-count check, offsets topic. False: abandon."""

    async def after_producer(self, connector: str, generation: int) -> bool:
        """Config read after the producer exists: False if a new generation appeared."""

    async def offsets_topic(self) -> None:
        """Create the connector's own offsets topic, if it has one and it is missing."""


@dataclass(frozen=True)
class TaskSpec:
    connector: str
    task_id: int
    generation: int
    config: Mapping[str, str]

    @property
    def transactional_id_suffix(self) -> str:
        return f"{self.connector}-{self.task_id}"


@dataclass
class TaskDeps:
    """What the worker gives a task actor (frozen settings and its collaborators)."""

    client_config: ClientConfig
    group_id: str
    offsets_topic: str
    offset_reader: CombinedOffsetReader
    key_converter: Converter
    value_converter: Converter
    status: StatusSink
    resources: SharedResources
    graceful_timeout: float
    flush_interval_ms: int
    transaction_timeout_ms: int
    producer_client: ProducerClient = "aiokafka"
    boundary: str = "poll"
    boundary_interval_ms: int = 10_000
    gate: StartGate | None = None
    offsets_committed: OffsetsCommitted | None = None
    topic_discovered: TopicDiscovered | None = None
    observer: TaskObserver = field(default_factory=NullTaskObserver)
    clock: Clock = field(default_factory=SystemClock)
    startup_slots: anyio.CapacityLimiter | None = None
    """Shared by the worker's tasks: how many go through :meth:`startup` at once."""
    batch_size: int = 262144
    """The producer's ``batch.size`` unless the user set one (sized by the worker from
    its task count: docs/sizing.md)."""
    explain: Explain | None = None
    """Turns a failure into the error the status shows (an authorization error becomes
    the ACLs that are missing: :func:`eos.acls.denied.explain`)."""


@dataclass
class InFlight:
    """What was sent since the last commit: the latest offset per source partition,
    the record count, and, only for tasks that override ``commit_record``, every
    record with where it went."""

    offsets: OffsetBatch
    count: int = 0
    records: list[tuple[SourceRecord, Sent]] = field(default_factory=list)
    opened_at: float | None = None

    def __len__(self) -> int:
        return self.count


class SourceTaskRunner(ABC):
    """The template. Subclasses implement the steps; the control flow lives here."""

    def __init__(self, spec: TaskSpec, deps: TaskDeps, task: SourceTask) -> None:
        self.spec = spec
        self.deps = deps
        self.task = task
        self.log = structlog.get_logger(__name__).bind(
            connector=spec.connector, task=spec.task_id, generation=spec.generation
        )
        self.stopped = anyio.Event()
        self.state = State.UNASSIGNED
        self._stop_requested = False
        self._wait_scope: anyio.CancelScope | None = None  # start-up or poll: what a stop ends
        self._producer: TaskProducer | None = None
        self._inflight = self.new_inflight()
        # Per-record bookkeeping only for tasks that want commit_record calls.
        self._per_record = type(task).commit_record is not SourceTask.commit_record
        self._background_error: Exception | None = None
        self._topics: set[str] = set()
        """Topics this run has written to (checked, and reported to ``topic_discovered``)."""

    # ------------------------------------------------------------------ control

    def request_stop(self) -> None:
        """Ask the loop to stop after the current step; interrupts start-up (whose
        checks may wait for the coordinator) and a waiting poll."""
        self._stop_requested = True
        if self._wait_scope is not None:
            self._wait_scope.cancel()

    async def run(self) -> None:
        """Run until stopped or failed. Failures become status, never exceptions."""
        try:
            await self._run()
        except FencedError as exc:
            self.deps.observer.producer_fenced()
            self.log.warning("task fenced: a newer instance owns it; stopping", reason=str(exc))
        except Exception as exc:
            await self._fail(exc)
        finally:
            self.stopped.set()

    async def _run(self) -> None:
        try:
            with anyio.CancelScope() as scope:
                self._wait_scope = scope
                if self._stop_requested:
                    scope.cancel()
                started = await self._startup_in_turn()
            self._wait_scope = None
        except BaseException:
            await self._shielded(self._close_producer(), "producer close")
            raise
        if scope.cancelled_caught or not started:
            await self._shielded(self._close_producer(), "producer close")
            why = "stop requested" if scope.cancelled_caught else "a newer task generation exists"
            self.log.info("start-up abandoned", reason=why)
            return
        try:
            # The task's background coroutines (context.start_soon) live in this group:
            # cancelled once task.stop() returned; their failures reach the loop.
            async with anyio.create_task_group() as background:
                await self._run_task(_Background(self, background))
                background.cancel_scope.cancel()
        except BaseExceptionGroup as group:  # only the body raises: unwrap it
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise

    async def _startup_in_turn(self) -> bool:
        slots = self.deps.startup_slots
        if slots is None:
            return await self.startup()
        async with slots:
            return await self.startup()

    def background_failed(self, exc: Exception) -> None:
        """A background coroutine of the task raised: the loop fails with ``exc``."""
        if self._background_error is None:
            self._background_error = exc
        if self._wait_scope is not None:
            self._wait_scope.cancel()

    def _raise_background_error(self) -> None:
        if self._background_error is not None:
            raise self._background_error

    async def _run_task(self, background: _Background) -> None:
        context = SourceTaskContext(
            connector=self.spec.connector,
            task_id=self.spec.task_id,
            offset_reader=self.deps.offset_reader,
            resources=self.deps.resources,
            transaction_context=self.transaction_context(),
            background=background,
            events=self.deps.observer.task_event,
        )
        try:
            await self.deps.offset_reader.refresh()
            await self.task.start(self.spec.config, context)
            await self._set_state(State.RUNNING)
            await self._loop()
            self._raise_background_error()
            await self._shielded(self.final_commit(), "final commit")
            await self._set_state(State.UNASSIGNED)
        except FencedError:
            raise
        except anyio.get_cancelled_exc_class():
            await self._shielded(self.abandon("shutdown"), "abort at hard stop")
            raise
        except BaseException:
            await self._shielded(self.abandon("error"), "abort after failure")
            raise
        finally:
            await self._shielded(self.task.stop(), "task stop")
            await self._shielded(self._close_producer(), "producer close")

    async def _loop(self) -> None:
        while not self._stop_requested:
            self._raise_background_error()
            await self.prepare_to_poll()
            batch = await self._poll()
            self._raise_background_error()
            if not batch:
                continue
            await self._dispatch(batch)
            await self.batch_dispatched()

    async def _poll(self) -> Sequence[Outgoing] | None:
        started = time.perf_counter()
        with anyio.CancelScope() as scope:
            self._wait_scope = scope
            if self._stop_requested:
                scope.cancel()
            try:
                batch = await self.task.poll()
            except Exception as exc:
                # A failing background coroutine may have ended what poll waited on
                # (e.g. closed its stream) before its own error was recorded.
                with anyio.CancelScope(shield=True):
                    await anyio.lowlevel.checkpoint()
                if self._background_error is not None:
                    raise self._background_error from exc
                raise
            self.deps.observer.poll_completed(
                count_records(batch or ()), time.perf_counter() - started
            )
            return batch
        return None  # cancelled by request_stop or a background failure

    async def _dispatch(self, batch: Sequence[Outgoing]) -> None:
        """Convert and send a poll batch; a record-level boundary splits it."""
        if not self.record_boundaries:
            await self._send(batch)
            return
        start = 0
        for n, record in enumerate(batch):
            action = self.record_boundary(record)
            if action is not None:
                await self._send(batch[start : n + 1])
                start = n + 1
                await self.act(action)
        if start < len(batch):
            await self._send(batch[start:])

    def _check_topic(self, topic: str) -> None:
        """Refuse the offsets topic; report a topic the first time (per record or block:
        a set lookup, all it costs once the topic is known)."""
        if topic in self._topics:
            return
        if topic == self.deps.offsets_topic:
            raise TaskError(
                f"a record is addressed to the offsets topic {topic!r} of this task; "
                "that would block reading the offsets back: write to another topic"
            )
        self._topics.add(topic)
        if self.deps.topic_discovered is not None:
            self.deps.topic_discovered(topic)

    def forget_topics(self, keep: Callable[[str], bool]) -> None:
        """Forget the topics ``keep`` rejects (their active-topic record was reset), so that
        the next record to one of them reports it again."""
        self._topics = {topic for topic in self._topics if keep(topic)}

    def _convert(self, record: SourceRecord) -> tuple[bytes | None, bytes | None]:
        self._check_topic(record.topic)
        if record.encoded:
            key, value = record.key, record.value
            if (key is None or type(key) is bytes) and (value is None or type(value) is bytes):
                return key, value
            raise ConversionError(
                f"{where(record)} is marked encoded but its key or value is not bytes "
                f"(key {type(key).__name__}, value {type(value).__name__})"
            )
        try:
            key = self.deps.key_converter.convert(record.topic, record.key)
            value = self.deps.value_converter.convert(record.topic, record.value)
        except Exception as exc:
            raise ConversionError(f"{where(record)} could not be converted: {exc}") from exc
        return key, value

    def _check_sent(self) -> None:
        """Raise for a send that already failed (the producer keeps queuing after a fatal
        error, e.g. a transaction the broker aborted; only its delivery reports say so)."""
        assert self._producer is not None
        try:
            self._producer.check()
        except SendFailed as failed:
            raise self.send_error(failed.item, failed.cause) from failed.cause
        except FencedError as exc:
            raise self.fenced_error(exc) from exc

    async def wait_sent(self) -> None:
        """Wait until every record sent is acknowledged; raise for the first failure."""
        assert self._producer is not None
        try:
            await self._producer.flush()
        except SendFailed as failed:
            raise self.send_error(failed.item, failed.cause) from failed.cause

    def send_error(self, record: Outgoing, error: BaseException) -> EosError:
        """The error a failed send becomes: fenced (a zombie, or a timed-out transaction)
        or a failure naming the record."""
        if isinstance(error, FencedError):
            return self.fenced_error(error)
        return ConversionError(f"{where(record)} could not be sent: {error!r}")

    async def _send(self, segment: Sequence[Outgoing]) -> None:
        assert self._producer is not None
        self._check_sent()
        await self.prepare_to_send()
        items = segment
        blocks = [item for item in items if type(item) is RecordBlock]
        for block in blocks:
            for topic in {block.topic} if block.topics is None else set(block.topics):
                self._check_topic(topic)
        if blocks and self._per_record:  # commit_record takes records: one per row
            segment = expand_blocks(items)
        try:
            sent = await self._producer.send(segment, self._convert, per_record=self._per_record)
        except SendFailed as failed:
            raise self.send_error(failed.item, failed.cause) from failed.cause
        count = count_records(segment) if blocks else len(segment)
        self.deps.observer.records_written(count, sent.nbytes)
        inflight = self._inflight
        if inflight.opened_at is None:
            inflight.opened_at = self.deps.clock.monotonic()
        inflight.count += count
        inflight.records += sent.records
        offsets = inflight.offsets
        for record in items:  # in order: the last offset of a partition wins
            if record.source_offset is not None:
                offsets.add(record.source_partition, record.source_offset)

    def new_inflight(self) -> InFlight:
        return InFlight(OffsetBatch(self.spec.connector))

    # ---------------------------------------------------------------- steps

    @abstractmethod
    async def startup(self) -> bool:
        """Create the producer (and run start-up checks). False: abandon start-up."""

    def transaction_context(self) -> Any:
        return None

    @abstractmethod
    async def prepare_to_poll(self) -> None: ...

    async def prepare_to_send(self) -> None:
        """Before records are sent (exactly-once: opens the transaction)."""

    record_boundaries = False
    """Whether :meth:`record_boundary` may split a poll batch (else it is not asked)."""

    def record_boundary(self, record: Outgoing) -> Action | None:
        """A boundary requested right after ``record`` (exactly-once, connector-defined)."""
        return None

    async def act(self, action: Action) -> None:
        """Commit or abort at a record-level boundary."""

    @abstractmethod
    async def batch_dispatched(self) -> None: ...

    @abstractmethod
    async def final_commit(self) -> None: ...

    @abstractmethod
    async def abandon(self, reason: AbortReason) -> None:
        """Give up what is in flight (abort the open transaction if there is one)."""

    def fenced_error(self, exc: BaseException) -> EosError:
        return FencedError(f"producer fenced: {exc}")

    # -------------------------------------------------------------- helpers

    async def _start_producer(self, **fixed: Any) -> None:
        config = self.deps.client_config
        # Defaults for task producers (overridable with producer.override.*): a commit
        # flushes anyway, so a short linger only fills batches, it adds no latency;
        # large batches cost less CPU per record here and on the broker.
        defaults = {"linger.ms": "5", "batch.size": str(self.deps.batch_size)}
        config = config.with_overrides(producer={**defaults, **config.producer})
        producer = make_task_producer(
            self.deps.producer_client, config, per_record=self._per_record, **fixed
        )
        self._producer = producer
        try:
            await producer.start()
        except FencedError as exc:
            raise self.fenced_error(exc) from exc

    async def _close_producer(self) -> None:
        if self._producer is not None:
            producer, self._producer = self._producer, None
            try:
                await producer.close()
            except Exception as exc:
                self.log.debug("producer close failed", error=repr(exc))

    async def _shielded(self, step: Awaitable[None], what: str) -> None:
        """Run a clean-up step shielded from cancellation, within the graceful timeout."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.deps.graceful_timeout) as s:
            await step
        if s.cancelled_caught:
            self.log.warning("clean-up step timed out", step=what)

    async def notify_committed(self, committed: InFlight) -> None:
        """After a commit: ``commit_record`` for each record, then ``commit``."""
        # ``records`` is empty when the task keeps the no-op default: same outcome.
        for record, sent in committed.records:
            metadata = sent.metadata()
            try:
                await self.task.commit_record(record, metadata)
            except Exception as exc:
                self.log.warning("commit_record raised", error=repr(exc))
        try:
            await self.task.commit()
        except Exception as exc:
            self.log.warning("task commit raised", error=repr(exc))
        if self.deps.offsets_committed is not None and committed.offsets:
            self.deps.offsets_committed(committed.offsets.records())

    async def _set_state(self, state: State, trace: str | None = None) -> None:
        self.state = state
        self.deps.observer.state_changed(state)
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.deps.graceful_timeout):
            await self.deps.status(state, trace)

    async def _fail(self, exc: BaseException) -> None:
        if self.deps.explain is not None:
            exc = await self.deps.explain(exc)
        trace = "".join(traceback.format_exception(exc))
        self.log.error("task failed", error=str(exc))
        await self._set_state(State.FAILED, f"{exc}\n\n{trace}")


class _Background:
    """``context.start_soon`` of a task: coroutines in the runner's task group whose
    exceptions fail the task through its loop instead of tearing the group down."""

    def __init__(self, runner: SourceTaskRunner, group: anyio.abc.TaskGroup) -> None:
        self._runner = runner
        self._group = group

    def start_soon(self, func: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        self._group.start_soon(self._guarded, func, args, name=getattr(func, "__name__", None))

    async def _guarded(
        self, func: Callable[..., Coroutine[Any, Any, Any]], args: tuple[Any, ...]
    ) -> None:
        try:
            await func(*args)
        except Exception as exc:
            self._runner.log.error("background work of the task failed", error=repr(exc))
            self._runner.background_failed(exc)


class AtLeastOnceTask(SourceTaskRunner):
    """Idempotent producer; offsets flushed every ``offset.flush.interval.ms``
    after every record they cover was acknowledged. A crash between a send and
    the next flush replays records (duplicates, never gaps)."""

    _last_flush: float = 0.0

    async def startup(self) -> bool:
        if self.deps.gate is not None:
            await self.deps.gate.offsets_topic()
        await self._start_producer(enable_idempotence=True, transactional_id=None)
        self._last_flush = self.deps.clock.monotonic()
        return True

    async def prepare_to_poll(self) -> None:
        interval = self.deps.flush_interval_ms / 1000
        if self.deps.clock.monotonic() - self._last_flush >= interval:
            await self._flush()

    async def batch_dispatched(self) -> None:
        pass

    async def final_commit(self) -> None:
        await self._flush()

    async def abandon(self, reason: AbortReason) -> None:
        self._inflight = self.new_inflight()

    async def _flush(self) -> None:
        self._last_flush = self.deps.clock.monotonic()
        batch, self._inflight = self._inflight, self.new_inflight()
        if not batch.count:
            return
        assert self._producer is not None
        started = time.perf_counter()
        try:
            await self.wait_sent()
            await self._producer.send_offsets(self.deps.offsets_topic, batch.offsets.records())
            await self.wait_sent()
        except Exception:
            self.deps.observer.offset_commit_failed()
            raise
        assert batch.opened_at is not None
        open_for = self.deps.clock.monotonic() - batch.opened_at
        self.deps.observer.transaction_committed(
            len(batch), time.perf_counter() - started, open_for
        )
        await self.notify_committed(batch)
