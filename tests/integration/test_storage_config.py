"""ConfigLog against real Kafka: transactional leader writes, read-back, fencing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from eos.errors import FencedError, ReadToEndTimeout
from eos.kafka import ClientConfig
from eos.storage import ConfigLog, SessionKey, TargetState
from eos.storage.config_log import encode_connector_config
from tests.conftest import TopicFactory
from tests.integration.helpers import producer

pytestmark = pytest.mark.integration


@asynccontextmanager
async def config_log(config: ClientConfig, topic: str, group_id: str) -> AsyncIterator[ConfigLog]:
    async with ConfigLog(config, topic, group_id, read_timeout=30) as log:
        yield log


async def test_writes_are_read_back(
    client_config: ClientConfig, topic_factory: TopicFactory, group_id: str
) -> None:
    topic = await topic_factory(partitions=1, compacted=True)
    async with config_log(client_config, topic, group_id) as log:
        assert (await log.refresh()).connectors == {}
        await log.put_connector_config("c", {"connector.class": "X", "tasks.max": "2"})
        await log.put_target_state("c", TargetState.PAUSED)
        commit = await log.put_task_configs("c", [{"t": "0"}, {"t": "1"}])
        await log.put_session_key(SessionKey(b"secret", "HmacSHA256", 42))
        assert log.snapshot.connectors == {}  # writers do not touch the snapshot

        snapshot = await log.refresh()
        assert snapshot.offset > commit
        assert snapshot.connectors == {"c": {"connector.class": "X", "tasks.max": "2"}}
        assert snapshot.target_state("c") is TargetState.PAUSED
        assert snapshot.tasks("c") == ({"t": "0"}, {"t": "1"})
        assert snapshot.generations == {"c": commit}
        assert snapshot.session_key == SessionKey(b"secret", "HmacSHA256", 42)
        assert snapshot.needs_fencing("c")
        assert log.snapshot is snapshot

        count = await log.put_task_count("c", 2)
        snapshot = await log.refresh()
        assert count > commit
        assert not snapshot.needs_fencing("c")
        assert snapshot.previous_task_count("c") == 2

        await log.remove_connector("c")
        snapshot = await log.refresh()
        assert snapshot.connectors == {}
        assert snapshot.tasks("c") == ()
        assert snapshot.target_states == {}

    # A fresh reader rebuilds the same state from the topic.
    async with config_log(client_config, topic, group_id) as other:
        fresh = await other.refresh()
        assert fresh.connectors == {}
        assert fresh.session_key == SessionKey(b"secret", "HmacSHA256", 42)
        assert fresh.offset == snapshot.offset


async def test_new_leader_fences_the_previous_one(
    client_config: ClientConfig, topic_factory: TopicFactory, group_id: str
) -> None:
    topic = await topic_factory(partitions=1, compacted=True)
    async with (
        config_log(client_config, topic, group_id) as old,
        config_log(client_config, topic, group_id) as new,
    ):
        await old.put_connector_config("a", {"by": "old"})
        await new.put_connector_config("b", {"by": "new"})  # initialises: fences old

        with pytest.raises(FencedError, match="another leader took over"):
            await old.put_connector_config("a", {"by": "zombie"})
        with pytest.raises(FencedError):  # stays fenced, never re-initialises by itself
            await old.put_target_state("a", TargetState.STOPPED)
        await new.put_connector_config("c", {"by": "new"})

        snapshot = await new.refresh()
        assert snapshot.connectors == {"a": {"by": "old"}, "b": {"by": "new"}, "c": {"by": "new"}}
        assert snapshot.target_states == {}

        # Leader again (a later rebalance): claiming fences the other one.
        await old.claim_write_privileges()
        await old.put_connector_config("a", {"by": "old again"})
        with pytest.raises(FencedError):
            await new.put_connector_config("b", {"by": "deposed"})
        assert (await old.refresh()).connectors["a"] == {"by": "old again"}


async def test_read_timeout_keeps_the_last_snapshot_and_loses_nothing(
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    group_id: str,
    transactional_id: Callable[[], str],
) -> None:
    topic = await topic_factory(partitions=1, compacted=True)
    async with config_log(client_config, topic, group_id) as log:
        await log.put_connector_config("a", {})
        before = await log.refresh()
        await log.put_connector_config("b", {})
        async with producer(client_config, transactional_id=transactional_id()) as stray:
            await stray.begin_transaction()
            await stray.send_and_wait(topic, *reversed(encode_connector_config("x", {})))
            with pytest.raises(ReadToEndTimeout):
                await log.refresh(timeout=2)
            assert log.snapshot is before
            await stray.abort_transaction()
        after = await log.refresh()
        assert set(after.connectors) == {"a", "b"}
        assert after.offset > before.offset
