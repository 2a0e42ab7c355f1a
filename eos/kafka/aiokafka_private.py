"""Every use of aiokafka's private surface, in one place: how a task producer ends its
transactions from its own coroutine, and transaction version 2 on aiokafka's sender (and
one metadata call a topic reader needs, :func:`topic_partitions`; and a bootstrap that
closes its connection when cancelled, :func:`close_what_a_cancelled_bootstrap_opened`).

aiokafka sends everything from one background task per producer (its ``Sender``): it
wakes on every queued batch, every transactional state change and every response, and
spawns a task per request. A task that commits a handful of records per transaction pays
that machinery several times per transaction, more than the requests themselves
(docs/sizing.md). While a transaction's batches fit the accumulator (one per partition),
the task ends the transaction itself, with aiokafka's own request handlers (their retries
and error mapping unchanged), in the order the sender uses::

    AddPartitionsToTxn (every partition of the transaction, one request)
    Produce            (every queued batch, one request per leader)
    EndTxn             (commit or abort)

With transaction version 2 (KIP-890; the codecs are :mod:`eos.kafka.transactions_v2`),
when the cluster has it, the first step goes: Produce version 12 adds its partitions to
the transaction, and EndTxn version 5 hands back the producer epoch of the next
transaction (its batches carry it, their sequence numbers from 0). The background sender,
once it has taken over, speaks version 2 as well (:func:`start` swaps in the three
Sender methods that differ).

A failed batch stops a commit before its EndTxn (:func:`flush_transaction` returns, and
the caller checks the batch futures first): the broker never commits a transaction that
lost records. A second batch for a partition would wait in the accumulator for the first
to leave (:func:`queued_for` tells): the caller then sends what is queued
(:func:`flush_transaction`, once a transaction) or starts the background sender for good
(:func:`start_sender`).

A version 12 Produce answered TRANSACTION_ABORTABLE (KIP-1050) fails its batch with
:class:`~eos.errors.TransactionAbortable`: the task aborts (EndTxn v5 bumps the epoch, so
the producer stays usable) and re-polls from its committed offsets. An EndTxn answered
UNKNOWN_SERVER_ERROR or INVALID_TXN_STATE (a coordinator meeting an outside fence midway)
is asked again, by the task and by the background sender alike (:func:`send_end_txn`), so
that a fenced producer is told it is fenced instead of failing.

What this relies on (the producer's ``_sender``, ``_txn_manager`` and
``_message_accumulator``, the sender's methods and handler classes, the transaction
manager's state) is recorded in ``tests/unit/test_aiokafka_contract.py``, which names each
attribute or signature an aiokafka upgrade changed; aiokafka is pinned to one release in
``pyproject.toml``. No other module of eos touches aiokafka's private names (the same test
checks that too).
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import aiokafka.client
import anyio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import errors as kerrors
from aiokafka.client import AIOKafkaClient, ConnectionGroup, CoordinationType
from aiokafka.cluster import ClusterMetadata
from aiokafka.conn import AIOKafkaConnection
from aiokafka.producer.message_accumulator import BatchBuilder, MessageAccumulator
from aiokafka.producer.sender import (
    AddPartitionsToTxnHandler,
    EndTxnHandler,
    SendProduceReqHandler,
)
from aiokafka.producer.transaction_manager import PidAndEpoch, TransactionResult
from aiokafka.structs import TopicPartition

from eos.errors import TransactionAbortable
from eos.kafka import transactions_v2 as v2

PRODUCER_FENCED = 90
"""The error code (newer than aiokafka) that transaction version 2 fences with."""

TRANSACTION_ABORTABLE = 120
"""KIP-1050's error code (newer than aiokafka): abort the transaction, then go on."""


_Opened = tuple["asyncio.Task[Any] | None", list[AIOKafkaConnection]]
_bootstrapping: contextvars.ContextVar[_Opened | None] = contextvars.ContextVar(
    "eos_bootstrapping", default=None
)


