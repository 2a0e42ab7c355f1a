"""The broker behaviour the design relies on (transactions, fencing by transactional id,
read_committed reads; KIP-98), against real Kafka."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from aiokafka.errors import ProducerFenced

from eos.kafka import ClientConfig
from tests.conftest import TopicFactory
from tests.integration.helpers import committed_values, producer

pytestmark = pytest.mark.integration


async def test_committed_records_visible_aborted_never(
    client_config: ClientConfig, topic_factory: TopicFactory, transactional_id: Callable[[], str]
) -> None:
    topic = await topic_factory(partitions=2)
    async with producer(client_config, transactional_id=transactional_id()) as p:
        async with p.transaction():
            for n in range(5):
                await p.send(topic, f"c{n}".encode(), partition=n % 2)
        await p.begin_transaction()
        for n in range(5):
            await p.send(topic, f"a{n}".encode(), partition=n % 2)
        await p.abort_transaction()
        async with p.transaction():
            await p.send(topic, b"after-abort", partition=0)

    values = sorted(await committed_values(client_config, topic))
    assert values == sorted([b"c0", b"c1", b"c2", b"c3", b"c4", b"after-abort"])


async def test_second_producer_fences_first(
    client_config: ClientConfig, topic_factory: TopicFactory, transactional_id: Callable[[], str]
) -> None:
    topic = await topic_factory()
    tid = transactional_id()
    async with producer(client_config, transactional_id=tid) as first:
        async with first.transaction():
            await first.send_and_wait(topic, b"first-committed")
        await first.begin_transaction()
        await first.send_and_wait(topic, b"first-open-when-fenced")

        async with producer(client_config, transactional_id=tid) as second:
            with pytest.raises(ProducerFenced):
                await first.send_and_wait(topic, b"first-after-fence")
                await first.commit_transaction()
            async with second.transaction():
                await second.send_and_wait(topic, b"second-committed")

    values = await committed_values(client_config, topic)
    assert values == [b"first-committed", b"second-committed"]
