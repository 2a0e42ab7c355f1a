"""The coordinator's mailbox, as its duties use it: the one queue in which every change
of cluster state runs, one call at a time (docs/cluster.md).

Made before the coordinator and its duties, so that each duty gets it at
construction: a duty's public methods check what they can outside, then
:meth:`Inbox.ask` for the change itself. The rule of the mailbox: nothing in it
waits for another worker (requests to the leader and the wait for a fencing round
happen outside it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from eos.errors import ConflictError
from eos.runtime.actor import Mailbox
from eos.runtime.cluster.coordinator.cluster_state import ClusterState

T = TypeVar("T")


class Inbox:
    def __init__(self, state: ClusterState) -> None:
        self._state = state
        self._mailbox = Mailbox("coordinator")

    async def ask(self, call: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``call(*args)`` in the mailbox, its result (or error); ConflictError once the
        worker is stopping."""
        if self._state.closed:
            raise ConflictError("the worker is shutting down")
        try:
            return await self._mailbox.ask(call, *args)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise ConflictError("the worker is shutting down") from None

    def tell(self, call: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """``call(*args)`` in the mailbox, without waiting; nothing once it is closed."""
        if self._state.closed:
            return
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._mailbox.tell(call, *args)

    async def ping(self) -> None:
        """Return once the mailbox has served a no-op (for the health monitor)."""
        await self.ask(_nothing)

    def busy_with(self) -> str | None:
        """The call the mailbox serves now, if any."""
        return self._mailbox.current

    def close(self) -> None:
        """No more calls; :meth:`serve` returns once the queued ones ran. Idempotent."""
        self._state.closed = True
        self._mailbox.close()

    async def serve(self) -> None:
        await self._mailbox.serve()


async def _nothing() -> None:
    """The health monitor's question."""
