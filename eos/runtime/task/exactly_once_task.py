"""The exactly-once source task (docs/exactly-once.md): records and their offsets in one
transaction, and the transaction boundary policies that say when it ends.

Invariants:
- the producer's ``transactional.id`` is ``${group.id}-${connector}-${task}``;
- offsets are written to the offsets topic inside the transaction that holds
  the records they describe, so they are committed if and only if the records are;
- ``commit_record``/``commit`` run only after the transaction committed;
- a fenced producer stops the task at once: no retry, no commit, no status;
- the records of an aborted transaction never become visible, but their
  offsets are committed right after (an abort drops records, it does not rewind);
- a record the broker rejected fails the commit before EndTxn (the producer checks).

The steps, as the template (:mod:`eos.runtime.task.source_task`) calls them: ``prepare_to_send``
opens the transaction; ``ready_to_write`` lets the policy hold records (interval boundary:
written together at the commit, or once :data:`HOLD_RECORDS` wait); ``prepare_to_poll``,
``record_boundary``/``act`` and ``batch_dispatched`` ask the :class:`BoundaryPolicy`;
``_commit`` writes the held records, then the offsets records, then commits.

Boundary policies (``transaction.boundary``), built by the worker (:func:`boundary_policy`):

- ``poll``: commit after every batch returned by ``poll`` (if anything was sent);
- ``interval``: commit once the transaction has been open for the interval;
- ``connector``: the task decides through its :class:`~eos.api.TransactionContext`.

The producer is a port (:mod:`eos.runtime.task.producers`): aiokafka or librdkafka. aiokafka
cannot bump its own epoch, so a transaction the broker timed out surfaces as "fenced";
librdkafka reports it as a failed send or commit. Either way the task tells a timed-out
transaction from a zombie (or another failure) by the transaction's age.

TRANSACTION_ABORTABLE (KIP-1050; a transaction-version-2 Produce may be answered it): the
task aborts the transaction (EndTxn v5 bumps the epoch, the producer stays usable), stops
the connector's task instance and starts a new one, which resumes from the committed
offsets (``context.offsets``) as a task Kafka Connect restarts does. The records of the
aborted transaction are polled again; their offsets were never committed. More than
:data:`ABORTABLE_RESTARTS` in a row without a commit between fail the task.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, TypeVar

from eos.api import RecordBlock, SourceRecord, SourceTask, TransactionContext
from eos.errors import (
    EosError,
    FencedError,
    TaskError,
    TransactionAbortable,
    TransactionRequestError,
    TransactionTimedOut,
)
from eos.kafka.transactional_ids import task_transactional_id
from eos.runtime.clock import Clock
from eos.runtime.observer import AbortReason
from eos.runtime.task.producers import SendFailed
from eos.runtime.task.producers.base import Outgoing, count_records
from eos.runtime.task.source_task import InFlight, SourceTaskRunner
from eos.runtime.task.task_deps import Action, BoundaryPolicy, TaskDeps, TaskSpec

if TYPE_CHECKING:
    from eos.config.connector import TransactionBoundaryName

T = TypeVar("T")

HOLD_RECORDS = 500
"""With ``transaction.boundary=interval``, polled records are held (converted and sent
together) until this many are waiting or the transaction commits: nobody can read them
before the commit anyway, and one Kafka batch per partition per transaction costs far
less than one per poll for a task that polls a few records at a time."""

ABORTABLE_RESTARTS = 5
"""TRANSACTION_ABORTABLE answers in a row (no commit between) before the task fails."""


class ExactlyOnceTask(SourceTaskRunner):
    def __init__(self, spec: TaskSpec, deps: TaskDeps, task: SourceTask) -> None:
        super().__init__(spec, deps, task)
        self._policy: BoundaryPolicy = deps.boundary or PollBoundary()
        self.record_boundaries = self._policy.per_record
        self._abortable = 0
        """TRANSACTION_ABORTABLE answers since the last commit."""

    def transaction_context(self) -> TransactionContext | None:
        return self._policy.context

    async def startup(self) -> bool:
        gate = self.deps.gate
        if gate and not await gate.before_producer(self.spec.connector, self.spec.generation):
            return False
        await self._start_producer(
            transactional_id=task_transactional_id(
                self.deps.group_id, self.spec.connector, self.spec.task_id
            ),
            enable_idempotence=True,
            transaction_timeout_ms=self.deps.transaction_timeout_ms,
        )
        return gate is None or await gate.after_producer(self.spec.connector, self.spec.generation)

    # ---------------------------------------------------------------- steps

    async def prepare_to_poll(self) -> None:
        await self._act(self._policy.before_poll(self._inflight.opened_at))

    async def prepare_to_send(self) -> None:
        if self._inflight.opened_at is None:
            assert self._producer is not None
            await self._call(self._producer.begin())
            self._inflight.opened_at = self.deps.clock.monotonic()

    def ready_to_write(self, segment: Sequence[Outgoing]) -> Sequence[Outgoing]:
        return self._policy.hold(segment)

    def record_boundary(self, record: Outgoing) -> Action | None:
        return self._policy.after_record(record)

    async def act(self, action: Action) -> None:
        await self._act(action)

    async def batch_dispatched(self) -> None:
        await self._act(self._policy.after_batch(self._inflight.opened_at))

    async def final_commit(self) -> None:
        """poll/interval: commit what was polled. connector: only what the task asked
        to commit; a transaction it left open is aborted (it defined no boundary)."""
        if self._policy.context is None:
            await self._commit()
            return
        await self._act(self._policy.after_batch(self._inflight.opened_at))
        if self._inflight.opened_at is not None:
            await self.abandon("shutdown")

    async def abandon(self, reason: AbortReason) -> None:
        held = self._policy.drop()
        batch, self._inflight = self._inflight, self.new_inflight()
        if batch.opened_at is None or self._producer is None:
            return
        try:
            await self._producer.abort()
        except Exception as exc:  # the producer may already be unusable
            self.log.debug("abort after failure did not complete", error=repr(exc))
        self.deps.observer.transaction_aborted(len(batch) + held, reason)

    async def recover(self, exc: TransactionAbortable) -> None:
        """Abort (the producer goes on with the next epoch) so that a new instance of the
        connector's task re-polls from the committed offsets; too many in a row fail."""
        held = self._policy.drop()
        batch, self._inflight = self._inflight, self.new_inflight()
        self._policy.forget()
        if batch.opened_at is not None:
            assert self._producer is not None
            await self._call(self._producer.abort())
            self.deps.observer.transaction_aborted(len(batch) + held, "error")
        self._abortable += 1
        if self._abortable > ABORTABLE_RESTARTS:
            raise TaskError(
                f"the broker answered TRANSACTION_ABORTABLE {self._abortable} times in a row "
                f"(each transaction aborted, the task restarted from its committed offsets): "
                f"{exc}"
            ) from exc
        self.log.warning(
            "transaction aborted (TRANSACTION_ABORTABLE); the task restarts from its "
            "committed offsets",
            reason=str(exc),
            attempt=self._abortable,
        )

    # ------------------------------------------------------------ commit/abort

    async def _act(self, action: Action | None) -> None:
        if action == "commit":
            await self._commit()
        elif action == "abort":
            await self._abort()

    async def _commit(self) -> None:
        batch = self._inflight
        if batch.opened_at is None:
            return
        assert self._producer is not None
        held = self._policy.release()
        if held:  # before the offsets that cover them
            await self.write(held)
        await self._send_offsets(batch)
        started = time.perf_counter()
        try:
            await self._call(self._producer.commit())
        except SendFailed as failed:
            self.deps.observer.offset_commit_failed()
            raise self.send_error(failed.item, failed.cause) from failed.cause
        except (FencedError, TransactionAbortable):
            raise
        except EosError:
            self.deps.observer.offset_commit_failed()
            self._check_sent()  # a failed send explains the failed commit best
            raise
        self._inflight = self.new_inflight()
        self._abortable = 0
        open_for = self.deps.clock.monotonic() - batch.opened_at
        self.deps.observer.transaction_committed(
            len(batch), time.perf_counter() - started, open_for
        )
        await self.notify_committed(batch)

    async def _abort(self) -> None:
        batch = self._inflight
        if batch.opened_at is None:
            self.log.warning("the task asked to abort, but no transaction is open; ignored")
            return
        assert self._producer is not None
        await self._call(self._producer.abort())
        self._inflight = self.new_inflight()
        self.deps.observer.transaction_aborted(len(batch), "connector")
        if not batch.offsets:
            return
        # Progress moves past the dropped records: commit their offsets on their own.
        offsets_only = self.new_inflight()
        offsets_only.offsets = batch.offsets
        await self._call(self._producer.begin())
        await self._send_offsets(offsets_only)
        await self._call(self._producer.commit())
        if self.deps.offsets_committed is not None:
            self.deps.offsets_committed(batch.offsets.records())

    async def _send_offsets(self, batch: InFlight) -> None:
        assert self._producer is not None
        await self._call(
            self._producer.send_offsets(self.deps.offsets_topic, batch.offsets.records())
        )

    async def _call(self, step: Awaitable[T]) -> T:
        """A producer step: a fenced producer, or any failure of a transaction older than
        the timeout, becomes :meth:`fenced_error` (zombie or timed out)."""
        try:
            return await step
        except FencedError as exc:
            raise self.fenced_error(exc) from exc
        except TransactionAbortable:
            raise
        except TaskError as exc:
            if self._timed_out():
                raise self.fenced_error(exc) from exc
            raise

    def send_error(self, record: Outgoing, error: BaseException) -> EosError:
        if self._timed_out() and not isinstance(error, TransactionAbortable):
            return self.fenced_error(error)
        return super().send_error(record, error)

    def _timed_out(self) -> bool:
        opened = self._inflight.opened_at
        limit_s = self.deps.transaction_timeout_ms / 1000
        return opened is not None and self.deps.clock.monotonic() - opened >= limit_s

    def fenced_error(self, exc: BaseException) -> EosError:
        if self._timed_out():
            return TransactionTimedOut(
                f"the transaction stayed open longer than transaction.timeout.ms="
                f"{self.deps.transaction_timeout_ms} and the broker aborted it. Remedies: raise "
                "the producer's throughput (producer.override.* batch/linger settings), raise "
                "producer.override.transaction.timeout.ms, shorten "
                "transaction.boundary.interval.ms, or use transaction.boundary=poll"
            )
        return FencedError(f"producer fenced by a newer instance of this task: {exc!r}")


