"""The leader's writes to the config topic (docs/cluster.md, "Config changes").

Only the leader writes the config topic, through the transactional producer
``eos-cluster-${group.id}``, which it initialises (:meth:`ConfigWrites.claim`)
when it becomes leader, fencing any deposed leader. A write that is fenced (a
newer leader took over) or fails makes this worker rejoin the group, and the
request fails so that its caller retries.

After a write the leader reads the topic back; every worker (the leader too)
then applies the change as its config watcher reads it: restart requests,
pauses, resumes, stops and new task generations need no rebalance. A rebalance
follows only when the work to place changed (:func:`placement_changed`): a
connector was created or deleted, or a connector's task count changed.

Each public method checks what it can outside the mailbox (this worker leads),
then asks the mailbox for the write.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping

import structlog

from eos.errors import ConflictError, EosError, FencedError, NotFoundError, NotLeaderError
from eos.runtime.cluster.coordinator.duty_context import Shared
from eos.runtime.cluster.coordinator.watcher import ConfigWatcher
from eos.storage.config_log import ConfigSnapshot, RestartRequest, TargetState

log = structlog.get_logger(__name__)


def placement_changed(before: ConfigSnapshot, after: ConfigSnapshot) -> bool:
    """Whether the assignment must place other work after a change of the config
    topic: the connectors, or the task count of one, differ."""
    if set(before.connectors) != set(after.connectors):
        return True
    return any(len(before.tasks(name)) != len(after.tasks(name)) for name in after.connectors)


class ConfigWrites:
    def __init__(self, shared: Shared, watcher: ConfigWatcher) -> None:
        self._state, self._config_log = shared.state, shared.state.config_log
        self._inbox, self._rejoin, self._watcher = shared.inbox, shared.rejoin, watcher
        self._claimed = False
        self._altering: set[str] = set()

    # ------------------------------------------------------------- leadership

    async def claim(self) -> None:
        """Initialise the config writer (fencing a deposed leader's) unless this worker
        did since it became leader."""
        if not self._claimed:
            await self._config_log.claim_write_privileges()
            self._claimed = True

    def release(self) -> None:
        """This worker no longer leads: the next leadership claims the writer anew."""
        self._claimed = False

    # --------------------------------------------------------- public requests

    async def put_connector(
        self, name: str, props: Mapping[str, str], initial_state: TargetState
    ) -> bool:
        """Create or update a connector (already validated; a new one starts in
        ``initial_state``). True if it is new. Leader only."""
        self._state.require_leader()
        return await self._inbox.ask(self._put_connector, name, dict(props), initial_state)

    async def set_target_state(self, name: str, state: TargetState) -> None:
        """Pause, stop or resume a connector and its tasks. Leader only."""
        self._state.require_leader()
        await self._inbox.ask(self._set_target_state, name, state)

    async def begin_offset_change(self, name: str) -> ConfigSnapshot:
        """Hold the connector STOPPED while its offsets change (leader only): until
        :meth:`end_offset_change`, it cannot be resumed. Raises ConflictError unless it
        is STOPPED now (docs/rest.md)."""
        self._state.require_leader()
        return await self._inbox.ask(self._begin_offset_change, name)

    def end_offset_change(self, name: str) -> None:
        self._altering.discard(name)

    async def restart(self, name: str, request: RestartRequest) -> None:
        """Ask the workers that run them to restart a connector and/or its tasks. Leader only."""
        self._state.require_leader()
        await self._inbox.ask(self._restart, name, request)

    async def delete_connector(self, name: str) -> None:
        self._state.require_leader()
        await self._inbox.ask(self._delete_connector, name)

    async def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Write a connector's task configs if they changed. Leader only."""
        self._state.require_leader()
        await self._inbox.ask(self._task_configs, name, configs)

    async def write(self, write: Awaitable[int]) -> int:
        """A config write by the leader. Fenced (a newer leader took over) or failed:
        this worker rejoins the group, and the request fails (the caller retries)."""
        try:
            return await write
        except FencedError as exc:
            self._claimed = False
            self._rejoin.request_rejoin("config writer fenced")
            raise NotLeaderError(f"{exc}; this worker rejoins the group: retry", None) from exc
        except EosError as exc:
            self._rejoin.request_rejoin("config write failed")
            raise ConflictError(f"config topic write failed ({exc}); retry") from exc

    # --------------------------------------------------------------- handlers

    async def _current(self, name: str) -> ConfigSnapshot:
        """The topic read to its end, as the leader: NotFoundError unless ``name`` exists."""
        self._state.require_leader()
        snap = await self._config_log.refresh()
        if name not in snap.connectors:
            raise NotFoundError(f"Connector {name} not found")
        return snap

    async def _put_connector(
        self, name: str, props: dict[str, str], initial_state: TargetState
    ) -> bool:
        self._state.require_leader()
        snap = await self._config_log.refresh()
        created = name not in snap.connectors
        if not created and dict(snap.connectors[name]) == props:
            return False
        await self.write(self._config_log.put_connector_config(name, props))
        if created:
            await self.write(self._config_log.put_target_state(name, initial_state))
        await self._changed(snap, f"connector {name} {'created' if created else 'updated'}")
        return created

    async def _set_target_state(self, name: str, state: TargetState) -> None:
        snap = await self._current(name)
        if snap.target_state(name) is state:
            return
        if name in self._altering:
            raise ConflictError(f"the offsets of {name} are being changed; retry afterwards")
        await self.write(self._config_log.put_target_state(name, state))
        if state is TargetState.STOPPED and snap.tasks(name):
            # As in Kafka Connect (KIP-875): a stopped connector has no tasks at all.
            await self.write(self._config_log.put_task_configs(name, []))
        if snap.target_state(name) is TargetState.STOPPED:
            # Resumed after a stop: its connector makes its task configs again. A worker
            # that reads the stop and the resume together never stopped it, so the resume
            # is also a restart request for the connector.
            await self.write(self._config_log.put_restart(name, RestartRequest()))
        await self._changed(snap, f"connector {name} {state.value.lower()}")

    async def _begin_offset_change(self, name: str) -> ConfigSnapshot:
        snap = await self._config_log.refresh()
        if name not in snap.connectors:
            raise NotFoundError(f"Connector {name} not found")
        if snap.target_state(name) is not TargetState.STOPPED:
            raise ConflictError(
                "Connectors must be in the STOPPED state before their offsets can be "
                f"modified. Stop this one with PUT /connectors/{name}/stop first"
            )
        if name in self._altering:
            raise ConflictError(f"the offsets of {name} are being changed already")
        self._altering.add(name)
        return snap

    async def _restart(self, name: str, request: RestartRequest) -> None:
        snap = await self._current(name)
        await self.write(self._config_log.put_restart(name, request))
        await self._changed(snap, f"restart of {name}")

    async def _delete_connector(self, name: str) -> None:
        snap = await self._current(name)
        await self.write(self._config_log.remove_connector(name))
        await self._changed(snap, f"connector {name} deleted")

    async def _task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        snap = await self._current(name)
        if name in snap.generations and [dict(c) for c in snap.tasks(name)] == configs:
            return
        log.info("writing new task configs", connector=name, tasks=len(configs))
        await self.write(self._config_log.put_task_configs(name, configs))
        await self._changed(snap, f"new task configs for {name}")

    async def _changed(self, before: ConfigSnapshot, reason: str) -> None:
        """After a config write: read it back; every worker (this one at once) applies
        it as its config watcher reads it, and a rebalance follows if the work to place
        changed."""
        after = await self._config_log.refresh()
        self._watcher.poke()
        if placement_changed(before, after):
            self._rejoin.request_rejoin(reason)
