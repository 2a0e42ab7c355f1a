"""Restart requests (KIP-745), acted on by every worker for what it runs
(docs/rest.md, "Restarting").

The leader writes a user's restart request to the config topic; every worker
reads it as the topic grows (the config watcher), without a rebalance, and stops
what the request names among the connector and tasks it is assigned. The rest of
the reconcile starts them again: a restarted task initialises its producer anew
(fencing the instance it replaces) and resumes from its committed offsets.

The decisions are pure functions: which requests are new to this worker
(:func:`new_restarts`) and what one of them stops here (:func:`restart_plan`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import structlog

from eos.runtime.cluster.assignors.base import Assignment
from eos.runtime.cluster.coordinator.worker_interfaces import Units
from eos.state import State
from eos.storage.config_log import ConfigSnapshot, RestartRequest

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class RestartPlan:
    """What one restart request stops (and so restarts) on this worker."""

    connector: bool
    tasks: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return self.connector or bool(self.tasks)


def restart_plan(
    request: RestartRequest,
    *,
    connector_here: bool,
    tasks_here: Iterable[int],
    connector_failed: bool = False,
    failed_tasks: Collection[int] = (),
) -> RestartPlan:
    """What ``request`` restarts here, given whether this worker is assigned the
    connector, the connector's task ids it is assigned, and what of them has FAILED.

    A request for one task (``task``) restarts that task only. Otherwise the
    connector restarts, and with ``include_tasks`` its tasks too; with
    ``only_failed``, only those that FAILED."""
    connector = False
    if request.task is None:
        connector = connector_here and (not request.only_failed or connector_failed)
        if not request.include_tasks:
            return RestartPlan(connector)
    tasks = tuple(
        t
        for t in sorted(tasks_here)
        if (request.task is None or t == request.task)
        and (not request.only_failed or t in failed_tasks)
    )
    return RestartPlan(connector, tasks)


def new_restarts(
    log_: Sequence[tuple[int, str, RestartRequest]], seen: int | None
) -> tuple[list[tuple[str, RestartRequest]], int]:
    """The requests of ``log_`` (offset, connector, request) after offset ``seen``, in
    order, and the new ``seen``. ``seen`` None: this worker has not looked before, and
    the requests made before it joined are done (none is new)."""
    offsets = [offset for offset, _, _ in log_]
    if seen is None:
        return [], max(offsets, default=-1)
    fresh = [(name, request) for offset, name, request in log_ if offset > seen]
    return fresh, max([seen, *offsets])


class Restarts:
    """Restarts what this worker is assigned when it reads a new restart request."""

    def __init__(self, units: Units) -> None:
        self._units = units
        self._seen: int | None = None

    async def apply(self, snap: ConfigSnapshot, assigned: Assignment) -> None:
        """Stop what the requests newer than those seen restart (the rest of the
        reconcile starts it again)."""
        fresh, self._seen = new_restarts(snap.restart_log, self._seen)
        for name, request in fresh:
            await self.restart_here(name, request, assigned)

    async def restart_here(self, name: str, request: RestartRequest, assigned: Assignment) -> None:
        """Stop what ``request`` restarts among what this worker is ``assigned`` (a
        user's request read from the config topic, or an automatic restart), reporting
        it RESTARTING; the reconcile that follows starts it again."""
        units = self._units
        tasks_here = [t.task for t in assigned.tasks if t.connector == name]
        plan = restart_plan(
            request,
            connector_here=name in assigned.connectors,
            tasks_here=tasks_here,
            connector_failed=units.failed(name),
            failed_tasks={t for t in tasks_here if units.failed(name, t)},
        )
        if plan.connector:
            log.info("restarting connector", connector=name)
            await units.report(name, None, State.RESTARTING)
            await units.stop_connector(name)
        if plan.tasks:
            log.info("restarting tasks", connector=name, tasks=list(plan.tasks))
            for task_id in plan.tasks:
                await units.report(name, task_id, State.RESTARTING)
            await units.stop_tasks([(name, t) for t in plan.tasks])