# ------------------------------------------------------------------ boundary policies


def boundary_policy(
    name: TransactionBoundaryName, interval_ms: int, clock: Clock
) -> BoundaryPolicy:
    """The policy of ``transaction.boundary=name``, one per task (a connector policy holds
    that task's requests)."""
    if name == "connector":
        return ConnectorBoundary()
    if name == "interval":
        return IntervalBoundary(interval_ms, clock)
    return PollBoundary()


class _Boundary:
    """No boundary anywhere, nothing held (what each policy overrides)."""

    per_record = False
    context: TransactionContext | None = None

    def hold(self, segment: Sequence[Outgoing]) -> Sequence[Outgoing]:
        return segment

    def release(self) -> list[Outgoing]:
        return []

    def drop(self) -> int:
        return 0

    def before_poll(self, open_since: float | None) -> Action | None:
        return None

    def after_record(self, record: SourceRecord | RecordBlock) -> Action | None:
        return None

    def after_batch(self, open_since: float | None) -> Action | None:
        return None

    def forget(self) -> None:
        pass


class PollBoundary(_Boundary):
    def after_batch(self, open_since: float | None) -> Action | None:
        return "commit"


class IntervalBoundary(_Boundary):
    """Commit once the transaction has been open for the interval; until then polled
    records are held and written together (at the commit, or once :data:`HOLD_RECORDS`
    wait)."""

    def __init__(self, interval_ms: int, clock: Clock) -> None:
        self.interval = interval_ms / 1000
        self.clock = clock
        self._held: list[Outgoing] = []
        self._held_count = 0

    def hold(self, segment: Sequence[Outgoing]) -> Sequence[Outgoing]:
        self._held.extend(segment)
        self._held_count += count_records(segment)
        return self.release() if self._held_count >= HOLD_RECORDS else ()

    def release(self) -> list[Outgoing]:
        held, self._held, self._held_count = self._held, [], 0
        return held

    def drop(self) -> int:
        count, self._held, self._held_count = self._held_count, [], 0
        return count

    def before_poll(self, open_since: float | None) -> Action | None:
        if open_since is not None and self.clock.monotonic() - open_since >= self.interval:
            return "commit"
        return None

    def after_batch(self, open_since: float | None) -> Action | None:
        return self.before_poll(open_since)


