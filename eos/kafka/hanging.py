"""Open transactions on partitions: seen, judged and aborted (KIP-664, what
``kafka-transactions.sh`` does with Kafka's Admin client; :mod:`eos.kafka.txn_requests`).

A transaction is *open* on a partition from its first record until its marker: a
read_committed consumer cannot read past it (the last stable offset stays at its start). It
is *hanging* when the coordinator no longer tracks it on that partition, so no marker will
ever come: only ``abort`` (WriteTxnMarkers, cluster-admin rights) ends it.
:meth:`TransactionsAdmin.find_hanging` follows Kafka's tool: the partitions' open
transactions older than ``max_timeout_ms`` whose producer id has no transactional id any
more, or whose transaction no longer lists the partition; with ``include_ongoing`` (eos's
addition) also those the coordinator still tracks, which end by themselves when their
``transaction.timeout.ms`` expires.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Self

import anyio
from aiokafka import errors as kerrors
from aiokafka.client import AIOKafkaClient, CoordinationType

from eos.kafka.authorized import AuthorizedMetadata
from eos.kafka.clients import STOP_SECONDS, ClientConfig, make_client
from eos.kafka.txn_requests import (
    DescribeProducers,
    DescribeTransactions,
    ListTransactions,
    WriteTxnMarkers,
)

Partition = tuple[str, int]


@dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int
    """-1: no open transaction on the partition."""


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    coordinator: int
    producer_id: int
    state: str


@dataclass(frozen=True)
class TransactionDescription:
    coordinator: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_time_ms: int
    """-1 when no transaction is open."""
    partitions: tuple[Partition, ...]


@dataclass(frozen=True)
class OpenTransaction:
    topic: str
    partition: int
    producer: ProducerState
    coordinator_state: str = ""
    """With ``include_ongoing``: the coordinator's state of it (empty: it has none)."""


def _check(code: int, what: str, message: str | None = None) -> None:
    if code:
        error = kerrors.for_code(code)
        raise error(f"{what}: {message or error.__name__}")


