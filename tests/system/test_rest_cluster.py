"""The REST API of a three-worker cluster, every request sent to a follower: writes are
forwarded to the leader and answered in Kafka Connect's shapes; lifecycle requests
visibly stop and restart the output; forwarding never turns a rebalance into a 500 or
a lost write, and a third hop is refused."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from eos.kafka import ClientConfig, read_to_end
from tests.integration.worker_harness import Cluster

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]


def verifiable(topic: str, tasks: int = 2) -> dict[str, str]:
    return {
        "name": "vs",
        "connector.class": "VerifiableSource",
        "tasks.max": str(tasks),
        "topic": topic,
        "partitions.per.task": "1",
        "records.per.partition": "0",
        "throughput": "100",
    }


class Client:
    """Requests to one worker, as a user's client would send them."""

    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return httpx.request(method, f"{self.url}{path}", json=body, timeout=60)

    def until(self, what: Callable[[], bool], timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if what():
                return
            time.sleep(0.2)
        raise AssertionError(f"not reached within {timeout}s")

    def write(self, method: str, path: str, body: Any = None) -> httpx.Response:
        """A write, sent again while it answers 409 for a rebalance under way (a stop
        or a config change starts one), as the 409's message asks."""
        deadline = time.monotonic() + 60
        while True:
            answer = self.call(method, path, body)
            if answer.status_code != 409 or "rebalance" not in answer.text:
                return answer
            assert time.monotonic() < deadline, answer.text
            time.sleep(0.2)

    def states(self) -> tuple[str, list[str]]:
        body = self.call("GET", "/connectors/vs/status").json()
        return body["connector"]["state"], [t["state"] for t in body["tasks"]]


def is_error(response: httpx.Response, status: int) -> bool:
    body = response.json()
    return response.status_code == status and set(body) == {"error_code", "message"}


async def committed(client: ClientConfig, topic: str) -> dict[str, list[int]]:
    found: dict[str, list[int]] = defaultdict(list)
    for record in await read_to_end(client, topic):
        value = json.loads(record.value)
        found[value["partition"]].append(value["seqno"])
    return found


async def test_every_request_through_a_follower(
    bootstrap: str, client_config: ClientConfig, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    group, topic = unique_name("rest"), unique_name("out")
    cluster = Cluster(tmp_path, bootstrap, group)
    run = anyio.to_thread.run_sync
    try:
        cluster.start()
        leader = await run(cluster.leader)
        follower = Client(next(w for w in cluster.workers if w is not leader).rest_url)
        root = (await run(follower.call, "GET", "/")).json()
        assert root["cluster"]["leader"] is False
        assert root["cluster"]["leader_url"] == leader.rest_url
        assert root["kafka_cluster_id"]
        assert len(root["cluster"]["members"]) == 3
        modes = {m["exactly_once_source_support"] for m in root["cluster"]["members"]}
        assert modes == {root["exactly_once_source_support"]} == {"enabled"}

        created = await run(
            follower.call, "POST", "/connectors", {"name": "vs", "config": verifiable(topic)}
        )
        assert created.status_code == 201, created.text
        assert created.headers["content-type"] == "application/json"
        assert created.json()["name"] == "vs"
        assert created.json()["type"] == "source"
        again = await run(follower.call, "POST", "/connectors", {"name": "vs", "config": {}})
        assert is_error(again, 409) or is_error(again, 400)
        await run(follower.until, lambda: follower.states() == ("RUNNING", ["RUNNING"] * 2))
        status = (await run(follower.call, "GET", "/connectors/vs/status")).json()
        live = {cluster.worker_id(w) for w in cluster.workers}
        assert {t["worker_id"] for t in status["tasks"]} <= live
        assert (await run(follower.call, "GET", "/connectors")).json() == ["vs"]
        expanded = await run(follower.call, "GET", "/connectors?expand=status&expand=info")
        assert set(expanded.json()["vs"]) == {"status", "info"}
        tasks = (await run(follower.call, "GET", "/connectors/vs/tasks")).json()
        assert [t["id"] for t in tasks] == [
            {"connector": "vs", "task": 0},
            {"connector": "vs", "task": 1},
        ]
        assert (await run(follower.call, "GET", "/connectors/vs/tasks/1/status")).json()["id"] == 1
        info = (await run(follower.call, "GET", "/connectors/vs")).json()
        assert info == {
            "name": "vs",
            "config": {**verifiable(topic), "name": "vs"},
            "tasks": [{"connector": "vs", "task": 0}, {"connector": "vs", "task": 1}],
            "type": "source",
        }
        config = (await run(follower.call, "GET", "/connectors/vs/config")).json()
        assert config == {**verifiable(topic), "name": "vs"}
        patched = await run(follower.write, "PATCH", "/connectors/vs/config", {"throughput": "90"})
        assert patched.status_code == 200, patched.text  # forwarded to the leader
        assert patched.json()["config"]["throughput"] == "90"
        await run(follower.until, lambda: follower.states() == ("RUNNING", ["RUNNING"] * 2))

        # Plugins, validation, active topics and log levels, through the follower too.
        plugins = (await run(follower.call, "GET", "/connector-plugins")).json()
        assert {"class", "type", "version"} <= set(plugins[0])
        own = (await run(follower.call, "GET", "/connector-plugins/VerifiableSource/config")).json()
        assert "topic" in {d["name"] for d in own}
        checked = await run(
            follower.call,
            "PUT",
            "/connector-plugins/VerifiableSource/config/validate",
            {**verifiable(topic), "tasks.max": "zero"},
        )
        assert checked.status_code == 200
        assert checked.json()["error_count"] == 1
        await run(
            follower.until,
            lambda: (
                follower.call("GET", "/connectors/vs/topics").json() == {"vs": {"topics": [topic]}}
            ),
        )
        assert (await run(follower.call, "PUT", "/connectors/vs/topics/reset")).status_code == 202
        levels = await run(follower.call, "PUT", "/admin/loggers/eos.runtime", {"level": "DEBUG"})
        assert "eos.runtime" in levels.json()
        logger = (await run(follower.call, "GET", "/admin/loggers/eos.runtime")).json()
        assert logger["level"] == "DEBUG"
        await run(follower.call, "PUT", "/admin/loggers/eos.runtime", {"level": "INFO"})
        restarted = await run(follower.write, "POST", "/connectors/vs/tasks/0/restart")
        assert restarted.status_code == 204, restarted.text
        await run(follower.until, lambda: follower.states() == ("RUNNING", ["RUNNING"] * 2))

        # Pause: output stops; resume: it goes on (through the follower each time).
        assert (await run(follower.call, "PUT", "/connectors/vs/pause")).status_code == 202
        await run(follower.until, lambda: follower.states() == ("PAUSED", ["PAUSED"] * 2))
        paused = sum(map(len, (await committed(client_config, topic)).values()))
        await anyio.sleep(2)
        assert sum(map(len, (await committed(client_config, topic)).values())) == paused
        assert (await run(follower.call, "PUT", "/connectors/vs/resume")).status_code == 202
        await run(follower.until, lambda: follower.states() == ("RUNNING", ["RUNNING"] * 2))
        await anyio.sleep(2)
        assert sum(map(len, (await committed(client_config, topic)).values())) > paused

        # Stop, alter the offsets, resume: the output continues from them, exactly.
        refused = await run(follower.call, "DELETE", "/connectors/vs/offsets")
        assert is_error(refused, 409)
        assert (await run(follower.call, "PUT", "/connectors/vs/stop")).status_code == 202
        await run(follower.until, lambda: follower.states() == ("STOPPED", []))
        offsets = (await run(follower.call, "GET", "/connectors/vs/offsets")).json()["offsets"]
        seqnos = {o["partition"]["partition"]: o["offset"]["seqno"] for o in offsets}
        assert set(seqnos) == {"0-0", "1-0"}
        reset = await run(follower.write, "DELETE", "/connectors/vs/offsets")
        assert reset.status_code == 200, reset.text
        assert reset.json() == {
            "message": "The offsets for this connector have been reset successfully"
        }
        assert (await run(follower.call, "GET", "/connectors/vs/offsets")).json() == {"offsets": []}
        new = {p: n + 5 for p, n in seqnos.items()}
        change = {
            "offsets": [
                {"partition": {"partition": p}, "offset": {"seqno": n}} for p, n in new.items()
            ]
        }
        altered = await run(follower.write, "PATCH", "/connectors/vs/offsets", change)
        assert altered.status_code == 200, altered.text
        before = await committed(client_config, topic)
        assert (await run(follower.call, "PUT", "/connectors/vs/resume")).status_code == 202
        await run(follower.until, lambda: follower.states() == ("RUNNING", ["RUNNING"] * 2))
        await anyio.sleep(2)

        # A restart through the follower; unknown names are 404 in the JSON shape.
        restart = await run(follower.call, "POST", "/connectors/vs/restart?includeTasks=true")
        assert restart.status_code in (202, 409), restart.text
        missing = await run(follower.call, "POST", "/connectors/nope/restart")
        assert is_error(missing, 404) or is_error(missing, 409)

        # A third hop is refused; a rebalance never turns a write into a 500 or loses it.
        hops = await run(
            follower.call, "PUT", "/connectors/vs/config?forward=false", verifiable(topic)
        )
        assert is_error(hops, 409)
        cluster.add({}).start()
        answers = []
        update = {**verifiable(topic), "throughput": "120"}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            answer = await run(follower.call, "PUT", "/connectors/vs/config", update)
            answers.append(answer.status_code)
            if answer.status_code == 200:
                break
            assert is_error(answer, 409), answer.text
            await anyio.sleep(0.1)
        assert answers[-1] == 200
        assert 500 not in answers
        config = (await run(follower.call, "GET", "/connectors/vs/config")).json()
        assert config["throughput"] == "120"
        await run(follower.until, lambda: follower.states() == ("RUNNING", ["RUNNING"] * 2))

        # The config update's rebalance may still run: 409 until it ends, then 204.
        deadline = time.monotonic() + 60
        while (deleted := await run(follower.call, "DELETE", "/connectors/vs")).status_code != 204:
            assert is_error(deleted, 409), deleted.text
            assert time.monotonic() < deadline, deleted.text
            await anyio.sleep(0.1)
        assert is_error(await run(follower.call, "GET", "/connectors/vs"), 404)
    finally:
        cluster.stop()

    after = await committed(client_config, topic)
    for partition, numbers in after.items():
        old = before[partition]
        assert numbers[: len(old)] == old
        resumed = numbers[len(old) :]
        # exactly from the altered offset: no duplicate, no gap relative to it
        assert resumed == list(range(new[partition], new[partition] + len(resumed))), partition
        assert resumed
