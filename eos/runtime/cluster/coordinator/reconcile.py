"""Bringing what this worker runs in line with its assignment and the config topic
(docs/cluster.md, "One round, step by step", step 5).

Run in the coordinator's mailbox after every assignment and whenever the config
topic moved: restart requests first (:mod:`~eos.runtime.cluster.coordinator.restart_requests`),
then connectors whose config changed or that must not run stop, stale task
generations stop, and what should run but does not starts (a task's start-up
asks the leader for a fencing round first). What is assigned but paused or stopped
is reported once. The decisions are the pure functions :func:`wanted_connectors`,
:func:`wanted_tasks` and :func:`idle_states`.
"""

from __future__ import annotations

from eos.runtime.cluster.assignors.base import Assignment
from eos.runtime.cluster.coordinator.cluster_state import ClusterState
from eos.runtime.cluster.coordinator.restart_requests import Restarts
from eos.runtime.cluster.coordinator.worker_interfaces import Units
from eos.state import State
from eos.storage.config_log import ConfigSnapshot, RestartRequest, TargetState

_IDLE = {TargetState.PAUSED: State.PAUSED, TargetState.STOPPED: State.STOPPED}


def wanted_connectors(assigned: Assignment, snap: ConfigSnapshot) -> set[str]:
    """The assigned connectors that should run: they exist and are STARTED."""
    return {
        name
        for name in assigned.connectors
        if name in snap.connectors and snap.target_state(name) is TargetState.STARTED
    }


def wanted_tasks(assigned: Assignment, snap: ConfigSnapshot) -> dict[tuple[str, int], int]:
    """(connector, task) → generation of every assigned task that should run."""
    wanted = {}
    for task in assigned.tasks:
        generation = snap.generations.get(task.connector)
        if (
            generation is not None
            and task.task < len(snap.tasks(task.connector))
            and snap.target_state(task.connector) is TargetState.STARTED
        ):
            wanted[(task.connector, task.task)] = generation
    return wanted


def idle_states(assigned: Assignment, snap: ConfigSnapshot) -> dict[tuple[str, int | None], State]:
    """PAUSED / STOPPED for what this worker owns but must not run (task None: the
    connector). A stopped connector has no tasks to report."""
    idle: dict[tuple[str, int | None], State] = {}
    for name in assigned.connectors:
        state = _IDLE.get(snap.target_state(name)) if name in snap.connectors else None
        if state is not None:
            idle[(name, None)] = state
    for task in assigned.tasks:
        state = _IDLE.get(snap.target_state(task.connector))
        if state is State.PAUSED and task.task < len(snap.tasks(task.connector)):
            idle[(task.connector, task.task)] = state
    return idle


class Reconciler:
    def __init__(self, state: ClusterState, units: Units) -> None:
        self._state = state
        self._units = units
        self._restarts = Restarts(units)
        self._reported: dict[tuple[str, int | None], State] = {}

    async def reconcile(self) -> None:
        """Bring running connectors and tasks in line with the assignment and the
        config topic: stale task generations stop, new ones start (their start-up
        asks the leader for a fencing round first)."""
        snap, assigned, units = self._state.config, self._state.assigned, self._units
        await self._restarts.apply(snap, assigned)
        for name, props in list(units.running_connectors().items()):
            if name not in wanted_connectors(assigned, snap) or props != snap.connectors.get(name):
                await units.stop_connector(name)
        running = units.running_connectors()
        for name in sorted(wanted_connectors(assigned, snap) - set(running)):
            units.start_connector(name, snap.connectors[name])
        wanted = wanted_tasks(assigned, snap)
        stale = [k for k, gen in units.running_tasks().items() if wanted.get(k) != gen]
        if stale:
            await units.stop_tasks(stale)
        running_tasks = units.running_tasks()
        for (name, task_id), generation in sorted(wanted.items()):
            if (name, task_id) not in running_tasks:
                units.start_task(name, task_id, generation, snap.tasks(name)[task_id])
        await self._report_idle(snap, assigned)

    async def restart(self, name: str, request: RestartRequest) -> None:
        """Restart here what ``request`` names, as a user's restart request read from
        the config topic is acted on (the auto-restart duty's way in)."""
        await self._restarts.restart_here(name, request, self._state.assigned)
        await self.reconcile()

    async def _report_idle(self, snap: ConfigSnapshot, assigned: Assignment) -> None:
        """Status PAUSED / STOPPED for what this worker owns but must not run (once)."""
        idle = idle_states(assigned, snap)
        for key, state in idle.items():
            if self._reported.get(key) is not state:
                await self._units.report(key[0], key[1], state)
        self._reported = idle
