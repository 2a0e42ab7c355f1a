"""The offsets API (Kafka Connect's KIP-875) against a real worker: read, alter and
reset a stopped connector's offsets; resuming continues exactly from them; a running
connector or a connector that refuses gets a clear answer; both offsets topics agree."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable

import anyio
import pytest

from eos.kafka import ClientConfig, read_to_end
from eos.storage.offset_log import decode_offset_record
from tests.integration.worker_harness import RunningWorker, running_worker, worker_props

pytestmark = pytest.mark.integration


def verifiable(topic: str, **extra: str) -> dict[str, str]:
    return {
        "name": "vs",
        "connector.class": "VerifiableSource",
        "tasks.max": "1",
        "partitions.per.task": "2",
        "records.per.partition": "0",
        "throughput": "200",
        "topic": topic,
        **extra,
    }


async def until_state(w: RunningWorker, state: str, tasks: int) -> None:
    """The connector in ``state`` with ``tasks`` tasks, all RUNNING."""
    with anyio.fail_after(60):
        while True:
            body = await w.status("vs")
            running = [t for t in body["tasks"] if t["state"] == "RUNNING"]
            if body["connector"]["state"] == state and len(running) == len(body["tasks"]) == tasks:
                return
            await anyio.sleep(0.2)


async def seqnos(client: ClientConfig, topic: str) -> dict[str, list[int]]:
    found: dict[str, list[int]] = defaultdict(list)
    for record in await read_to_end(client, topic):
        value = json.loads(record.value)
        found[value["partition"]].append(value["seqno"])
    return found


async def offsets(w: RunningWorker) -> dict[str, int]:
    body = (await w.http.get("/connectors/vs/offsets")).json()
    return {e["partition"]["partition"]: e["offset"]["seqno"] for e in body["offsets"]}


async def test_alter_then_resume_continues_from_the_new_offsets(
    bootstrap: str, client_config: ClientConfig, unique_name: Callable[[str], str]
) -> None:
    topic, own = unique_name("out"), unique_name("own-offsets")
    props = verifiable(topic, **{"offsets.storage.topic": own})
    wprops = worker_props(bootstrap, unique_name("g"))
    async with running_worker(wprops, [props]) as w:
        await until_state(w, "RUNNING", 1)
        await anyio.sleep(2)
        running = await w.http.patch("/connectors/vs/offsets", json={"offsets": []})
        assert running.status_code == 400  # an empty change is refused before anything else
        entry = {"partition": {"partition": "0-0"}, "offset": {"seqno": 5}}
        running = await w.http.patch("/connectors/vs/offsets", json={"offsets": [entry]})
        assert running.status_code == 409
        assert "STOPPED" in running.json()["message"]

        assert (await w.http.put("/connectors/vs/stop")).status_code == 202
        await until_state(w, "STOPPED", 0)
        before = await offsets(w)
        assert set(before) == {"0-0", "0-1"}
        written = await seqnos(client_config, topic)
        assert {p: max(s) + 1 for p, s in written.items()} == before

        # Skip ahead a little (VerifiableSource lets a lagging partition catch up first).
        jump = {"0-0": before["0-0"] + 10, "0-1": before["0-1"] + 7}
        change = {
            "offsets": [
                {"partition": {"partition": p}, "offset": {"seqno": n}} for p, n in jump.items()
            ]
        }
        altered = await w.http.patch("/connectors/vs/offsets", json=change)
        assert altered.status_code == 200, altered.text
        assert altered.json() == {
            "message": "The offsets for this connector have been altered successfully"
        }
        assert await offsets(w) == jump

        # Both offsets topics agree afterwards.
        for offsets_topic in (own, wprops["offset.storage.topic"]):
            latest = {}
            for r in await read_to_end(client_config, offsets_topic):
                decoded = decode_offset_record(r.key, r.value)
                if decoded and decoded[0] == "vs":
                    latest[decoded[1]["partition"]] = decoded[2]
            assert {p: o["seqno"] for p, o in latest.items() if o} == jump, offsets_topic

        assert (await w.http.put("/connectors/vs/resume")).status_code == 202
        await until_state(w, "RUNNING", 1)
        await anyio.sleep(2)

        # Reset: no offsets left; the task starts from the beginning again.
        assert (await w.http.put("/connectors/vs/stop")).status_code == 202
        await until_state(w, "STOPPED", 0)
        after = await seqnos(client_config, topic)
        reset = await w.http.delete("/connectors/vs/offsets")
        assert reset.status_code == 200, reset.text
        assert (await w.http.get("/connectors/vs/offsets")).json() == {"offsets": []}

    for partition, numbers in after.items():
        old = written[partition]
        new = numbers[len(old) :]
        assert numbers[: len(old)] == old
        # exactly from the altered offset on: no duplicate, no gap relative to it
        assert new == list(range(jump[partition], jump[partition] + len(new))), partition
        assert new


async def test_a_connector_may_refuse_an_offset_change(
    bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    props = {
        "name": "vs",
        "connector.class": "tests.integration.connectors:RefusingSource",
        "topic": unique_name("out"),
    }
    async with running_worker(worker_props(bootstrap, unique_name("g")), [props]) as w:
        assert (await w.http.put("/connectors/vs/stop")).status_code == 202
        entry = {"partition": {"p": 1}, "offset": {"n": 1}}
        refused = await w.http.patch("/connectors/vs/offsets", json={"offsets": [entry]})
        assert refused.status_code == 400
        assert "offsets are managed elsewhere" in refused.json()["message"]


async def test_offsets_change_on_an_at_least_once_cluster(
    bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    """With exactly.once.source.support=disabled the leader fences nothing, and a stopped
    connector's offsets are still altered and reset (KIP-875 does not need exactly-once)."""
    wprops = worker_props(bootstrap, unique_name("g"), exactly_once_source_support="disabled")
    async with running_worker(wprops, [verifiable(unique_name("out"))]) as w:
        await until_state(w, "RUNNING", 1)
        assert (await w.http.put("/connectors/vs/stop")).status_code == 202
        await until_state(w, "STOPPED", 0)
        entry = {"partition": {"partition": "0-0"}, "offset": {"seqno": 42}}
        altered = await w.http.patch("/connectors/vs/offsets", json={"offsets": [entry]})
        assert altered.status_code == 200, altered.text
        assert (await offsets(w))["0-0"] == 42
        reset = await w.http.delete("/connectors/vs/offsets")
        assert reset.status_code == 200, reset.text
