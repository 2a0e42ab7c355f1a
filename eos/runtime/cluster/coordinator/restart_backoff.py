"""Automatic restarts of failed connectors and tasks: the decisions, as pure functions
(docs/operations.md, "Tasks that heal themselves").

A *unit* is a connector (task None) or one of its tasks. For each unit that runs
on this worker, :func:`decide` says what to do now, from what is known of it
(:class:`RestartRecord`), whether it has failed, why, and the connector's
:class:`~eos.config.auto_restart.AutoRestartPolicy`:

- a failure that restarting cannot heal (:func:`cannot_heal`: a bad setting, a
  missing plugin, a missing ACL or wrong credentials) is never restarted;
- otherwise the unit is restarted with Strimzi's backoff (:func:`backoff_ms`): at
  once, then n·n + n units after the previous restart (n = restarts so far), each
  wait at most ``auto.restart.backoff.max.ms``, until ``auto.restart.max.attempts``;
- a unit that has run for as long as its last wait without failing starts counting
  from 0 again.

:class:`RestartBook` keeps the records; the coordinator's auto-restart duty
(:mod:`eos.runtime.cluster.coordinator.auto_restarts`) applies the decisions and the
supervisor writes what the book says into the unit's status.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, replace

from eos.config.auto_restart import AutoRestartPolicy
from eos.errors import EosError
from eos.storage.status_log import AutoRestartStatus

Unit = tuple[str, int | None]
"""(connector, task id), the task id None for the connector itself."""


def backoff_ms(restarts: int, policy: AutoRestartPolicy) -> int:
    """How long after the previous automatic restart the next one comes, when there
    were ``restarts`` so far: (n·n + n) units, at most ``backoff_max_ms``."""
    n = restarts
    return min((n * n + n) * policy.backoff_unit_ms, policy.backoff_max_ms)


def cannot_heal(error: BaseException | None) -> str | None:
    """Why restarting cannot heal a unit that failed with ``error`` (None: it may).

    The exception, its causes and the members of exception groups are looked at: an
    eos error whose ``heals`` is False (a bad setting, a missing plugin, a connector
    asking the impossible), or Kafka refusing the principal (an authorization or
    authentication error, by its Kafka name) cannot heal by restarting."""
    for exc in _chain(error):
        name = type(exc).__name__
        if "Authorization" in name or "AUTHORIZATION_FAILED" in str(exc):
            return (
                f"Kafka refused an operation ({name}: {exc}): a missing ACL does not heal by "
                "restarting; grant it (docs/security.md), then restart"
            )
        if "Authentication" in name or "AUTHENTICATION_FAILED" in str(exc):
            return (
                f"Kafka refused the credentials ({name}): fix the sasl.* / ssl.* settings, "
                "then restart"
            )
        if isinstance(exc, EosError) and not exc.heals:
            return f"{name} does not heal by restarting: fix the cause, then restart"
    return None


def _chain(error: BaseException | None) -> Iterator[BaseException]:
    pending = [] if error is None else [error]
    seen: set[int] = set()
    while pending:
        exc = pending.pop(0)
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        yield exc
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(exc.exceptions)
        pending.extend(e for e in (exc.__cause__, exc.__context__) if e is not None)


@dataclass(frozen=True)
class RestartRecord:
    """What is known of one unit's automatic restarts."""

    restarts: int = 0
    """Automatic restarts in a row (since the count last started from 0)."""
    last_restart: float | None = None
    """``Clock.monotonic()`` of the last automatic restart."""
    next_attempt: float | None = None
    """When the next one is due (monotonic), while the unit waits for it."""
    next_attempt_ms: int | None = None
    """The same as wall-clock epoch milliseconds (for the status)."""
    reason: str | None = None
    """Why the failed unit is not restarted automatically (any more)."""

    def status(self) -> AutoRestartStatus | None:
        """What the unit's status says of its automatic restarts (None: nothing)."""
        if not self.restarts and self.next_attempt_ms is None and self.reason is None:
            return None
        return AutoRestartStatus(self.restarts, self.next_attempt_ms, self.reason)


