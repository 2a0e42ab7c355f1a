"""The coordinator actor: the single owner of cluster state on a worker, and the
leader's duties (SPEC §8 to §11).

Today every worker is a group of one and is its own leader; the group
membership protocol (JoinGroup/SyncGroup, assignors) arrives with the
multi-worker issue and plugs in at :meth:`Coordinator._assignment`. The leader
duties are already the cluster's:

- it alone writes the config topic (connector configs, target states, task
  configs + commit, task count records), through the transactional producer
  ``eos-cluster-${group.id}``;
- before a connector's new task generation starts it runs a *fencing round*:
  if the previous task count record exists and it or the new count is above 1,
  every transactional id of the previous generation is fenced; then the new
  task count record is written and read back;
- it brings running connectors and tasks in line with the config topic
  (:meth:`_reconcile`): stale generations stop before the fencing round, and
  new tasks start only after their task count record.

All state changes run inside the actor's mailbox, one at a time.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Protocol

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from eos.config.worker import WorkerConfig
from eos.errors import ConflictError, FencingError, NotFoundError
from eos.kafka.fencing import fence_producers
from eos.runtime.actor import Mailbox
from eos.runtime.exactly_once_task import transactional_id
from eos.runtime.observer import WorkerObserver
from eos.storage.config_log import ConfigLog, ConfigSnapshot, TargetState

log = structlog.get_logger(__name__)


class Units(Protocol):
    """What the coordinator drives on its worker: connectors and tasks."""

    def running_connectors(self) -> Mapping[str, Mapping[str, str]]: ...

    def running_tasks(self) -> Mapping[tuple[str, int], int]:
        """(connector, task id) → generation of every task running here."""

    def start_connector(self, name: str, props: Mapping[str, str]) -> None: ...

    async def stop_connector(self, name: str) -> None: ...

    def start_task(
        self, name: str, task_id: int, generation: int, config: Mapping[str, str]
    ) -> None: ...

    async def stop_tasks(self, tasks: Sequence[tuple[str, int]]) -> None: ...

    async def task_failed(self, name: str, task_id: int, generation: int, trace: str) -> None: ...


class Coordinator:
    def __init__(
        self,
        settings: WorkerConfig,
        config_log: ConfigLog,
        units: Units,
        observer: WorkerObserver,
        *,
        retry_backoff: float = 1.0,
    ) -> None:
        self.settings = settings
        self.config_log = config_log
        self.units = units
        self.observer = observer
        self.mailbox = Mailbox("coordinator")
        self.generation = 0
        self._retry_backoff = retry_backoff
        self._tg: TaskGroup | None = None
        self._retry_pending = False

    # ------------------------------------------------------------------ actor

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        await self.config_log.refresh()
        await self.config_log.claim_write_privileges()
        self.generation += 1
        self.observer.rebalance_completed(self.generation, leader=True)
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self._watch_lag)
            self.mailbox.tell(self._reconcile)
            task_status.started()
            await self.mailbox.serve()  # until close(): queued calls still run
            tg.cancel_scope.cancel()

    def close(self) -> None:
        self.mailbox.close()

    async def _watch_lag(self) -> None:
        """Report how far the config topic is ahead of what was read, now and then."""
        interval = self.settings.heartbeat_interval_ms / 1000
        while True:
            with anyio.move_on_after(interval):
                try:
                    self.observer.config_read_lag(await self.config_log.lag())
                except Exception as exc:
                    log.debug("config lag check failed", error=repr(exc))
            await anyio.sleep(interval)

    # ------------------------------------------------------- public requests

    async def snapshot(self) -> ConfigSnapshot:
        """The config topic read to its end (through the actor, so reads never race)."""
        return await self.mailbox.ask(self.config_log.refresh)

    async def put_connector(self, name: str, props: Mapping[str, str]) -> bool:
        """Create or update a connector (already validated). True if it is new."""
        return await self.mailbox.ask(self._put_connector, name, dict(props))

    async def delete_connector(self, name: str) -> None:
        await self.mailbox.ask(self._delete_connector, name)

    async def fence(self, name: str) -> None:
        """A fencing round for ``name`` if its task configs need one (SPEC §10 step 2)."""
        await self.mailbox.ask(self._fence_if_needed, name)

    def task_configs_generated(self, name: str, configs: list[dict[str, str]]) -> None:
        """From a connector actor: its current task configs (written only if changed)."""
        self.mailbox.tell(self._task_configs, name, configs)

    def request_reconcile(self) -> None:
        self.mailbox.tell(self._reconcile)

    # --------------------------------------------------------------- handlers

    async def _put_connector(self, name: str, props: dict[str, str]) -> bool:
        snap = await self.config_log.refresh()
        created = name not in snap.connectors
        await self.config_log.put_connector_config(name, props)
        if created:
            await self.config_log.put_target_state(name, TargetState.STARTED)
        await self._reconcile()
        return created

    async def _delete_connector(self, name: str) -> None:
        snap = await self.config_log.refresh()
        if name not in snap.connectors:
            raise NotFoundError(f"connector {name} not found")
        await self.config_log.remove_connector(name)
        await self._reconcile()

    async def _task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        snap = await self.config_log.refresh()
        if name not in snap.connectors:
            return
        if name in snap.generations and [dict(c) for c in snap.tasks(name)] == configs:
            return
        log.info("writing new task configs", connector=name, tasks=len(configs))
        await self.config_log.put_task_configs(name, configs)
        await self._reconcile()

    async def _fence_if_needed(self, name: str) -> None:
        snap = await self.config_log.refresh()
        if name not in snap.connectors:
            raise ConflictError(f"connector {name} was deleted")
        if snap.needs_fencing(name):
            await self._fencing_round(name)

    # ------------------------------------------------------------- reconcile

    async def _reconcile(self) -> None:
        snap = await self.config_log.refresh()
        wanted = self._assignment(snap)
        await self._reconcile_connectors(snap, wanted)
        for name in sorted(wanted):
            await self._reconcile_tasks(name)
        orphans = [t for t in self.units.running_tasks() if t[0] not in wanted]
        if orphans:
            await self.units.stop_tasks(orphans)

    def _assignment(self, snap: ConfigSnapshot) -> set[str]:
        """Connectors this worker runs: all started ones (a group of one)."""
        return {n for n in snap.connectors if snap.target_state(n) is TargetState.STARTED}

    async def _reconcile_connectors(self, snap: ConfigSnapshot, wanted: set[str]) -> None:
        for name, props in list(self.units.running_connectors().items()):
            if name not in wanted or dict(props) != dict(snap.connectors[name]):
                await self.units.stop_connector(name)
        running = self.units.running_connectors()
        for name in sorted(wanted - set(running)):
            self.units.start_connector(name, snap.connectors[name])

    async def _reconcile_tasks(self, name: str) -> None:
        snap = self.config_log.snapshot
        generation = snap.generations.get(name)
        running = self.units.running_tasks()
        mine = {key: gen for key, gen in running.items() if key[0] == name}
        count = len(snap.tasks(name))
        stale = [k for k, gen in mine.items() if gen != generation or k[1] >= count]
        if stale:  # courtesy: stop them before they are fenced
            await self.units.stop_tasks(stale)
        if generation is None:
            return
        if self.settings.exactly_once_enabled and snap.needs_fencing(name):
            try:
                if not await self._fencing_round(name):
                    return
            except FencingError as exc:
                for task_id in range(count):
                    await self.units.task_failed(name, task_id, generation, str(exc))
                return
            snap = self.config_log.snapshot
        running = self.units.running_tasks()
        for task_id, config in enumerate(snap.tasks(name)):
            if (name, task_id) not in running:
                self.units.start_task(name, task_id, generation, config)

    # --------------------------------------------------------------- fencing

    async def _fencing_round(self, name: str) -> bool:
        """Fence the previous generation and write the task count record (SPEC §9).
        False if it did not finish within half the session timeout (retried later)."""
        snap = self.config_log.snapshot
        previous = snap.previous_task_count(name)
        count = len(snap.tasks(name))
        budget = self.settings.session_timeout_ms / 2000
        started = time.perf_counter()
        ids: list[str] = []
        if previous is not None and (previous > 1 or count > 1):
            ids = [transactional_id(self.settings.group_id, name, i) for i in range(previous)]
        try:
            with anyio.fail_after(budget):
                if ids:
                    # The round's own deadline comes first: a slow coordinator is retried,
                    # while refusals (e.g. missing ACLs) come back at once as FencingError.
                    await fence_producers(self.settings.client_config, ids, timeout=2 * budget)
                await self.config_log.put_task_count(name, count)
                await self.config_log.refresh()
        except TimeoutError:
            self.observer.fencing_round(name, time.perf_counter() - started, False)
            log.warning("fencing round not done in time; retrying", connector=name, ids=ids)
            self._retry_later()
            return False
        except FencingError:
            self.observer.fencing_round(name, time.perf_counter() - started, False)
            raise
        self.observer.fencing_round(name, time.perf_counter() - started, True)
        self.observer.task_count_record_written(name)
        log.info("fencing round done", connector=name, fenced=len(ids), tasks=count)
        return True

    def _retry_later(self) -> None:
        if self._retry_pending or self._tg is None:
            return
        self._retry_pending = True

        async def retry() -> None:
            await anyio.sleep(self._retry_backoff)
            self._retry_pending = False
            self.mailbox.tell(self._reconcile)

        self._tg.start_soon(retry)
