"""Lifecycle calls back to back through a follower, sent by a third-party Kafka Connect
REST client (kafka-connect-py) as a user would: restart the connector with its tasks,
restart a task, pause, resume, stop, resume. Every call is answered 2xx (the client
raises on anything else, 409 included); restarts, pauses and resumes cause no
rebalance (KIP-745: every worker reads them from the config topic); and the output
holds every record exactly once, as ``eos verify`` reads it."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from kafka_connect import KafkaConnect

from tests.integration.worker_harness import REPO, Cluster

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


def verifiable(topic: str) -> dict[str, str]:
    return {
        "name": "vs",
        "connector.class": "VerifiableSource",
        "tasks.max": "2",
        "topic": topic,
        "partitions.per.task": "1",
        "records.per.partition": "0",
        "throughput": "200",
    }


def until(what: Callable[[], bool], timeout: float = 60, cluster: Cluster | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, f"not reached in time\n{cluster and cluster.tails()}"
        time.sleep(0.1)


def states(client: KafkaConnect) -> tuple[str, list[str]]:
    body: dict[str, Any] = client.get_connector_status("vs")
    return body["connector"]["state"], [t["state"] for t in body["tasks"]]


def running(client: KafkaConnect) -> bool:
    return states(client) == ("RUNNING", ["RUNNING", "RUNNING"])


def generation(client: KafkaConnect) -> int:
    found: int = client.get_cluster_info()["cluster"]["generation"]
    return found


SETTLED = 3.0
"""Seconds the group's generation must hold, running, before it counts as settled."""


def settled_generation(client: KafkaConnect, cluster: Cluster) -> int:
    """The generation once the connector runs and no rebalance came for :data:`SETTLED` s.

    Right after the back-to-back calls the tasks may still show RUNNING from before the
    stop was applied; the stop (its tasks' configs removed) and the resume (new ones) then
    rebalance the group, as Connect's do, a moment later."""
    deadline = time.monotonic() + 60
    last, since = generation(client), time.monotonic()
    while time.monotonic() - since < SETTLED or not running(client):
        assert time.monotonic() < deadline, f"the group did not settle\n{cluster.tails()}"
        time.sleep(0.2)
        now = generation(client)
        if now != last:
            last, since = now, time.monotonic()
    return last


async def test_lifecycle_calls_back_to_back_through_a_follower(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    group, topic = unique_name("calls"), unique_name("out")
    cluster = Cluster(tmp_path, bootstrap, group)
    run = anyio.to_thread.run_sync
    try:
        cluster.start()
        leader = await run(cluster.leader)
        await run(cluster.put_connector, verifiable(topic))
        follower = next(w for w in cluster.workers if w is not leader)
        client = KafkaConnect(url=follower.rest_url)
        await run(until, lambda: running(client), 60, cluster)

        def back_to_back() -> None:
            plan = client.restart_connector("vs", include_tasks=True)
            assert plan["connector"]["state"] == "RESTARTING", plan
            assert [t["state"] for t in plan["tasks"]] == ["RESTARTING"] * 2, plan
            client.restart_connector_task("vs", 0)
            client.pause_connector("vs")
            client.resume_connector("vs")
            client.stop_connector("vs")
            client.resume_connector("vs")

        await run(back_to_back)

        # Restarts, a pause and a resume again: the workers act on them, no rebalance.
        before = await run(settled_generation, client, cluster)

        def lifecycle_without_stop() -> None:
            client.restart_connector("vs", include_tasks=True)
            client.restart_connector_task("vs", 1)
            client.pause_connector("vs")
            until(lambda: states(client) == ("PAUSED", ["PAUSED", "PAUSED"]))
            client.resume_connector("vs")
            until(lambda: running(client))

        await run(lifecycle_without_stop)
        assert await run(generation, client) == before
        await anyio.sleep(2)  # more output after the last resume
    finally:
        cluster.stop()

    verified = await anyio.run_process(
        [sys.executable, "-m", "services.cli", "verify", "--bootstrap-server", bootstrap,
         "--topic", topic, "--expect", "500"],
        cwd=REPO, check=False,
    )  # fmt: skip
    output = (verified.stdout + verified.stderr).decode(errors="replace")
    assert verified.returncode == 0, output + cluster.tails()
