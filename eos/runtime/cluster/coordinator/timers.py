"""The coordinator's timers and background jobs, in a task group of their own.

A timer is named: setting one replaces a pending timer of the same name (the
leader's ``delayed`` rebalance and its ``session-key`` rotation are cancelled
when it loses the leadership). A timer's action must not block: it asks for a
rebalance or tells the mailbox. Background jobs (a fencing round's
InitProducerId calls) run outside the mailbox and report back through it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus


class Timers:
    def __init__(self) -> None:
        self._tg: TaskGroup | None = None
        self._timers: dict[str, anyio.CancelScope] = {}
        self._closed = False

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Until cancelled (with the coordinator)."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            await anyio.sleep_forever()

    def close(self) -> None:
        """No more timers or jobs (the worker is stopping)."""
        self._closed = True

    def later(self, name: str, delay_ms: int, action: Callable[[], None]) -> None:
        """Run ``action`` after ``delay_ms``; replaces a pending timer of the same name."""
        if self._tg is None or self._closed:
            return
        previous = self._timers.pop(name, None)
        if previous is not None:
            previous.cancel()
        scope = anyio.CancelScope()
        self._timers[name] = scope

        async def fire() -> None:
            with scope:
                await anyio.sleep(delay_ms / 1000)
                if self._timers.get(name) is scope:
                    del self._timers[name]
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    action()  # the mailbox may be closed: the worker is stopping

        self._tg.start_soon(fire)

    def cancel(self, *names: str) -> None:
        for name in names:
            scope = self._timers.pop(name, None)
            if scope is not None:
                scope.cancel()

    def start_soon(self, job: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None:
        """Run ``job(*args)`` in the background (it handles its own errors)."""
        assert self._tg is not None, "run() first"
        self._tg.start_soon(job, *args)