def close_what_a_cancelled_bootstrap_opened() -> None:
    """Make ``AIOKafkaClient.bootstrap`` close the connection it bootstraps from when it is
    cancelled or fails while asking that connection for metadata.

    aiokafka holds that connection in a local variable and closes it only on the errors it
    expects; a cancellation there (a worker stopping while its clients start, a timeout
    around a start) left the socket open until the garbage collector found it, with a
    ResourceWarning. Every client of the process bootstraps through this (producers,
    consumers and admin clients included); installing it twice is a no-op."""
    original: Any = AIOKafkaClient.bootstrap
    if getattr(original, "eos_guarded", False):
        return
    create = aiokafka.client.create_conn

    async def create_conn(*args: Any, **kwargs: Any) -> AIOKafkaConnection:
        conn: AIOKafkaConnection = await create(*args, **kwargs)
        opened = _bootstrapping.get()
        if opened is not None and opened[0] is asyncio.current_task():  # not a child task
            opened[1].append(conn)
        return conn

    @functools.wraps(original)
    async def bootstrap(self: AIOKafkaClient) -> None:
        opened: list[AIOKafkaConnection] = []
        token = _bootstrapping.set((asyncio.current_task(), opened))
        try:
            await original(self)
        except BaseException:
            for conn in opened:  # a failed bootstrap stored none of them in the client
                if conn.connected():
                    conn.close()
            raise
        finally:
            _bootstrapping.reset(token)

    bootstrap.eos_guarded = True  # type: ignore[attr-defined]
    aiokafka.client.create_conn = create_conn
    AIOKafkaClient.bootstrap = bootstrap


async def fresh_metadata(consumer: AIOKafkaConsumer) -> ClusterMetadata:
    """The cluster's metadata, freshly fetched (aiokafka has no public "describe these
    topics" on a consumer; its client does)."""
    cluster: ClusterMetadata = await consumer._client.fetch_all_metadata()
    return cluster


async def topic_partitions(consumer: AIOKafkaConsumer, topic: str) -> set[int] | None:
    """The partitions of ``topic`` from fresh metadata."""
    partitions: set[int] | None = (await fresh_metadata(consumer)).partitions_for_topic(topic)
    return partitions


def sender_running(producer: AIOKafkaProducer) -> bool:
    return producer._sender.sender_task is not None


def batch_size(producer: AIOKafkaProducer) -> int:
    """The producer's ``batch.size`` (what fits one batch of the accumulator)."""
    size: int = producer._message_accumulator._batch_size
    return size


Row = tuple[int | None, bytes | None, bytes | None, list[tuple[str, bytes | None]]]
"""A record as :func:`append_rows` takes it: timestamp, key, value, headers."""


def append_rows(batch: BatchBuilder, rows: Iterator[Row]) -> tuple[int, Row | None]:
    """Append ``rows`` to ``batch`` (from :meth:`AIOKafkaProducer.create_batch`) until it
    is full: how many went in, and the row that did not fit (taken from ``rows``; None when
    every row went in). What ``BatchBuilder.append`` does for each row, without its
    per-row Python (keyword call, serializer check, metadata): its builder's ``append``
    directly, the offset counted here. The producer has no serializers (eos hands it
    bytes)."""
    if batch._closed:
        return 0, next(rows, None)
    append, first = batch._builder.append, batch._relative_offset
    offset = first
    try:
        for row in rows:
            stamp, key, value, headers = row
            if append(offset, stamp, key, value, headers) is None:
                batch.close()
                return offset - first, row
            offset += 1
    finally:
        batch._relative_offset = offset
    return offset - first, None


def begin(producer: AIOKafkaProducer) -> bool:
    """What ``begin_transaction`` does once the producer id is known, without the task it
    spawns to wait for the id (a task per transaction, for nothing). False when the id
    is not known yet (or the producer is not transactional): use ``begin_transaction``."""
    txn = producer._txn_manager
    if txn is None or txn.transactional_id is None or not txn.has_pid():
        return False
    txn.begin_transaction()
    return True


async def start(producer: AIOKafkaProducer) -> bool:
    """What ``producer.start()`` does, but the sender task: bootstrap, then the producer
    id (InitProducerId, which fences older producers of the transactional id). True if
    the cluster takes transaction version 2 (asked of the transaction coordinator)."""
    await producer.client.bootstrap()
    sender = producer._sender
    await sender._maybe_wait_for_pid()
    txn = producer._txn_manager
    node = await sender._find_coordinator(CoordinationType.TRANSACTION, txn.transactional_id)
    response = await producer.client.send(
        node, v2.ApiVersionsV3(), group=ConnectionGroup.COORDINATION
    )
    version2 = v2.supports_transaction_v2(response)
    _sender_steps(producer, version2=version2)
    return version2


