"""The aiokafka task producer (the default ``producer.client``), and its batching.

A source task hands the producer a whole segment at once (:meth:`AiokafkaTaskProducer.send`):
in one pass each record is converted, given its partition and appended to the open record
batch of its topic-partition (``AIOKafkaProducer.create_batch``); a full batch is queued
with ``send_batch``, which adds the partition to the open transaction like a single send
does. This costs a fraction of one ``send()`` per record. Order within a partition is the
order of the records. A :class:`~eos.api.RecordBlock` skips the per-record work: its keys
are hashed as one column (:meth:`KeyPartitioner.partitions`) and its rows are appended
straight from its columns, with no object per row. Partitions follow Kafka's default
partitioner (:mod:`eos.runtime.task.partitioner`); records without a key stick to one
partition per segment and topic, as the Java client's sticky partitioner does.

Each queued batch has a future; :meth:`AiokafkaTaskProducer.check` looks at those already
done, because aiokafka keeps queuing batches after a fatal error (a transaction the broker
aborted, say) and only their futures tell.

aiokafka speaks transactional RPCs at version 0 only and cannot bump its own epoch after
an error: a transaction the broker timed out surfaces as fenced (the task tells the two
apart by the transaction's age). On a cluster with transaction version 2 the transactions
this module ends use Produce v12 and EndTxn v5, and the epoch moves on with every
transaction.

A transactional producer starts without aiokafka's background sender: while a
transaction's batches fit the accumulator, the commit sends them and ends the transaction
from the task's coroutine, which costs a fraction of the sender's wake-ups and tasks. The
accumulator holds one batch per partition: the first time in a transaction that a second
one is due, the task sends what is queued first (a poll slightly over a batch stays
here); the second time, the producer goes to the sender for good. Then the commit has
the sender send what is still queued at once (a transaction's last batch and its offsets
records would otherwise each wait out ``linger.ms`` first). Either way
a batch the broker rejected fails the commit before EndTxn (aiokafka alone would commit the
rest of the transaction, offsets included). All of that reaches into aiokafka's private
parts, so it lives in :mod:`eos.kafka.aiokafka_private`; this module uses aiokafka's public
API only.
"""

from __future__ import annotations

import itertools
import operator
import random
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from aiokafka import AIOKafkaProducer
from aiokafka import errors as kerrors

from eos.api import RecordBlock, RecordMetadata, SourceRecord
from eos.errors import ConversionError, FencedError, TaskError
from eos.kafka import aiokafka_private as private
from eos.kafka.clients import FENCED_ERRORS, ClientConfig, make_producer
from eos.runtime.task.partitioner import KeyPartitioner
from eos.runtime.task.producers.base import (
    Convert,
    Headers,
    OffsetRecords,
    Outgoing,
    ProducerClient,
    ProducerStats,
    SegmentSent,
    SendFailed,
    bad_row,
    header_rows,
    where,
)

T = TypeVar("T")


INLINE_SENDS = 1
"""Times a transaction's queued batches are sent from the task before its commit (a poll
slightly larger than a batch, say) before the background sender takes over."""


def _fenced(exc: BaseException) -> FencedError:
    return FencedError(f"producer fenced: {exc!r}")


