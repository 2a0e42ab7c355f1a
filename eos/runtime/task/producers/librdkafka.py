"""The librdkafka task producer (``producer.client=librdkafka``, the ``eos[librdkafka]``
extra: ``confluent-kafka``).

librdkafka batches, compresses and sends in its own C threads, so the task's event loop
only hands it records (``produce``, a C call per record, no Python batch building).

Off the event loop: the calls that block until the broker answers (``init_transactions``,
``commit_transaction``, ``abort_transaction``, ``flush``) run in a worker thread
(:func:`anyio.to_thread.run_sync`), in short slices (:data:`SLICE_S`) so a cancelled
task is not held up by one of them for long.

Delivery reports: librdkafka reports only failures (``delivery.report.only.error``)
unless the task overrides ``commit_record``, which needs where each record went. To keep
the per-record cost at the ``produce`` call itself, the records of one send share one
report callback, so a delivery failure names the first record (or block) of its send;
a record refused at once (too large, say) is named exactly. A report
is served by ``poll`` or ``flush`` in whichever thread calls it; the callbacks only append
to a list the task's loop reads (:meth:`LibrdkafkaTaskProducer.check`), so nothing of the
loop is touched from another thread.

Keys are partitioned with ``murmur2_random``, Kafka's default partitioner, so a keyed record
lands on the same partition as with the aiokafka producer or a Java client. Records without
a key stick to one partition per send and topic, chosen here, as the aiokafka producer does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from itertools import repeat
from typing import Any

import anyio
import anyio.to_thread
import structlog
from confluent_kafka import KafkaError, KafkaException, Producer

from eos.api import RecordBlock, RecordMetadata, SourceRecord
from eos.errors import ConversionError, EosError, FencedError, TaskError, TransactionAbortable
from eos.kafka.clients import ClientConfig
from eos.runtime.task.producers.base import (
    Convert,
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
from eos.runtime.task.producers.settings import librdkafka_settings

log = structlog.get_logger(__name__)

STATISTICS_INTERVAL_MS = 5000
"""How often librdkafka hands over its statistics (the producer's client metrics), unless
the connector's ``producer.override.statistics.interval.ms`` says otherwise."""

SLICE_S = 0.5
"""Longest single blocking librdkafka call; calls that need longer are repeated."""

ABORT_FLUSH_S = 30.0
"""How long an abort first waits for the records of the transaction to be delivered."""

METADATA_MAX_AGE_S = 60.0
"""How long a topic's partition count is reused (for the partition of records without a key)."""

START_TIMEOUT_S = 30.0
"""How long start-up may try to reach the cluster (aiokafka gives up about as soon)."""

_FENCED = frozenset(
    {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
)
_PURGED = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})

Failures = list[tuple[Outgoing, KafkaError]]


def _record_failure(failures: Failures, item: Outgoing, err: KafkaError | None, _msg: Any) -> None:
    """Delivery report of a record of ``item`` (runs in whichever thread serves it)."""
    if err is not None and err.code() not in _PURGED:
        failures.append((item, err))


class _Delivered:
    """A record's delivery report, for ``commit_record`` (the per-record mode). The
    report runs once per record: it keeps the message and reads it only when asked."""

    __slots__ = ("failures", "item", "msg")

    def __init__(self, failures: Failures, item: SourceRecord) -> None:
        self.failures = failures
        self.item = item
        self.msg: Any = None

    def __call__(self, err: KafkaError | None, msg: Any) -> None:
        if err is None:
            self.msg = msg
        elif err.code() not in _PURGED:
            self.failures.append((self.item, err))

    def metadata(self) -> RecordMetadata | None:
        msg = self.msg
        if msg is None:
            return None
        _, stamp = msg.timestamp()
        return RecordMetadata(msg.topic(), msg.partition(), msg.offset(), stamp)


_FINE = frozenset({bytes, type(None)})