def _sender_steps(producer: AIOKafkaProducer, *, version2: bool) -> None:
    """The background sender's steps (for when it takes over), as the task's own: Produce
    counted (:func:`request_counts`), EndTxn through :func:`send_end_txn`; with transaction
    version 2 no AddPartitionsToTxn, Produce v12 and EndTxn v5."""
    sender = producer._sender
    txn = producer._txn_manager

    async def add_partitions(tps: Any) -> bool:
        for tp in list(tps):
            txn.partition_added(tp)
        return True

    async def end(result: Any) -> None:
        await producer._message_accumulator.flush_for_commit()
        if txn.is_empty_transaction():
            txn.complete_transaction()
            return
        await send_end_txn(sender, result, version2=version2)

    if version2:
        sender._do_add_partitions_to_txn = add_partitions
    count_produce_requests(producer, version2=version2)
    sender._do_txn_commit = end


def count_produce_requests(producer: AIOKafkaProducer, *, version2: bool = False) -> None:
    """The background sender's Produce step through this module's counted handlers
    (:func:`request_counts`); for a producer without transactions too (an at-least-once
    task's), whose sender may already run: it looks the step up for every request."""
    sender = producer._sender
    produce = _ProduceV2Handler if version2 else _CountedProduce

    async def send_produce(node_id: int, batches: Any) -> None:
        await produce(sender, batches).do(node_id)
        sender._in_flight.remove(node_id)
        for tp in batches:
            sender._muted_partitions.remove(tp)

    sender._send_produce_req = send_produce


async def start_sender(producer: AIOKafkaProducer) -> None:
    """Hand the producer to aiokafka's background sender (for the rest of its life)."""
    if not sender_running(producer):
        await producer._sender.start()


def queued_for(producer: AIOKafkaProducer, topic: str, partition: int) -> bool:
    """Whether a batch for the partition waits in the accumulator (a second one would
    wait for it to be sent)."""
    return bool(producer._message_accumulator._batches.get(TopicPartition(topic, partition)))


def _close_batches(accumulator: MessageAccumulator) -> None:
    """Close every batch the accumulator holds: nothing joins them any more, and a closed
    batch does not wait out ``linger.ms`` (the transaction ends now)."""
    for batches in accumulator._batches.values():
        for batch in batches:
            batch._builder.close()


def send_now(producer: AIOKafkaProducer) -> None:
    """Have the background sender send every queued batch now, without waiting out
    ``linger.ms`` (a transaction's last batch and its offsets records would each wait
    that long before the commit): close them and wake the sender, as aiokafka's own
    ``commit_transaction`` does before it waits for them."""
    accumulator = producer._message_accumulator
    _close_batches(accumulator)
    waiter = accumulator.waiter()
    if not waiter.done():
        waiter.set_result(None)


async def flush_transaction(producer: AIOKafkaProducer, *, version2: bool) -> None:
    """Add the transaction's new partitions (version 2: the Produce request does), then
    send every queued batch (retrying what aiokafka retries). Failed batches fail their
    futures; nothing is raised for them."""
    sender = producer._sender
    txn = producer._txn_manager
    accumulator = producer._message_accumulator
    produce = _ProduceV2Handler if version2 else _CountedProduce
    if version2:
        for tp in list(txn.partitions_to_add()):
            txn.partition_added(tp)
    while txn.partitions_to_add():
        node = await sender._find_coordinator(CoordinationType.TRANSACTION, txn.transactional_id)
        await AddPartitionsToTxnHandler(sender, set(txn.partitions_to_add())).do(node)
        waiter = txn.wait_for_transaction_end()
        if waiter.done():  # an abortable error (e.g. a topic not authorised)
            waiter.result()
    _close_batches(accumulator)
    while accumulator._batches:
        nodes, unknown_leaders = accumulator.drain_by_nodes(ignore_nodes=set())
        if len(nodes) == 1:
            [(node_id, node_batches)] = nodes.items()
            await produce(sender, node_batches).do(node_id)
        elif nodes:
            async with anyio.create_task_group() as group:
                for node_id, node_batches in nodes.items():
                    group.start_soon(produce(sender, node_batches).do, node_id)
        if unknown_leaders:
            await producer.client.force_metadata_update()


