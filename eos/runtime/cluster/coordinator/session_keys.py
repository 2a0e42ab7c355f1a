"""The session key that signs internal requests (docs/cluster.md, "The session key").

The leader writes a new key to the config topic when there is none, when it was
made for another algorithm than ``inter.worker.signature.algorithm``, or when it
is ``inter.worker.key.ttl.ms`` old (:func:`key_due`); then it sets a timer for
the next rotation (:func:`key_remaining_ms`). A worker that loses the leadership
cancels that timer; the new leader takes over from the key it reads.
"""

from __future__ import annotations

import secrets

import structlog

from eos.errors import EosError
from eos.runtime.cluster.coordinator.config_writes import ConfigWrites
from eos.runtime.cluster.coordinator.duty_context import Shared
from eos.runtime.cluster.signatures import key_bytes
from eos.storage.config_log import SessionKey

log = structlog.get_logger(__name__)

TIMER = "session-key"
"""The name of the rotation timer."""


def key_due(key: SessionKey | None, *, algorithm: str, ttl_ms: int, now_ms: int) -> bool:
    """Whether the leader must write a new key at ``now_ms``."""
    return key is None or key.algorithm != algorithm or now_ms >= key.created_ms + ttl_ms


def key_remaining_ms(key: SessionKey, *, ttl_ms: int, now_ms: int) -> int:
    """Milliseconds until ``key`` is due for rotation (0: now)."""
    return max(key.created_ms + ttl_ms - now_ms, 0)


class SessionKeys:
    def __init__(self, shared: Shared, writes: ConfigWrites) -> None:
        self._settings, self._state, self._inbox = shared.settings, shared.state, shared.inbox
        self._config_log, self._writes = shared.state.config_log, writes
        self._timers, self._clock = shared.timers, shared.clock

    async def ensure(self) -> None:
        """Write a new key if one is due, and set the timer for the next. In the mailbox."""
        s = self._settings
        key = self._config_log.snapshot.session_key
        now = self._clock.wall_ms()
        if key is None or key_due(
            key, algorithm=s.signature_algorithm, ttl_ms=s.key_ttl_ms, now_ms=now
        ):
            new = SessionKey(
                secrets.token_bytes(key_bytes(s.signature_algorithm)), s.signature_algorithm, now
            )
            try:
                await self._writes.write(self._config_log.put_session_key(new))
                await self._config_log.refresh()
            except EosError as exc:
                log.warning("session key not written", error=str(exc))
                return
            log.info("session key written", algorithm=new.algorithm)
            key = new
        remaining = key_remaining_ms(key, ttl_ms=s.key_ttl_ms, now_ms=now)
        self._timers.later(TIMER, remaining, lambda: self._inbox.tell(self._rotate))

    async def _rotate(self) -> None:
        if self._state.is_leader:
            await self.ensure()
