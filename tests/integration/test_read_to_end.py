"""read_to_end waits for open transactions and fails clearly when they stay open."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from eos.errors import ReadToEndTimeout
from eos.kafka import ClientConfig, TopicReader
from tests.conftest import TopicFactory
from tests.integration.helpers import producer

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("outcome", ["commit", "abort"])
async def test_waits_for_open_transaction(
    outcome: str,
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    transactional_id: Callable[[], str],
) -> None:
    topic = await topic_factory(partitions=2)
    async with producer(client_config, transactional_id=transactional_id()) as p:
        async with p.transaction():
            await p.send_and_wait(topic, b"committed", partition=1)
        await p.begin_transaction()
        await p.send_and_wait(topic, b"open", partition=0)

        async with TopicReader(client_config, topic) as reader:
            done = anyio.Event()
            seen: list[bytes] = []

            async def read() -> None:
                seen.extend(r.value for r in await reader.read_to_end(timeout=30))
                done.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(read)
                await anyio.sleep(1.5)
                assert not done.is_set(), "read_to_end passed an open transaction"
                if outcome == "commit":
                    await p.commit_transaction()
                else:
                    await p.abort_transaction()
                with anyio.fail_after(15):
                    await done.wait()

    expected = [b"committed", b"open"] if outcome == "commit" else [b"committed"]
    assert sorted(seen) == sorted(expected)


async def test_times_out_with_clear_error(
    client_config: ClientConfig, topic_factory: TopicFactory, transactional_id: Callable[[], str]
) -> None:
    topic = await topic_factory()
    async with producer(client_config, transactional_id=transactional_id()) as p:
        await p.begin_transaction()
        await p.send_and_wait(topic, b"open")
        async with TopicReader(client_config, topic) as reader:
            with pytest.raises(ReadToEndTimeout) as caught:
                await reader.read_to_end(timeout=2)
        await p.abort_transaction()
    message = str(caught.value)
    assert topic in message
    assert "partition 0 at 0 of 1" in message
    assert "transaction.timeout.ms" in message


async def test_incremental_reads_return_only_new_records(
    client_config: ClientConfig, topic_factory: TopicFactory, transactional_id: Callable[[], str]
) -> None:
    topic = await topic_factory(partitions=2)
    async with (
        producer(client_config, transactional_id=transactional_id()) as p,
        TopicReader(client_config, topic) as reader,
    ):
        async with p.transaction():
            await p.send(topic, b"one", partition=0)
        assert [r.value for r in await reader.read_to_end(10)] == [b"one"]
        async with p.transaction():
            await p.send(topic, b"two", partition=1)
        assert [r.value for r in await reader.read_to_end(10)] == [b"two"]
        assert await reader.read_to_end(10) == []


async def test_a_reader_closed_while_its_caller_is_cancelled_stops_both_consumers(
    client_config: ClientConfig, topic_factory: TopicFactory
) -> None:
    """A cancelled caller's ``async with`` still stops the reader and the lister (one
    left unstopped was later collected as "Unclosed AIOKafkaConsumer", failing whatever
    test ran then)."""
    topic = await topic_factory()
    reader = TopicReader(client_config, topic)
    with anyio.CancelScope() as scope:
        async with reader:
            consumers = [reader._reader, reader._lister]
            scope.cancel()
            await anyio.sleep(5)  # cancelled here: __aexit__ closes under cancellation
    assert [c is not None and c._closed for c in consumers] == [True, True]