class TransactionsAdmin:
    """The transaction admin requests over one client (``async with``)."""

    def __init__(self, config: ClientConfig) -> None:
        self.client: AIOKafkaClient = make_client(config, client_id="eos-transactions")

    async def __aenter__(self) -> Self:
        try:
            await self.client.bootstrap()
        except BaseException:  # closed also when bootstrapping fails half-way
            with anyio.CancelScope(shield=True):
                await self.client.close()
            raise
        return self

    async def __aexit__(self, *_: object) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_SECONDS):
            await self.client.close()

    async def _send(self, node: int, request: Any) -> Any:
        return await self.client.send(node, request)

    async def partitions(
        self, topics: Sequence[str] | None, broker_id: int | None = None
    ) -> dict[Partition, int]:
        """Partition → leader of ``topics`` (None: every topic), only those with a replica
        on ``broker_id`` if given."""
        metadata = await self._send(self.client.get_random_node(), AuthorizedMetadata(topics))
        found = {}
        for error, name, _, partitions, _ in metadata.topics:
            _check(error, f"topic {name}")
            for _, index, leader, _, replicas, _, _ in partitions:
                if broker_id is None or broker_id in replicas:
                    found[(name, index)] = leader
        return found

    async def describe_producers(
        self, partitions: Iterable[Partition], broker_id: int | None = None
    ) -> dict[Partition, list[ProducerState]]:
        """The active producers of each partition, asked of its leader (or ``broker_id``)."""
        wanted = list(partitions)
        leaders = await self.partitions(sorted({t for t, _ in wanted}))
        by_node: dict[int, dict[str, list[int]]] = {}
        for topic, index in wanted:
            node = broker_id if broker_id is not None else leaders[(topic, index)]
            by_node.setdefault(node, {}).setdefault(topic, []).append(index)
        found: dict[Partition, list[ProducerState]] = {}
        for node, asked in by_node.items():
            response = await self._send(node, DescribeProducers(asked))
            for topic, results, _ in response.topics:
                for index, error, message, producers, _ in results:
                    _check(error, f"DescribeProducers {topic}-{index}", message)
                    found[(topic, index)] = [ProducerState(*p[:6]) for p in producers]
        return found

    async def list_transactions(
        self, *, producer_ids: Sequence[int] = (), duration_ms: int = -1
    ) -> dict[int, list[TransactionListing]]:
        """Every coordinator's transactional ids (each broker is a coordinator)."""
        await self.client.force_metadata_update()
        found = {}
        for broker in sorted(self.client.cluster.brokers(), key=lambda b: b.nodeId):
            request = ListTransactions((), list(producer_ids), duration_ms)
            response = await self._send(broker.nodeId, request)
            _check(response.error_code, f"ListTransactions on broker {broker.nodeId}")
            found[broker.nodeId] = [
                TransactionListing(tid, broker.nodeId, pid, state)
                for tid, pid, state, _ in response.transaction_states
            ]
        return found

    async def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        node = await self.client.coordinator_lookup(CoordinationType.TRANSACTION, transactional_id)
        response = await self._send(node, DescribeTransactions([transactional_id]))
        error, tid, state, timeout, start, pid, epoch, topics, _ = response.transaction_states[0]
        _check(error, f"DescribeTransactions {transactional_id}")
        partitions = tuple((t, p) for t, ps, _ in topics for p in ps)
        return TransactionDescription(node, tid, pid, epoch, state, timeout, start, partitions)

    async def find_hanging(
        self,
        partitions: Iterable[Partition],
        *,
        now_ms: int,
        max_timeout_ms: int,
        broker_id: int | None = None,
        include_ongoing: bool = False,
    ) -> list[OpenTransaction]:
        """Kafka's ``find-hanging`` (module docstring)."""
        producers = await self.describe_producers(partitions, broker_id)
        candidates = [
            OpenTransaction(topic, index, state)
            for (topic, index), states in sorted(producers.items())
            for state in states
            if state.current_txn_start_offset >= 0
            and now_ms - state.last_timestamp > max_timeout_ms
        ]
        if not candidates:
            return []
        listings = await self.list_transactions(
            producer_ids=sorted({c.producer.producer_id for c in candidates})
        )
        ids = {t.producer_id: t.transactional_id for ts in listings.values() for t in ts}
        return [found for c in candidates if (found := await self._judge(c, ids, include_ongoing))]

    async def _judge(
        self, open_: OpenTransaction, ids: dict[int, str], include_ongoing: bool
    ) -> OpenTransaction | None:
        tid = ids.get(open_.producer.producer_id)
        if tid is None:
            return open_  # no transactional id holds the producer id any more: hanging
        try:
            description = await self.describe_transaction(tid)
        except kerrors.TransactionalIdNotFound:
            return open_
        if (open_.topic, open_.partition) not in description.partitions:
            return open_  # the coordinator will write no marker here: hanging
        if include_ongoing:
            return OpenTransaction(open_.topic, open_.partition, open_.producer, description.state)
        return None

    async def abort(self, topic: str, partition: int, start_offset: int) -> ProducerState:
        """Abort the transaction that opened at ``start_offset`` on the partition."""
        states = (await self.describe_producers([(topic, partition)]))[(topic, partition)]
        found = next((s for s in states if s.current_txn_start_offset == start_offset), None)
        if found is None:
            raise kerrors.KafkaError(
                f"no open transaction starting at offset {start_offset} on {topic}-{partition}"
            )
        await self.write_abort_marker(topic, partition, found)
        return found

    async def write_abort_marker(self, topic: str, partition: int, state: ProducerState) -> None:
        leader = (await self.partitions([topic]))[(topic, partition)]
        coordinator_epoch = max(state.coordinator_epoch, 0)  # -1 (never ended): 0, as Kafka
        request = WriteTxnMarkers(
            state.producer_id, state.producer_epoch, coordinator_epoch, {topic: [partition]}
        )
        response = await self._send(leader, request)
        for _, topics, _ in response.markers:
            for name, results, _ in topics:
                for index, error, _ in results:
                    _check(error, f"WriteTxnMarkers {name}-{index}")
