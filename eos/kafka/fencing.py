"""Fencing producers by transactional id (KIP-618's ``Admin.fenceProducers`` in Python).

For every transactional id, in parallel: find its transaction coordinator
(``FindCoordinator`` with key type *transaction*), then send ``InitProducerId``
with that id and no producer id/epoch. The coordinator bumps the epoch and
aborts (or completes) any transaction the previous holder left open, so the
previous holder can never write again.

Behaviour kept from Kafka's Java client after two bug fixes:
``CONCURRENT_TRANSACTIONS`` and ``COORDINATOR_LOAD_IN_PROGRESS`` are retried
(KAFKA-16570), and the request carries a real transaction timeout, not 1 ms
(KAFKA-16047).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import anyio
import structlog
from aiokafka import errors as kerrors
from aiokafka.client import AIOKafkaClient, CoordinationType
from aiokafka.protocol.transaction import InitProducerIdRequest

from eos.errors import FencingError
from eos.kafka.clients import ClientConfig, make_client

log = structlog.get_logger(__name__)

_RETRIABLE = (
    kerrors.CoordinatorLoadInProgressError,
    kerrors.CoordinatorNotAvailableError,
    kerrors.NotCoordinatorError,
    kerrors.ConcurrentTransactions,
    kerrors.RequestTimedOutError,
    kerrors.KafkaConnectionError,
    kerrors.NodeNotReadyError,
)
_WHAT_IS_MISSING = {
    kerrors.TransactionalIdAuthorizationFailed: (
        "not authorized: grant the principal Write and Describe on TransactionalId {tid}"
    ),
    kerrors.ClusterAuthorizationFailedError: (
        "not authorized: grant the principal IdempotentWrite on the cluster"
    ),
    kerrors.InvalidTransactionTimeout: (
        "the broker rejected transaction.timeout.ms={timeout}: keep it at or below the "
        "broker's transaction.max.timeout.ms"
    ),
}


@dataclass(frozen=True)
class ProducerIdentity:
    """What the coordinator answered: the id now owns this producer id and epoch."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


async def fence_producers(
    config: ClientConfig,
    transactional_ids: Iterable[str],
    *,
    timeout: float = 30.0,
    transaction_timeout_ms: int = 60_000,
    retry_backoff: float = 0.1,
) -> dict[str, ProducerIdentity]:
    """Fence every producer that holds one of ``transactional_ids``.

    Returns each id's new producer id and epoch. If any id could not be fenced
    within ``timeout`` seconds, raises :class:`~eos.errors.FencingError` whose
    ``failures`` say, per id, what went wrong and what is missing.
    """
    ids = sorted(set(transactional_ids))
    fenced: dict[str, ProducerIdentity] = {}
    failures: dict[str, str] = {}
    if not ids:
        return fenced
    client = make_client(config)
    unreachable = ""
    try:
        with anyio.move_on_after(timeout):
            try:
                await client.bootstrap()
            except kerrors.KafkaError as exc:
                unreachable = f" ({type(exc).__name__}: {exc})"
                return _raise_unfenced(ids, fenced, failures, timeout, unreachable)
            async with anyio.create_task_group() as tg:
                for tid in ids:
                    tg.start_soon(
                        _fence_one,
                        client,
                        tid,
                        transaction_timeout_ms,
                        retry_backoff,
                        fenced,
                        failures,
                    )
    finally:
        await client.close()
    return _raise_unfenced(ids, fenced, failures, timeout, unreachable)


def _raise_unfenced(
    ids: list[str],
    fenced: dict[str, ProducerIdentity],
    failures: dict[str, str],
    timeout: float,
    cause: str,
) -> dict[str, ProducerIdentity]:
    for tid in ids:
        if tid not in fenced and tid not in failures:
            failures[tid] = (
                f"not fenced within {timeout:g}s{cause}: is the transaction coordinator "
                "reachable from this worker? (check bootstrap.servers and the broker logs)"
            )
    if failures:
        raise FencingError(failures)
    return fenced


async def _fence_one(
    client: AIOKafkaClient,
    tid: str,
    transaction_timeout_ms: int,
    retry_backoff: float,
    fenced: dict[str, ProducerIdentity],
    failures: dict[str, str],
) -> None:
    while True:
        try:
            fenced[tid] = await _init_producer_id(client, tid, transaction_timeout_ms)
            log.info("producer fenced", transactional_id=tid, epoch=fenced[tid].producer_epoch)
            return
        except _RETRIABLE as exc:
            log.debug("fencing retry", transactional_id=tid, error=type(exc).__name__)
            await anyio.sleep(retry_backoff)
        except kerrors.KafkaError as exc:
            template = _WHAT_IS_MISSING.get(type(exc), "{error}")
            failures[tid] = template.format(
                tid=tid, timeout=transaction_timeout_ms, error=f"{type(exc).__name__}: {exc}"
            )
            return


async def _init_producer_id(
    client: AIOKafkaClient, tid: str, transaction_timeout_ms: int
) -> ProducerIdentity:
    node_id = await client.coordinator_lookup(CoordinationType.TRANSACTION, tid)
    response = await client.send(node_id, InitProducerIdRequest(tid, transaction_timeout_ms))
    error = kerrors.for_code(response.error_code)
    if error is not kerrors.NoError:
        raise error()
    return ProducerIdentity(tid, response.producer_id, response.producer_epoch)
