"""TRANSACTION_ABORTABLE (KIP-1050) on a transaction-version-2 Produce, end to end: a
worker in this process, the real broker, the aiokafka task producer.

No path of the Kafka 4.3 broker answers a version 12 Produce with error 120: the partition
leader adds the partitions to the transaction itself (AddPartitionsToTxnManager's
ADD_PARTITION operation), and only the coordinator's verify-only answer
(handleVerifyPartitionsInTransaction, used for Produce versions below 12) produces it. So
the answer is injected where the client reads it: the first Produce response for the
task's topic has its partitions' error rewritten to 120, after the broker really wrote the
batch into the open transaction. What follows is real: the task aborts that transaction
(EndTxn v5, the epoch bumped), a new instance of the connector's task re-reads the
committed offsets from the offsets topic and re-polls; a read_committed reader sees every
record once, and the log holds the aborted batch too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from io import BytesIO
from typing import Any

import pytest

from eos.kafka import ClientConfig
from eos.kafka import aiokafka_private as private
from eos.kafka import transactions_v2 as v2
from tests.integration.connectors import BACKGROUND_EVENTS, BACKGROUND_SOURCES
from tests.integration.helpers import committed_values, read_uncommitted, wait_committed
from tests.integration.worker_harness import connector_config, running_worker, worker_props

pytestmark = pytest.mark.integration


def answer_abortable_once(monkeypatch: pytest.MonkeyPatch, topic: str) -> list[Any]:
    """The first Produce response for ``topic`` reads TRANSACTION_ABORTABLE; returns the
    list of what was rewritten (one entry once it happened)."""
    decode = v2.ProduceResponse_v12.decode.__func__  # type: ignore[attr-defined]
    rewritten: list[Any] = []

    def decode_abortable(cls: type[v2.ProduceResponse_v12], data: BytesIO | bytes) -> Any:
        response = decode(cls, data)
        if rewritten or all(name != topic for name, _, _ in response.topics):
            return response
        topics = []
        for name, partitions, tags in response.topics:
            if name == topic:
                rewritten.extend((name, p[0]) for p in partitions)
                partitions = [(p[0], private.TRANSACTION_ABORTABLE, *p[2:]) for p in partitions]
            topics.append((name, partitions, tags))
        return cls(topics, response.throttle_time_ms, response.tags)

    monkeypatch.setattr(v2.ProduceResponse_v12, "decode", classmethod(decode_abortable))
    return rewritten


async def test_an_abortable_produce_aborts_and_the_task_resumes_from_its_offsets(
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    group, topic = unique_name("g"), unique_name("out")
    BACKGROUND_SOURCES[topic] = 300
    events = BACKGROUND_EVENTS.setdefault(topic, [])
    rewritten = answer_abortable_once(monkeypatch, topic)
    props = connector_config("BackgroundSource", "abortable", topic)

    async with running_worker(worker_props(bootstrap, group), [props]) as w:
        await w.wait_for_tasks("abortable", "RUNNING", 1, timeout=20)
        await wait_committed(client_config, topic, 300)
        assert (await w.status("abortable"))["tasks"][0]["state"] == "RUNNING"
    assert rewritten, "no Produce for the topic was answered (transaction version 1?)"
    # The first instance was stopped and replaced (its background coroutine ended: it
    # was still reading ahead, so the stream stop() closed may have ended it first), the
    # second stopped with the worker.
    assert events[0] == "stopped"
    assert events[1] in ("background cancelled", "background raised")
    assert events[2:] == ["stopped", "background cancelled"]

    values = [json.loads(v) for v in await committed_values(client_config, topic)]
    assert values == [{"n": n} for n in range(300)]
    logged = await read_uncommitted(client_config, topic)
    aborted = len(logged) - 300
    assert aborted > 0  # the batch the broker wrote, then aborted: never read committed
    assert logged[:aborted] == values[:aborted]  # polled again from the committed offset
