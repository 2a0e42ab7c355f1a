"""A running task's ``progress`` in the status answers, without a cluster: this worker's
own tasks answered from the worker, a task on another worker asked of that worker (with
the caller's ``Authorization``), and a worker that does not answer leaves it out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest

from eos.config import WorkerConfig
from eos.runtime.cluster.group_metadata import MemberInfo
from eos.runtime.worker import Worker
from eos.state import State
from eos.storage.config_log import ConfigSnapshot
from eos.storage.status_log import Status
from services.rest import build_app, task_progress

HERE, THERE, GONE = "10.0.0.1:8083", "10.0.0.2:8083", "10.0.0.3:8083"
SETTINGS = WorkerConfig.from_properties({
    "group.id": "workers", "config.storage.topic": "c", "offset.storage.topic": "o",
    "status.storage.topic": "s", "listeners": "http://10.0.0.1:8083",
})  # fmt: skip
STATUSES = {
    0: Status(State.RUNNING, None, HERE, 1),
    1: Status(State.RUNNING, None, THERE, 1),
    2: Status(State.FAILED, "boom", THERE, 1),
    3: Status(State.RUNNING, None, GONE, 1),  # a worker the view does not list
}


@dataclass
class Peer:
    requests: list[httpx.Request] = field(default_factory=list)
    down: bool = False

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.down:
            raise httpx.ConnectTimeout("no answer", request=request)
        return httpx.Response(200, json={"snapshot_rows": 20480, "snapshot_tables": 2})


class Statuses:
    def task_statuses(self, name: str) -> dict[int, Status]:
        return dict(STATUSES)

    def connector_status(self, name: str) -> Status:
        return Status(State.RUNNING, None, HERE, 1)


@pytest.fixture
def peer(monkeypatch: pytest.MonkeyPatch) -> Peer:
    peer = Peer()

    def client(settings: WorkerConfig, timeout: float) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(peer.handle), timeout=timeout)

    monkeypatch.setattr(task_progress, "peer_client", client)
    return peer


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    members = (MemberInfo("m1", "http://10.0.0.1:8083", HERE),
               MemberInfo("m2", "http://10.0.0.2:8083", THERE))  # fmt: skip
    snap = ConfigSnapshot(
        connectors={"cdc": {"connector.class": "PostgresCdcSource"}},
        task_configs={"cdc": tuple({} for _ in range(4))},
    )

    async def snapshot() -> ConfigSnapshot:
        return snap

    async def read_status() -> Statuses:
        return Statuses()

    def progress(name: str, task: int) -> dict[str, float] | None:
        return {"changes": 7.0, "slot_lag_bytes": 120.0} if (name, task) == ("cdc", 0) else None

    worker: Any = SimpleNamespace(
        settings=SETTINGS, cluster=lambda: SimpleNamespace(members=members),
        snapshot=snapshot, read_status=read_status, task_progress=progress,
    )  # fmt: skip
    transport = httpx.ASGITransport(app=build_app(cast(Worker, worker)))
    async with httpx.AsyncClient(transport=transport, base_url="http://10.0.0.1:8083") as http:
        yield http


async def test_each_running_task_has_its_worker_s_figures(
    http: httpx.AsyncClient, peer: Peer
) -> None:
    answer = await http.get("/connectors/cdc/status", headers={"Authorization": "Basic eA=="})
    tasks = answer.json()["tasks"]
    assert tasks[0]["progress"] == {"changes": 7.0, "slot_lag_bytes": 120.0}  # here
    assert tasks[1]["progress"] == {"snapshot_rows": 20480, "snapshot_tables": 2}  # asked
    assert "progress" not in tasks[2]  # not running
    assert "progress" not in tasks[3]  # its worker is not in the view
    (asked,) = peer.requests
    assert str(asked.url) == "http://10.0.0.2:8083/connectors/cdc/tasks/1/progress"
    assert asked.headers["authorization"] == "Basic eA=="
    one = await http.get("/connectors/cdc/tasks/1/status")
    assert one.json()["progress"] == {"snapshot_rows": 20480, "snapshot_tables": 2}


async def test_a_worker_that_does_not_answer_leaves_progress_out(
    http: httpx.AsyncClient, peer: Peer
) -> None:
    peer.down = True
    answer = await http.get("/connectors/cdc/status")
    assert answer.status_code == 200
    tasks = answer.json()["tasks"]
    assert "progress" in tasks[0]
    assert "progress" not in tasks[1]


async def test_the_progress_endpoint_answers_for_this_worker_s_tasks_only(
    http: httpx.AsyncClient,
) -> None:
    assert (await http.get("/connectors/cdc/tasks/0/progress")).json()["changes"] == 7.0
    other = await http.get("/connectors/cdc/tasks/1/progress")
    assert other.status_code == 404
    assert "does not run on this worker" in other.json()["message"]
    assert (await http.get("/connectors/cdc/tasks/x/progress")).status_code == 404
