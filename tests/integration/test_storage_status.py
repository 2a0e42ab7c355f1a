"""StatusLog against real Kafka."""

from __future__ import annotations

import pytest

from eos.kafka import ClientConfig
from eos.state import State
from eos.storage import Status, StatusLog
from tests.conftest import TopicFactory

pytestmark = pytest.mark.integration


async def test_status_round_trip(client_config: ClientConfig, topic_factory: TopicFactory) -> None:
    topic = await topic_factory(partitions=1, compacted=True)
    async with (
        StatusLog(client_config, topic, "worker-a", read_timeout=30) as a,
        StatusLog(client_config, topic, "worker-b", read_timeout=30) as b,
    ):
        await a.put_connector("c", State.RUNNING, generation=3)
        await a.put_task("c", 0, State.RUNNING, generation=3)
        await b.put_task("c", 1, State.FAILED, trace="boom\nat line 1", generation=3)
        await b.put_connector("other", State.PAUSED)
        assert a.connector_status("c") is None  # visible after a refresh only

        await a.refresh()
        assert a.connector_status("c") == Status(State.RUNNING, None, "worker-a", 3)
        assert a.task_statuses("c") == {
            0: Status(State.RUNNING, None, "worker-a", 3),
            1: Status(State.FAILED, "boom\nat line 1", "worker-b", 3),
        }
        assert a.connector_status("other") == Status(State.PAUSED, None, "worker-b", 0)

        await b.put_task("c", 1, State.RESTARTING, generation=4)
        await a.refresh()
        assert a.task_statuses("c")[1].state is State.RESTARTING

        await a.remove("c")
        await a.refresh()
        assert a.connector_status("c") is None
        assert a.task_statuses("c") == {}
        assert a.connector_status("other") is not None

        await b.refresh()
        assert b.task_statuses("c") == {}
