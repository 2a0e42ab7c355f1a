"""The exactly-once decisions of a source task, with a scripted producer (the producer
port over an in-memory broker that keeps only what was committed) and a manual clock: what
is committed, what is aborted, what the task's status becomes, and what the producer was
asked, in which order. No broker, no sleeping; each test runs in milliseconds."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import pytest

from eos.api import SourceRecord, SourceTaskContext, TransactionContext
from eos.errors import FencedError, TaskError, TransactionAbortable
from eos.runtime.task.at_least_once_task import AtLeastOnceTask
from eos.runtime.task.exactly_once_task import ABORTABLE_RESTARTS, HOLD_RECORDS, ExactlyOnceTask
from eos.runtime.task.producers.base import SendFailed
from eos.runtime.task.source_task import SourceTaskRunner, TaskDeps, TaskSpec
from eos.state import State
from tests.unit.task_fakes import PARTITION, FakeProducer, Harness, Source

SPEC = TaskSpec("c", 0, 1, {})


async def run(
    source: Source, deps: TaskDeps, runner_class: type[SourceTaskRunner] = ExactlyOnceTask
) -> SourceTaskRunner:
    runner = runner_class(SPEC, deps, source.task_class()())
    source.stop = runner.request_stop
    with anyio.fail_after(1):
        await runner.run()
    return runner


def txn(context: SourceTaskContext) -> TransactionContext:
    assert context.transaction_context is not None
    return context.transaction_context


def failed_trace(h: Harness) -> str:
    state, trace = h.statuses[-1]
    assert state is State.FAILED, h.statuses
    assert trace is not None
    return trace


async def test_commit_writes_the_records_and_their_offsets_in_one_transaction() -> None:
    h, source = Harness(), Source(7)
    await run(source, h.deps())
    assert h.broker.values() == list(range(7))
    assert h.broker.transactions == 3
    assert h.broker.offset(PARTITION) == {"n": 6}
    assert h.observer.committed == [3, 3, 1]
    assert source.committed == list(range(7))  # commit_record after each commit
    assert h.states() == [State.RUNNING, State.UNASSIGNED]
    first = h.producer.calls[: h.producer.calls.index("end_txn commit") + 1]
    assert first == ["start", "begin", "send 3", "send_offsets", "flush", "end_txn commit"]
    assert h.producer.fixed["transactional_id"] == "g-c-0"
    assert h.producer.calls[-1] == "close"


async def test_a_fenced_producer_stops_the_task_without_a_status_or_a_commit() -> None:
    """A zombie: a newer instance owns the transactional id. Nothing committed, no status
    written (the new owner writes it), no retry."""
    h, source = Harness(), Source(7)
    h.script = lambda producer: producer.fail.update({"end_txn commit": FencedError("epoch")})
    runner = await run(source, h.deps())
    assert h.broker.values() == []
    assert h.states() == [State.RUNNING]
    assert runner.state is State.RUNNING
    assert h.observer.fenced == 1
    assert runner.fenced  # the supervisor has the worker rejoin: is the task still ours?
    assert "end_txn abort" not in h.producer.calls  # a zombie does not even abort
    assert h.producer.calls[-1] == "close"


@pytest.mark.parametrize(
    "error", [FencedError("epoch"), TaskError("commit failed")], ids=["aiokafka", "librdkafka"]
)
async def test_a_commit_that_failed_after_the_timeout_fails_the_task_naming_the_remedies(
    error: Exception,
) -> None:
    """aiokafka reports a transaction the broker timed out as fenced, librdkafka as a
    failed commit: either way, past transaction.timeout.ms it is a timeout, and the task
    fails (FAILED, with what to change) instead of stopping as a zombie."""
    h, source = Harness(), Source(7)

    def slow_commit(producer: FakeProducer) -> None:
        producer.slow["flush"] = 2.0
        producer.fail["end_txn commit"] = error

    h.script = slow_commit
    await run(source, h.deps(transaction_timeout_ms=1000))
    trace = failed_trace(h)
    assert "transaction.timeout.ms=1000" in trace
    assert "transaction.boundary=poll" in trace
    assert h.observer.fenced == 0
    assert h.broker.values() == []


async def test_a_failed_commit_of_a_young_transaction_is_not_a_timeout() -> None:
    h, source = Harness(), Source(7)
    h.script = lambda producer: producer.fail.update({"end_txn commit": TaskError("boom")})
    await run(source, h.deps())
    trace = failed_trace(h)
    assert trace.startswith("boom")
    assert h.observer.commit_failures == 1
    assert h.observer.aborted == [(3, "error")]


async def test_a_rejected_record_fails_the_commit_before_end_txn() -> None:
    """The broker rejected a batch: the transaction must not commit (its offsets would
    skip the lost records). The commit fails before EndTxn and the transaction aborts."""
    h, source = Harness(), Source(7)
    h.script = lambda producer: producer.reject.add(4)
    await run(source, h.deps())
    trace = failed_trace(h)
    assert "source partition {'p': 0} at offset {'n': 4} could not be sent" in trace
    # the fake broker refuses it as too large: the line says what to change
    assert "set producer.override.batch.size below the topic's max.message.bytes" in trace
    assert "(524288 bytes)" in trace
    calls = h.producer.calls
    second = calls[calls.index("end_txn commit") + 1 :]
    assert second[:4] == ["begin", "send 3", "send_offsets", "flush"]
    assert "end_txn commit" not in second
    assert "end_txn abort" in second
    assert h.broker.values() == [0, 1, 2]
    assert h.broker.offset(PARTITION) == {"n": 2}
    assert h.observer.commit_failures == 1


async def test_a_rejected_record_of_a_timed_out_transaction_is_a_timeout() -> None:
    h, source = Harness(), Source(3)

    def slow_rejection(producer: FakeProducer) -> None:
        producer.slow["flush"] = 2.0
        producer.reject.add(1)

    h.script = slow_rejection
    await run(source, h.deps(transaction_timeout_ms=1000))
    assert "transaction.timeout.ms=1000" in failed_trace(h)


async def test_a_connector_requested_abort_drops_the_records_but_commits_their_offsets() -> None:
    h, source = Harness(), Source(7)

    def boundaries(end: int, context: SourceTaskContext, records: list[SourceRecord]) -> None:
        if end == 6:
            txn(context).abort_transaction()
        else:
            txn(context).commit_transaction()

    source.on_poll = boundaries
    await run(source, h.deps("connector"))
    assert h.broker.values() == [0, 1, 2, 6]
    committed_offsets = [h.broker.offset(PARTITION)]
    assert committed_offsets == [{"n": 6}]
    assert b'{"n":5}' in [value for _, value in h.broker.offsets]  # the dropped batch's
    assert h.observer.aborted == [(3, "connector")]
    calls = h.producer.calls
    abort = calls.index("end_txn abort")
    assert calls[abort + 1 : abort + 5] == ["begin", "send_offsets", "flush", "end_txn commit"]


async def test_a_record_level_boundary_splits_the_batch() -> None:
    h, source = Harness(), Source(6)

    def after_first(end: int, context: SourceTaskContext, records: list[SourceRecord]) -> None:
        txn(context).commit_transaction(records[0])
        txn(context).commit_transaction()

    source.on_poll = after_first
    await run(source, h.deps("connector"))
    assert h.observer.committed == [1, 2, 1, 2]
    assert h.broker.values() == list(range(6))


async def test_an_abort_with_no_open_transaction_is_ignored() -> None:
    h, source = Harness(), Source(3)

    def commit_then_abort(end: int, context: SourceTaskContext, records: list[Any]) -> None:
        txn(context).commit_transaction(records[-1])
        txn(context).abort_transaction()

    source.on_poll = commit_then_abort
    await run(source, h.deps("connector"))
    assert h.broker.values() == [0, 1, 2]
    assert h.observer.aborted == []
    assert h.states() == [State.RUNNING, State.UNASSIGNED]


async def test_a_transaction_the_connector_left_open_is_aborted_at_shutdown() -> None:
    h, source = Harness(), Source(3)
    await run(source, h.deps("connector"))
    assert h.broker.values() == []
    assert h.observer.aborted == [(3, "shutdown")]


async def test_asking_to_commit_and_abort_the_same_batch_fails_the_task() -> None:
    h, source = Harness(), Source(3)

    def both(end: int, context: SourceTaskContext, records: list[Any]) -> None:
        txn(context).commit_transaction()
        txn(context).abort_transaction()

    source.on_poll = both
    await run(source, h.deps("connector"))
    assert "both commit and abort" in failed_trace(h)


async def test_the_interval_boundary_holds_records_and_sends_them_in_order_at_the_commit() -> None:
    h, source = Harness(), Source(12, batch=2)
    source.on_poll = lambda end, context, records: h.clock.advance(0.3)
    await run(source, h.deps("interval", interval_ms=1000))
    assert h.broker.values() == list(range(12))
    # Nothing reaches the producer before the commit: each send comes right before the
    # offsets that cover it.
    calls = [c for c in h.producer.calls if c not in ("start", "close")]
    commit = ["send_offsets", "flush", "end_txn commit"]
    assert calls == ["begin", "send 10", *commit, "begin", "send 2", *commit]
    assert h.observer.committed == [10, 2]


async def test_held_records_are_sent_once_hold_records_wait() -> None:
    h, source = Harness(), Source(2 * HOLD_RECORDS + 200, batch=HOLD_RECORDS // 2 + 50)
    await run(source, h.deps("interval", interval_ms=60_000))
    sends = [c for c in h.producer.calls if c.startswith("send ")]
    assert sends == [f"send {HOLD_RECORDS + 100}", f"send {HOLD_RECORDS + 100}"]
    assert h.broker.values() == list(range(2 * HOLD_RECORDS + 200))
    assert h.broker.transactions == 1


async def test_transaction_abortable_aborts_and_resumes_from_the_committed_offsets() -> None:
    """TRANSACTION_ABORTABLE (KIP-1050): the transaction is aborted, a new instance of the
    connector's task starts from the committed offsets with the same producer; every
    record ends up committed exactly once and the task never leaves RUNNING."""
    h, source = Harness(), Source(9)
    answered = False

    def abortable_once(end: int, context: SourceTaskContext, records: list[Any]) -> None:
        nonlocal answered
        if end == 6 and not answered:
            answered = True
            error = TransactionAbortable("the broker answered TRANSACTION_ABORTABLE")
            h.producer.fail["flush"] = SendFailed(records[0], error)

    source.on_poll = abortable_once
    await run(source, h.deps())
    assert h.broker.values() == list(range(9))
    assert source.starts == [0, 3]
    assert len(h.producers) == 1
    assert h.states() == [State.RUNNING, State.UNASSIGNED]
    assert h.observer.aborted == [(3, "error")]
    calls = h.producer.calls
    assert calls[calls.index("end_txn abort") - 1] == "flush"  # abort right after the answer


@pytest.mark.parametrize("where", ["check", "end_txn commit"])
async def test_transaction_abortable_from_a_check_or_the_end_txn_is_recovered_too(
    where: str,
) -> None:
    h, source = Harness(), Source(9)
    error = TransactionAbortable("TRANSACTION_ABORTABLE")
    pending: list[str] = [where]

    def once(end: int, context: SourceTaskContext, records: list[Any]) -> None:
        if end == 6 and pending:
            cause: Exception = SendFailed(records[0], error) if where == "check" else error
            h.producer.fail[pending.pop()] = cause

    source.on_poll = once
    await run(source, h.deps())
    assert h.broker.values() == list(range(9))
    assert h.states() == [State.RUNNING, State.UNASSIGNED]


async def test_transaction_abortable_in_a_row_fails_the_task() -> None:
    h, source = Harness(), Source(3)

    def always(end: int, context: SourceTaskContext, records: list[Any]) -> None:
        h.producer.fail["end_txn commit"] = TransactionAbortable("TRANSACTION_ABORTABLE")

    source.on_poll = always
    await run(source, h.deps())
    assert f"TRANSACTION_ABORTABLE {ABORTABLE_RESTARTS + 1} times in a row" in failed_trace(h)
    assert source.starts == [0] * (ABORTABLE_RESTARTS + 1)
    assert h.broker.values() == []
    assert h.producer.calls.count("end_txn abort") == ABORTABLE_RESTARTS + 1  # the last too


async def test_the_at_least_once_flush_writes_offsets_only_after_their_records() -> None:
    h, source = Harness(), Source(7)
    source.on_poll = lambda end, context, records: h.clock.advance(0.6)
    await run(source, h.deps(), AtLeastOnceTask)
    assert h.broker.values() == list(range(7))
    assert h.broker.offset(PARTITION) == {"n": 6}
    assert h.producer.fixed == {"enable_idempotence": True, "transactional_id": None}
    calls = [c for c in h.producer.calls if c not in ("start", "close")]
    # one periodic flush (1.2 s after the start), then the final one at the stop
    flush = ["flush", "send_offsets", "flush"]
    assert calls == ["send 3", "send 3", *flush, "send 1", *flush]
    assert h.observer.committed == [6, 1]
    assert source.committed == list(range(7))
    assert h.states() == [State.RUNNING, State.UNASSIGNED]


async def test_an_at_least_once_flush_that_fails_fails_the_task() -> None:
    h, source = Harness(), Source(3)
    h.script = lambda producer: producer.reject.add(1)
    await run(source, h.deps(), AtLeastOnceTask)
    assert "could not be sent" in failed_trace(h)
    assert h.observer.commit_failures == 1
    assert h.broker.offsets == []


class _Gate:
    def __init__(self, before: bool, after: bool) -> None:
        self.before, self.after = before, after

    async def before_producer(self, connector: str, generation: int) -> bool:
        return self.before

    async def after_producer(self, connector: str, generation: int) -> bool:
        return self.after

    async def offsets_topic(self) -> None:
        pass


@pytest.mark.parametrize(("before", "after", "producers"), [(False, True, 0), (True, False, 1)])
async def test_start_up_is_abandoned_when_a_newer_generation_exists(
    before: bool, after: bool, producers: int
) -> None:
    h, source = Harness(), Source(3)
    await run(source, h.deps(gate=_Gate(before, after)))
    assert h.statuses == []
    assert source.starts == []
    assert len(h.producers) == producers
    assert all(p.calls[-1] == "close" for p in h.producers)


async def test_a_record_that_cannot_be_converted_aborts_and_fails_naming_it() -> None:
    """Even when the abort itself fails (the producer may be unusable by then)."""
    h, source = Harness(), Source(3)

    def unconvertible(end: int, context: SourceTaskContext, records: list[SourceRecord]) -> None:
        records[1] = dataclasses.replace(records[1], value=object())
        h.producer.fail["end_txn abort"] = RuntimeError("connection lost")

    source.on_poll = unconvertible
    await run(source, h.deps())
    assert "offset {'n': 1} could not be converted" in failed_trace(h)
    assert h.broker.values() == []


async def test_a_failed_begin_fails_the_task_and_a_fenced_one_stops_it() -> None:
    h, source = Harness(), Source(3)
    h.script = lambda producer: producer.fail.update({"begin": TaskError("no coordinator")})
    await run(source, h.deps())
    assert failed_trace(h).startswith("no coordinator")
    fenced, source = Harness(), Source(3)
    fenced.script = lambda producer: producer.fail.update({"begin": FencedError("epoch")})
    await run(source, fenced.deps())
    assert fenced.states() == [State.RUNNING]
    assert fenced.observer.fenced == 1
