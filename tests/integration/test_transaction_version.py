"""Transaction version 2 (KIP-890) with the aiokafka task producer: on a Kafka 4 cluster
each transaction is a Produce v12 and an EndTxn v5 that bumps the producer epoch; the
records, the aborts, the hand-over to aiokafka's background sender and fencing behave as
with version 1."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from eos.api import SourceRecord
from eos.errors import FencedError
from eos.kafka import ClientConfig
from eos.kafka import aiokafka_private as private
from eos.runtime.task.producers import make_task_producer
from eos.runtime.task.producers.aiokafka import AiokafkaTaskProducer
from eos.runtime.task.producers.base import SendFailed
from tests.conftest import TopicFactory
from tests.integration.helpers import committed_values

pytestmark = pytest.mark.integration


def _raw(record: SourceRecord) -> tuple[bytes | None, bytes | None]:
    assert isinstance(record.value, bytes)
    return None, record.value


def _producer(config: ClientConfig, transactional_id: str, **fixed: int) -> AiokafkaTaskProducer:
    producer = make_task_producer(
        "aiokafka",
        config,
        per_record=False,
        transactional_id=transactional_id,
        enable_idempotence=True,
        transaction_timeout_ms=60000,
        **fixed,
    )
    assert isinstance(producer, AiokafkaTaskProducer)
    return producer


def _records(topic: str, name: str, count: int, size: int = 10) -> list[SourceRecord]:
    return [
        SourceRecord({"p": name}, {"o": n}, topic, f"{name}-{n}".encode().ljust(size, b"."))
        for n in range(count)
    ]


async def test_transactions_commit_abort_and_outgrow_a_batch_with_version_2(
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    transactional_id: Callable[[], str],
) -> None:
    topic, offsets = await topic_factory(partitions=3), await topic_factory()
    producer = _producer(client_config, transactional_id())
    await producer.start()
    assert producer.transaction_version == 2  # the test broker is Kafka 4 (KRaft defaults)
    # small, aborted, small, then one that outgrows a batch per partition (the background
    # sender takes over), then small again: each ends with a new producer epoch
    plan = [("a", 5, True), ("b", 5, False), ("c", 3, True), ("d", 400, True), ("e", 2, True)]
    try:
        for name, count, commit in plan:
            await producer.begin()
            await producer.send(_records(topic, name, count, 500), _raw, per_record=False)
            await producer.send_offsets(offsets, [(name.encode(), b"v")])
            await (producer.commit() if commit else producer.abort())
    finally:
        await producer.close()
    values = await committed_values(client_config, topic, timeout=10)
    expected = [r.value for n, c, ok in plan if ok for r in _records(topic, n, c, 500)]
    assert sorted(values) == sorted(expected)
    assert sorted(await committed_values(client_config, offsets, timeout=5)) == [b"v"] * sum(
        1 for _, _, ok in plan if ok
    )


async def test_a_newer_producer_fences_the_older_with_version_2(
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    transactional_id: Callable[[], str],
) -> None:
    topic = await topic_factory()
    same = transactional_id()
    old = _producer(client_config, same)
    await old.start()
    try:
        for name in ("x", "y"):  # epochs bumped by two commits first
            await old.begin()
            await old.send(_records(topic, name, 2), _raw, per_record=False)
            await old.commit()
        await old.begin()
        await old.send(_records(topic, "zombie", 2), _raw, per_record=False)
        new = _producer(client_config, same)
        await new.start()  # fences the old one (its open transaction is aborted)
        try:
            with pytest.raises(SendFailed) as raised:  # the zombie's batch is refused
                await old.commit()
            assert isinstance(raised.value.cause, FencedError), repr(raised.value)
            await new.begin()
            await new.send(_records(topic, "new", 2), _raw, per_record=False)
            await new.commit()
        finally:
            await new.close()
    finally:
        await old.close()
    values = sorted(await committed_values(client_config, topic, timeout=10))
    assert values == sorted(r.value for n in ("x", "y", "new") for r in _records(topic, n, 2))


async def test_back_to_back_transactions_wait_for_the_previous_markers(
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    transactional_id: Callable[[], str],
) -> None:
    """300 transactions back to back: each EndTxn hands the next one a new epoch, and
    each first Produce may meet the previous transaction's markers still being written
    (the broker waits a little; after a broker restart it answers CONCURRENT_TRANSACTIONS,
    which the producer retries: tests/unit/test_transactions_v2.py)."""
    topic, offsets = await topic_factory(partitions=2), await topic_factory()
    producer = _producer(client_config, transactional_id())
    await producer.start()
    try:
        for n in range(300):
            await producer.begin()
            await producer.send(_records(topic, f"t{n}", 1), _raw, per_record=False)
            await producer.send_offsets(offsets, [(b"k", str(n).encode())])
            await producer.commit()
    finally:
        await producer.close()
    values = await committed_values(client_config, topic, timeout=10)
    assert sorted(values) == sorted(
        r.value for n in range(300) for r in _records(topic, f"t{n}", 1)
    )


async def test_a_commit_does_not_wait_out_linger_once_the_background_sender_sends(
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    transactional_id: Callable[[], str],
) -> None:
    """A transaction's last batch and its offsets records are sent at the commit, not
    after ``linger.ms``: nothing else joins them (with the default 5 ms, every
    transaction handed to the background sender waited that long before its EndTxn)."""
    topic, offsets = await topic_factory(), await topic_factory()
    lingering = client_config.with_overrides(producer={"linger.ms": "600000"})
    producer = _producer(lingering, transactional_id())
    await producer.start()
    plan = [("big", 400), ("small", 2)]  # the first outgrows the batch: the sender takes over
    try:
        for name, count in plan:
            await producer.begin()
            await producer.send(_records(topic, name, count, 500), _raw, per_record=False)
            await producer.send_offsets(offsets, [(name.encode(), b"v")])
            with anyio.fail_after(30):  # ten minutes of linger otherwise
                await producer.commit()
            assert private.sender_running(producer._producer)
    finally:
        await producer.close()
    values = await committed_values(client_config, topic, timeout=10)
    assert sorted(values) == sorted(r.value for n, c in plan for r in _records(topic, n, c, 500))


async def test_a_transaction_one_batch_too_large_stays_with_the_task(
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    transactional_id: Callable[[], str],
) -> None:
    """A poll a little larger than a batch (two batches for its partition) is sent from
    the task: its first batch before the second is queued, the rest at the commit; a
    transaction of three batches for a partition hands the producer to aiokafka's
    sender. Every record is committed once, in order, either way."""
    topic, offsets = await topic_factory(), await topic_factory()
    producer = _producer(client_config, transactional_id(), max_batch_size=16384)
    await producer.start()
    plan = [(f"two{n}", 40) for n in range(20)] + [("three", 90), ("after", 40)]
    try:
        for name, count in plan:  # 40 records of 500 bytes: two batches of 16 KiB
            await producer.begin()
            await producer.send(_records(topic, name, count, 500), _raw, per_record=False)
            await producer.send_offsets(offsets, [(name.encode(), b"v")])
            await producer.commit()
            if name.startswith("two"):
                assert not private.sender_running(producer._producer), name
        assert private.sender_running(producer._producer)
    finally:
        await producer.close()
    values = await committed_values(client_config, topic, timeout=10)
    assert values == [r.value for name, count in plan for r in _records(topic, name, count, 500)]
