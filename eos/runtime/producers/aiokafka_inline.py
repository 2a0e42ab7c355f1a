"""Ending a transaction from the task's own coroutine, without aiokafka's sender task.

aiokafka sends everything from one background task per producer (its ``Sender``): it
wakes on every queued batch, every transactional state change and every response, and
spawns a task per request. A task that commits a handful of records per transaction pays
that machinery several times per transaction, more than the requests themselves. While a
transaction's batches fit the accumulator (one per partition), the task can end the
transaction itself, with aiokafka's own request handlers (their retries and error
mapping unchanged), in the order the sender uses::

    AddPartitionsToTxn (every partition of the transaction, one request)
    Produce            (every queued batch, one request per leader)
    EndTxn             (commit or abort)

A failed batch stops a commit before its EndTxn (:func:`flush_transaction` returns, and
the caller checks the batch futures first): the broker never commits a transaction that
lost records. Once a transaction outgrows that (a second batch for a partition would
wait for the first to leave), the caller starts the background sender for good
(:func:`start_sender`).

This relies on aiokafka's private parts (the producer's ``_sender``, ``_txn_manager`` and
``_message_accumulator``, the sender's handler classes): aiokafka is pinned to one
release in ``pyproject.toml``; check this module when moving it.
"""

from __future__ import annotations

from typing import Any

import anyio
from aiokafka import AIOKafkaProducer
from aiokafka.client import CoordinationType
from aiokafka.producer.sender import (
    AddPartitionsToTxnHandler,
    EndTxnHandler,
    SendProduceReqHandler,
)
from aiokafka.producer.transaction_manager import TransactionResult


def sender_running(producer: AIOKafkaProducer) -> bool:
    return producer._sender.sender_task is not None


async def start(producer: AIOKafkaProducer) -> None:
    """What ``producer.start()`` does, but the sender task: bootstrap, then the producer
    id (InitProducerId, which fences older producers of the transactional id)."""
    await producer.client.bootstrap()
    await producer._sender._maybe_wait_for_pid()


async def start_sender(producer: AIOKafkaProducer) -> None:
    """Hand the producer to aiokafka's background sender (for the rest of its life)."""
    if not sender_running(producer):
        await producer._sender.start()


def queued(producer: AIOKafkaProducer) -> bool:
    """Whether batches wait in the accumulator (a second one for a partition would block)."""
    return bool(producer._message_accumulator._batches)


async def flush_transaction(producer: AIOKafkaProducer) -> None:
    """Add the transaction's new partitions, then send every queued batch (retrying
    what aiokafka retries). Failed batches fail their futures; nothing is raised for them."""
    sender = producer._sender
    txn = producer._txn_manager
    accumulator = producer._message_accumulator
    while txn.partitions_to_add():
        node = await sender._find_coordinator(CoordinationType.TRANSACTION, txn.transactional_id)
        await AddPartitionsToTxnHandler(sender, set(txn.partitions_to_add())).do(node)
        waiter = txn.wait_for_transaction_end()
        if waiter.done():  # an abortable error (e.g. a topic not authorised)
            waiter.result()
    for batches in accumulator._batches.values():
        for batch in batches:
            batch._builder.close()  # no lingering: the transaction ends now
    while accumulator._batches:
        nodes, unknown_leaders = accumulator.drain_by_nodes(ignore_nodes=set())
        if len(nodes) == 1:
            [(node_id, node_batches)] = nodes.items()
            await SendProduceReqHandler(sender, node_batches).do(node_id)
        elif nodes:
            async with anyio.create_task_group() as group:
                for node_id, node_batches in nodes.items():
                    group.start_soon(SendProduceReqHandler(sender, node_batches).do, node_id)
        if unknown_leaders:
            await producer.client.force_metadata_update()


async def end_transaction(producer: AIOKafkaProducer, *, commit: bool) -> None:
    """EndTxn (commit or abort) after :func:`flush_transaction`; retried until the
    coordinator answers, fatal errors (fenced) raised."""
    sender = producer._sender
    txn = producer._txn_manager
    if commit:
        txn.committing_transaction()
    else:
        txn.aborting_transaction()
    await flush_transaction(producer)  # an abort still sends what is queued, as aiokafka does
    if txn.is_empty_transaction():
        txn.complete_transaction()
        return
    result: Any = TransactionResult.COMMIT if commit else TransactionResult.ABORT
    while True:
        node = await sender._find_coordinator(CoordinationType.TRANSACTION, txn.transactional_id)
        if await EndTxnHandler(sender, result).do(node):
            return
