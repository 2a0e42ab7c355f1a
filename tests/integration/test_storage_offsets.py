"""OffsetLog and CombinedOffsetReader against real Kafka (read_committed offsets)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from eos.kafka import ClientConfig
from eos.storage import CombinedOffsetReader, OffsetBatch, OffsetLog
from tests.conftest import TopicFactory
from tests.integration.helpers import producer

pytestmark = pytest.mark.integration


async def _commit(
    config: ClientConfig, topic: str, tid: str, batch: OffsetBatch, *, abort: bool = False
) -> None:
    async with producer(config, transactional_id=tid) as p:
        await p.begin_transaction()
        for key, value in batch.records():
            await p.send_and_wait(topic, value, key=key)
        if abort:
            await p.abort_transaction()
        else:
            await p.commit_transaction()


async def test_committed_offsets_visible_aborted_never(
    client_config: ClientConfig, topic_factory: TopicFactory, transactional_id: Callable[[], str]
) -> None:
    topic = await topic_factory(partitions=3, compacted=True)
    tid = transactional_id()
    committed = OffsetBatch("conn")
    for n in range(5):
        committed.add({"file": f"f{n % 2}"}, {"line": n})
    await _commit(client_config, topic, tid, committed)

    aborted = OffsetBatch("conn")
    aborted.add({"file": "f0"}, {"line": 100})
    aborted.add({"file": "f-new"}, {"line": 1})
    await _commit(client_config, topic, tid, aborted, abort=True)

    other = OffsetBatch("other-conn")
    other.add({"file": "f0"}, {"line": 7})
    await _commit(client_config, topic, tid, other)

    async with OffsetLog(client_config, topic, read_timeout=30) as log:
        assert log.get("conn", {"file": "f0"}) is None  # nothing before the first refresh
        await log.refresh()
        assert log.get("conn", {"file": "f0"}) == {"line": 4}
        assert log.get("conn", {"file": "f1"}) == {"line": 3}
        assert log.get("conn", {"file": "f-new"}) is None
        assert log.get("other-conn", {"file": "f0"}) == {"line": 7}
        assert log.all_for("conn") == {'{"file":"f0"}': {"line": 4}, '{"file":"f1"}': {"line": 3}}

        reset = OffsetBatch("conn")
        reset.reset({"file": "f1"})
        await _commit(client_config, topic, tid, reset)
        await log.refresh()
        assert log.get("conn", {"file": "f1"}) is None
        assert set(log.all_for("conn")) == {'{"file":"f0"}'}


async def test_combined_reader_prefers_the_connectors_own_topic(
    client_config: ClientConfig, topic_factory: TopicFactory, transactional_id: Callable[[], str]
) -> None:
    own_topic = await topic_factory(partitions=1, compacted=True)
    global_topic = await topic_factory(partitions=1, compacted=True)
    in_global = OffsetBatch("conn")
    in_global.add({"p": "both"}, {"pos": 1})
    in_global.add({"p": "global-only"}, {"pos": 2})
    await _commit(client_config, global_topic, transactional_id(), in_global)
    in_own = OffsetBatch("conn")
    in_own.add({"p": "both"}, {"pos": 10})
    in_own.add({"p": "own-only"}, {"pos": 30})
    await _commit(client_config, own_topic, transactional_id(), in_own)

    async with (
        OffsetLog(client_config, own_topic, read_timeout=30) as own,
        OffsetLog(client_config, global_topic, read_timeout=30) as global_,
    ):
        reader = CombinedOffsetReader("conn", own, global_)
        # The first question reads both topics to their ends.
        assert await reader.offset({"p": "both"}) == {"pos": 10}
        partitions = [{"p": "own-only"}, {"p": "nowhere"}, {"p": "global-only"}, {"p": "both"}]
        assert await reader.offsets(partitions) == [{"pos": 30}, None, {"pos": 2}, {"pos": 10}]

        later = OffsetBatch("conn")
        later.add({"p": "nowhere"}, {"pos": 5})
        await _commit(client_config, own_topic, transactional_id(), later)
        assert await reader.offset({"p": "nowhere"}) is None  # answers from the last read
        await reader.refresh()
        assert await reader.offset({"p": "nowhere"}) == {"pos": 5}

        without_own = CombinedOffsetReader("conn", None, global_)
        assert await without_own.offsets([{"p": "both"}, {"p": "own-only"}]) == [{"pos": 1}, None]
