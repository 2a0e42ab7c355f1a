"""Sending records in Kafka record batches (the aiokafka task producer's hot path).

A source task hands the producer a whole segment at once (:func:`send_records`):
in one pass each record is converted, given its partition and appended to the
open record batch of its topic-partition (``AIOKafkaProducer.create_batch``); a
full batch is queued with ``send_batch``, which adds the partition to the open
transaction like a single send does. This costs a fraction of one ``send()`` per
record. Order within a partition is the order of the records.

A :class:`RecordBlock` skips the per-record work: its keys are hashed as one
column (:meth:`KeyPartitioner.partitions`) and its rows are appended straight
from its columns, with no object per row.

Partitions follow Kafka's default partitioner (:mod:`eos.runtime.partitioner`);
records without a key stick to one partition per segment and topic, as the Java
client's sticky partitioner does.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from aiokafka import AIOKafkaProducer

from eos.api import RecordBlock, RecordMetadata, SourceRecord
from eos.errors import ConversionError
from eos.runtime.partitioner import KeyPartitioner
from eos.runtime.producers.base import Convert, Outgoing, SendFailed
from eos.runtime.producers.base import SegmentSent as _SegmentSent

__all__ = ["Convert", "Outgoing", "SegmentSent", "SendFailed", "Sent", "send_records"]


def where(item: Outgoing) -> str:
    """A record or block, as error messages name it."""
    what = "the record" if isinstance(item, SourceRecord) else "the record block"
    return (
        f"{what} for topic {item.topic!r} from source partition "
        f"{dict(item.source_partition)} at offset {dict(item.source_offset or {})}"
    )


def count_records(items: Iterable[Outgoing]) -> int:
    """Records in ``items``, each row of a block counted."""
    return sum(len(item) if isinstance(item, RecordBlock) else 1 for item in items)


def expand_blocks(items: Sequence[Outgoing]) -> list[SourceRecord]:
    """``items`` with every block replaced by its rows as records."""
    records: list[SourceRecord] = []
    for item in items:
        if isinstance(item, RecordBlock):
            records += item.records()
        else:
            records.append(item)
    return records


class Sent(NamedTuple):
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
class SegmentSent(_SegmentSent):
    """Also the queued batches: (the record or block of the first record, batch future)."""

    batches: list[tuple[Outgoing, Any]] = field(default_factory=list)


Headers = list[tuple[str, bytes | None]]

BeforeFull = Callable[[], Awaitable[None]]
"""Called once, before a segment queues a full batch or a record too large for a batch:
another batch for that partition would then wait until the first is sent."""


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


class _Segment:
    """The open batches of one :func:`send_records` call, by topic and partition."""

    def __init__(
        self,
        producer: AIOKafkaProducer,
        partitioner: KeyPartitioner,
        per_record: bool,
        before_full: BeforeFull | None = None,
    ) -> None:
        self.producer = producer
        self.before_full = before_full
        self.partitioner = partitioner
        self.per_record = per_record
        self.sent = SegmentSent()
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

    async def record(self, record: SourceRecord, key: bytes | None, value: bytes | None) -> None:
        topic, partition = record.topic, record.partition
        if partition is None:
            known = await self.partitions(topic)
            if key is not None:
                partition = self.partitioner.partition(key, known)
            else:
                partition = self.sticky(topic, known)
        headers = list(record.headers) if record.headers else []
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
        n = len(block.values)
        if not n:
            return
        keys: Sequence[bytes | None] = block.keys if block.keys is not None else [None] * n
        stamps = block.timestamps if block.timestamps is not None else itertools.repeat(None)
        topics: Iterable[str]
        if block.topics is None:
            topics = itertools.repeat(block.topic)
            known = await self.partitions(block.topic)
            partitions = self.partitioner.partitions(keys, known)
            if -1 in partitions:
                sticky = self.sticky(block.topic, known)
                partitions = [sticky if p < 0 else p for p in partitions]
        else:
            topics = block.topics
            partitions = [
                await self._row_partition(t, k) for t, k in zip(topics, keys, strict=True)
            ]
        batches = self.batches
        for topic, partition, key, value, stamp, headers in zip(
            topics, partitions, keys, block.values, stamps, header_rows(block), strict=False
        ):
            batch = batches.get((topic, partition))
            if batch is None or (
                batch.builder.append(timestamp=stamp, key=key, value=value, headers=headers) is None
            ):
                await self.add(block, topic, partition, stamp, key, value, headers)
            else:
                if not batch.count:
                    batch.first = block
                batch.count += 1

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
                await self._before_full()
                await self.queue(topic, partition, batch)
            batch = self.batches[topic, partition] = _OpenBatch(self.producer, self.per_record)
            if batch.add(item, timestamp, key, value, headers):
                return
        await self._before_full()
        try:
            future = await self.producer.send(
                topic, value, key=key, partition=partition, timestamp_ms=timestamp,
                headers=headers or None,
            )  # fmt: skip
        except Exception as exc:
            raise SendFailed(item, exc) from exc
        self.sent.batches.append((item, future))
        if self.per_record:
            assert isinstance(item, SourceRecord)
            self.sent.records.append((item, Sent(future, 0)))

    async def _before_full(self) -> None:
        if self.before_full is not None:
            await self.before_full()
            self.before_full = None

    async def queue(self, topic: str, partition: int, batch: _OpenBatch) -> None:
        assert batch.first is not None
        try:
            future = await self.producer.send_batch(batch.builder, topic, partition=partition)
        except Exception as exc:
            raise SendFailed(batch.first, exc) from exc
        self.sent.batches.append((batch.first, future))
        if batch.members is not None:
            self.sent.records += [(r, Sent(future, i)) for i, r in enumerate(batch.members)]

    async def finish(self) -> SegmentSent:
        for (topic, partition), batch in self.batches.items():
            if batch.count:
                await self.queue(topic, partition, batch)
        return self.sent


def bad_row(block: RecordBlock) -> int | str:
    """The first row of ``block`` with a key, value, timestamp or header value of the
    wrong type ("?" if none is found)."""
    fine = (bytes, bytearray, memoryview, type(None))
    values: Sequence[object] = block.values  # as given, whatever the annotations say
    keys: Sequence[object] = block.keys if block.keys is not None else []
    stamps: Sequence[object] = block.timestamps if block.timestamps is not None else []
    for row, value in enumerate(values):
        if not isinstance(value, fine):
            return row
        if row < len(keys) and not isinstance(keys[row], fine):
            return row
        if row < len(stamps) and not isinstance(stamps[row], int | None):
            return row
        if any(not isinstance(c[row], fine) for c in block.header_columns.values()):
            return row
    return "?"


def header_rows(block: RecordBlock) -> Iterable[Headers]:
    """Each row's headers: the block's, then its header columns' (None: left out)."""
    common: Headers = list(block.headers)
    columns = list(block.header_columns.items())
    if not columns:
        return itertools.repeat(common)
    if len(columns) == 1:
        name, column = columns[0]
        return ([*common, (name, v)] if v is not None else common for v in column)
    names = [name for name, _ in columns]
    return (
        [*common, *((h, v) for h, v in zip(names, values, strict=True) if v is not None)]
        for values in zip(*(column for _, column in columns), strict=True)
    )


async def send_records(
    producer: AIOKafkaProducer,
    partitioner: KeyPartitioner,
    items: Sequence[Outgoing],
    convert: Convert,
    *,
    per_record: bool,
    before_full: BeforeFull | None = None,
) -> SegmentSent:
    """Convert and queue every record and block of ``items``; raise :class:`SendFailed`
    if one cannot be queued (and whatever ``convert`` raises). With ``per_record``,
    blocks must have been expanded (:func:`expand_blocks`)."""
    segment = _Segment(producer, partitioner, per_record, before_full)
    nbytes = 0
    for item in items:
        if type(item) is SourceRecord:
            key, value = convert(item)
            nbytes += (len(key) if key else 0) + (len(value) if value else 0)
            await segment.record(item, key, value)
        else:
            assert isinstance(item, RecordBlock)
            assert not per_record, "expand blocks for per-record bookkeeping"
            await segment.block(item)
    segment.sent.nbytes += nbytes
    return await segment.finish()
