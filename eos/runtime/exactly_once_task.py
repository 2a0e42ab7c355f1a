"""The exactly-once source task (docs/exactly-once.md): records and their offsets in one
transaction.

Invariants:
- the producer's ``transactional.id`` is ``${group.id}-${connector}-${task}``;
- offsets are written to the offsets topic inside the transaction that holds
  the records they describe, so they are committed if and only if the records are;
- ``commit_record``/``commit`` run only after the transaction committed;
- a fenced producer stops the task at once: no retry, no commit, no status;
- the records of an aborted transaction never become visible, but their
  offsets are committed right after (an abort drops records, it does not rewind).

The producer is a port (:mod:`eos.runtime.producers`): aiokafka or librdkafka. aiokafka
cannot bump its own epoch, so a transaction the broker timed out surfaces as "fenced";
librdkafka reports it as a failed send or commit. Either way the task tells a timed-out
transaction from a zombie (or another failure) by the transaction's age.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Sequence
from typing import TypeVar

from eos.api import SourceTask
from eos.errors import EosError, FencedError, TaskError, TransactionTimedOut
from eos.kafka.transactional_ids import task_transactional_id
from eos.runtime.boundaries import (
    Action,
    BoundaryPolicy,
    ConnectorBoundary,
    IntervalBoundary,
    PollBoundary,
    TransactionRequests,
)
from eos.runtime.observer import AbortReason
from eos.runtime.producers import SendFailed
from eos.runtime.sending import Outgoing, count_records
from eos.runtime.source_task import InFlight, SourceTaskRunner, TaskDeps, TaskSpec

T = TypeVar("T")

HOLD_RECORDS = 500
"""With ``transaction.boundary=interval``, polled records are held (converted and sent
together) until this many are waiting or the transaction commits: nobody can read them
before the commit anyway, and one Kafka batch per partition per transaction costs far
less than one per poll for a task that polls a few records at a time."""


class ExactlyOnceTask(SourceTaskRunner):
    def __init__(self, spec: TaskSpec, deps: TaskDeps, task: SourceTask) -> None:
        super().__init__(spec, deps, task)
        self._requests: TransactionRequests | None = None
        self._policy: BoundaryPolicy
        if deps.boundary == "connector":
            self._requests = TransactionRequests()
            self._policy = ConnectorBoundary(self._requests)
            self.record_boundaries = True
        elif deps.boundary == "interval":
            self._policy = IntervalBoundary(deps.boundary_interval_ms, deps.clock)
        else:
            self._policy = PollBoundary()
        self._hold = deps.boundary == "interval"
        self._held: list[Outgoing] = []
        self._held_count = 0

    def transaction_context(self) -> TransactionRequests | None:
        return self._requests

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

    async def _send(self, segment: Sequence[Outgoing]) -> None:
        if not self._hold:
            await super()._send(segment)
            return
        await self.prepare_to_send()  # the transaction is open from the first held record
        self._held.extend(segment)
        self._held_count += count_records(segment)
        if self._held_count >= HOLD_RECORDS:
            await self._release()

    async def _release(self) -> None:
        """Send the held records (before the offsets that cover them)."""
        if self._held:
            held, self._held, self._held_count = self._held, [], 0
            await super()._send(held)

    def record_boundary(self, record: Outgoing) -> Action | None:
        return self._policy.after_record(record)

    async def act(self, action: Action) -> None:
        await self._act(action)

    async def batch_dispatched(self) -> None:
        await self._act(self._policy.after_batch(self._inflight.opened_at))

    async def final_commit(self) -> None:
        """poll/interval: commit what was polled. connector: only what the task asked
        to commit; a transaction it left open is aborted (it defined no boundary)."""
        if self._requests is None:
            await self._commit()
            return
        await self._act(self._policy.after_batch(self._inflight.opened_at))
        if self._inflight.opened_at is not None:
            await self.abandon("shutdown")

    async def abandon(self, reason: AbortReason) -> None:
        held, self._held, self._held_count = self._held_count, [], 0
        batch, self._inflight = self._inflight, self.new_inflight()
        if batch.opened_at is None or self._producer is None:
            return
        try:
            await self._producer.abort()
        except Exception as exc:  # the producer may already be unusable
            self.log.debug("abort after failure did not complete", error=repr(exc))
        self.deps.observer.transaction_aborted(len(batch) + held, reason)

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
        await self._release()
        await self._send_offsets(batch)
        started = time.perf_counter()
        try:
            await self._call(self._producer.commit())
        except SendFailed as failed:
            self.deps.observer.offset_commit_failed()
            raise self.send_error(failed.item, failed.cause) from failed.cause
        except FencedError:
            raise
        except EosError:
            self.deps.observer.offset_commit_failed()
            self._check_sent()  # a failed send explains the failed commit best
            raise
        self._inflight = self.new_inflight()
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
        except TaskError as exc:
            if self._timed_out():
                raise self.fenced_error(exc) from exc
            raise

    def send_error(self, record: Outgoing, error: BaseException) -> EosError:
        if self._timed_out():
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
