"""The REST app without Kafka: log levels at run time (``/admin/loggers``), the OpenAPI
document against the routes the app serves, oversized bodies (413), and the JSON
error shape of unknown routes and verbs."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest
from starlette.routing import Route

from eos.config import WorkerConfig
from eos.runtime.worker import Worker
from services.rest import build_app
from services.rest.loggers import level_name
from services.rest.openapi import document

BASE = {
    "group.id": "workers",
    "config.storage.topic": "eos-configs",
    "offset.storage.topic": "eos-offsets",
    "status.storage.topic": "eos-status",
}


def app(**settings: str) -> Any:
    worker = SimpleNamespace(settings=WorkerConfig.from_properties({**BASE, **settings}))
    return build_app(cast(Worker, worker))


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app(**{"rest.max.request.bytes": "2048"}))
    async with httpx.AsyncClient(transport=transport, base_url="http://eos") as http:
        yield http


@pytest.fixture
def loggers() -> Iterator[list[logging.Logger]]:
    """A small tree of loggers; their levels (and the root's) are put back afterwards."""
    tree = [logging.getLogger(n) for n in ("eostest", "eostest.a", "eostest.a.b", "eostestx")]
    tree[2].setLevel(logging.ERROR)
    root = logging.getLogger()
    saved = [(lg, lg.level) for lg in [root, *logging.Logger.manager.loggerDict.values()]
             if isinstance(lg, logging.Logger)]  # fmt: skip
    yield tree
    for lg, level in saved:
        lg.setLevel(level)


async def test_loggers_list_get_and_put(
    client: httpx.AsyncClient, loggers: list[logging.Logger]
) -> None:
    listed = (await client.get("/admin/loggers")).json()
    assert listed["root"] == {
        "level": level_name(logging.getLogger().getEffectiveLevel()),
        "last_modified": None,
    }
    assert listed["eostest.a.b"] == {"level": "ERROR", "last_modified": None}
    assert "eostest.a" not in listed  # inherits its level

    one = await client.get("/admin/loggers/eostest.a")
    assert one.status_code == 200
    assert one.json()["level"] == level_name(logging.getLogger().getEffectiveLevel())

    changed = await client.put("/admin/loggers/eostest", json={"level": "DEBUG"})
    assert changed.status_code == 200
    assert changed.json() == ["eostest", "eostest.a", "eostest.a.b"]  # not eostestx
    assert all(lg.getEffectiveLevel() == logging.DEBUG for lg in loggers[:3])
    assert loggers[3].level == logging.NOTSET
    after = (await client.get("/admin/loggers/eostest.a.b")).json()
    assert after["level"] == "DEBUG"
    assert isinstance(after["last_modified"], int)

    warn = await client.put("/admin/loggers/eostest.a", json={"level": "warn"})
    assert warn.json() == ["eostest.a", "eostest.a.b"]
    assert loggers[2].level == logging.WARNING
    assert (await client.get("/admin/loggers/eostest.a")).json()["level"] == "WARN"


async def test_loggers_refusals(client: httpx.AsyncClient, loggers: list[logging.Logger]) -> None:
    missing = await client.get("/admin/loggers/no.such.logger.here")
    assert missing.status_code == 404
    assert missing.json() == {"error_code": 404, "message": "Logger no.such.logger.here not found."}
    for body in ({"level": "LOUD"}, {}, {"level": 10}, ["DEBUG"]):
        bad = await client.put("/admin/loggers/eostest", json=body)
        assert bad.status_code == 400, body
        assert set(bad.json()) == {"error_code", "message"}
    cluster = await client.put("/admin/loggers/eostest?scope=cluster", json={"level": "INFO"})
    assert cluster.status_code == 400
    assert "scope=worker" in cluster.json()["message"]
    assert loggers[0].level == logging.NOTSET  # nothing changed


async def test_a_new_logger_can_be_set_before_anything_logs_to_it(
    client: httpx.AsyncClient, loggers: list[logging.Logger]
) -> None:
    answer = await client.put("/admin/loggers/eostest.later", json={"level": "ERROR"})
    assert answer.json() == ["eostest.later"]
    assert logging.getLogger("eostest.later").level == logging.ERROR


def test_openapi_describes_every_route_the_app_serves() -> None:
    served = {
        (route.path, method.lower())
        for route in app().routes
        if isinstance(route, Route)
        for method in route.methods or ()
        if method != "HEAD"
    }
    described = {(path, method) for path, ops in document()["paths"].items() for method in ops}
    served.add(("/metrics", "get"))  # served by the worker service beside these routes
    assert described == served


async def test_openapi_is_served_and_well_formed(client: httpx.AsyncClient) -> None:
    answer = await client.get("/openapi.json")
    assert answer.status_code == 200
    doc = answer.json()
    assert doc["openapi"].startswith("3.")
    schemas = doc["components"]["schemas"]
    text = answer.text
    refs = {part.split('"')[0] for part in text.split('"$ref":"#/components/schemas/')[1:]}
    assert refs
    assert refs <= set(schemas)
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            params = {p["name"] for p in operation["parameters"] if p["in"] == "path"}
            assert params == {seg[1:-1] for seg in path.split("/") if seg.startswith("{")}, (
                path,
                method,
            )
            assert operation["responses"]


async def test_oversized_bodies_are_refused_before_they_are_read(
    client: httpx.AsyncClient,
) -> None:
    big = b"x" * 4096
    declared = await client.post("/connectors", content=big)
    assert declared.status_code == 413
    assert declared.json() == {
        "error_code": 413,
        "message": "Request body is larger than 2048 bytes (rest.max.request.bytes)",
    }

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it comes
        for _ in range(8):
            yield b"y" * 512

    streamed = await client.put("/admin/loggers/eostest", content=chunks())
    assert streamed.status_code == 413
    assert streamed.json()["error_code"] == 413


async def test_a_body_within_the_limit_reaches_the_route(
    client: httpx.AsyncClient, loggers: list[logging.Logger]
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"level":'
        yield b' "DEBUG"}' + b" " * 1000

    answer = await client.put("/admin/loggers/eostest", content=chunks())
    assert answer.status_code == 200, answer.text
    bad_length = await client.put(
        "/admin/loggers/eostest", content=b"{}", headers={"Content-Length": "lots"}
    )
    assert bad_length.status_code == 400


async def test_unknown_routes_and_verbs_answer_in_the_json_shape(
    client: httpx.AsyncClient,
) -> None:
    missing = await client.get("/no/such/thing")
    assert missing.status_code == 404
    assert missing.json() == {"error_code": 404, "message": "Not Found"}
    wrong = await client.delete("/admin/loggers")
    assert wrong.status_code == 405
    assert wrong.json() == {"error_code": 405, "message": "Method Not Allowed"}
