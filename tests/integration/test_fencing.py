"""fence_producers: KIP-618's fenceProducers in Python, against real Kafka."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
from aiokafka.errors import ProducerFenced

from eos.errors import FencingError
from eos.kafka import ClientConfig, fence_producers, read_to_end
from services.dev_kafka import free_ports
from tests.conftest import TopicFactory
from tests.integration.helpers import committed_values, producer

pytestmark = pytest.mark.integration


async def test_fence_live_producer_with_open_transaction(
    client_config: ClientConfig, topic_factory: TopicFactory, transactional_id: Callable[[], str]
) -> None:
    topic = await topic_factory(partitions=2)
    tids = [transactional_id() for _ in range(3)]
    async with producer(client_config, transactional_id=tids[0]) as zombie:
        async with zombie.transaction():
            await zombie.send_and_wait(topic, b"before", partition=0)
        await zombie.begin_transaction()
        await zombie.send_and_wait(topic, b"open-1", partition=0)
        await zombie.send_and_wait(topic, b"open-2", partition=1)

        fenced = await fence_producers(client_config, tids, timeout=30)

        assert set(fenced) == set(tids)
        assert all(f.producer_id >= 0 and f.producer_epoch >= 0 for f in fenced.values())
        with pytest.raises(ProducerFenced):
            await zombie.send_and_wait(topic, b"after-fence", partition=0)
            await zombie.commit_transaction()

    # The fence aborted the open transaction: read_to_end completes at once.
    with anyio.fail_after(15):
        values = await committed_values(client_config, topic, timeout=15)
    assert values == [b"before"]


async def test_fencing_twice_bumps_epoch(
    client_config: ClientConfig, transactional_id: Callable[[], str]
) -> None:
    tid = transactional_id()
    first = (await fence_producers(client_config, [tid]))[tid]
    second = (await fence_producers(client_config, [tid]))[tid]
    assert second.producer_id == first.producer_id
    assert second.producer_epoch == first.producer_epoch + 1


async def test_fencing_unreachable_cluster_names_each_id() -> None:
    (port,) = free_ports(1)
    config = ClientConfig({"bootstrap.servers": f"127.0.0.1:{port}"})
    with pytest.raises(FencingError) as caught:
        await fence_producers(config, ["a-0", "a-1"], timeout=3)
    assert set(caught.value.failures) == {"a-0", "a-1"}
    assert "bootstrap.servers" in str(caught.value)


async def test_read_to_end_of_empty_topic(
    client_config: ClientConfig, topic_factory: TopicFactory
) -> None:
    topic = await topic_factory(partitions=3)
    assert await read_to_end(client_config, topic, timeout=10) == []
