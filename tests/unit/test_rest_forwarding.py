"""Forwarding writes to the leader, without a cluster: a follower's app in front of a
recorded leader. At most two hops, 409 (never a 500) while no leader is known, during
a rebalance or when the leader does not answer, and of the caller's headers only
``Authorization`` and ``Content-Type`` travel along."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest

from eos.config import WorkerConfig
from eos.runtime.worker import Worker
from services.rest import build_app, forwarding

LEADER = "http://leader.example:8083"
BASE = {
    "group.id": "workers",
    "config.storage.topic": "eos-configs",
    "offset.storage.topic": "eos-offsets",
    "status.storage.topic": "eos-status",
}


@dataclass
class View:
    is_leader: bool = False
    leader_url: str = LEADER
    rebalancing: bool = False


@dataclass
class Leader:
    """What the leader received; it answers like Connect's create."""

    requests: list[httpx.Request] = field(default_factory=list)
    down: bool = False

    def handle(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        self.requests.append(request)
        return httpx.Response(201, json={"name": "c", "config": {}, "tasks": [], "type": "source"})


@pytest.fixture
def leader(monkeypatch: pytest.MonkeyPatch) -> Leader:
    leader = Leader()

    def client(settings: WorkerConfig, timeout: float) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(leader.handle), timeout=timeout)

    monkeypatch.setattr(forwarding, "peer_client", client)
    return leader


@pytest.fixture
def view() -> View:
    return View()


@pytest.fixture
async def follower(view: View) -> AsyncIterator[httpx.AsyncClient]:
    worker = SimpleNamespace(settings=WorkerConfig.from_properties(BASE), cluster=lambda: view)
    app = build_app(cast(Worker, worker))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://follower") as http:
        yield http


BODY: dict[str, Any] = {"name": "c", "config": {"connector.class": "VerifiableSource"}}
HEADERS = {
    "Authorization": "Basic YWxpY2U6d29uZGVybGFuZA==",
    "Cookie": "session=secret",
    "X-Forwarded-For": "10.0.0.9",
    "X-Custom": "nope",
}


async def test_a_write_is_forwarded_with_only_the_callers_credentials(
    follower: httpx.AsyncClient, leader: Leader
) -> None:
    answer = await follower.post("/connectors?expand=x", json=BODY, headers=HEADERS)
    assert answer.status_code == 201
    assert answer.json()["name"] == "c"
    (sent,) = leader.requests
    assert str(sent.url) == f"{LEADER}/connectors?expand=x&forward=true"
    assert sent.method == "POST"
    assert sent.headers["authorization"] == HEADERS["Authorization"]
    assert sent.headers["content-type"] == "application/json"
    for name in ("cookie", "x-forwarded-for", "x-custom"):
        assert name not in sent.headers
    assert b'"VerifiableSource"' in sent.content


async def test_the_second_hop_is_marked_and_a_third_is_refused(
    follower: httpx.AsyncClient, leader: Leader
) -> None:
    second = await follower.put("/connectors/c/pause?forward=true")
    assert second.status_code == 201  # what the (recorded) leader answered
    assert leader.requests[0].url.params["forward"] == "false"
    third = await follower.put("/connectors/c/pause?forward=false")
    assert third.status_code == 409
    assert third.json() == {
        "error_code": 409,
        "message": "this worker is not the leader and the request already made two hops",
    }
    assert len(leader.requests) == 1


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ({"leader_url": ""}, "no leader is known yet"),
        ({"rebalancing": True}, "a rebalance is under way"),
        ({"down": True}, "did not answer"),
    ],
)
async def test_no_leader_a_rebalance_or_a_silent_leader_is_409_never_500(
    follower: httpx.AsyncClient,
    leader: Leader,
    view: View,
    state: dict[str, Any],
    message: str,
) -> None:
    for key, value in state.items():
        setattr(leader if key == "down" else view, key, value)
    for method, path in [
        ("POST", "/connectors"),
        ("PUT", "/connectors/c/config"),
        ("PATCH", "/connectors/c/offsets"),
        ("POST", "/connectors/c/restart"),
        ("DELETE", "/connectors/c"),
    ]:
        answer = await follower.request(method, path, json=BODY)
        assert answer.status_code == 409, (method, path)
        assert answer.json()["error_code"] == 409
        assert message in answer.json()["message"]
        assert "retry" in answer.json()["message"]
    assert leader.requests == []


async def test_reads_are_answered_by_the_follower(
    follower: httpx.AsyncClient, leader: Leader
) -> None:
    answer = await follower.get("/admin/loggers")
    assert answer.status_code == 200
    assert leader.requests == []
