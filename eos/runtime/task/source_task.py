"""The source task actor: one connector task, one producer, one loop.

The loop is written once, as a template with named steps::

    start-up → task.start → RUNNING
    loop until stopped:
        prepare_to_poll()              (interval commits / periodic flushes)
        poll()                         (cancelled when a stop is requested)
        dispatch: send(segment)        (record_boundary splits the batch): what the variant
                                       does not hold back is written (prepared, converted,
                                       queued), the offsets of what was polled kept
        batch_dispatched()             (batch boundary)
    final_commit()                     (bounded by the graceful-shutdown deadline)
    task.stop → producer closed

A record crosses five modules from its poll to its commit (docs/architecture.md, "The
modules a record crosses", kept true by ``tests/unit/test_record_crossings.py``): here the
loop polls it and :meth:`SourceTaskRunner.write` hands its segment to
:mod:`eos.runtime.task.record_path`, whose frozen :class:`~eos.runtime.task.record_path.Prepared`
goes to the producer port with its convert step (the converters make the bytes), then its
dead letters in a second send of the same transaction; the latest source offset per
partition of what was polled is kept in :class:`InFlight` (so a dropped or skipped record
still commits its offset, as Connect does). The producer
(:mod:`eos.runtime.task.producers.aiokafka`) appends each record to a Kafka batch and
:mod:`eos.kafka.aiokafka_private` sends the batches and ends the transaction.

Two variants fill in the steps: :class:`~eos.runtime.task.at_least_once_task.AtLeastOnceTask`
(``exactly.once.source.support`` = disabled or preparing) sends with an idempotent producer
and flushes offsets periodically; :class:`~eos.runtime.task.exactly_once_task.ExactlyOnceTask`
sends inside transactions and commits the offsets in the same transaction.

Errors: a fenced producer (:class:`~eos.errors.FencedError`): this instance is a zombie
and stops at once, commits nothing, writes no status; its worker rejoins the group, and
starts it again if the rebalance leaves it here (fenced by a worker behind on the config
topic, not replaced). TRANSACTION_ABORTABLE: abort, then a
new instance of the connector's task goes on from the committed offsets (:meth:`recover`).
Anything else fails the task (FAILED with the message), the open transaction aborted.
"""

from __future__ import annotations

import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import structlog