async def end_transaction(producer: AIOKafkaProducer, *, commit: bool, version2: bool) -> None:
    """EndTxn (commit or abort) after :func:`flush_transaction`; retried until the
    coordinator answers, fatal errors (fenced) raised."""
    sender = producer._sender
    txn = producer._txn_manager
    if commit:
        txn.committing_transaction()
    else:
        txn.aborting_transaction()
    # An abort still sends what is queued, as aiokafka does.
    await flush_transaction(producer, version2=version2)
    if txn.is_empty_transaction():
        txn.complete_transaction()
        return
    result: Any = TransactionResult.COMMIT if commit else TransactionResult.ABORT
    await send_end_txn(sender, result, version2=version2)


UNCLEAR_END_TXN_RETRIES = 5
"""EndTxn answers asked again (UNKNOWN_SERVER_ERROR, INVALID_TXN_STATE) before the
transaction fails with them.

The transaction coordinator gives them when an InitProducerId fences the producer while
its EndTxn is handled: UNKNOWN_SERVER_ERROR when the EndTxn meets the fence midway (the
broker logs ``IllegalStateException: Preparing transaction state transition to ... while
it already a pending state PREPARE_EPOCH_FENCE``), INVALID_TXN_STATE when the fence has
already aborted the transaction but not yet given the id its new epoch (``state is
COMPLETE_ABORT, but received transaction marker result to send: COMMIT``). aiokafka, like
the Java client, takes both as fatal, so a zombie fenced at that moment failed instead of
being fenced. Asked again, the coordinator answers with the outcome: done (an EndTxn of
the same epoch is idempotent; an aborted transaction is never committed by it), or fenced
(the epoch moved on)."""


async def send_end_txn(sender: Any, result: Any, *, version2: bool) -> None:
    """EndTxn to the transaction coordinator until it answers: retried as aiokafka retries
    (coordinator moved, concurrent transactions), an unclear answer asked again up to
    :data:`UNCLEAR_END_TXN_RETRIES` times, fatal answers (fenced) raised."""
    end = _EndTxnV2Handler if version2 else EndTxnHandler
    unclear = 0
    while True:
        txn_id = sender._txn_manager.transactional_id
        node = await sender._find_coordinator(CoordinationType.TRANSACTION, txn_id)
        try:
            if await end(sender, result).do(node):
                return
        except (kerrors.UnknownError, kerrors.InvalidTxnState):
            unclear += 1
            if unclear > UNCLEAR_END_TXN_RETRIES:
                raise
            await asyncio.sleep(sender._retry_backoff)


@dataclass
class RequestCounts:
    """What a producer's Produce requests carried, and their round trips (aiokafka keeps
    no metrics): counted by the handlers of this module for the producers
    :func:`request_counts` was asked about."""

    requests: int = 0
    seconds: float = 0.0
    batches: int = 0
    batch_bytes: int = 0
    records: int = 0


_counts: weakref.WeakKeyDictionary[Any, RequestCounts] = weakref.WeakKeyDictionary()
"""By aiokafka sender (one per producer)."""


def request_counts(producer: AIOKafkaProducer) -> RequestCounts:
    """The producer's :class:`RequestCounts`, counted from now on (updated in place)."""
    return _counts.setdefault(producer._sender, RequestCounts())


def queued_bytes(producer: AIOKafkaProducer) -> int | None:
    """Bytes of the batches waiting in the accumulator (None if they moved while counted:
    read from another thread)."""
    try:
        queued = list(producer._message_accumulator._batches.values())
        sizes: list[int] = [batch._builder.size() for batches in queued for batch in list(batches)]
        return sum(sizes)
    except (RuntimeError, AttributeError):
        return None


