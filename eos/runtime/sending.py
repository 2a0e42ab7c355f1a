"""Sending records in Kafka record batches.

A source task hands the producer a whole segment of records at once
(:func:`send_records`): in one pass each record is converted, given its partition
and appended to the open record batch of its topic-partition
(``AIOKafkaProducer.create_batch``); a full batch is queued with ``send_batch``,
which adds the partition to the open transaction like a single send does. This
costs a fraction of one ``send()`` per record. Order within a partition is the
order of the records.

Partitions follow Kafka's default partitioner: murmur2 of the key bytes modulo
the topic's partition count (hashes are cached per key); records without a key
stick to one partition per segment and topic, as the Java client's sticky
partitioner does.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from aiokafka import AIOKafkaProducer

from eos.api import RecordMetadata, SourceRecord

_MAX_CACHED_KEYS = 65_536
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_WORDS = [struct.Struct(f"<{n}I") for n in range(64)]

Convert = Callable[[SourceRecord], tuple[bytes | None, bytes | None]]
"""A record's key and value as bytes (raises for a record that cannot be converted)."""


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash of ``data`` (unsigned 32 bits, as aiokafka's), reading the
    input four bytes at a time."""
    length = len(data)
    h = 0x9747B28C ^ length
    n4 = length >> 2
    words = _WORDS[n4].unpack_from(data) if n4 < 64 else struct.unpack_from(f"<{n4}I", data)
    for k in words:
        k = (k * _M) & _MASK
        k ^= k >> 24
        h = ((h * _M) & _MASK) ^ ((k * _M) & _MASK)
    tail = length & 3
    if tail:
        base = length & ~3
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h = ((h ^ data[base]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


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
    """Kafka's default partitioner, with the hashes of recent keys cached."""

    def __init__(self) -> None:
        self._hashes: dict[bytes, int] = {}

    def partition(self, key: bytes, partitions: Sequence[int]) -> int:
        hashed = self._hashes.get(key)
        if hashed is None:
            if len(self._hashes) >= _MAX_CACHED_KEYS:
                self._hashes.clear()
            hashed = self._hashes[key] = murmur2(key) & 0x7FFFFFFF
        return partitions[hashed % len(partitions)]


@dataclass
class SegmentSent:
    """The queued batches (first record, batch future), the bytes of keys and values,
    and, when asked for, where each record went (for ``commit_record``)."""

    batches: list[tuple[SourceRecord, Any]] = field(default_factory=list)
    records: list[tuple[SourceRecord, Sent]] = field(default_factory=list)
    nbytes: int = 0


class _OpenBatch:
    __slots__ = ("builder", "count", "first", "members")

    def __init__(self, producer: AIOKafkaProducer, per_record: bool) -> None:
        self.builder = producer.create_batch()
        self.first: SourceRecord | None = None
        self.count = 0
        self.members: list[SourceRecord] | None = [] if per_record else None

    def append(self, record: SourceRecord, key: bytes | None, value: bytes | None) -> bool:
        headers = list(record.headers) if record.headers else []
        appended = self.builder.append(
            timestamp=record.timestamp, key=key, value=value, headers=headers
        )
        if appended is not None:
            if self.first is None:
                self.first = record
            self.count += 1
            if self.members is not None:
                self.members.append(record)
            return True
        return False


async def send_records(
    producer: AIOKafkaProducer,
    partitioner: KeyPartitioner,
    records: Sequence[SourceRecord],
    convert: Convert,
    *,
    per_record: bool,
) -> SegmentSent:
    """Convert and queue every record of ``records``; raise :class:`SendFailed` if one
    cannot be queued (and whatever ``convert`` raises)."""
    sent = SegmentSent()
    partitions: dict[str, list[int]] = {}
    sticky: dict[str, int] = {}
    batches: dict[tuple[str, int], _OpenBatch] = {}
    nbytes = 0

    async def queue(topic: str, partition: int, batch: _OpenBatch) -> None:
        assert batch.first is not None
        try:
            future = await producer.send_batch(batch.builder, topic, partition=partition)
        except Exception as exc:
            raise SendFailed(batch.first, exc) from exc
        sent.batches.append((batch.first, future))
        if batch.members is not None:
            sent.records += [(r, Sent(future, i)) for i, r in enumerate(batch.members)]

    for record in records:
        key, value = convert(record)
        nbytes += (len(key) if key else 0) + (len(value) if value else 0)
        topic, partition = record.topic, record.partition
        if partition is None:
            known = partitions.get(topic)
            if known is None:
                known = partitions[topic] = sorted(await producer.partitions_for(topic))
            if key is not None:
                partition = partitioner.partition(key, known)
            elif topic in sticky:
                partition = sticky[topic]
            else:
                partition = sticky[topic] = random.choice(known)
        batch = batches.get((topic, partition))
        if batch is None:
            batch = batches[topic, partition] = _OpenBatch(producer, per_record)
        if batch.append(record, key, value):
            continue
        if batch.count:  # the batch is full: queue it and start the next one
            await queue(topic, partition, batch)
            batch = batches[topic, partition] = _OpenBatch(producer, per_record)
            if batch.append(record, key, value):
                continue
        future = await _send_alone(producer, topic, partition, record, key, value)
        sent.batches.append((record, future))
        if per_record:
            sent.records.append((record, Sent(future, 0)))
    for (topic, partition), batch in batches.items():
        if batch.count:
            await queue(topic, partition, batch)
    sent.nbytes = nbytes
    return sent


async def _send_alone(
    producer: AIOKafkaProducer,
    topic: str,
    partition: int,
    record: SourceRecord,
    key: bytes | None,
    value: bytes | None,
) -> Any:
    """A record too large for a batch of ``batch.size`` goes on its own."""
    try:
        future = await producer.send(
            topic, value, key=key, partition=partition, timestamp_ms=record.timestamp,
            headers=list(record.headers) or None,
        )  # fmt: skip
    except Exception as exc:
        raise SendFailed(record, exc) from exc
    return future
