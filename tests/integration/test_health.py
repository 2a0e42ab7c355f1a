"""``GET /health`` of a real worker on the real broker, in each state of Kafka Connect's
contract (KIP-1017): 503 ``starting`` while it cannot join its group (a consumer group
holds the group id), 200 ``healthy`` once it has joined (and ``eos health`` says so),
500 ``unhealthy`` within the 10 s bound once a call blocks the coordinator's mailbox
— while every ``/health`` answer stays fast, also with a REST write stuck behind that
call — and healthy again once the call ends."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
import httpx
import pytest

from eos.kafka import ClientConfig, make_consumer
from eos.runtime.health import BOUND
from eos.runtime.worker import Worker
from services.cli import parser
from services.client import commands
from services.worker_service import run_worker, worker_settings
from tests.conftest import TopicFactory
from tests.integration.worker_harness import worker_props

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

FAST = 1.0
"""Seconds any /health answer may take (it asks no actor)."""


async def health(http: httpx.AsyncClient) -> tuple[int, dict[str, Any]]:
    started = time.monotonic()
    response = await http.get("/health")
    assert time.monotonic() - started < FAST
    return response.status_code, response.json()


async def until(
    http: httpx.AsyncClient,
    code: int,
    timeout: float = 30,
    says: str = "",
) -> tuple[dict[str, Any], float]:
    """The first /health body with ``code`` (whose message has ``says``), and how long
    it took to come."""
    started = time.monotonic()
    with anyio.fail_after(timeout):
        while True:
            status, body = await health(http)
            if status == code and says in body["message"]:
                return body, time.monotonic() - started
            await anyio.sleep(0.2)


def eos_health(url: str) -> tuple[int, str]:
    out = io.StringIO()
    code = commands.run(parser().parse_args(["health", "--url", url]), out=out, err=io.StringIO())
    return code, out.getvalue()


async def test_starting_healthy_and_a_stuck_mailbox(
    bootstrap: str, topic_factory: TopicFactory, unique_name: Callable[[str], str]
) -> None:
    group = unique_name("health")
    consumer = make_consumer(
        ClientConfig({"bootstrap.servers": bootstrap}), group_id=group, session_timeout_ms=30000
    )
    consumer.subscribe([await topic_factory()])
    await consumer.start()
    settings = worker_settings(worker_props(bootstrap, group))
    found: list[Worker] = []
    async with (
        anyio.create_task_group() as tg,
        httpx.AsyncClient(base_url=settings.rest_url, timeout=30) as http,
    ):

        async def run() -> None:
            found.append(await tg.start(run_worker, settings, []))

        try:
            with anyio.fail_after(30):
                while not consumer.assignment():
                    await consumer.getmany(timeout_ms=200)
            tg.start_soon(run)
            starting, _ = await until(http, 503, says="protocol type 'consumer'")
        finally:
            await consumer.stop()
        assert starting["status"] == "starting"
        assert f"the worker is starting: joining group {group}" in starting["message"]
        assert "protocol type 'consumer'" in starting["message"]

        healthy, _ = await until(http, 200)
        assert healthy == {
            "status": "healthy",
            "message": f"the worker is running in group {group}",
        }
        code, line = await anyio.to_thread.run_sync(eos_health, settings.rest_url)
        assert (code, line) == (0, f"healthy: the worker is running in group {group}\n")

        (worker,) = found
        release = anyio.Event()
        tg.start_soon(worker.inbox.ask, release.wait)  # a call that does not end
        stuck: list[int] = []

        async def write() -> None:  # a REST request that queues behind it
            config = {"connector.class": "VerifiableSource", "topic": group, "throughput": "1"}
            response = await http.put("/connectors/c/config", json=config)
            stuck.append(response.status_code)

        tg.start_soon(write)
        unhealthy, after = await until(http, 500, timeout=3 * BOUND)
        assert BOUND - 1 <= after <= BOUND + 3, after
        assert unhealthy["status"] == "unhealthy"
        assert "the coordinator has not answered for 1" in unhealthy["message"]
        assert "(busy with Event.wait)" in unhealthy["message"]
        assert stuck == []  # the write still waits; /health never did
        code, line = await anyio.to_thread.run_sync(eos_health, settings.rest_url)
        assert code == 1
        assert line.startswith("unhealthy: the coordinator has not answered")

        release.set()
        await until(http, 200, timeout=5)
        with anyio.fail_after(10):
            while not stuck:  # noqa: ASYNC110
                await anyio.sleep(0.1)
        assert stuck == [201]  # served once the mailbox moved on
        worker.stop()