class _CountedProduce(SendProduceReqHandler):  # type: ignore[misc]
    """aiokafka's Produce handler (its retries and error mapping), counting what each
    request carries and timing its round trip."""

    sent_at = 0.0

    def _count_request(self) -> None:
        counts = _counts.get(self._sender)
        if counts is not None:
            counts.batches += len(self._batches)
            for batch in self._batches.values():
                counts.records += batch.record_count
                counts.batch_bytes += len(batch.get_data_buffer())
        self.sent_at = time.monotonic()

    def create_request(self) -> Any:
        self._count_request()
        return super().create_request()

    def handle_response(self, response: Any) -> None:
        counts = _counts.get(self._sender)
        if counts is not None:
            counts.requests += 1
            counts.seconds += time.monotonic() - self.sent_at
        super().handle_response(response)


class _ProduceV2Handler(_CountedProduce):
    """aiokafka's Produce handler (its retries and error mapping), speaking version 12."""

    def create_request(self) -> v2.ProduceV12:
        self._count_request()
        topics: dict[str, list[tuple[int, bytes]]] = collections.defaultdict(list)
        for tp, batch in self._batches.items():
            topics[tp.topic].append((tp.partition, batch.get_data_buffer()))
        sender = self._sender
        return v2.ProduceV12(
            sender._txn_manager.transactional_id,
            sender._acks,
            sender._request_timeout_ms,
            list(topics.items()),
        )

    def handle_response(self, response: v2.ProduceResponse_v12) -> None:
        super().handle_response(_AsVersion8(self._fail_abortable(v2.partition_results(response))))

    def _fail_abortable(self, topics: list[tuple[str, list[tuple[Any, ...]]]]) -> list[Any]:
        """Fail the batches answered TRANSACTION_ABORTABLE (aiokafka does not know the
        code); the other partitions' results, for aiokafka's handler."""
        rest = []
        for topic, parts in topics:
            for part in parts:
                batch = self._batches.get(TopicPartition(topic, part[0]))
                if part[1] == TRANSACTION_ABORTABLE and batch is not None:
                    batch.failure(
                        exception=TransactionAbortable(
                            f"the broker answered TRANSACTION_ABORTABLE to the Produce to "
                            f"{topic}-{part[0]}: the transaction must be aborted"
                        )
                    )
            rest.append((topic, [p for p in parts if p[1] != TRANSACTION_ABORTABLE]))
        return rest

    def _can_retry(self, error: Exception, batch: Any) -> bool:
        # Adding the partition waits for the previous transaction's markers: the broker
        # answers CONCURRENT_TRANSACTIONS until they are written (the Java client retries
        # it too). aiokafka calls it fatal, as it is for its own AddPartitionsToTxn.
        if isinstance(error, kerrors.ConcurrentTransactions):
            return True
        retry: bool = super()._can_retry(error, batch)
        return retry


class _AsVersion8:
    """A version 12 Produce response as aiokafka's handler reads a version 8 one (the
    fencing code of version 2 mapped to the one aiokafka knows)."""

    API_VERSION = 8

    def __init__(self, topics: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
        fenced = kerrors.InvalidProducerEpoch.errno
        self.topics = [
            (topic, [(p[0], fenced, *p[2:]) if p[1] == PRODUCER_FENCED else p for p in parts])
            for topic, parts in topics
        ]


class _EndTxnV2Handler(EndTxnHandler):  # type: ignore[misc]
    """EndTxn version 5: the answer carries the producer id and epoch of the next
    transaction, whose sequence numbers start again at 0."""

    def create_request(self) -> v2.EndTxnV5:
        txn = self._sender._txn_manager
        commit = self._commit_result == TransactionResult.COMMIT
        return v2.EndTxnV5(txn.transactional_id, txn.producer_id, txn.producer_epoch, commit)

    def handle_response(self, resp: v2.EndTxnResponse_v5) -> float | None:
        if resp.error_code == PRODUCER_FENCED:
            raise kerrors.ProducerFenced()
        if resp.error_code == 0:
            txn = self._sender._txn_manager
            txn._pid_and_epoch = PidAndEpoch(resp.producer_id, resp.producer_epoch)
            txn._sequence_numbers.clear()
        result: float | None = super().handle_response(resp)
        return result
