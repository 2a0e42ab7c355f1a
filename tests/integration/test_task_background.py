"""Task background work (``context.start_soon``) and records already encoded
(``SourceRecord(encoded=True)``), run by a worker in this process against the real
broker: what a user sees in the topics, the offsets and the task status."""

from __future__ import annotations

import json
from collections.abc import Callable

import anyio
import pytest

from eos.kafka import ClientConfig, read_to_end
from tests.integration.connectors import BACKGROUND_EVENTS, BACKGROUND_SOURCES, ENCODED_RECORDS
from tests.integration.helpers import (
    committed_offsets,
    committed_values,
    read_uncommitted,
    wait_committed,
)
from tests.integration.worker_harness import connector_config, running_worker, worker_props

pytestmark = pytest.mark.integration


def background(name: str, topic: str, **settings: object) -> dict[str, str]:
    return connector_config("BackgroundSource", name, topic, **settings)


def encoded(name: str, topic: str, **settings: object) -> dict[str, str]:
    return connector_config("EncodedSource", name, topic, **settings)


async def test_background_records_exactly_once_and_cancelled_after_stop(
    bootstrap: str, client_config: ClientConfig, unique_name: Callable[[str], str]
) -> None:
    group, topic = unique_name("g"), unique_name("out")
    wprops = worker_props(bootstrap, group)
    props = background("bg", topic)
    events = BACKGROUND_EVENTS.setdefault(topic, [])
    BACKGROUND_SOURCES[topic] = 200

    async with running_worker(wprops, [props]) as w:
        await w.wait_for_tasks("bg", "RUNNING", 1, timeout=20)
        await wait_committed(client_config, topic, 200)
        assert events == []  # the background coroutine outlives the polls that drained it
    # Cancelled only once stop() had returned (stop awaits before it records "stopped").
    assert events == ["stopped", "background cancelled"]

    # The source grew: the next run's background coroutine starts at the committed
    # offset; nothing is written twice.
    BACKGROUND_SOURCES[topic] = 300
    async with running_worker(wprops, [props]) as w:
        await w.wait_for_tasks("bg", "RUNNING", 1, timeout=20)
        await wait_committed(client_config, topic, 300)
    assert events == ["stopped", "background cancelled"] * 2

    values = [json.loads(v) for v in await committed_values(client_config, topic)]
    assert values == [{"n": n} for n in range(300)]
    offsets = await committed_offsets(client_config, wprops["offset.storage.topic"], "bg")
    assert offsets[-1] == {"n": 300}


async def test_background_failure_fails_task_and_hides_open_transaction(
    bootstrap: str, client_config: ClientConfig, unique_name: Callable[[str], str]
) -> None:
    group, topic = unique_name("g"), unique_name("out")
    wprops = worker_props(bootstrap, group)
    BACKGROUND_SOURCES[topic] = 10
    props = background(
        "bg",
        topic,
        commit_after=4,
        fail_after_handover="true",
        transaction_boundary="connector",
    )
    async with running_worker(wprops, [props]) as w:
        status = await w.wait_for_tasks("bg", "FAILED", 1, timeout=20)
    trace = status["tasks"][0]["trace"]
    assert trace.startswith("background reader broke after 10 records")
    assert "RuntimeError" in trace
    assert BACKGROUND_EVENTS[topic] == ["background raised", "stopped"]

    # Records 4..9 reached the topic in the open transaction, which was aborted: a
    # read_committed reader sees only what the task committed, and so do the offsets.
    values = [json.loads(v) for v in await committed_values(client_config, topic)]
    assert values == [{"n": n} for n in range(4)]
    assert await read_uncommitted(client_config, topic) == [{"n": n} for n in range(10)]
    offsets = await committed_offsets(client_config, wprops["offset.storage.topic"], "bg")
    assert offsets == [{"n": 4}]


async def test_encoded_records_arrive_unchanged(
    bootstrap: str, client_config: ClientConfig, unique_name: Callable[[str], str]
) -> None:
    topic = unique_name("out")
    async with running_worker(worker_props(bootstrap, unique_name("g")), [encoded("enc", topic)]):
        with anyio.fail_after(15):
            while True:
                records = await read_to_end(client_config, topic)
                if len(records) >= len(ENCODED_RECORDS):
                    break
                await anyio.sleep(0.2)
    # value.converter is json (the default), yet nothing was converted: bytes would have
    # become base64 JSON strings.
    assert [(r.key, r.value) for r in records] == ENCODED_RECORDS


async def test_encoded_record_with_non_bytes_value_fails_task(
    bootstrap: str, client_config: ClientConfig, unique_name: Callable[[str], str]
) -> None:
    topic = unique_name("out")
    props = encoded("enc", topic, bad="true")
    async with running_worker(worker_props(bootstrap, unique_name("g")), [props]) as w:
        status = await w.wait_for_tasks("enc", "FAILED", 1, timeout=20)
    trace = status["tasks"][0]["trace"]
    assert "source partition {'blob': 'bad'}" in trace
    assert "marked encoded but its key or value is not bytes" in trace
    assert "value str" in trace
    assert "ConversionError" in trace
    # The first batch was committed; nothing of the failing one is visible.
    records = await read_to_end(client_config, topic)
    assert [(r.key, r.value) for r in records] == ENCODED_RECORDS


async def test_background_failure_is_the_status_even_when_poll_fails_because_of_it(
    bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    topic = unique_name("out")
    BACKGROUND_SOURCES[topic] = 10
    props = background("bg", topic, fail_after_handover="true", close_on_exit="true")
    async with running_worker(worker_props(bootstrap, unique_name("g")), [props]) as w:
        status = await w.wait_for_tasks("bg", "FAILED", 1, timeout=20)
    assert status["tasks"][0]["trace"].startswith("background reader broke after 10 records")
