"""Internal requests between workers against a real worker: only a request signed
with the cluster's current session key, for this method, path and body, and made
just now, is served; everything else is refused with a JSON error and changes
nothing. And the leader's own config writer can be fenced by a newer one."""

from __future__ import annotations

import json
from collections.abc import Callable

import anyio
import httpx
import pytest

from eos.kafka import ClientConfig, read_to_end
from eos.kafka.transactional_ids import leader_transactional_id
from eos.runtime.clock import SystemClock
from eos.runtime.cluster.leader_client import LeaderClient
from eos.runtime.cluster.signatures import sign
from eos.storage.config_log import SessionKey, TaskCountRecord, decode_record
from tests.integration.helpers import producer
from tests.integration.worker_harness import RunningWorker, running_worker, worker_props

pytestmark = pytest.mark.integration

FENCE = "/connectors/vs/fence"


def verifiable(topic: str, tasks: int = 2) -> dict[str, str]:
    return {
        "name": "vs",
        "connector.class": "VerifiableSource",
        "tasks.max": str(tasks),
        "topic": topic,
        "records.per.partition": "0",
        "throughput": "50",
    }


async def session_key(w: RunningWorker) -> SessionKey:
    key = (await w.worker.snapshot()).session_key
    assert key is not None
    return key


async def task_counts(client: ClientConfig, topic: str) -> int:
    records = [decode_record(r.key, r.value) for r in await read_to_end(client, topic)]
    return sum(isinstance(r, TaskCountRecord) for r in records)


def headers_for(
    key: SessionKey, method: str, path: str, body: bytes = b"", *, age: int = 0
) -> dict[str, str]:
    now = SystemClock().wall_ms() - age
    return sign(key.key, key.algorithm, method, path, body, now)


async def test_only_correctly_signed_requests_are_served(
    bootstrap: str, client_config: ClientConfig, unique_name: Callable[[str], str]
) -> None:
    group, topic = unique_name("g"), unique_name("out")
    props = worker_props(bootstrap, group, inter_worker_key_ttl_ms="3000")
    async with running_worker(props, [verifiable(topic)]) as w:
        await w.wait_for_tasks("vs", "RUNNING", 2)
        configs = f"{group}-configs"
        counts_before = await task_counts(client_config, configs)
        key = await session_key(w)
        forged = SessionKey(b"x" * 32, key.algorithm, key.created_ms)

        async def put(headers: dict[str, str], path: str = FENCE) -> httpx.Response:
            return await w.http.put(path, headers=headers)

        refused = {
            "unsigned": await put({}),
            "forged": await put(headers_for(forged, "PUT", FENCE)),
            "other connector": await put(headers_for(key, "PUT", "/connectors/other/fence")),
            "other method": await put(headers_for(key, "POST", FENCE)),
            "replayed later": await put(headers_for(key, "PUT", FENCE, age=120_000)),
        }
        assert {k: r.status_code for k, r in refused.items()} == {
            "unsigned": 400,
            "forged": 403,
            "other connector": 403,
            "other method": 403,
            "replayed later": 403,
        }
        for response in refused.values():
            body = response.json()
            assert set(body) == {"error_code", "message"}
            assert body["error_code"] == response.status_code
        # Task configs: a forged body is refused as well, and nothing was written.
        body = json.dumps([{"bogus": "1"}]).encode()
        forged_tasks = await w.http.post(
            "/connectors/vs/tasks",
            content=body,
            headers=headers_for(forged, "POST", "/connectors/vs/tasks", body),
        )
        assert forged_tasks.status_code == 403
        assert len((await w.http.get("/connectors/vs/tasks")).json()) == 2
        assert await task_counts(client_config, configs) == counts_before

        # The real thing is served.
        ok = await put(headers_for(key, "PUT", FENCE))
        assert ok.status_code == 204, ok.text

        # The leader rotates the key (ttl 3 s): the old one is refused, and a worker
        # whose request failed that way reads the new key and succeeds.
        with anyio.fail_after(30):
            while (await session_key(w)) == key:  # noqa: ASYNC110 - polls the config topic
                await anyio.sleep(0.5)
        stale = await put(headers_for(key, "PUT", FENCE))
        assert stale.status_code == 403

        served_with: list[SessionKey | None] = []

        async def keys(refresh: bool) -> SessionKey | None:
            current = await session_key(w) if refresh else key  # first the rotated-out one
            served_with.append(current)
            return current

        await LeaderClient(keys, timeout=30).fence(w.settings.rest_url, "vs")
        assert served_with[0] == key
        assert served_with[-1] != key


async def test_a_deposed_leader_cannot_write_and_recovers_by_rejoining(
    bootstrap: str, client_config: ClientConfig, unique_name: Callable[[str], str]
) -> None:
    group, topic = unique_name("g"), unique_name("out")
    async with running_worker(worker_props(bootstrap, group)) as w:
        created = await w.http.put("/connectors/vs/config", json=verifiable(topic))
        assert created.status_code == 201, created.text
        # A newer holder of the leader's transactional id fences this worker's writer.
        async with producer(client_config, transactional_id=leader_transactional_id(group)):
            pass
        update = {**verifiable(topic), "throughput": "60"}
        refused = await w.http.put("/connectors/vs/config", json=update)
        assert refused.status_code == 409, refused.text
        assert "fenced" in refused.json()["message"]
        with anyio.fail_after(30):  # it rejoins, leads again with a new writer: a retry works
            while (await w.http.put("/connectors/vs/config", json=update)).status_code != 200:  # noqa: ASYNC110
                await anyio.sleep(0.5)
        assert (await w.http.get("/connectors/vs/config")).json()["throughput"] == "60"