class AiokafkaTaskProducer:
    client: ProducerClient = "aiokafka"

    def __init__(self, config: ClientConfig, **fixed: Any) -> None:
        self._producer: AIOKafkaProducer = make_producer(config, **fixed)
        self._transactional = fixed.get("transactional_id") is not None
        self._partitioner = KeyPartitioner()
        self._pending: list[_Queued] = []
        """Queued batches, in order."""
        self._counts = private.request_counts(self._producer)
        self._record_errors = 0
        self._buffered = 0
        self._checked = 0
        """Batches before this index were acknowledged."""
        self._version2 = False
        """Transaction version 2 (KIP-890): two requests per transaction, not three."""
        self._inline_sends = 0
        """Times the task sent this transaction's queued batches before its commit."""

    async def _call(self, step: Awaitable[T]) -> T:
        try:
            return await step
        except FENCED_ERRORS as exc:
            raise _fenced(exc) from exc

    async def start(self) -> None:
        if self._transactional:
            self._version2 = await self._call(private.start(self._producer))
        else:
            await self._call(self._producer.start())
            private.count_produce_requests(self._producer)

    @property
    def transaction_version(self) -> int:
        """2 when the cluster takes KIP-890 transactions (known after :meth:`start`)."""
        return 2 if self._version2 else 1

    def _inline(self) -> bool:
        """Whether this transaction still ends from the task (no background sender)."""
        return self._transactional and not private.sender_running(self._producer)

    async def _to_sender(self) -> None:
        """The transaction outgrows the accumulator: aiokafka's sender takes over."""
        await self._call(private.start_sender(self._producer))

    async def _room(self, topic: str, partition: int) -> None:
        """Before a batch for ``topic``-``partition`` is queued: while the task sends,
        a second batch for a partition would wait for the first forever. The first time
        in a transaction, send what is queued from the task; after that, the background
        sender takes over (it sends while the task converts: a transaction of many
        batches is faster that way)."""
        if not self._inline() or not private.queued_for(self._producer, topic, partition):
            return
        if self._inline_sends >= INLINE_SENDS:
            await self._to_sender()
            return
        self._inline_sends += 1
        await self._call(private.flush_transaction(self._producer, version2=self._version2))

    async def begin(self) -> None:
        self._inline_sends = 0
        try:
            if private.begin(self._producer):
                return
        except FENCED_ERRORS as exc:
            raise _fenced(exc) from exc
        # Not transactional (aiokafka says so), or the producer id is on its way.
        await self._call(self._producer.begin_transaction())

    async def send(
        self, items: Sequence[Outgoing], convert: Convert, *, per_record: bool
    ) -> SegmentSent:
        """Convert and queue every record and block of ``items`` (see the module
        docstring); raise :class:`SendFailed` if one cannot be queued (and whatever
        ``convert`` raises). With ``per_record``, blocks must have been expanded."""
        room = self._room if self._inline() else None
        segment = _Segment(self._producer, self._partitioner, per_record, room)
        nbytes = 0
        try:
            for item in items:
                if type(item) is SourceRecord:
                    pair = convert(item)
                    if pair is None:  # skipped: its failure was tolerated
                        continue
                    key, value = pair
                    nbytes += (len(key) if key else 0) + (len(value) if value else 0)
                    if not segment.quick(item, key, value):
                        await segment.record(item, key, value)
                else:
                    assert isinstance(item, RecordBlock)
                    assert not per_record, "expand blocks for per-record bookkeeping"
                    await segment.block(item)
            sent = await segment.finish()
        except SendFailed as failed:
            raise self._failed(failed.item, failed.cause) from failed.cause
        sent.nbytes += nbytes
        self._pending += sent.batches
        return sent

    def _failed(self, item: Outgoing, cause: BaseException) -> SendFailed:
        return SendFailed(item, _fenced(cause) if isinstance(cause, FENCED_ERRORS) else cause)

    def check(self) -> None:
        pending = self._pending
        while self._checked < len(pending):
            queued = pending[self._checked]
            if not queued.future.done():
                return
            error = None if queued.future.cancelled() else queued.future.exception()
            if error is not None:
                self._count_errors(pending[self._checked :])
                raise self._failed(queued.item, error) from error
            self._checked += 1

    async def flush(self) -> None:
        if self._inline():  # nothing sends the transaction's batches but the task
            await self._call(private.flush_transaction(self._producer, version2=self._version2))
        else:  # the last batches would wait out linger.ms first
            private.send_now(self._producer)
        pending, self._pending, self._checked = self._pending, [], 0
        for i, queued in enumerate(pending):
            try:
                await queued.future
            except Exception as exc:
                self._count_errors(pending[i:])
                raise self._failed(queued.item, exc) from exc

    def _count_errors(self, queued: list[_Queued]) -> None:
        """Count the records of the failed batches among ``queued`` (each once)."""
        for entry in queued:
            future = entry.future
            if entry.records and future.done() and not future.cancelled() and future.exception():
                self._record_errors += entry.records
                entry.records = 0

    def stats(self) -> ProducerStats:
        counts = self._counts
        queued = private.queued_bytes(self._producer)
        if queued is not None:
            self._buffered = queued
        return ProducerStats(
            records_sent=counts.records,
            record_errors=self._record_errors,
            requests=counts.requests,
            request_seconds=counts.seconds,
            batches=counts.batches,
            batch_bytes=counts.batch_bytes,
            buffered_bytes=self._buffered,
        )

    async def send_offsets(self, topic: str, records: OffsetRecords) -> None:
        size = sum(len(key) + len(value or b"") + 64 for key, value in records)
        if self._inline() and size > private.batch_size(self._producer) // 2:
            await self._to_sender()
        for key, value in records:
            future = await self._call(self._producer.send(topic, key=key, value=value))
            self._pending.append(_Queued(offsets_item(topic), future, 1))

    async def commit(self) -> None:
        try:
            await self.flush()  # a rejected batch fails the commit before EndTxn
            if self._inline():
                await self._call(
                    private.end_transaction(self._producer, commit=True, version2=self._version2)
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
                private.end_transaction(self._producer, commit=False, version2=self._version2)
            )
        else:
            await self._call(self._producer.abort_transaction())

    async def close(self) -> None:
        await self._producer.stop()


