"""The REST listener's front door (no Kafka): ``GET /health`` is answered from its own
thread — at once, also while the event loop is blocked, and then with 500 naming the
blocked loop — while every other request, and a kept-alive connection's later
requests, reach the app on the loop as before."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

import anyio
import anyio.from_thread
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from eos.runtime.clock import SystemClock
from eos.runtime.health import HealthMonitor
from services.http import listen, serve_listener
from services.rest.health import health_response

pytestmark = pytest.mark.integration

BOUND = 1.0


async def echo(request: Request) -> Response:
    return JSONResponse({"path": request.url.path})


async def block(request: Request) -> Response:
    time.sleep(float(request.query_params["seconds"]))  # noqa: ASYNC251 - the point of it
    return JSONResponse({"blocked": True})


@contextmanager
def front_door() -> Iterator[tuple[str, HealthMonitor]]:
    """An app served behind the front door, with a started health monitor whose bound
    is a second; yields its URL."""
    monitor = HealthMonitor(SystemClock(), interval=0.1, bound=BOUND)
    monitor.started("running in group g")

    async def in_loop(request: Request) -> Response:  # as the worker's app serves it too
        return health_response(monitor.health())

    app = Starlette(
        routes=[Route("/echo", echo), Route("/block", block), Route("/health", in_loop)]
    )
    listener = listen("http://127.0.0.1:0", "listeners")
    with anyio.from_thread.start_blocking_portal() as portal:
        portal.start_task_soon(monitor.run)
        _, port = portal.start_task(partial(serve_listener, app, listener, health=monitor.health))
        try:
            yield f"http://127.0.0.1:{port}", monitor
        finally:
            portal.call(portal.stop, True)


def test_health_from_the_thread_and_everything_else_on_the_loop() -> None:
    with front_door() as (url, _), httpx.Client(base_url=url, timeout=10) as http:
        answer = http.get("/health")
        assert (answer.status_code, answer.json()) == (
            200,
            {"status": "healthy", "message": "the worker is running in group g"},
        )
        assert answer.headers["connection"] == "close"
        for _ in range(3):  # one kept-alive connection: the later requests are uvicorn's
            assert http.get("/echo").json() == {"path": "/echo"}
        assert http.get("/health?x=1").status_code == 200
        assert http.get("/healthz").status_code == 404
        assert http.post("/health").status_code == 405  # not a GET: the app's answer


def test_while_the_loop_is_blocked_health_answers_500_at_once() -> None:
    with front_door() as (url, _):
        blocked = threading.Thread(
            target=httpx.get, args=(f"{url}/block?seconds={3 * BOUND}",), kwargs={"timeout": 30}
        )
        blocked.start()
        time.sleep(2 * BOUND)
        started = time.monotonic()
        answer = httpx.get(f"{url}/health", timeout=5)
        took = time.monotonic() - started
        assert took < 0.5, took
        assert answer.status_code == 500
        assert answer.json()["status"] == "unhealthy"
        assert "event loop has not run for" in answer.json()["message"]
        blocked.join()
        deadline = time.monotonic() + 5
        while httpx.get(f"{url}/health", timeout=5).status_code != 200:
            assert time.monotonic() < deadline, "still unhealthy after the block"
            time.sleep(0.1)


def test_a_silent_client_holds_up_no_one() -> None:
    with front_door() as (url, _):
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)):  # says nothing
            started = time.monotonic()
            assert httpx.get(f"{url}/health", timeout=5).status_code == 200
            assert httpx.get(f"{url}/echo", timeout=5).status_code == 200
            assert time.monotonic() - started < 1
