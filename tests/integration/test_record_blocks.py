"""Record blocks (``RecordBlock``: many encoded rows column by column) returned by a
task's ``poll``, run by a worker in this process against the real broker: where the
rows land (topic, partition, headers, timestamps), the committed offsets, restarts,
``commit_record`` and connector-defined transactions, and how bad blocks fail the task."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from aiokafka.structs import ConsumerRecord

from eos.kafka import ClientConfig, read_to_end
from tests.conftest import TopicFactory
from tests.integration.connectors import (
    BLOCK_BASE_TIMESTAMP,
    BLOCK_COMMITS,
    BLOCK_SOURCES,
    block_key,
    block_row_headers,
    block_value,
)
from tests.integration.helpers import (
    committed_offsets,
    committed_values,
    key_partition,
    wait_committed,
)
from tests.integration.worker_harness import connector_config, running_worker, worker_props

pytestmark = pytest.mark.integration


def blocks(name: str, topic: str, *, commits: bool = False, **settings: object) -> dict[str, str]:
    """The config of a :class:`BlockSource` (or, with ``commits``, a
    :class:`BlockCommitSource`) named ``name`` writing to ``topic``."""
    return connector_config(
        "BlockCommitSource" if commits else "BlockSource", name, topic, **settings
    )


async def wait_offset(
    config: ClientConfig, offsets_topic: str, name: str, offset: Any, timeout: float = 3
) -> list[Any]:
    """The committed offsets of connector ``name`` once ``offset`` is among them (or
    when ``timeout`` seconds have passed)."""
    offsets: list[Any] = []
    with anyio.move_on_after(timeout):
        while offset not in (offsets := await committed_offsets(config, offsets_topic, name)):  # noqa: ASYNC110 - polls Kafka
            await anyio.sleep(0.1)
    return offsets


def row_of(record: ConsumerRecord) -> int:
    """The row number ``n`` of a record written from a block (value ``row-<n>``)."""
    value = record.value
    assert value is not None
    assert value.startswith(b"row-"), value
    return int(value[4:])


def assert_rows_as_given(records: list[ConsumerRecord], partitions: int) -> None:
    """Each row has its key, headers and timestamp, and a keyed row is in its key's
    partition."""
    for record in records:
        n = row_of(record)
        key = block_key(n)
        assert record.key == key, n
        assert list(record.headers) == block_row_headers(n), n
        assert record.timestamp == BLOCK_BASE_TIMESTAMP + n, n
        assert record.timestamp_type == 0, n  # CreateTime: the block's timestamp
        if key is not None:
            assert record.partition == key_partition(key, partitions), n


async def test_blocks_land_once_by_key_with_headers_and_resume_after_restart(
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    topic_factory: TopicFactory,
    producer_client: str,
) -> None:
    topic = await topic_factory(partitions=3)
    wprops = worker_props(bootstrap, unique_name("g"), producer_client=producer_client)
    props = blocks("blk", topic, block_rows=30, blocks_per_poll=2)
    BLOCK_SOURCES[topic] = 300  # 10 blocks, 5 polls

    async with running_worker(wprops, [props]) as w:
        await w.wait_for_tasks("blk", "RUNNING", 1, timeout=20)
        await wait_committed(client_config, topic, 300)

    records = await read_to_end(client_config, topic)
    assert sorted(row_of(r) for r in records) == list(range(300))
    assert_rows_as_given(records, 3)
    assert {r.partition for r in records} == {0, 1, 2}
    # Rows without a key stick to one partition per send (here: per poll).
    unkeyed: dict[int, set[int]] = defaultdict(set)
    for r in records:
        if r.key is None:
            unkeyed[row_of(r) // 60].add(r.partition)
    assert sorted(unkeyed) == list(range(5))
    assert all(len(p) == 1 for p in unkeyed.values()), unkeyed
    # Within a partition the rows keep their order.
    for p in range(3):
        rows = [row_of(r) for r in records if r.partition == p]
        assert rows == sorted(rows)
    # One transaction per poll; each stores the offset of the poll's last block.
    offsets_topic = wprops["offset.storage.topic"]
    offsets = await committed_offsets(client_config, offsets_topic, "blk")
    assert offsets == [{"row": r} for r in range(60, 301, 60)]

    # The source grew: the restarted task resumes after the last block's offset.
    BLOCK_SOURCES[topic] = 450
    async with running_worker(wprops, [props]) as w:
        await w.wait_for_tasks("blk", "RUNNING", 1, timeout=20)
        await wait_committed(client_config, topic, 450)

    records = await read_to_end(client_config, topic)
    assert sorted(row_of(r) for r in records) == list(range(450))  # nothing twice
    assert_rows_as_given(records, 3)
    offsets = await committed_offsets(client_config, offsets_topic, "blk")
    assert offsets[-1] == {"row": 450}
    assert offsets[5:] == [{"row": r} for r in (360, 420, 450)]


async def test_per_row_topics_mixed_with_records(
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    topic_factory: TopicFactory,
    producer_client: str,
) -> None:
    even = await topic_factory(partitions=2)
    odd = await topic_factory(partitions=3)
    BLOCK_SOURCES[even] = 40  # 4 blocks, 2 polls, each poll led by a JSON record
    props = blocks("blk", even, second_topic=odd, block_rows=10, leading_record="true")
    async with running_worker(
        worker_props(bootstrap, unique_name("g"), producer_client=producer_client), [props]
    ) as w:
        await w.wait_for_tasks("blk", "RUNNING", 1, timeout=20)
        await wait_committed(client_config, even, 22)
        await wait_committed(client_config, odd, 20)

    in_even = await read_to_end(client_config, even)
    in_odd = await read_to_end(client_config, odd)
    # The SourceRecords of the same polls went through the JSON converter as usual.
    markers = [r for r in in_even if not r.value.startswith(b"row-")]
    assert sorted(json.loads(r.value)["poll"] for r in markers) == [0, 1]
    rows_even = [r for r in in_even if r.value.startswith(b"row-")]
    assert sorted(row_of(r) for r in rows_even) == list(range(0, 40, 2))
    assert sorted(row_of(r) for r in in_odd) == list(range(1, 40, 2))
    # Each row's partition follows the partition count of its own topic.
    assert_rows_as_given(rows_even, 2)
    assert_rows_as_given(in_odd, 3)
    assert await committed_values(client_config, even) == [r.value for r in in_even]


async def test_commit_record_gets_each_row_with_where_it_is(
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    topic_factory: TopicFactory,
    producer_client: str,
) -> None:
    topic = await topic_factory(partitions=3)
    BLOCK_SOURCES[topic] = 100  # 5 blocks of 20 rows, 3 polls
    calls = BLOCK_COMMITS.setdefault(topic, [])
    props = blocks("blk", topic, commits=True, block_rows=20)
    async with running_worker(
        worker_props(bootstrap, unique_name("g"), producer_client=producer_client), [props]
    ) as w:
        await w.wait_for_tasks("blk", "RUNNING", 1, timeout=20)
        await wait_committed(client_config, topic, 100)
        with anyio.fail_after(10):
            while len(calls) < 100:  # noqa: ASYNC110 - commit_record runs after the commit
                await anyio.sleep(0.05)

    records = await read_to_end(client_config, topic)
    where = {row_of(r): (r.topic, r.partition, r.offset) for r in records}
    assert sorted(where) == list(range(100))
    assert_rows_as_given(records, 3)

    assert len(calls) == 100
    rows = [int(record.value[4:]) for record, _ in calls]
    assert sorted(rows) == list(range(100))  # one call per row
    for (record, metadata), n in zip(calls, rows, strict=True):
        assert metadata is not None, n
        assert (metadata.topic, metadata.partition, metadata.offset) == where[n], n
        assert record.encoded, n
        assert record.topic == topic, n
        assert record.key == block_key(n), n
        assert record.value == block_value(n), n
        assert record.timestamp == BLOCK_BASE_TIMESTAMP + n, n
        assert list(record.headers) == block_row_headers(n), n
        # The block's offset comes with its last row only.
        assert record.source_offset == ({"row": n + 1} if n % 20 == 19 else None), n


@pytest.mark.parametrize("commits", [False, True], ids=["plain", "commits"])
@pytest.mark.parametrize("kind", ["value", "timestamp", "key"])
async def test_bad_row_fails_task_and_hides_its_transaction(
    kind: str,
    commits: bool,
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    topic_factory: TopicFactory,
    producer_client: str,
) -> None:
    """A bad row fails the task with a ConversionError naming where it comes from and
    hides its transaction, also when the rows become records first (for a task that
    overrides ``commit_record``)."""
    topic = await topic_factory(partitions=3)
    wprops = worker_props(bootstrap, unique_name("g"), producer_client=producer_client)
    BLOCK_SOURCES[topic] = 120
    # Poll 1: blocks 0-1 (committed). Poll 2: block 2, then block 3 (rows 60-79), whose
    # row 3 (row 63) has a str where bytes or an int belong.
    props = blocks("blk", topic, commits=commits, block_rows=20, bad_kind=kind, bad_row=3)
    async with running_worker(wprops, [props]) as w:
        status = await w.wait_for_tasks("blk", "FAILED", 1, timeout=20)
    trace = status["tasks"][0]["trace"]
    if commits:  # the error names the row's record
        assert f"for topic {topic!r} from source partition {{'table': 'blocks'}}" in trace, trace
    else:
        assert trace.startswith(
            f"row 3 of the record block for topic {topic!r} from source partition "
            "{'table': 'blocks'} at offset {'row': 80} cannot be written"
        ), trace
    assert "ConversionError" in trace

    # The first poll's transaction is there; nothing of the failing one.
    records = await read_to_end(client_config, topic)
    assert sorted(row_of(r) for r in records) == list(range(40))
    offsets = await committed_offsets(client_config, wprops["offset.storage.topic"], "blk")
    assert offsets == [{"row": 40}]


@pytest.mark.parametrize("commits", [False, True], ids=["plain", "commits"])
async def test_offset_of_a_block_without_rows_is_committed(
    commits: bool,
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    topic_factory: TopicFactory,
    producer_client: str,
) -> None:
    """A block of no rows still moves its source partition's offset (e.g. a chunk that
    turned out empty), whether or not the task overrides ``commit_record``."""
    topic = await topic_factory()
    wprops = worker_props(bootstrap, unique_name("g"), producer_client=producer_client)
    offsets_topic = wprops["offset.storage.topic"]
    BLOCK_SOURCES[topic] = 20
    props = blocks("blk", topic, commits=commits, block_rows=10, trailing_empty_block="true")
    checked = {"row": 20, "checked": True}
    async with running_worker(wprops, [props]) as w:
        await w.wait_for_tasks("blk", "RUNNING", 1, timeout=20)
        await wait_committed(client_config, topic, 20)
        offsets = await wait_offset(client_config, offsets_topic, "blk", checked)
    assert offsets == [{"row": 20}, checked]
    assert sorted(row_of(r) for r in await read_to_end(client_config, topic)) == list(range(20))


@pytest.mark.parametrize("addressed", ["topic", "topics"])
async def test_block_for_the_offsets_topic_fails_task(
    addressed: str,
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    topic_factory: TopicFactory,
    producer_client: str,
) -> None:
    wprops = worker_props(bootstrap, unique_name("g"), producer_client=producer_client)
    offsets_topic = wprops["offset.storage.topic"]
    if addressed == "topic":  # the block's topic
        topic = offsets_topic
        props = blocks("blk", topic)
    else:  # one row's topic (odd rows go to the second topic)
        topic = await topic_factory()
        props = blocks("blk", topic, second_topic=offsets_topic)
    BLOCK_SOURCES[topic] = 10
    async with running_worker(wprops, [props]) as w:
        status = await w.wait_for_tasks("blk", "FAILED", 1, timeout=20)
    trace = status["tasks"][0]["trace"]
    assert f"addressed to the offsets topic {offsets_topic!r}" in trace, trace
    assert await committed_offsets(client_config, offsets_topic, "blk") == []
    if addressed == "topics":
        assert await committed_values(client_config, topic) == []


async def test_connector_commits_right_after_the_block_it_names(
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    topic_factory: TopicFactory,
    producer_client: str,
) -> None:
    topic = await topic_factory(partitions=3)
    wprops = worker_props(bootstrap, unique_name("g"), producer_client=producer_client)
    BLOCK_SOURCES[topic] = 120  # 12 blocks of 10 rows, 3 a poll
    # Commits after the middle block of each poll (so mid-poll), and after the last.
    props = blocks(
        "blk",
        topic,
        block_rows=10,
        blocks_per_poll=3,
        commit_blocks="1,4,7,10,11",
        transaction_boundary="connector",
    )
    async with running_worker(wprops, [props]) as w:
        await w.wait_for_tasks("blk", "RUNNING", 1, timeout=20)
        await wait_committed(client_config, topic, 120)
        offsets = await committed_offsets(client_config, wprops["offset.storage.topic"], "blk")

    # Each transaction ends right after its block: its offset is that block's.
    assert offsets == [{"row": r} for r in (20, 50, 80, 110, 120)]
    records = await read_to_end(client_config, topic)
    assert sorted(row_of(r) for r in records) == list(range(120))
    assert_rows_as_given(records, 3)
