"""Tasks that heal themselves, on a real worker and broker with a backoff unit of a second
(restarts at once, then after 2 s and 6 s): a task that fails three times in
the middle of open transactions heals and its output is exactly once (read back
read_committed); one that never heals stops at its connector's maximum; one that
fails with a configuration error is never restarted; the status and the metrics say
so."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from eos.kafka import ClientConfig, read_to_end
from tests.conftest import TopicFactory
from tests.integration.connectors import HEALING
from tests.integration.worker_harness import RunningWorker, running_worker, worker_props

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

UNIT_S = 1.0
"""A run after the first restart counts as healed once it lasts 2 units: a task's restart
on a busy host (stop, fence, start, 60 records) took over a second, so half a second
counted the never-healing task from 0 again and again (and it never stopped)."""


def healing(name: str, topic: str, failures: int, **settings: str) -> dict[str, str]:
    HEALING[topic] = {"failures": failures}
    return {
        "name": name,
        "connector.class": "tests.integration.connectors:HealingSource",
        "topic": topic,
        "transaction.boundary": "interval",
        "transaction.boundary.interval.ms": "200",
        **settings,
    }


async def task_status(worker: RunningWorker, name: str, until: Callable[[Any], bool]) -> Any:
    with anyio.fail_after(30):
        while True:
            body = await worker.status(name)
            if body["tasks"] and until(body["tasks"][0]):
                return body["tasks"][0]
            await anyio.sleep(0.1)


async def test_failed_tasks_heal_with_backoff_or_stay_failed_and_say_why(
    bootstrap: str,
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    unique_name: Callable[[str], str],
) -> None:
    heals, never, config = [await topic_factory() for _ in range(3)]
    props = worker_props(
        bootstrap,
        unique_name("g"),
        auto_restart_enabled="true",
        auto_restart_backoff_unit_ms=str(int(UNIT_S * 1000)),
    )
    connectors = [
        healing("heals", heals, 3),
        healing("never", never, 100, **{"auto.restart.max.attempts": "2"}),
        healing("config", config, 0, **{"fail.with": "config"}),
    ]
    async with running_worker(props, connectors) as worker:
        waiting: list[Any] = []  # what the status said while the task waited for a restart
        with anyio.fail_after(60):
            for tick in itertools.count():
                for task in (await worker.status("heals"))["tasks"]:
                    if task.get("auto_restart", {}).get("next_attempt"):
                        waiting.append(task)
                if tick % 5 == 0 and len(ids := await committed(client_config, heals)) >= 300:
                    break
                await anyio.sleep(0.1)
        left = await task_status(
            worker, "never", lambda t: "not_restarted" in t.get("auto_restart", {})
        )
        unhealable = await task_status(worker, "config", lambda t: "auto_restart" in t)
        await anyio.sleep(4 * UNIT_S * 2)  # longer than "never"'s next wait would be
        body = (await worker.http.get("/metrics")).text
        after = await worker.status("never")

    assert sorted(ids) == list(range(300))
    assert max(ids.values()) == 1  # exactly once across three failed runs
    starts = HEALING[heals]["starts"]
    assert len(starts) == 4
    # restarts at once, then 1 s and 3 s after the previous one (the unit tests hold the
    # exact schedule; a task's start-up, between the decision and start(), blurs it here)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert gaps[1] >= 2 * UNIT_S * 0.6, gaps
    assert gaps[2] >= 6 * UNIT_S * 0.8, gaps
    assert gaps[2] > gaps[1] > 0, gaps
    assert 'eos_task_auto_restarts_total{connector="heals",task="0"} 3.0' in body
    assert waiting, "the status never showed the next attempt"
    assert {t["state"] for t in waiting} == {"FAILED"}
    assert {t["auto_restart"]["restarts"] for t in waiting} <= {1, 2}

    assert left["state"] == "FAILED"
    assert left["auto_restart"]["restarts"] == 2
    assert left["auto_restart"]["next_attempt"] is None
    assert "auto.restart.max.attempts (2) reached" in left["auto_restart"]["not_restarted"]
    assert len(HEALING[never]["starts"]) == 3  # the first run and two restarts, no more
    assert after["tasks"][0]["auto_restart"] == left["auto_restart"]
    assert 'eos_task_auto_restarting{connector="never",task="0"} 2.0' in body

    assert unhealable["state"] == "FAILED"
    assert unhealable["auto_restart"]["restarts"] == 0
    assert "ConfigError does not heal" in unhealable["auto_restart"]["not_restarted"]
    assert len(HEALING[config]["starts"]) == 1


async def committed(config: ClientConfig, topic: str) -> Counter[int]:
    records = await read_to_end(config, topic, timeout=30)
    return Counter(json.loads(r.value)["n"] for r in records if r.value is not None)
