"""Sending converted records in Kafka record batches.

A source task hands the producer a whole segment of records at once: they are
grouped by topic-partition, appended to record batches
(``AIOKafkaProducer.create_batch``) and queued with ``send_batch``, which adds the
partition to the open transaction like a single send does. This costs a
fraction of one ``send()`` per record. Order within a partition is the order
of the records.

Partitions follow Kafka's default partitioner: murmur2 of the key bytes modulo
the topic's partition count (hashes are cached per key); records without a key
stick to one partition per segment and topic, as the Java client's sticky
partitioner does.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import murmur2

from eos.api import RecordMetadata, SourceRecord

_MAX_CACHED_KEYS = 65_536


@dataclass(slots=True)
class Outgoing:
    """A record with its converted key and value."""

    record: SourceRecord
    key: bytes | None
    value: bytes | None

    @property
    def nbytes(self) -> int:
        return len(self.key or b"") + len(self.value or b"")


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


class SendFailed(Exception):
    """Queuing a batch failed; ``record`` is its first record."""

    def __init__(self, record: SourceRecord, cause: BaseException) -> None:
        self.record = record
        self.cause = cause
        super().__init__(repr(cause))


class KeyPartitioner:
    def __init__(self) -> None:
        self._hashes: dict[bytes, int] = {}

    def _hash(self, key: bytes) -> int:
        hashed = self._hashes.get(key)
        if hashed is None:
            if len(self._hashes) >= _MAX_CACHED_KEYS:
                self._hashes.clear()
            hashed = self._hashes[key] = murmur2(key) & 0x7FFFFFFF
        return hashed

    async def assign(
        self, producer: AIOKafkaProducer, segment: Sequence[Outgoing]
    ) -> dict[tuple[str, int], list[Outgoing]]:
        """Group records by topic-partition, in record order."""
        topics: dict[str, list[int]] = {}
        sticky: dict[str, int] = {}
        groups: dict[tuple[str, int], list[Outgoing]] = {}
        for out in segment:
            topic, partition = out.record.topic, out.record.partition
            if partition is None:
                partitions = topics.get(topic)
                if partitions is None:
                    partitions = topics[topic] = sorted(await producer.partitions_for(topic))
                if out.key is None:
                    if topic not in sticky:
                        sticky[topic] = random.choice(partitions)
                    partition = sticky[topic]
                else:
                    partition = partitions[self._hash(out.key) % len(partitions)]
            groups.setdefault((topic, partition), []).append(out)
        return groups


@dataclass
class SegmentSent:
    """The queued batches (first record, batch future), and, when asked for, where
    each record went (for ``commit_record``)."""

    batches: list[tuple[SourceRecord, Any]]
    records: list[tuple[SourceRecord, Sent]]


async def send_segment(
    producer: AIOKafkaProducer,
    partitioner: KeyPartitioner,
    segment: Sequence[Outgoing],
    *,
    per_record: bool,
) -> SegmentSent:
    """Queue every record of ``segment``; raise :class:`SendFailed` if one cannot be."""
    sent = SegmentSent([], [])

    async def queue(topic: str, partition: int, builder: Any, members: list[Outgoing]) -> None:
        try:
            future = await producer.send_batch(builder, topic, partition=partition)
        except Exception as exc:
            raise SendFailed(members[0].record, exc) from exc
        sent.batches.append((members[0].record, future))
        if per_record:
            sent.records += [(out.record, Sent(future, i)) for i, out in enumerate(members)]

    for (topic, partition), outs in (await partitioner.assign(producer, segment)).items():
        builder = producer.create_batch()
        members: list[Outgoing] = []
        for out in outs:
            if _append(builder, out):
                members.append(out)
                continue
            if members:  # the batch is full: queue it and start the next one
                await queue(topic, partition, builder, members)
                builder, members = producer.create_batch(), []
                if _append(builder, out):
                    members.append(out)
                    continue
            future = await _send_alone(producer, topic, partition, out)
            sent.batches.append((out.record, future))
            if per_record:
                sent.records.append((out.record, Sent(future, 0)))
        if members:
            await queue(topic, partition, builder, members)
    return sent


def _append(builder: Any, out: Outgoing) -> bool:
    r = out.record
    headers = list(r.headers) if r.headers else []
    return (
        builder.append(timestamp=r.timestamp, key=out.key, value=out.value, headers=headers)
        is not None
    )


async def _send_alone(producer: AIOKafkaProducer, topic: str, partition: int, out: Outgoing) -> Any:
    """A record too large for a batch of ``batch.size`` goes on its own."""
    r = out.record
    try:
        future = await producer.send(
            topic, out.value, key=out.key, partition=partition, timestamp_ms=r.timestamp,
            headers=list(r.headers) or None,
        )  # fmt: skip
    except Exception as exc:
        raise SendFailed(r, exc) from exc
    return future
