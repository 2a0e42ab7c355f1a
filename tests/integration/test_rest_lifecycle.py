"""Pause, resume, stop, restart and the other Connect endpoints against a real worker:
status codes and bodies as Kafka Connect documents them, and output that visibly
stops and starts again."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from eos.kafka import ClientConfig, read_to_end
from tests.integration.worker_harness import RunningWorker, running_worker, worker_props

pytestmark = pytest.mark.integration


def flaky(topic: str, fail_dir: Path, tasks: int = 2) -> dict[str, str]:
    return {
        "name": "flaky",
        "connector.class": "tests.integration.connectors:FlakySource",
        "tasks.max": str(tasks),
        "topic": topic,
        "fail.dir": str(fail_dir),
    }


async def states(w: RunningWorker, name: str) -> tuple[str, list[str]]:
    body = await w.status(name)
    return body["connector"]["state"], [t["state"] for t in body["tasks"]]


async def until(w: RunningWorker, name: str, expected: tuple[str, list[str]]) -> None:
    with anyio.fail_after(60):
        while await states(w, name) != expected:  # noqa: ASYNC110 - polls REST
            await anyio.sleep(0.2)


async def count(client: ClientConfig, topic: str) -> int:
    return len(await read_to_end(client, topic))


async def test_pause_resume_stop_and_restart(
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    topic_factory: Callable[..., Any],
    tmp_path: Path,
) -> None:
    topic = await topic_factory()
    (tmp_path / "fail-1").touch()  # task 1 fails until the file goes
    async with running_worker(worker_props(bootstrap, unique_name("g"))) as w:
        created = await w.http.post(
            "/connectors", json={"name": "flaky", "config": flaky(topic, tmp_path)}
        )
        assert created.status_code == 201, created.text
        await until(w, "flaky", ("RUNNING", ["RUNNING", "FAILED"]))
        one = await w.http.get("/connectors/flaky/tasks/1/status")
        assert one.json()["state"] == "FAILED"
        assert "told to fail" in one.json()["trace"]
        assert (await w.http.get("/connectors/flaky/tasks/7/status")).status_code == 404

        # Restart only what failed: 202 and the plan; task 0 keeps running throughout.
        (tmp_path / "fail-1").unlink()
        restarted = await w.http.post("/connectors/flaky/restart?includeTasks=true&onlyFailed=true")
        assert restarted.status_code == 202, restarted.text
        plan = restarted.json()
        assert plan["connector"]["state"] == "RUNNING"
        assert [t["state"] for t in plan["tasks"]] == ["RUNNING", "RESTARTING"]
        await until(w, "flaky", ("RUNNING", ["RUNNING", "RUNNING"]))

        # Pause: the output stops; resume: it goes on.
        assert (await w.http.put("/connectors/flaky/pause")).status_code == 202
        await until(w, "flaky", ("PAUSED", ["PAUSED", "PAUSED"]))
        before = await count(client_config, topic)
        await anyio.sleep(2)
        assert await count(client_config, topic) == before
        assert (await w.http.put("/connectors/flaky/resume")).status_code == 202
        await until(w, "flaky", ("RUNNING", ["RUNNING", "RUNNING"]))
        await anyio.sleep(1.5)
        assert await count(client_config, topic) > before

        # Stop: no tasks at all, the connector stays; resume brings them back.
        assert (await w.http.put("/connectors/flaky/stop")).status_code == 202
        await until(w, "flaky", ("STOPPED", []))
        assert (await w.http.get("/connectors/flaky/tasks")).json() == []
        assert (await w.http.put("/connectors/flaky/resume")).status_code == 202
        await until(w, "flaky", ("RUNNING", ["RUNNING", "RUNNING"]))

        # Restarts of the connector alone (204) and of one task (204); unknowns are 404.
        assert (await w.http.post("/connectors/flaky/restart")).status_code == 204
        # Right after, the group is rebalancing: a restart is refused (409) until it settles.
        with anyio.fail_after(30):
            while (
                answer := await w.http.post("/connectors/flaky/tasks/0/restart")
            ).status_code == 409:
                assert "rebalance" in answer.json()["message"]
                await anyio.sleep(0.2)
        assert answer.status_code == 204
        assert (await w.http.post("/connectors/flaky/tasks/9/restart")).status_code == 404
        assert (await w.http.post("/connectors/nope/restart")).status_code == 404
        await until(w, "flaky", ("RUNNING", ["RUNNING", "RUNNING"]))

        # PATCH changes one setting and keeps the others.
        patched = await w.http.patch("/connectors/flaky/config", json={"tasks.max": "1"})
        assert patched.status_code == 200, patched.text
        assert patched.json()["config"]["fail.dir"] == str(tmp_path)
        await until(w, "flaky", ("RUNNING", ["RUNNING"]))

    values = [json.loads(r.value) for r in await read_to_end(client_config, topic)]
    assert values  # every task wrote, and resumed from its own offsets
    assert len({v["n"] for v in values}) > 3


async def test_created_paused_or_stopped(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    async with running_worker(worker_props(bootstrap, unique_name("g"))) as w:
        for state in ("PAUSED", "STOPPED"):
            name = f"c-{state.lower()}"
            config = {**flaky("t", tmp_path), "name": name}
            body = {"name": name, "config": config, "initial_state": state}
            assert (await w.http.post("/connectors", json=body)).status_code == 201
            await until(w, name, (state, []))
        bad_config = {**flaky("t", tmp_path), "name": "x"}
        bad = {"name": "x", "config": bad_config, "initial_state": "ASLEEP"}
        refused = await w.http.post("/connectors", json=bad)
        assert refused.status_code == 400
        assert "initial_state" in refused.json()["message"]
        assert (await w.http.put("/connectors/c-stopped/resume")).status_code == 202
        await until(w, "c-stopped", ("RUNNING", ["RUNNING", "RUNNING"]))


async def test_unknown_routes_and_verbs_answer_json(
    bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    async with running_worker(worker_props(bootstrap, unique_name("g"))) as w:
        missing = await w.http.get("/no/such/thing")
        assert missing.status_code == 404
        assert missing.json() == {"error_code": 404, "message": "Not Found"}
        wrong = await w.http.delete("/connectors")
        assert wrong.status_code == 405
        assert wrong.json()["error_code"] == 405