from eos.api import SourceRecord, SourceTask, SourceTaskContext
from eos.errors import ConversionError, EosError, FencedError, TaskError, TransactionAbortable
from eos.runtime.observer import AbortReason
from eos.runtime.task.producers import SendFailed, Sent, TaskProducer
from eos.runtime.task.producers import base as port
from eos.runtime.task.producers.base import Outgoing, SegmentSent, count_records, where
from eos.runtime.task.record_path import RecordPath
from eos.runtime.task.task_deps import Action
from eos.runtime.task.task_deps import StartGate as StartGate
from eos.runtime.task.task_deps import TaskDeps as TaskDeps
from eos.runtime.task.task_deps import TaskSpec as TaskSpec
from eos.state import State
from eos.storage.offset_log import OffsetBatch


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
        self.failure: tuple[BaseException, str] | None = None  # once FAILED: why, its trace
        self._stop_requested = False
        self._wait_scope: anyio.CancelScope | None = None  # start-up or poll: what a stop ends
        self._producer: TaskProducer | None = None
        self._inflight = self.new_inflight()
        # Per-record bookkeeping only for tasks that want commit_record calls.
        self._per_record = type(task).commit_record is not SourceTask.commit_record
        self._background_error: Exception | None = None
        self._topics: set[str] = set()
        """Topics this run has written to (checked, and reported to ``topic_discovered``)."""
        self._path = RecordPath(spec, deps, self._check_topic, self._per_record, self.log)
        self.fenced = False
        """The run ended fenced: a newer instance owns the transactional id, or one of an
        older generation started on a worker behind on the config topic (KIP-618's
        "worker lag"); the supervisor has its worker rejoin, and the task runs again if
        it is still assigned here."""
        self.figures: dict[str, float] = {}
        """The connector's own counts (``context.count``, totals since this task started)
        and values (``context.gauge``, the latest): its progress in the task status."""

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
            self.fenced = True
            self.deps.observer.producer_fenced()
            self.log.warning(
                "task fenced: another instance owns its transactional id; stopping, and "
                "starting again if it is still assigned here after a rebalance",
                reason=str(exc),
            )
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
                await self._path.start(self._waiting)
                started = await self._startup_in_turn()
            self._wait_scope = None
            if scope.cancelled_caught or not started:
                why = "stop requested" if scope.cancelled_caught else "a newer generation exists"
                self.log.info("start-up abandoned", reason=why)
                return
            while await self._run_instance():  # replaced after TRANSACTION_ABORTABLE
                self.task = type(self.task)()
                self._background_error = None
        finally:
            await self._shielded(self._close_producer(), "producer close")
            self._path.close()

    async def _waiting(self, why: str) -> None:
        """Start-up waits (for a schema registry): the status says so."""
        await self._set_state(State.UNASSIGNED, why)

    async def _run_instance(self) -> bool:
        """Run one instance of the connector's task; True: replace it and go on."""
        try:
            # The task's background coroutines (context.start_soon) live in this group:
            # cancelled once task.stop() returned; their failures reach the loop.
            async with anyio.create_task_group() as background:
                restart = await self._run_task(_Background(self, background))
                background.cancel_scope.cancel()
        except BaseExceptionGroup as group:  # only the body raises: unwrap it
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        return restart

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

    def _count(self, event: str, amount: int) -> None:
        self.figures[event] = self.figures.get(event, 0) + amount
        self.deps.observer.task_event(event, amount)

    def _value(self, name: str, value: float) -> None:
        self.figures[name] = value
        self.deps.observer.task_value(name, value)

    async def _run_task(self, background: _Background) -> bool:
        context = SourceTaskContext(
            connector=self.spec.connector,
            task_id=self.spec.task_id,
            offset_reader=self.deps.offset_reader,
            resources=self.deps.resources,
            transaction_context=self.transaction_context(),
            background=background,
            events=self._count,
            values=self._value,
        )
        try:
            await self.deps.offset_reader.refresh()
            await self.task.start(self.spec.config, context)
            if self.state is not State.RUNNING:
                await self._set_state(State.RUNNING)
            await self._loop()
            self._raise_background_error()
            await self._shielded(self.final_commit(), "final commit")
            await self._set_state(State.UNASSIGNED)
            return False
        except FencedError:
            raise
        except TransactionAbortable as exc:
            await self.recover(exc)
            return True
        except anyio.get_cancelled_exc_class():
            await self._shielded(self.abandon("shutdown"), "abort at hard stop")
            raise
        except BaseException:
            await self._shielded(self.abandon("error"), "abort after failure")
            raise
        finally:
            await self._shielded(self.task.stop(), "task stop")

    async def _loop(self) -> None:
        while not self._stop_requested:
            self._raise_background_error()
            await self.prepare_to_poll()
            batch = await self._poll()
            self._raise_background_error()
            if not batch:  # a poll that returned at once must not starve the event loop
                await anyio.lowlevel.checkpoint()
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
        """The error a failed send becomes: fenced (a zombie, or a timed-out transaction),
        abortable (the broker asks for an abort), or a failure naming the record."""
        if isinstance(error, FencedError):
            return self.fenced_error(error)
        if isinstance(error, TransactionAbortable):
            return error
        hint = port.too_large_hint(error, self._producer_settings()["batch.size"])
        return ConversionError(f"{where(record)} could not be sent: {error!r}{hint}")

    async def _send(self, segment: Sequence[Outgoing]) -> None:
        """The send step: open what must be open, then write what the variant does not
        hold back (:meth:`ready_to_write`)."""
        await self.prepare_to_send()
        ready = self.ready_to_write(segment)
        if ready:
            await self.write(ready)

    async def write(self, segment: Sequence[Outgoing]) -> None:
        """Write ``segment``: the record path prepares it (transforms, schemas, blocks), the
        producer converts and queues it in order, its dead letters after; keep the offsets
        of what was polled."""
        producer, per_record = self._producer, self._per_record
        assert producer is not None
        self._check_sent()
        prepared = await self._path.prepare(segment)
        try:
            sent = SegmentSent()  # every record dropped: only the offsets commit
            if prepared.items:
                sent = await producer.send(prepared.items, prepared.convert, per_record=per_record)
            dead = prepared.dead_letters()
            if dead:
                await producer.send(dead, self._path.convert_dead, per_record=False)
        except SendFailed as failed:
            raise self.send_error(failed.item, failed.cause) from failed.cause
        count = prepared.written()
        self.deps.observer.records_written(count, sent.nbytes)
        if prepared.dropped:
            self.deps.observer.records_dropped(prepared.dropped)
        inflight = self._inflight
        if inflight.opened_at is None:
            inflight.opened_at = self.deps.clock.monotonic()
        inflight.count += count + len(dead)
        if per_record:
            inflight.records += prepared.committed(sent.records)
        _keep_offsets(inflight.offsets, segment)

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

    def ready_to_write(self, segment: Sequence[Outgoing]) -> Sequence[Outgoing]:
        """What of a polled segment to write now; the variant writes what it held back
        itself, with :meth:`write` (exactly-once with the interval boundary: at the
        commit)."""
        return segment

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

    async def recover(self, exc: TransactionAbortable) -> None:
        """Abort after TRANSACTION_ABORTABLE so that a new task instance can go on from the
        committed offsets; raise if that cannot be done (the task then fails)."""
        raise exc

    def fenced_error(self, exc: BaseException) -> EosError:
        return FencedError(f"producer fenced: {exc}")

    # -------------------------------------------------------------- helpers

    def _producer_settings(self) -> dict[str, str]:
        """The task producer's settings: the defaults for task producers (a commit flushes
        anyway, so a short linger only fills batches, it adds no latency; large batches
        cost less CPU per record here and on the broker), then the user's."""
        defaults = {"linger.ms": "5", "batch.size": str(self.deps.batch_size)}
        return {**defaults, **self.deps.client_config.producer}

    async def _start_producer(self, **fixed: Any) -> None:
        config = self.deps.client_config.with_overrides(producer=self._producer_settings())
        producer = self.deps.make_producer(
            self.deps.producer_client, config, per_record=self._per_record, **fixed
        )
        self._producer = producer
        self.deps.observer.producer_started(producer.client, producer.stats)
        try:
            await producer.start()
        except FencedError as exc:
            raise self.fenced_error(exc) from exc

    async def _close_producer(self) -> None:
        if self._producer is not None:
            producer, self._producer = self._producer, None
            self.deps.observer.producer_closed()
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
        self.failure = (exc, f"{exc}\n\n{''.join(traceback.format_exception(exc))}")
        self.log.error("task failed", error=str(exc))
        await self._set_state(State.FAILED, self.failure[1])


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


def _keep_offsets(offsets: OffsetBatch, segment: Sequence[Outgoing]) -> None:
    """The offsets of ``segment`` as polled, in order (the last of a partition wins): a
    run of records sharing one partition object adds only its last offset (the same
    batch as adding each, without a lookup per record)."""
    add = offsets.add
    partition: Any = None
    offset: Any = None
    for record in segment:
        if record.source_offset is None:
            continue
        if record.source_partition is not partition:
            if offset is not None:
                add(partition, offset)
            partition = record.source_partition
        offset = record.source_offset
    if offset is not None:
        add(partition, offset)
