"""The worker's health, as Kafka Connect's ``GET /health`` reports it (KIP-1017;
docs/operations.md, "Health").

- **starting** (503) until the worker has created and read its internal topics and
  joined its group; the message names the stage it is in (and why it cannot join,
  if it cannot);
- **healthy** (200) from then on, while its own actors answer;
- **unhealthy** (500) when one of them has not answered for :data:`BOUND` seconds:
  the coordinator's mailbox (a call stuck in it: the message names the call), the
  supervisor, or the event loop itself; and while the worker stops.

The answer is computed from what :class:`HealthMonitor` last saw, never by asking an
actor on the spot: the monitor asks each actor once a second in the background (one
question at a time), so a stuck actor, a slow request or a long queue can never
make the answer slow, and the answer can be given from another thread. The rules
are the pure function :func:`assess`.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import anyio
import structlog
from anyio.abc import TaskStatus

from eos.runtime.clock import Clock

log = structlog.get_logger(__name__)

BOUND = 10.0
"""Seconds an actor may take to answer before the worker is unhealthy (Kafka Connect's
health check timeout; not a setting)."""
INTERVAL = 1.0
"""Seconds between the monitor's questions to each actor."""

Status = Literal["healthy", "starting", "unhealthy"]
CODES: dict[Status, int] = {"healthy": 200, "starting": 503, "unhealthy": 500}


@dataclass(frozen=True)
class Health:
    """The answer of ``GET /health``."""

    status: Status
    message: str

    @property
    def code(self) -> int:
        return CODES[self.status]


@dataclass(frozen=True)
class Probe:
    """What the monitor knows of one actor."""

    name: str
    asked: float | None
    """When the question it has not answered yet was asked (monotonic); None: none."""
    busy_with: str | None = None
    """What the actor is doing now, if it can say (the call in a mailbox)."""


def assess(
    *,
    stage: str,
    started: bool,
    stopping: bool,
    probes: Sequence[Probe],
    loop_seen: float,
    now: float,
    detail: str | None = None,
    bound: float = BOUND,
) -> Health:
    """The health of a worker in ``stage`` (``started``: it has joined its group once)
    whose event loop last ran the monitor at ``loop_seen``, at ``now``."""
    if stopping:
        return Health("unhealthy", f"the worker is stopping ({stage})")
    if not started:
        why = f" ({detail})" if detail else ""
        return Health("starting", f"the worker is starting: {stage}{why}")
    if now - loop_seen > bound:
        return Health(
            "unhealthy",
            f"the worker's event loop has not run for {now - loop_seen:.0f} s: something "
            f"blocks it (a blocking call in a connector?); stage: {stage}",
        )
    for probe in probes:
        if probe.asked is not None and now - probe.asked > bound:
            doing = f" (busy with {probe.busy_with})" if probe.busy_with else ""
            return Health(
                "unhealthy",
                f"{probe.name} has not answered for {now - probe.asked:.0f} s{doing}; "
                f"stage: {stage}",
            )
    why = f"; {detail}" if detail else ""
    return Health("healthy", f"the worker is {stage}{why}")


@dataclass
class _Watched:
    name: str
    ping: Callable[[], Awaitable[None]]
    busy: Callable[[], str | None]
    asked: float | None = None


class HealthMonitor:
    """Follows the worker's stage and asks its actors, in the background, whether they
    answer; :meth:`health` says what it saw (from any thread)."""

    def __init__(
        self,
        clock: Clock,
        *,
        detail: Callable[[], str | None] = lambda: None,
        interval: float = INTERVAL,
        bound: float = BOUND,
    ) -> None:
        self._clock = clock
        self._detail = detail
        self._interval = interval
        self._bound = bound
        self._lock = threading.Lock()
        self._stage = "starting up"
        self._started = False
        self._stopping = False
        self._loop_seen = clock.monotonic()
        self._watched: list[_Watched] = []
        self._new = anyio.Event()

    def enter(self, stage: str) -> None:
        """The worker is now in ``stage`` ("creating its internal topics", …)."""
        with self._lock:
            self._stage = stage
        log.debug("worker stage", stage=stage)

    def started(self, stage: str) -> None:
        """Start-up is done: the worker has read its internal topics and joined."""
        with self._lock:
            self._stage, self._started = stage, True

    def stopping(self) -> None:
        with self._lock:
            self._stage, self._stopping = "stopping", True

    def watch(
        self,
        name: str,
        ping: Callable[[], Awaitable[None]],
        busy: Callable[[], str | None] = lambda: None,
    ) -> None:
        """Ask the actor ``name`` every interval: ``ping()`` returns once it answered;
        ``busy()`` says what it is doing."""
        self._watched.append(_Watched(name, ping, busy))
        self._new.set()

    def health(self) -> Health:
        """What the worker's health is now, from what the monitor saw."""
        with self._lock:
            stage, started, stopping = self._stage, self._started, self._stopping
            probes = [Probe(w.name, w.asked, w.busy()) for w in self._watched]
            loop_seen = self._loop_seen
        return assess(
            stage=stage,
            started=started,
            stopping=stopping,
            probes=probes,
            loop_seen=loop_seen,
            now=self._clock.monotonic(),
            detail=self._detail(),
            bound=self._bound,
        )

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Note that the loop runs, and ask every watched actor that has answered its
        last question, every interval, until cancelled."""
        async with anyio.create_task_group() as tg:
            task_status.started()
            while True:
                with self._lock:
                    self._loop_seen = self._clock.monotonic()
                for watched in self._watched:
                    if watched.asked is None:
                        watched.asked = self._clock.monotonic()
                        tg.start_soon(self._ask, watched)
                with anyio.move_on_after(self._interval):
                    await self._new.wait()
                    self._new = anyio.Event()

    async def _ask(self, watched: _Watched) -> None:
        try:
            await watched.ping()
        except Exception as exc:  # closed (the worker stops): that is an answer too
            log.debug("health probe ended", actor=watched.name, error=repr(exc))
        with self._lock:
            watched.asked = None
