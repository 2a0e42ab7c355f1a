"""The task-producer port: what a source task needs from its (transactional) producer.

A source task owns one producer for its whole run. It calls, in this order::

    start()                          init; with a transactional id this fences every
                                     older producer of the id (InitProducerId)
    ( begin()                        exactly-once only: open a transaction
      send(items) ... check()        queue records and record blocks; check() raises
                                     for a send that already failed
      send_offsets(topic, records)   the source offsets, in the same transaction
      commit() | abort() )*
    flush()                          at-least-once: wait until every send is acknowledged
    close()

Errors, the same for every implementation:

- :class:`~eos.errors.FencedError`: a newer producer holds the transactional id, or the
  broker aborted a transaction that outlived ``transaction.timeout.ms`` (the task tells
  the two apart by the transaction's age); never retried;
- :class:`SendFailed`: a record or block could not be written; ``cause`` is a
  :class:`~eos.errors.FencedError` when fencing (or a timed-out transaction) is why;
- :class:`~eos.errors.TransactionAbortable` (itself, or as a :class:`SendFailed` cause):
  the broker answered TRANSACTION_ABORTABLE; :meth:`TaskProducer.abort` leaves the producer
  usable for the next transaction;
- :class:`~eos.errors.TaskError`: anything else that ends the task (a failed commit,
  an unreachable broker at start-up, a fatal producer error).

Implementations: :mod:`.aiokafka` (the default) and :mod:`.librdkafka` (``confluent-kafka``,
the ``eos[librdkafka]`` extra), chosen with ``producer.client``. This module also holds what
every implementation needs of records: :func:`where` (how errors name a record),
:func:`header_rows` and :func:`bad_row` (a block's headers per row, its first bad row),
:func:`count_records` and :func:`expand_blocks`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from eos.api import RecordBlock, RecordMetadata, SourceRecord
from eos.runtime.observer import ProducerStats as ProducerStats

if TYPE_CHECKING:
    from eos.kafka.clients import ClientConfig

ProducerClient = Literal["aiokafka", "librdkafka"]
PRODUCER_CLIENTS: tuple[ProducerClient, ...] = ("aiokafka", "librdkafka")

Outgoing = SourceRecord | RecordBlock
"""What a poll returns: records and blocks of records."""

Convert = Callable[[SourceRecord], tuple[bytes | None, bytes | None] | None]
"""A record's key and value as bytes; None: skip the record (the task tolerated its
failure); raises for a record that cannot be converted."""

OffsetRecords = list[tuple[bytes, bytes | None]]
"""Offsets-topic records (key, value)."""

Headers = list[tuple[str, bytes | None]]


class Sent(Protocol):
    """Where one record went, known once it is acknowledged."""

    def metadata(self) -> RecordMetadata | None:
        """Kafka's metadata once acknowledged (None before, or on failure)."""


@dataclass
class SegmentSent:
    """What one :meth:`TaskProducer.send` queued: the bytes of keys and values, and, when
    asked for (``per_record``), where each record went (for ``commit_record``)."""

    records: list[tuple[SourceRecord, Sent]] = field(default_factory=list)
    nbytes: int = 0


_TOO_LARGE = re.compile(r"TooLarge|TOO_LARGE")
"""aiokafka's MessageSizeTooLargeError, librdkafka's MSG_SIZE_TOO_LARGE."""


def too_large_hint(error: BaseException, batch_size: str) -> str:
    """What to change when the broker refused a batch as too large (else empty): a batch
    of many records grows up to the producer's ``batch.size``."""
    if not _TOO_LARGE.search(f"{type(error).__name__} {error!r}"):
        return ""
    return (
        f"; a batch grows up to the producer's batch.size ({batch_size} bytes): set "
        "producer.override.batch.size below the topic's max.message.bytes (the broker's "
        "message.max.bytes), or raise that if a single record is larger"
    )


class SendFailed(Exception):
    """A record could not be written; ``item`` is the record or block it came from."""

    def __init__(self, item: Outgoing, cause: BaseException) -> None:
        self.item = item
        self.cause = cause
        super().__init__(repr(cause))


class TaskProducer(Protocol):
    """One task's producer (see the module docstring for the call order and errors)."""

    client: ProducerClient

    async def start(self) -> None:
        """Connect; with a transactional id, init transactions (fencing older instances)."""

    async def begin(self) -> None:
        """Open a transaction."""

    async def send(
        self, items: Sequence[Outgoing], convert: Convert, *, per_record: bool
    ) -> SegmentSent:
        """Convert and queue every record and block of ``items``, in order (a record
        ``convert`` answers None for is left out). With ``per_record`` blocks must have
        been expanded and each queued record's :class:`Sent` is returned. Raises
        :class:`SendFailed` (and whatever ``convert`` raises)."""

    def check(self) -> None:
        """Raise :class:`SendFailed` for a send that already failed (does not wait)."""

    async def flush(self) -> None:
        """Wait until every queued record is acknowledged; :class:`SendFailed` if one failed."""

    async def send_offsets(self, topic: str, records: OffsetRecords) -> None:
        """Queue offsets records (in the open transaction, if there is one)."""

    async def commit(self) -> None:
        """Commit the open transaction (flushes first)."""

    async def abort(self) -> None:
        """Abort the open transaction; its records never become visible."""

    async def close(self) -> None:
        """Release the client (after a failure too; never raises)."""

    def stats(self) -> ProducerStats:
        """The client's figures so far (cheap: read at every scrape, from another thread)."""


class ProducerFactory(Protocol):
    """Makes a task's producer (:func:`eos.runtime.task.producers.make_task_producer`; a test
    passes a fake)."""

    def __call__(
        self, client: ProducerClient, config: ClientConfig, *, per_record: bool, **fixed: Any
    ) -> TaskProducer: ...


# ------------------------------------------------------------ helpers every producer uses


def where(item: Outgoing) -> str:
    """A record or block, as error messages name it."""
    what = "the record" if isinstance(item, SourceRecord) else "the record block"
    return (
        f"{what} for topic {item.topic!r} from source partition "
        f"{dict(item.source_partition)} at offset {dict(item.source_offset or {})}"
    )


_RECORDS_ONLY = frozenset({SourceRecord})


def count_records(items: Iterable[Outgoing]) -> int:
    """Records in ``items``, each row of a block counted."""
    if type(items) is list and set(map(type, items)) <= _RECORDS_ONLY:  # C loops, no blocks
        return len(items)
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