class TransactionRequests:
    """The :class:`~eos.api.TransactionContext` given to tasks with connector boundaries.

    Requests are remembered until the loop reaches the record (or the end of the
    batch) they apply to. Asking for both outcomes of one record or one batch
    raises :class:`TransactionRequestError`, which fails the task.
    """

    def __init__(self) -> None:
        self._batch: Action | None = None
        self._records: dict[int, Action] = {}

    def _request(self, action: Action, record: SourceRecord | RecordBlock | None) -> None:
        if record is None:
            if self._batch not in (None, action):
                raise TransactionRequestError(
                    "the task asked to both commit and abort the transaction of the same batch"
                )
            self._batch = action
            return
        previous = self._records.get(id(record))
        if previous not in (None, action):
            raise TransactionRequestError(
                f"the task asked to both commit and abort the transaction at the record of "
                f"source partition {dict(record.source_partition)} offset "
                f"{dict(record.source_offset or {})}"
            )
        self._records[id(record)] = action

    def commit_transaction(self, record: SourceRecord | RecordBlock | None = None) -> None:
        self._request("commit", record)

    def abort_transaction(self, record: SourceRecord | RecordBlock | None = None) -> None:
        self._request("abort", record)

    def take_record(self, record: SourceRecord | RecordBlock) -> Action | None:
        return self._records.pop(id(record), None)

    def take_batch(self) -> Action | None:
        action, self._batch = self._batch, None
        self._records.clear()  # requests for records never dispatched lapse with their batch
        return action


class ConnectorBoundary(_Boundary):
    per_record = True

    def __init__(self) -> None:
        self.context = self.requests = TransactionRequests()

    def after_record(self, record: SourceRecord | RecordBlock) -> Action | None:
        return self.requests.take_record(record)

    def after_batch(self, open_since: float | None) -> Action | None:
        return self.requests.take_batch()

    def forget(self) -> None:
        self.requests.take_batch()
