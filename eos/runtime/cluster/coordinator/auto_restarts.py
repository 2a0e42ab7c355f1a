"""The auto-restart duty: failed connectors and tasks of this worker restarted with
backoff (docs/operations.md, "Tasks that heal themselves").

Every tick (a quarter of ``auto.restart.backoff.unit.ms``, at most a second) it
looks at what has FAILED here (the supervisor's ``failures()``) and at what the
:class:`~.restart_backoff.RestartBook` remembers; when there is anything,
it decides in the coordinator's mailbox, unit by unit, with the pure
:func:`~.restart_backoff.decide`:

- a restart goes the way a user's restart request goes once read from the config
  topic (:meth:`Reconciler.restart`: reported RESTARTING, stopped, started again by
  the reconcile, its producer fencing the instance it replaces, resuming from the
  committed offsets). It is this worker's own decision, so it is not written to the
  config topic: no leader is needed, and the other workers have nothing to do;
- waiting for a restart, or staying FAILED (and why), is written into the unit's
  status (its ``auto_restart`` field), and counted in the metrics;
- a unit that runs again for as long as its last wait starts counting from 0.

A unit no longer assigned here is forgotten (its new owner starts counting anew).
"""

from __future__ import annotations

import anyio
import structlog
from anyio.abc import TaskStatus

from eos.config.auto_restart import AutoRestartPolicy
from eos.errors import ConflictError
from eos.runtime.cluster.assignors.base import Assignment, TaskId
from eos.runtime.cluster.coordinator.duty_context import Shared
from eos.runtime.cluster.coordinator.reconcile import Reconciler
from eos.runtime.cluster.coordinator.restart_backoff import (
    Action,
    Decision,
    RestartBook,
    Unit,
    decide,
)
from eos.runtime.cluster.coordinator.worker_interfaces import Units
from eos.storage.config_log import RestartRequest

log = structlog.get_logger(__name__)

TICK_MAX = 1.0
"""Seconds between two looks at most (a first restart comes within a tick)."""


def is_assigned(unit: Unit, assigned: Assignment) -> bool:
    name, task = unit
    return name in assigned.connectors if task is None else TaskId(name, task) in assigned.tasks


def restart_request(unit: Unit) -> RestartRequest:
    """The restart request that restarts ``unit`` only, if it has failed."""
    _, task = unit
    return RestartRequest(task=task, only_failed=True)


class AutoRestarts:
    def __init__(
        self, shared: Shared, units: Units, reconciler: Reconciler, book: RestartBook
    ) -> None:
        self._settings, self._state, self._inbox = shared.settings, shared.state, shared.inbox
        self._observer, self._clock = shared.observer, shared.clock
        self._units, self._reconciler, self._book = units, reconciler, book
        self._policy = AutoRestartPolicy.of_worker(self._settings.raw)
        unit_s = self._policy.backoff_unit_ms / 1000
        self._tick = min(TICK_MAX, max(0.05, unit_s / 4))

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Look every tick until cancelled (or the mailbox closes)."""
        task_status.started()
        while True:
            await anyio.sleep(self._tick)
            assigned = self._state.assigned
            failed = [unit for unit in self._units.failures() if is_assigned(unit, assigned)]
            if not failed and not self._book.units():
                continue
            try:
                await self._inbox.ask(self.check)
            except ConflictError:
                return  # the worker is stopping
            except Exception as exc:  # the next tick tries again
                log.error("auto-restart check failed", error=repr(exc), exc_info=exc)

    def policy(self, name: str) -> AutoRestartPolicy:
        props = self._state.config.connectors.get(name, {})
        return self._policy.for_connector(props)

    async def check(self) -> None:
        """Decide and act for every unit here that failed or has a record. In the mailbox."""
        now = self._clock.monotonic()
        failures = self._units.failures()
        units = set(failures) | set(self._book.units())
        for unit in sorted(units, key=lambda u: (u[0], -1 if u[1] is None else u[1])):
            if not is_assigned(unit, self._state.assigned):
                if self._book.forget(unit):
                    self._observer.auto_restart_forgotten(*unit)
                continue
            decision = decide(
                self._book.get(unit),
                failed=unit in failures,
                error=failures.get(unit),
                policy=self.policy(unit[0]),
                now=now,
            )
            await self._act(unit, decision, now)

    async def _act(self, unit: Unit, decision: Decision, now: float) -> None:
        name, task = unit
        book, observer = self._book, self._observer
        action = decision.action
        if action is Action.NOTHING:
            return
        if action is Action.RESTART:
            restarts = book.restarted(unit, now).restarts
            observer.auto_restarted(name, task, restarts)
            log.info("restarting automatically", connector=name, task=task, restarts=restarts)
            await self._reconciler.restart(name, restart_request(unit))
            return
        record = book.get(unit)
        observer.auto_restarts_in_a_row(name, task, 0 if record is None else record.restarts)
        if action is Action.WAIT:
            assert decision.at is not None
            at_ms = self._clock.wall_ms() + round((decision.at - now) * 1000)
            changed = book.waiting(unit, decision.at, at_ms)
            if changed:
                wait = round(decision.at - now, 1)
                log.info("automatic restart scheduled", connector=name, task=task, in_s=wait)
        elif action is Action.LEAVE:
            assert decision.reason is not None
            changed = book.left(unit, decision.reason)
            if changed:
                log.warning(
                    "not restarted automatically", connector=name, task=task, reason=decision.reason
                )
        elif action is Action.RUNNING:
            changed = book.running(unit)
        else:  # RESET
            changed = book.forget(unit)
            observer.auto_restarts_in_a_row(name, task, 0)
            if changed and record is not None and record.restarts:
                log.info("runs again: automatic restarts counted from 0", connector=name, task=task)
        if changed:
            await self._units.refresh_status(name, task)
