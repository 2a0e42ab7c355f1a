"""The aiokafka task producer (the default ``producer.client``).

Records go out in whole Kafka record batches built in Python (:mod:`eos.runtime.sending`).
Each queued batch has a future; :meth:`AiokafkaTaskProducer.check` looks at those already
done, because aiokafka keeps queuing batches after a fatal error (a transaction the broker
aborted, say) and only their futures tell.

aiokafka speaks transactional RPCs at version 0 only and cannot bump its own epoch after
an error: a transaction the broker timed out surfaces as fenced (the task tells the two
apart by the transaction's age). On a cluster with transaction version 2 the transactions
this module ends use Produce v12 and EndTxn v5 (:mod:`eos.kafka.transactions_v2`), and
the epoch moves on with every transaction.

A transactional producer starts without aiokafka's background sender: while a
transaction's batches fit the accumulator, the commit sends them and ends the transaction
from the task's coroutine (:mod:`.aiokafka_inline`), which costs a fraction of the
sender's wake-ups and tasks. The first transaction that outgrows that hands the producer
to the sender for good. Either way a batch the broker rejected fails the commit before
EndTxn (aiokafka alone would commit the rest of the transaction, offsets included).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from aiokafka import AIOKafkaProducer
from aiokafka import errors as kerrors

from eos.api import SourceRecord
from eos.errors import FencedError, TaskError
from eos.kafka.clients import FENCED_ERRORS, ClientConfig, make_producer
from eos.runtime.partitioner import KeyPartitioner
from eos.runtime.producers import aiokafka_inline as inline
from eos.runtime.producers.base import (
    Convert,
    OffsetRecords,
    Outgoing,
    ProducerClient,
    SegmentSent,
    SendFailed,
)
from eos.runtime.sending import send_records

T = TypeVar("T")


def _fenced(exc: BaseException) -> FencedError:
    return FencedError(f"producer fenced: {exc!r}")


class AiokafkaTaskProducer:
    client: ProducerClient = "aiokafka"

    def __init__(self, config: ClientConfig, **fixed: Any) -> None:
        self._producer: AIOKafkaProducer = make_producer(config, **fixed)
        self._transactional = fixed.get("transactional_id") is not None
        self._partitioner = KeyPartitioner()
        self._pending: list[tuple[Outgoing, Any]] = []
        """Queued batches: (the record or block of the first record, batch future)."""
        self._checked = 0
        """Batches before this index were acknowledged."""
        self._version2 = False
        """Transaction version 2 (KIP-890): two requests per transaction, not three."""

    async def _call(self, step: Awaitable[T]) -> T:
        try:
            return await step
        except FENCED_ERRORS as exc:
            raise _fenced(exc) from exc

    async def start(self) -> None:
        if self._transactional:
            self._version2 = await self._call(inline.start(self._producer))
        else:
            await self._call(self._producer.start())

    @property
    def transaction_version(self) -> int:
        """2 when the cluster takes KIP-890 transactions (known after :meth:`start`)."""
        return 2 if self._version2 else 1

    def _inline(self) -> bool:
        """Whether this transaction still ends from the task (no background sender)."""
        return self._transactional and not inline.sender_running(self._producer)

    async def _to_sender(self) -> None:
        """The transaction outgrows the accumulator: aiokafka's sender takes over."""
        await self._call(inline.start_sender(self._producer))

    async def begin(self) -> None:
        txn = self._producer._txn_manager
        if txn is None or txn.transactional_id is None or not txn.has_pid():
            # Not transactional (aiokafka says so), or the producer id is on its way.
            await self._call(self._producer.begin_transaction())
            return
        # What begin_transaction does once the producer id is known, without the task
        # it spawns to wait for the id: a task per transaction, for nothing.
        try:
            txn.begin_transaction()
        except FENCED_ERRORS as exc:
            raise _fenced(exc) from exc

    async def send(
        self, items: Sequence[Outgoing], convert: Convert, *, per_record: bool
    ) -> SegmentSent:
        before_full = None
        if self._inline():
            if inline.queued(self._producer):  # a second batch for a partition would wait
                await self._to_sender()
            else:
                before_full = self._to_sender
        try:
            sent = await send_records(
                self._producer, self._partitioner, items, convert, per_record=per_record,
                before_full=before_full,
            )  # fmt: skip
        except SendFailed as failed:
            raise self._failed(failed.item, failed.cause) from failed.cause
        self._pending += sent.batches
        return sent

    def _failed(self, item: Outgoing, cause: BaseException) -> SendFailed:
        return SendFailed(item, _fenced(cause) if isinstance(cause, FENCED_ERRORS) else cause)

    def check(self) -> None:
        pending = self._pending
        while self._checked < len(pending):
            item, future = pending[self._checked]
            if not future.done():
                return
            error = None if future.cancelled() else future.exception()
            if error is not None:
                raise self._failed(item, error) from error
            self._checked += 1

    async def flush(self) -> None:
        if self._inline():  # nothing sends the transaction's batches but the task
            await self._call(inline.flush_transaction(self._producer, version2=self._version2))
        pending, self._pending, self._checked = self._pending, [], 0
        for item, future in pending:
            try:
                await future
            except Exception as exc:
                raise self._failed(item, exc) from exc

    async def send_offsets(self, topic: str, records: OffsetRecords) -> None:
        size = sum(len(key) + len(value or b"") + 64 for key, value in records)
        if self._inline() and size > self._producer._message_accumulator._batch_size // 2:
            await self._to_sender()
        for key, value in records:
            future = await self._call(self._producer.send(topic, key=key, value=value))
            self._pending.append((offsets_item(topic), future))

    async def commit(self) -> None:
        try:
            await self.flush()  # a rejected batch fails the commit before EndTxn
            if self._inline():
                await self._call(
                    inline.end_transaction(self._producer, commit=True, version2=self._version2)
                )
            else:
                await self._call(self._producer.commit_transaction())
        except kerrors.KafkaError as exc:
            self.check()  # a failed batch explains the failed commit best
            raise TaskError(f"committing the transaction failed: {exc!r}") from exc
        self._pending, self._checked = [], 0

    async def abort(self) -> None:
        self._pending, self._checked = [], 0
        if self._inline():
            await self._call(
                inline.end_transaction(self._producer, commit=False, version2=self._version2)
            )
        else:
            await self._call(self._producer.abort_transaction())

    async def close(self) -> None:
        await self._producer.stop()


def offsets_item(topic: str) -> Outgoing:
    """What a failed offsets record is reported as (it has no source record)."""
    return SourceRecord({"offsets topic": topic}, None, topic, None)