def _check_columns(block: RecordBlock) -> None:
    """librdkafka would take a str as its UTF-8 bytes; a block must hold bytes (as the
    aiokafka producer requires). A set of the column's types: no Python loop per row."""
    columns: list[Sequence[object]] = [block.values, *block.header_columns.values()]
    if block.keys is not None:
        columns.append(block.keys)
    for column in columns:
        if not set(map(type, column)) <= _FINE:
            raise ConversionError(
                f"row {bad_row(block)} of {where(block)} cannot be written: keys, values "
                "and header values must be bytes or None, timestamps int or None"
            )


def as_eos_error(err: KafkaError, what: str) -> EosError:
    """``err`` as eos's errors: fenced (a zombie, or a timed-out transaction), abortable
    (TRANSACTION_ABORTABLE: abort, then go on), else fatal."""
    if err.code() in _FENCED:
        return FencedError(f"producer fenced: {err.str()} ({what})")
    if err.code() == KafkaError.TRANSACTION_ABORTABLE:
        return TransactionAbortable(f"{what}: the broker answered {err.name()}: {err.str()}")
    return TaskError(f"{what} failed: {err.name()}: {err.str()}")


class LibrdkafkaTaskProducer:
    client: ProducerClient = "librdkafka"

    def __init__(
        self,
        config: ClientConfig,
        *,
        transactional_id: str | None = None,
        transaction_timeout_ms: int | None = None,
        per_record: bool = False,
    ) -> None:
        settings: dict[str, Any] = dict(librdkafka_settings(config))
        # A commit waits for everything queued: let an interval's worth of records queue
        # up (librdkafka's default, 100 000, makes a fast task wait for room).
        settings.setdefault("queue.buffering.max.messages", 1_000_000)
        settings.setdefault("statistics.interval.ms", STATISTICS_INTERVAL_MS)
        settings.update(
            {
                "enable.idempotence": True,
                "partitioner": "murmur2_random",
                "delivery.report.only.error": not per_record,
                "error_cb": self._on_error,
                "stats_cb": self._on_statistics,
            }
        )
        if transactional_id is not None:
            settings["transactional.id"] = transactional_id
        if transaction_timeout_ms is not None:
            settings["transaction.timeout.ms"] = transaction_timeout_ms
        # What the client connects to: a producer override wins over the common setting.
        self._bootstrap = settings.get("bootstrap.servers", config.bootstrap_servers)
        self._transactional = transactional_id is not None
        self._producer = Producer(settings)
        self._failures: Failures = []
        self._fatal: KafkaError | None = None
        self._partitions: dict[str, tuple[float, int]] = {}
        """Partition count per topic, and when it was learnt."""
        self._stats = ProducerStats()
        self._record_errors = 0
        """Failed records of transactions before the current one."""

    async def _count(self, topic: str) -> int:
        known = self._partitions.get(topic)
        now = time.monotonic()
        if known is None or now - known[0] > METADATA_MAX_AGE_S:
            try:
                metadata = await anyio.to_thread.run_sync(
                    partial(self._producer.list_topics, topic, START_TIMEOUT_S)
                )
            except KafkaException as exc:
                raise self._error(exc.args[0], f"metadata of topic {topic!r}") from exc
            found = metadata.topics.get(topic)
            count = len(found.partitions) if found is not None and not found.error else 0
            if count == 0:
                return 0  # not there (yet): asked again by the next send
            known = self._partitions[topic] = (now, count)
        return known[1]

    async def _sticky(self, sticky: dict[str, int], topic: str) -> int:
        """The partition of this send's records without a key for ``topic``."""
        chosen = sticky.get(topic)
        if chosen is None:
            count = await self._count(topic)
            # A topic not created yet: librdkafka creates it (if the broker auto-creates
            # topics) and picks the partition itself (-1).
            chosen = sticky[topic] = random.randrange(count) if count else -1
        return chosen

    def _on_statistics(self, text: str) -> None:
        """librdkafka's statistics (every ``statistics.interval.ms``, via poll): its totals
        and current queue as they are; its windows (round trips, batch sizes) added up."""
        try:
            stats = json.loads(text)
            rtt = [b["rtt"] for b in stats.get("brokers", {}).values() if b.get("nodeid", -1) >= 0]
            sizes = [t["batchsize"] for t in stats.get("topics", {}).values()]
            old = self._stats
            self._stats = ProducerStats(
                records_sent=stats["txmsgs"],
                requests=old.requests + sum(w["cnt"] for w in rtt),
                request_seconds=old.request_seconds + sum(w["sum"] for w in rtt) / 1e6,
                batches=old.batches + sum(w["cnt"] for w in sizes),
                batch_bytes=old.batch_bytes + sum(w["sum"] for w in sizes),
                buffered_bytes=stats["msg_size"],
            )
        except (ValueError, KeyError, TypeError) as exc:
            log.debug("producer statistics not read", error=repr(exc))

    def stats(self) -> ProducerStats:
        """The figures of librdkafka's last statistics: served here too (poll is
        thread-safe), or a task that stopped sending would show them as they were."""
        with contextlib.suppress(Exception):  # closing: the last figures
            self._producer.poll(0)
        errors = self._record_errors + len(self._failures)
        return dataclasses.replace(self._stats, record_errors=errors)

    def _on_error(self, err: KafkaError) -> None:
        """Client-level errors (librdkafka's own thread, via poll): keep a fatal one."""
        if err.fatal() and self._fatal is None:
            self._fatal = err

    # ------------------------------------------------------------ blocking calls

    async def _blocking(self, call: Callable[[float], Any], what: str, limit: float | None) -> None:
        """Run ``call(SLICE_S)`` in a thread until it stops timing out (or ``limit`` s)."""
        deadline = None if limit is None else time.monotonic() + limit
        while True:
            try:
                await anyio.to_thread.run_sync(call, SLICE_S)
                return
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                timed_out = err.code() in (KafkaError._TIMED_OUT, KafkaError._TIMED_OUT_QUEUE)
                if not (err.retriable() or timed_out) or err.txn_requires_abort():
                    raise self._error(err, what) from exc
                if deadline is not None and time.monotonic() >= deadline:
                    raise self._error(err, what) from exc

    def _error(self, err: KafkaError, what: str) -> EosError:
        self._serve()
        if self._failures:  # a failed record explains a failed commit best
            item, failed = self._failures[0]
            raise SendFailed(item, as_eos_error(failed, "sending"))
        return as_eos_error(err, what)

    # ------------------------------------------------------------------ the port

    async def start(self) -> None:
        if self._transactional:
            try:
                await self._blocking(self._producer.init_transactions, "init", START_TIMEOUT_S)
            except TaskError as exc:
                raise TaskError(
                    f"the task's producer could not initialise its transactions with the "
                    f"cluster at bootstrap.servers={self._bootstrap}: {exc}"
                ) from exc
            return
        try:
            await anyio.to_thread.run_sync(self._producer.list_topics, None, START_TIMEOUT_S)
        except KafkaException as exc:
            raise TaskError(
                f"the task's producer cannot reach the cluster at "
                f"bootstrap.servers={self._bootstrap}: {exc.args[0].str()}"
            ) from exc

    async def begin(self) -> None:
        try:
            self._producer.begin_transaction()
        except KafkaException as exc:
            raise self._error(exc.args[0], "begin transaction") from exc

    async def send(
        self, items: Sequence[Outgoing], convert: Convert, *, per_record: bool
    ) -> SegmentSent:
        sent = SegmentSent()
        produce: Callable[..., None] = self._producer.produce  # headers: list[tuple[str, bytes]]
        failures = self._failures
        sticky: dict[str, int] = {}
        nbytes = 0
        report: Callable[[KafkaError | None, Any], None] | None = None
        for item in items:
            if type(item) is SourceRecord:
                pair = convert(item)
                if pair is None:  # skipped: its failure was tolerated
                    continue
                key, value = pair
                nbytes += (len(key) if key else 0) + (len(value) if value else 0)
                if per_record:
                    report = delivered = _Delivered(failures, item)
                    sent.records.append((item, delivered))
                elif report is None:  # one per send: a later failure names its first record
                    report = partial(_record_failure, failures, item)
                partition = item.partition
                if partition is None:
                    if key is not None:
                        partition = -1
                    else:  # known after a send's first keyless record: no await per record
                        partition = sticky.get(item.topic)
                        if partition is None:
                            partition = await self._sticky(sticky, item.topic)
                try:
                    if item.timestamp is None and not item.headers:  # positional: the fast call
                        try:
                            produce(item.topic, value, key, partition, report)
                        except BufferError:
                            await self._room()
                            produce(item.topic, value, key, partition, report)
                    else:
                        await self._produce_full(item, key, value, partition, report)
                except TypeError as exc:
                    raise ConversionError(
                        f"{where(item)} cannot be written: its timestamp must be int or None "
                        f"and its header values bytes ({exc})"
                    ) from exc
                except (KafkaException, ValueError) as exc:
                    raise SendFailed(item, self._cause(exc)) from exc
            else:
                assert isinstance(item, RecordBlock)
                nbytes += await self._block(item, sticky)
        self._serve()  # delivery reports (non-blocking)
        sent.nbytes = nbytes
        return sent

    async def _produce_full(
        self,
        item: SourceRecord,
        key: bytes | None,
        value: bytes | None,
        partition: int,
        report: Callable[[KafkaError | None, Any], None],
    ) -> None:
        """Produce a record with a timestamp or headers (keywords: the slower call)."""
        produce: Callable[..., None] = self._producer.produce  # headers: list[tuple[str, bytes]]
        headers = list(item.headers) if item.headers else None
        stamp = item.timestamp or 0
        try:
            produce(item.topic, value, key, partition, report, timestamp=stamp, headers=headers)
        except BufferError:
            await self._room()
            produce(item.topic, value, key, partition, report, timestamp=stamp, headers=headers)

    async def _plain_rows(
        self,
        topic: str,
        keys: Iterable[bytes | None],
        values: Sequence[bytes | None],
        partition: int,
        report: Callable[[KafkaError | None, Any], None],
    ) -> None:
        """The common blocks: one topic, no timestamps or headers (the positional call).
        Every row keyed (``partition`` -1: librdkafka partitions by key), or none (the
        send's sticky partition of the topic, as keyless records go: FileSource's lines,
        records folded into a block)."""
        produce: Callable[..., None] = self._producer.produce
        for key, value in zip(keys, values):  # noqa: B905 (keys may be repeat(None))
            try:
                produce(topic, value, key, partition, report)
            except BufferError:
                await self._room()
                produce(topic, value, key, partition, report)

    async def _block(self, block: RecordBlock, sticky: dict[str, int]) -> int:
        """Produce every row of ``block``; the bytes of its keys and values."""
        _check_columns(block)
        report = partial(_record_failure, self._failures, block)
        plain = block.timestamps is None and not block.headers and not block.header_columns
        keys = block.keys
        try:
            if plain and block.topics is None and keys is not None and None not in keys:
                await self._plain_rows(block.topic, keys, block.values, -1, report)
            elif plain and block.topics is None and keys is None:
                chosen = sticky.get(block.topic)
                partition = await self._sticky(sticky, block.topic) if chosen is None else chosen
                await self._plain_rows(block.topic, repeat(None), block.values, partition, report)
            else:
                await self._rows(block, report, sticky)
        except TypeError as exc:
            raise ConversionError(
                f"row {bad_row(block)} of {where(block)} cannot be written: keys, values "
                f"and header values must be bytes or None, timestamps int or None ({exc})"
            ) from exc
        except (KafkaException, ValueError) as exc:
            raise SendFailed(block, self._cause(exc)) from exc
        nbytes = sum(map(len, filter(None, block.values)))
        if keys is not None:
            nbytes += sum(map(len, filter(None, keys)))
        return nbytes

    async def _rows(
        self,
        block: RecordBlock,
        report: Callable[[KafkaError | None, Any], None],
        sticky: dict[str, int],
    ) -> None:
        """Any block, row by row (keywords for timestamps and headers)."""
        n = len(block.values)
        keys: Sequence[bytes | None] = block.keys if block.keys is not None else [None] * n
        stamps: Sequence[int | None] = (
            block.timestamps if block.timestamps is not None else [None] * n
        )
        topics: Sequence[str] = block.topics if block.topics is not None else [block.topic] * n
        # Positional: (topic, value, key, partition, on_delivery, callback, timestamp,
        # headers), the order of confluent-kafka's C signature; a third faster per row
        # than keywords (test_record_blocks checks the headers and timestamps arrive).
        produce: Callable[..., None] = self._producer.produce  # headers: list[tuple[str, bytes]]
        rows = zip(topics, keys, block.values, stamps, header_rows(block), strict=False)
        for topic, key, value, stamp, headers in rows:
            partition = -1
            if key is None:
                chosen = sticky.get(topic)
                partition = await self._sticky(sticky, topic) if chosen is None else chosen
            try:
                produce(topic, value, key, partition, report, None, stamp or 0, headers or None)
            except BufferError:
                await self._room()
                produce(topic, value, key, partition, report, None, stamp or 0, headers or None)

    def _cause(self, exc: BaseException) -> BaseException:
        if isinstance(exc, KafkaException):
            return as_eos_error(exc.args[0], "produce")
        return exc

    async def _room(self) -> None:
        """librdkafka's queue is full: wait (in a thread) until it has sent some."""
        await anyio.to_thread.run_sync(self._producer.poll, 0.05)

    def _serve(self) -> None:
        try:
            self._producer.poll(0)
        except KafkaException as exc:  # a fatal error is also raised by poll
            self._on_error(exc.args[0])

    def check(self) -> None:
        if self._fatal is not None:
            raise as_eos_error(self._fatal, "the producer")
        if self._failures:
            item, err = self._failures[0]
            raise SendFailed(item, as_eos_error(err, "sending"))

    async def flush(self) -> None:
        while await anyio.to_thread.run_sync(self._producer.flush, SLICE_S):
            self.check()
        self.check()

    async def send_offsets(self, topic: str, records: OffsetRecords) -> None:
        item = SourceRecord({"offsets topic": topic}, None, topic, None)
        report = partial(_record_failure, self._failures, item)
        for key, value in records:
            try:
                self._producer.produce(topic, value, key, -1, report)
            except BufferError:
                await self._room()
                self._producer.produce(topic, value, key, -1, report)
            except KafkaException as exc:
                raise self._error(exc.args[0], "sending offsets") from exc

    async def commit(self) -> None:
        await self._blocking(self._producer.commit_transaction, "committing the transaction", None)
        self._serve()
        self._forget_failures()

    async def abort(self) -> None:
        # Deliver what was produced first: on a broker with transaction version 2 (Kafka
        # 4.x) the partitions join the transaction when the records arrive, and aborting
        # before they did ends in INVALID_TXN_STATE, a fatal error for the producer.
        with anyio.move_on_after(ABORT_FLUSH_S):
            while await anyio.to_thread.run_sync(self._producer.flush, SLICE_S):
                pass
        try:
            await self._blocking(self._producer.abort_transaction, "aborting the transaction", None)
        finally:
            self._serve()  # the purged records' reports
            self._forget_failures()

    def _forget_failures(self) -> None:
        """The transaction ended: its failed records stay counted."""
        self._record_errors += len(self._failures)
        self._failures.clear()

    async def close(self) -> None:
        producer = self._producer
        try:
            producer.purge()
            await anyio.to_thread.run_sync(producer.close, abandon_on_cancel=True)
        except Exception as exc:
            log.debug("producer close failed", error=repr(exc))


def make(
    config: ClientConfig, fixed: Mapping[str, Any], per_record: bool
) -> LibrdkafkaTaskProducer:
    return LibrdkafkaTaskProducer(
        config,
        transactional_id=fixed.get("transactional_id"),
        transaction_timeout_ms=fixed.get("transaction_timeout_ms"),
        per_record=per_record,
    )