def offsets_item(topic: str) -> Outgoing:
    """What a failed offsets record is reported as (it has no source record)."""
    return SourceRecord({"offsets topic": topic}, None, topic, None)


# ------------------------------------------------------------------------ batching


class _Position(NamedTuple):
    """Where a record went: the future of its batch, and its position in the batch."""

    future: Any
    position: int

    def metadata(self) -> RecordMetadata | None:
        """Kafka's metadata once the batch is acknowledged (None before, or on failure)."""
        f = self.future
        if not f.done() or f.cancelled() or f.exception() is not None:
            return None
        md = f.result()
        return RecordMetadata(md.topic, md.partition, md.offset + self.position, md.timestamp)


@dataclass
class _Queued:
    """A queued batch: the record or block of its first record, its future, its records
    (0 once counted as failed)."""

    item: Outgoing
    future: Any
    records: int


class _SegmentSent(SegmentSent):
    """Also the queued batches."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[_Queued] = []


_NO_HEADERS: Headers = []
"""Shared by records without headers (aiokafka only reads them; its own default is one
shared list too)."""

Room = Callable[[str, int], Awaitable[None]]
"""Called before a segment queues a batch (or a record too large for one) for a topic and
partition: another batch for that partition would wait until the first is sent."""


class _OpenBatch:
    __slots__ = ("builder", "count", "first", "members")

    def __init__(self, producer: AIOKafkaProducer, per_record: bool) -> None:
        self.builder = producer.create_batch()
        self.first: Outgoing | None = None
        self.count = 0
        self.members: list[SourceRecord] | None = [] if per_record else None

    def add(
        self,
        item: Outgoing,
        timestamp: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
    ) -> bool:
        """Append one record (``item``: the record, or its block); False if full."""
        if self.builder.append(timestamp=timestamp, key=key, value=value, headers=headers) is None:
            return False
        if not self.count:
            self.first = item
        self.count += 1
        if self.members is not None:
            assert isinstance(item, SourceRecord)
            self.members.append(item)
        return True


K = TypeVar("K")


def _indices_by(targets: Sequence[K]) -> dict[K, list[int]]:
    """The indices of each distinct item of ``targets``, in order."""
    groups: dict[K, list[int]] = {}
    for i, target in enumerate(targets):
        group = groups.get(target)
        if group is None:
            group = groups[target] = []
        group.append(i)
    return groups


def _picker(indices: list[int]) -> Callable[[Sequence[T]], Sequence[T]]:
    """The items of a column at ``indices``, in their order (C-speed)."""
    if len(indices) == 1:
        (only,) = indices
        return lambda column: (column[only],)
    return operator.itemgetter(*indices)


class _Segment:
    """The open batches of one :meth:`AiokafkaTaskProducer.send`, by topic and partition."""

    def __init__(
        self,
        producer: AIOKafkaProducer,
        partitioner: KeyPartitioner,
        per_record: bool,
        room: Room | None = None,
    ) -> None:
        self.producer = producer
        self.room = room
        self.partitioner = partitioner
        self.per_record = per_record
        self.sent = _SegmentSent()
        self.batches: dict[tuple[str, int], _OpenBatch] = {}
        self._partitions: dict[str, list[int]] = {}
        self._sticky: dict[str, int] = {}

    async def partitions(self, topic: str) -> list[int]:
        known = self._partitions.get(topic)
        if known is None:
            known = self._partitions[topic] = sorted(await self.producer.partitions_for(topic))
        return known

    def sticky(self, topic: str, known: Sequence[int]) -> int:
        """The partition of this segment's records without a key for ``topic``."""
        chosen = self._sticky.get(topic)
        if chosen is None:
            chosen = self._sticky[topic] = random.choice(known)
        return chosen

    def quick(self, record: SourceRecord, key: bytes | None, value: bytes | None) -> bool:
        """Append ``record`` without awaiting, when its partition is known and its open
        batch has room (most records); False: :meth:`record` must (nothing appended)."""
        topic, partition = record.topic, record.partition
        if partition is None:
            if key is None:
                partition = self._sticky.get(topic)
            else:
                known = self._partitions.get(topic)
                if known is None:
                    return False
                partition = self.partitioner.partition(key, known)
            if partition is None:
                return False
        batch = self.batches.get((topic, partition))
        if batch is None:
            return False
        headers = list(record.headers) if record.headers else _NO_HEADERS
        try:
            return batch.add(record, record.timestamp, key, value, headers)
        except TypeError:
            return False  # record() raises it, naming the record

    async def record(self, record: SourceRecord, key: bytes | None, value: bytes | None) -> None:
        topic, partition = record.topic, record.partition
        if partition is None:
            if key is not None:
                partition = self.partitioner.partition(key, await self.partitions(topic))
            else:  # known after a segment's first keyless record: no await per record
                partition = self._sticky.get(topic)
                if partition is None:
                    partition = self.sticky(topic, await self.partitions(topic))
        headers = list(record.headers) if record.headers else _NO_HEADERS
        try:
            batch = self.batches.get((topic, partition))
            if batch is None or not batch.add(record, record.timestamp, key, value, headers):
                await self.add(record, topic, partition, record.timestamp, key, value, headers)
        except TypeError as exc:
            raise ConversionError(
                f"{where(record)} cannot be written: its timestamp must be int or None and "
                f"its header values bytes ({exc})"
            ) from exc

    async def block(self, block: RecordBlock) -> None:
        """Append every row of ``block`` (the hot loop: no object per row)."""
        try:
            await self._append_block(block)
        except TypeError as exc:
            raise ConversionError(
                f"row {bad_row(block)} of {where(block)} cannot be written: keys, values "
                f"and header values must be bytes or None, timestamps int or None ({exc})"
            ) from exc
        self.sent.nbytes += sum(map(len, filter(None, block.values)))
        if block.keys is not None:
            self.sent.nbytes += sum(map(len, filter(None, block.keys)))

    async def _append_block(self, block: RecordBlock) -> None:
        """The rows of ``block`` by topic and partition (in order within each), each run
        appended to its open batch by :func:`~eos.kafka.aiokafka_private.append_rows`.
        Rows are grouped by their indices (no row object is kept: tens of thousands of
        live tuples would wake the garbage collector)."""
        n = len(block.values)
        if not n:
            return
        keys: Sequence[bytes | None] = block.keys if block.keys is not None else [None] * n
        stamps = block.timestamps if block.timestamps is not None else itertools.repeat(None)
        headers = header_rows(block)
        if block.topics is None:
            topic = block.topic
            known = await self.partitions(topic)
            if block.keys is None:  # the segment's partition for records without a key
                partitions = [self.sticky(topic, known)]
            else:
                partitions = self.partitioner.partitions(keys, known)
                if -1 in partitions:
                    sticky = self.sticky(topic, known)
                    partitions = [sticky if p < 0 else p for p in partitions]
            if len(partitions) == 1 or partitions.count(partitions[0]) == n:
                rows = zip(stamps, keys, block.values, headers, strict=False)
                await self._append_rows(block, topic, partitions[0], rows)
                return
            groups = {(topic, p): found for p, found in _indices_by(partitions).items()}
        else:
            targets = [
                (t, await self._row_partition(t, k))
                for t, k in zip(block.topics, keys, strict=True)
            ]
            groups = _indices_by(targets)
        if not isinstance(stamps, itertools.repeat):
            stamps = list(stamps)
        if not isinstance(headers, itertools.repeat):
            headers = list(headers)
        for (topic, partition), indices in groups.items():
            pick = _picker(indices)
            rows = zip(
                stamps if isinstance(stamps, itertools.repeat) else pick(stamps),
                pick(keys),
                pick(block.values),
                headers if isinstance(headers, itertools.repeat) else pick(headers),
                strict=False,
            )
            await self._append_rows(block, topic, partition, rows)

    async def _append_rows(
        self, block: RecordBlock, topic: str, partition: int, rows: Iterator[private.Row]
    ) -> None:
        """Append ``rows`` to the open batch of ``topic``-``partition``, queuing each batch
        that fills and opening the next (:meth:`add`)."""
        batches = self.batches
        while True:
            batch = batches.get((topic, partition))
            if batch is None:
                left = next(rows, None)
            else:
                count, left = private.append_rows(batch.builder, rows)
                if count:
                    if not batch.count:
                        batch.first = block
                    batch.count += count
            if left is None:
                return
            await self.add(block, topic, partition, *left)

    async def _row_partition(self, topic: str, key: bytes | None) -> int:
        known = await self.partitions(topic)
        if key is None:
            return self.sticky(topic, known)
        return self.partitioner.partition(key, known)

    async def add(
        self,
        item: Outgoing,
        topic: str,
        partition: int,
        timestamp: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
    ) -> None:
        """Append where the open batch is missing or full: queue the full one, open a
        new one; a record too large for any batch goes on its own."""
        batch = self.batches.get((topic, partition))
        if batch is None or batch.count:
            if batch is not None:
                await self.queue(topic, partition, batch)
            batch = self.batches[topic, partition] = _OpenBatch(self.producer, self.per_record)
            if batch.add(item, timestamp, key, value, headers):
                return
        if self.room is not None:
            await self.room(topic, partition)
        try:
            future = await self.producer.send(
                topic, value, key=key, partition=partition, timestamp_ms=timestamp,
                headers=headers or None,
            )  # fmt: skip
        except Exception as exc:
            raise SendFailed(item, exc) from exc
        self.sent.batches.append(_Queued(item, future, 1))
        if self.per_record:
            assert isinstance(item, SourceRecord)
            self.sent.records.append((item, _Position(future, 0)))

    async def queue(self, topic: str, partition: int, batch: _OpenBatch) -> None:
        assert batch.first is not None
        if self.room is not None:
            await self.room(topic, partition)
        try:
            future = await self.producer.send_batch(batch.builder, topic, partition=partition)
        except Exception as exc:
            raise SendFailed(batch.first, exc) from exc
        self.sent.batches.append(_Queued(batch.first, future, batch.count))
        if batch.members is not None:
            self.sent.records += [(r, _Position(future, i)) for i, r in enumerate(batch.members)]

    async def finish(self) -> _SegmentSent:
        for (topic, partition), batch in self.batches.items():
            if batch.count:
                await self.queue(topic, partition, batch)
        return self.sent