class Action(enum.Enum):
    NOTHING = "nothing"
    RESTART = "restart"
    """Restart the failed unit now."""
    WAIT = "wait"
    """The failed unit is restarted at :attr:`Decision.at`."""
    LEAVE = "leave"
    """The failed unit stays FAILED (:attr:`Decision.reason` says why)."""
    RUNNING = "running"
    """The unit runs again, not yet for as long as its last wait: its count stays."""
    RESET = "reset"
    """The unit runs again for long enough (or was never restarted): its record goes."""


@dataclass(frozen=True)
class Decision:
    action: Action
    at: float | None = None
    reason: str | None = None


def decide(
    record: RestartRecord | None,
    *,
    failed: bool,
    error: BaseException | None,
    policy: AutoRestartPolicy,
    now: float,
) -> Decision:
    """What to do now (``now``: ``Clock.monotonic()``) with a unit whose automatic
    restarts so far are ``record``, and which has ``failed`` (with ``error``)."""
    if not failed:
        if record is None:
            return Decision(Action.NOTHING)
        last = record.last_restart
        on_probation = last is not None and now - last < backoff_ms(record.restarts, policy) / 1000
        return Decision(Action.RUNNING if record.restarts and on_probation else Action.RESET)
    record = record or RestartRecord()
    if not policy.enabled:
        return Decision(Action.LEAVE, reason="auto.restart.enabled is false")
    why = cannot_heal(error)
    if why is not None:
        return Decision(Action.LEAVE, reason=why)
    if policy.max_attempts is not None and record.restarts >= policy.max_attempts:
        return Decision(
            Action.LEAVE,
            reason=f"auto.restart.max.attempts ({policy.max_attempts}) reached: restart it "
            "when the cause is fixed",
        )
    last = record.last_restart
    at = now if last is None else last + backoff_ms(record.restarts, policy) / 1000
    return Decision(Action.RESTART) if at <= now else Decision(Action.WAIT, at=at)


class RestartBook:
    """The :class:`RestartRecord` of every unit on this worker that has one. Changed by
    the auto-restart duty only; read by the supervisor for statuses."""

    def __init__(self) -> None:
        self._records: dict[Unit, RestartRecord] = {}

    def __contains__(self, unit: Unit) -> bool:
        return unit in self._records

    def units(self) -> list[Unit]:
        return list(self._records)

    def get(self, unit: Unit) -> RestartRecord | None:
        return self._records.get(unit)

    def status(self, unit: Unit) -> AutoRestartStatus | None:
        record = self._records.get(unit)
        return None if record is None else record.status()

    def restarted(self, unit: Unit, now: float) -> RestartRecord:
        """Count an automatic restart of ``unit`` made at ``now``."""
        record = self._records.get(unit) or RestartRecord()
        record = RestartRecord(restarts=record.restarts + 1, last_restart=now)
        self._records[unit] = record
        return record

    def waiting(self, unit: Unit, at: float, at_ms: int) -> bool:
        """``unit`` waits for its next restart at ``at`` (``at_ms`` on the wall clock);
        False if that was known already."""
        record = self._records.get(unit) or RestartRecord()
        if record.next_attempt == at and record.reason is None:
            return False
        self._records[unit] = replace(record, next_attempt=at, next_attempt_ms=at_ms, reason=None)
        return True

    def left(self, unit: Unit, reason: str) -> bool:
        """``unit`` stays FAILED because of ``reason``; False if that was known already."""
        record = self._records.get(unit) or RestartRecord()
        if record.reason == reason:
            return False
        self._records[unit] = replace(
            record, next_attempt=None, next_attempt_ms=None, reason=reason
        )
        return True

    def running(self, unit: Unit) -> bool:
        """``unit`` runs again (its count stays); False if nothing changed."""
        record = self._records.get(unit)
        if record is None or (record.next_attempt is None and record.reason is None):
            return False
        self._records[unit] = replace(record, next_attempt=None, next_attempt_ms=None, reason=None)
        return True

    def forget(self, unit: Unit) -> bool:
        """Drop ``unit``'s record (it runs well again, or is gone); False if it had none."""
        return self._records.pop(unit, None) is not None
