"""``GET /health`` (KIP-1017) decided by a pure function on a manual clock; the monitor
that feeds it, with actors that answer or not; ``eos health`` against recorded
answers."""

from __future__ import annotations

import io

import anyio
import httpx
import pytest

from eos.runtime.actor import Mailbox
from eos.runtime.clock import ManualClock
from eos.runtime.health import BOUND, HealthMonitor, Probe, assess
from services.cli import parser
from services.client import commands
from services.health_thread import route


def test_starting_names_the_stage_and_why() -> None:
    health = assess(
        stage="joining group g",
        started=False,
        stopping=False,
        probes=[],
        loop_seen=0.0,
        now=100.0,  # a long start-up is not unhealthy
        detail="the group runs protocol type 'consumer'",
    )
    assert (health.status, health.code) == ("starting", 503)
    assert health.message == (
        "the worker is starting: joining group g (the group runs protocol type 'consumer')"
    )


def test_healthy_while_every_actor_answers_within_the_bound() -> None:
    probes = [Probe("the coordinator", asked=100.0 - BOUND, busy_with="reconcile")]
    health = assess(
        stage="running in group g",
        started=True,
        stopping=False,
        probes=probes,
        loop_seen=99.0,
        now=100.0,
    )
    assert (health.status, health.code) == ("healthy", 200)
    assert health.message == "the worker is running in group g"


def test_an_actor_that_does_not_answer_is_unhealthy_and_named() -> None:
    probes = [
        Probe("the supervisor", asked=None),
        Probe("the coordinator", asked=88.0, busy_with="GroupListener._assign"),
    ]
    health = assess(
        stage="running in group g",
        started=True,
        stopping=False,
        probes=probes,
        loop_seen=99.5,
        now=100.0,
    )
    assert (health.status, health.code) == ("unhealthy", 500)
    assert health.message == (
        "the coordinator has not answered for 12 s (busy with GroupListener._assign); "
        "stage: running in group g"
    )


def test_a_blocked_loop_and_a_stop_are_unhealthy() -> None:
    blocked = assess(
        stage="running in group g",
        started=True,
        stopping=False,
        probes=[],
        loop_seen=80.0,
        now=95.0,
    )
    assert blocked.status == "unhealthy"
    assert "event loop has not run for 15 s" in blocked.message
    stopping = assess(
        stage="stopping", started=True, stopping=True, probes=[], loop_seen=95.0, now=95.0
    )
    assert (stopping.status, stopping.message) == ("unhealthy", "the worker is stopping (stopping)")


async def test_the_monitor_sees_a_stuck_mailbox_and_says_what_it_is_busy_with() -> None:
    clock = ManualClock()
    mailbox = Mailbox("coordinator")
    release = anyio.Event()
    monitor = HealthMonitor(clock, interval=0.01)

    async def stuck_call() -> None:
        await release.wait()

    async def ping() -> None:
        await mailbox.ask(anyio.lowlevel.checkpoint)

    async with anyio.create_task_group() as tg:
        tg.start_soon(mailbox.serve)
        await tg.start(monitor.run)
        assert monitor.health().status == "starting"
        monitor.watch("the coordinator", ping, lambda: mailbox.current)
        monitor.started("running in group g")
        await anyio.sleep(0.05)
        assert monitor.health().status == "healthy"

        tg.start_soon(mailbox.ask, stuck_call)
        await anyio.sleep(0.05)  # the monitor's question waits behind it
        clock.advance(BOUND + 1)
        await anyio.sleep(0.05)  # the loop runs: the monitor notes it
        health = monitor.health()
        assert health.status == "unhealthy"
        assert "the coordinator has not answered for 11 s" in health.message
        assert "busy with test_the_monitor_sees_a_stuck_mailbox" in health.message

        release.set()
        await anyio.sleep(0.05)
        assert monitor.health().status == "healthy"
        monitor.stopping()
        assert monitor.health().status == "unhealthy"
        mailbox.close()
        tg.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("code", "body", "line", "exit_code"),
    [
        (
            200,
            {"status": "healthy", "message": "the worker is running"},
            "healthy: the worker is running",
            0,
        ),
        (503, {"status": "starting", "message": "joining group g"}, "starting: joining group g", 1),
        (500, {"status": "unhealthy", "message": "stuck"}, "unhealthy: stuck", 1),
    ],
)
def test_eos_health_prints_one_line_and_exits_0_only_when_healthy(
    code: int, body: dict[str, str], line: str, exit_code: int
) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/health"
        return httpx.Response(code, json=body)

    out, err = io.StringIO(), io.StringIO()
    args = parser().parse_args(["health", "--url", "http://w:8083"])
    assert args.timeout == 15.0
    done = commands.run(args, transport=httpx.MockTransport(answer), out=out, err=err)
    assert (done, out.getvalue(), err.getvalue()) == (exit_code, line + "\n", "")


def test_eos_health_of_nobody_is_one_line_too() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    out = io.StringIO()
    args = parser().parse_args(["health", "--url", "http://w:8083"])
    done = commands.run(args, transport=httpx.MockTransport(refuse), out=out, err=io.StringIO())
    assert done == 1
    assert (
        out.getvalue()
        == "unreachable: no eos worker answers at http://w:8083: start one or pass --url\n"
    )


@pytest.mark.parametrize(
    ("head", "what"),
    [
        (b"GET /health HTTP/1.1\r\n", "health"),
        (b"GET /health?verbose", "health"),
        (b"GET /he", "wait"),
        (b"GET /health", "wait"),
        (b"GET /healthz", "loop"),
        (b"POST /health", "loop"),
        (b"GET /connectors", "loop"),
        (b"\x16\x03\x01", "loop"),
    ],
)
def test_the_front_door_answers_health_requests_itself(head: bytes, what: str) -> None:
    assert route(head) == what
