"""The smallest actor: a bounded inbox of calls, served one at a time by the owner.

An actor's state is touched only by its own :meth:`Mailbox.serve` loop. Other
code sends it work: :meth:`Mailbox.ask` waits for the result (or the error),
:meth:`Mailbox.tell` does not wait (errors are logged by the actor).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import structlog
from anyio.streams.memory import MemoryObjectSendStream

T = TypeVar("T")
log = structlog.get_logger(__name__)


@dataclass
class _Envelope:
    call: Callable[..., Awaitable[Any]]
    args: tuple[Any, ...]
    reply: MemoryObjectSendStream[tuple[bool, Any]] | None


class Mailbox:
    def __init__(self, name: str, size: int = 256) -> None:
        self.name = name
        self._send, self._receive = anyio.create_memory_object_stream[_Envelope](size)
        self._serving = False
        self.current: str | None = None
        """The call being served now (its qualified name), for health reports."""

    async def ask(self, call: Callable[..., Awaitable[T]], *args: Any) -> T:
        reply_send, reply_receive = anyio.create_memory_object_stream[tuple[bool, Any]](1)
        try:
            async with reply_receive:
                await self._send.send(_Envelope(call, args, reply_send))
                ok, value = await reply_receive.receive()
        finally:
            reply_send.close()  # also when the call never ran (mailbox closed, cancelled)
        if not ok:
            raise value
        result: T = value
        return result

    def tell(self, call: Callable[..., Awaitable[Any]], *args: Any) -> None:
        self._send.send_nowait(_Envelope(call, args, None))

    def close(self) -> None:
        """No more calls; :meth:`serve` returns once the queued ones ran. Idempotent."""
        self._send.close()
        if not self._serving:
            self._receive.close()

    async def serve(self) -> None:
        """Run calls one at a time until :meth:`close` (or cancellation)."""
        self._serving = True
        async with self._receive:
            async for envelope in self._receive:
                await self._handle(envelope)

    async def _handle(self, envelope: _Envelope) -> None:
        self.current = getattr(envelope.call, "__qualname__", None) or repr(envelope.call)
        try:
            result = await envelope.call(*envelope.args)
            outcome: tuple[bool, Any] = (True, result)
        except Exception as exc:
            if envelope.reply is None:
                log.error("actor call failed", actor=self.name, error=repr(exc), exc_info=exc)
            outcome = (False, exc)
        finally:
            self.current = None
        if envelope.reply is not None:
            async with envelope.reply:
                # The asker may have gone away (cancelled): then nobody needs the answer.
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    envelope.reply.send_nowait(outcome)
