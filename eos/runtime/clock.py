"""Time, replaceable in tests: the runtime reads the clock only through :class:`Clock`."""

from __future__ import annotations

import time
from typing import Protocol

import anyio
import anyio.lowlevel


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds from an arbitrary start; never goes backwards."""

    def wall_ms(self) -> int:
        """Epoch milliseconds."""

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a manual clock moves on by as much instead)."""


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


class ManualClock:
    """A clock that moves only when told to (tests of intervals and deadlines)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def monotonic(self) -> float:
        return self.now

    def wall_ms(self) -> int:
        return int(self.now * 1000)

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await anyio.lowlevel.checkpoint()
