"""The worker: the root of a worker process's actors, and the one interface the
REST API and the service talk to.

It creates the internal topics, owns the Kafka clients and stores (config,
status, global offsets), the offset mirror, the coordinator and the group
membership, and runs the connectors and tasks the coordinator assigns to it,
each in its own cancel scope inside the worker's task group.

Shutdown is two-phase with one deadline (``task.shutdown.graceful.timeout.ms``):
every task is asked to stop and given until the deadline to commit what it
polled; what is still running then is cancelled. Only then does the worker
leave its group (so the others take its work over at once, after its final
commits).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from functools import partial

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from eos.acls.denied import check_worker_access, explain
from eos.acls.rules import output_topics as declared_topics
from eos.config.connector import ConnectorConfig
from eos.config.providers import ConfigProviders, task_configs_sink
from eos.config.worker import LSO_CHECK_INTERVAL, WorkerConfig
from eos.errors import (
    ConflictError,
    EosError,
    NotFoundError,
    NotLeaderError,
    PluginError,
    RetriableError,
    ValidationError,
)
from eos.kafka.admin import ensure_topic, kafka_cluster_id
from eos.kafka.clients import ClientConfig
from eos.kafka.group import GroupClient
from eos.kafka.transactional_ids import offsets_transactional_id
from eos.runtime.assignors.base import AssignorSettings
from eos.runtime.assignors.registry import make_assignor
from eos.runtime.capacity import capacity_warning
from eos.runtime.clock import Clock, SystemClock
from eos.runtime.connector_actor import ConnectorActor
from eos.runtime.converters import make_converter
from eos.runtime.coordinator import ClusterView, Coordinator
from eos.runtime.exactly_once_task import ExactlyOnceTask
from eos.runtime.leader_client import LeaderClient
from eos.runtime.lso_monitor import LsoMonitor, output_topics
from eos.runtime.membership import Membership, MembershipSettings
from eos.runtime.observer import NullObserver, WorkerObserver
from eos.runtime.offset_mirror import OffsetMirror
from eos.runtime.offsets_admin import Offsets, read_offsets, write_offsets
from eos.runtime.plugins import connector_class
from eos.runtime.resources import SharedResources
from eos.runtime.signatures import Rejection, verify
from eos.runtime.source_task import AtLeastOnceTask, SourceTaskRunner, TaskDeps, TaskSpec
from eos.runtime.validation import validate_connector
from eos.state import State
from eos.storage.config_log import (
    ConfigLog,
    ConfigSnapshot,
    RestartRequest,
    SessionKey,
    TargetState,
)
from eos.storage.offset_log import CombinedOffsetReader, OffsetLog
from eos.storage.status_log import ActiveTopic, StatusLog

log = structlog.get_logger(__name__)


@dataclass
class _ConnectorUnit:
    props: Mapping[str, str]
    actor: ConnectorActor | None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


@dataclass
class _TaskUnit:
    spec: TaskSpec
    runner: SourceTaskRunner
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)
    """Set when the task has stopped."""


class Worker:
    def __init__(
        self,
        settings: WorkerConfig,
        *,
        observer: WorkerObserver | None = None,
        clock: Clock | None = None,
        plugin_settings: Mapping[str, str] | None = None,
    ) -> None:
        s = settings
        self.settings = s
        self.observer = observer or NullObserver()
        self.clock = clock or SystemClock()
        self.log = log.bind(worker=s.worker_id, group=s.group_id)
        client = s.client_config
        sync_timeout = s.worker_sync_timeout_ms / 1000
        self.config_log = ConfigLog(client, s.config_topic, s.group_id, read_timeout=sync_timeout)
        self.status_log = StatusLog(client, s.status_topic, s.worker_id, read_timeout=sync_timeout)
        self.mirror = OffsetMirror(client, s.offsets_topic, observer=self.observer)
        self.link = LeaderClient(
            self._session_key,
            timeout=sync_timeout,
            clock=self.clock,
            verify=s.rest_tls.client_context(),
        )
        assignor = make_assignor(
            s.assignor,
            AssignorSettings(s.scheduled_rebalance_max_delay_ms, s.failover_settle_ms, s.raw),
        )
        self.coordinator = Coordinator(
            s,
            self.config_log,
            self,
            self.observer,
            assignor=assignor,
            link=self.link,
            clock=self.clock,
        )
        self.group = GroupClient(
            client,
            s.group_id,
            client_id=f"eos-group-{s.worker_id}",
            request_timeout=(s.rebalance_timeout_ms + 5000) / 1000,
            short_timeout=s.session_timeout_ms / 1000,
        )
        self.membership = Membership(
            self.group,
            self.coordinator,
            MembershipSettings(
                s.session_timeout_ms,
                s.heartbeat_interval_ms,
                s.rebalance_timeout_ms,
                s.retry_backoff_ms,
            ),
            group_id=s.group_id,
            clock=self.clock,
        )
        self.coordinator.rejoin = self.membership
        self.resources = SharedResources(plugin_settings or {}, s.thread_pool_size, self.observer)
        self.providers = ConfigProviders.from_worker(s.raw)
        self.lso = LsoMonitor(
            client,
            self.observer,
            lambda: output_topics(
                {c for c, _ in self._tasks},
                self.config_log.snapshot.connectors,
                self.status_log,
                declared_topics,
            ),
            interval=LSO_CHECK_INTERVAL.parse(s.raw.get(LSO_CHECK_INTERVAL.name)) / 1000,
            clock=self.clock,
        )
        self.kafka_cluster_id: str | None = None
        self._connectors: dict[str, _ConnectorUnit] = {}
        self._tasks: dict[tuple[str, int], _TaskUnit] = {}
        self._offset_logs: dict[tuple[str, str], OffsetLog] = {}
        self._tg: TaskGroup | None = None
        self._stop = anyio.Event()
        self.stopped = anyio.Event()
        self._status_lock = anyio.Lock()
        self._startup_slots = anyio.CapacityLimiter(settings.task_startup_concurrency)
        self._start_checks: dict[str, _StartCheck] = {}
        """connector → the start-up check of its latest task generation (_StartGate)."""
        self._topics_ensured: set[str] = set()

    # ------------------------------------------------------------- lifecycle

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run until :meth:`stop`; ready (``task_status``) once it has joined its group."""
        try:
            await self._run(task_status)
        finally:
            self.coordinator.close()

    async def _run(self, task_status: TaskStatus[None]) -> None:
        await self._create_internal_topics()
        await check_worker_access(self.settings)  # every missing ACL named (docs/security.md)
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(self.config_log)
            await stack.enter_async_context(self.status_log)
            await self.group.start()
            stack.push_async_callback(self.group.close)
            stack.push_async_callback(self.resources.aclose)
            stack.push_async_callback(self._close_offset_logs)
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await tg.start(self.mirror.run)
                tg.start_soon(self.lso.run)
                await tg.start(self.coordinator.run)
                membership = anyio.CancelScope()
                tg.start_soon(self._run_in_scope, membership, self.membership.run)
                if self.settings.topic_tracking:
                    tg.start_soon(self._watch_topic_resets)
                await self._until_joined()
                self.log.info("worker started", rest_url=self.settings.rest_url)
                task_status.started()
                await self._stop.wait()
                await self._shutdown()
                membership.cancel()  # leaves the group (shielded LeaveGroup)
                self.coordinator.close()
                tg.cancel_scope.cancel()
        self.log.info("worker stopped")
        self.stopped.set()

    async def _until_joined(self) -> None:
        """Until the first assignment arrived — or a stop was asked for (a worker that
        cannot join must still stop on SIGTERM)."""

        async def joined() -> None:
            with anyio.move_on_after(self.settings.session_timeout_ms / 1000) as waiting:
                await self.coordinator.joined_once.wait()
            if waiting.cancelled_caught:
                self.log.warning("still joining the group", error=self.coordinator.error)
                await self.coordinator.joined_once.wait()
            race.cancel_scope.cancel()

        async def stopped() -> None:
            await self._stop.wait()
            race.cancel_scope.cancel()

        async with anyio.create_task_group() as race:
            race.start_soon(joined)
            race.start_soon(stopped)

    async def _close_offset_logs(self) -> None:
        logs, self._offset_logs = list(self._offset_logs.values()), {}
        for offsets in logs:
            await offsets.close()

    def stop(self) -> None:
        """Begin a graceful shutdown; :meth:`run` returns when it is done."""
        self._stop.set()

    async def _shutdown(self) -> None:
        await self.stop_tasks(list(self._tasks))
        for name in list(self._connectors):
            await self.stop_connector(name)

    async def _create_internal_topics(self) -> None:
        s = self.settings
        client = s.client_config
        for topic, partitions, rf, kind in (
            (s.config_topic, 1, s.config_replication_factor, "config"),
            (s.offsets_topic, s.offsets_partitions, s.offsets_replication_factor, "offset"),
            (s.status_topic, s.status_partitions, s.status_replication_factor, "status"),
        ):
            await ensure_topic(
                client,
                topic,
                partitions=partitions,
                replication_factor=rf,
                topic_configs=s.topic_settings(kind),  # type: ignore[arg-type]
                compacted=True,
                check=True,
            )
        self.kafka_cluster_id = await kafka_cluster_id(client)

    # ------------------------------------------------- what REST and services ask

    async def snapshot(self) -> ConfigSnapshot:
        """The config topic read to its end."""
        return await self.coordinator.snapshot()

    def cluster(self) -> ClusterView:
        """The cluster as this worker sees it."""
        return self.coordinator.view()

    def require_leader(self) -> None:
        """Raise :class:`~eos.errors.NotLeaderError` (naming the leader) unless this
        worker leads the cluster: only the leader serves writes."""
        self.coordinator.require_leader()

    async def put_connector(
        self,
        name: str,
        props: Mapping[str, str],
        initial_state: TargetState = TargetState.STARTED,
    ) -> bool:
        """Validate, then create or update (leader only); True if new. A new connector
        starts in ``initial_state``."""
        props = {**props, "name": name}
        self.coordinator.require_leader()
        self.validate_connector(props)
        self._warn_capacity(name, props)
        return await self.coordinator.put_connector(name, props, initial_state)

    def _warn_capacity(self, name: str, props: Mapping[str, str]) -> None:
        try:
            tasks_max = int(props.get("tasks.max", "1"))
        except ValueError:
            return  # validation named it already
        members = max(1, len(self.cluster().members))
        warning = capacity_warning(name, tasks_max, members, len(self._tasks))
        if warning is not None:
            self.log.warning("connector may not fit on the workers", detail=warning)

    async def set_target_state(self, name: str, state: TargetState) -> None:
        """Pause (PAUSED), stop (STOPPED) or resume (STARTED) a connector (leader only)."""
        await self.coordinator.set_target_state(name, state)

    async def restart(self, name: str, request: RestartRequest) -> None:
        """Have the connector and/or its tasks restarted where they run (leader only)."""
        await self.coordinator.restart(name, request)

    async def offsets(self, name: str) -> Offsets:
        """The connector's committed offsets, as its tasks would read them."""
        snap = await self.snapshot()
        if name not in snap.connectors:
            raise NotFoundError(f"Connector {name} not found")
        return await read_offsets(self.settings, name, snap.connectors[name])

    async def change_offsets(self, name: str, changes: Offsets | None) -> None:
        """Alter (``changes``: partition → new offset, None to reset it) or, with None,
        reset all of a STOPPED connector's offsets (leader only): the last task generation
        is fenced first, the connector may veto, the write is one transaction."""
        snap = await self.coordinator.begin_offset_change(name)
        try:
            props = snap.connectors[name]
            await self.coordinator.fence(name)  # the stop's round: every old producer fenced
            if changes is None:
                changes = dict.fromkeys(await read_offsets(self.settings, name, props))
            connector = connector_class(props["connector.class"])()
            try:
                connector.alter_offsets(props, changes)
            except Exception as exc:
                raise ValidationError(
                    {"offsets": [f"the connector refused the change: {exc}"]}
                ) from exc
            tid = offsets_transactional_id(self.settings.group_id, name)
            await write_offsets(self.settings, name, props, changes, transactional_id=tid)
        finally:
            self.coordinator.end_offset_change(name)

    async def delete_connector(self, name: str) -> None:
        """Delete the connector (leader only); its active topics are forgotten too."""
        await self.coordinator.delete_connector(name)
        try:
            await self.reset_active_topics(name)
        except EosError as exc:
            self.log.warning("active topics not reset", connector=name, error=str(exc))

    async def active_topics(self, name: str) -> list[str]:
        """The topics the connector's tasks have written to since the last reset
        (KIP-558; empty for a connector that never wrote, or does not exist)."""
        return sorted((await self.read_status()).active_topics(name))

    async def reset_active_topics(self, name: str) -> None:
        """Forget the connector's active topics: its tasks report them again as they
        write (those of this worker at once, the others' within
        ``topic.tracking.refresh.interval.ms``)."""
        status = await self.read_status()
        removed = await status.remove_topics(name)
        for (connector, _), unit in self._tasks.items():
            if connector == name:
                unit.runner.forget_topics(lambda topic: topic not in removed)

    async def apply_connector(self, name: str, props: Mapping[str, str]) -> bool:
        """A connector config given to this worker at start: applied by the leader,
        wherever it is (retried while the group settles). True if new."""
        props = {**props, "name": name}
        backoff = self.settings.retry_backoff_ms / 1000
        with anyio.fail_after(self.settings.worker_sync_timeout_ms / 1000):
            while not self._stop.is_set():
                try:
                    view = self.coordinator.view()
                    if view.is_leader:
                        return await self.put_connector(name, props)
                    if view.leader_url:
                        return await self.link.put_connector_config(
                            view.leader_url, name, dict(props)
                        )
                except (NotLeaderError, RetriableError) as exc:
                    self.log.info("connector not applied yet; retrying", error=str(exc))
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
        return False  # stopping

    def validate_connector(self, props: Mapping[str, str]) -> dict[str, list[str]]:
        """Problems per setting; raises :class:`ValidationError` if there are any."""
        problems = self.problems(props)
        if any(problems.values()):
            raise ValidationError(problems)
        return problems

    def problems(self, props: Mapping[str, str]) -> dict[str, list[str]]:
        """Every setting of the framework and the connector → its problems (often none),
        for this worker's settings (e.g. its exactly-once mode); variables resolved."""
        return self.providers.checked(props, self._problems)

    def _problems(self, props: Mapping[str, str]) -> dict[str, list[str]]:
        try:
            connector = connector_class(props.get("connector.class", ""))()
        except PluginError as exc:
            return {"connector.class": [str(exc)]}
        return validate_connector(props, self.settings, connector)

    async def fence(self, name: str) -> None:
        """Internal (a worker about to start tasks of ``name``): a fencing round."""
        await self.coordinator.fence(name)

    async def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Internal (a connector running on some worker): its task configs."""
        await self.coordinator.put_task_configs(name, configs)

    def check_signature(
        self, headers: Mapping[str, str], method: str, path: str, body: bytes
    ) -> Rejection | None:
        """Why an internal request's signature is not accepted, or None."""
        key = self.config_log.snapshot.session_key
        return verify(
            headers,
            key=key.key if key else None,
            method=method,
            path=path,
            body=body,
            now_ms=self.clock.wall_ms(),
            window_ms=self.settings.signature_window_ms,
        )

    async def _session_key(self, refresh: bool) -> SessionKey | None:
        if refresh:
            return (await self.coordinator.snapshot()).session_key
        return self.config_log.snapshot.session_key

    async def read_status(self) -> StatusLog:
        """The status topic read to its end."""
        async with self._status_lock:
            await self.status_log.refresh()
        self._forget_reset_topics()
        return self.status_log

    # ------------------------------------------------------- Units (connectors)

    def running_connectors(self) -> Mapping[str, Mapping[str, str]]:
        return {name: unit.props for name, unit in self._connectors.items()}

    def start_connector(self, name: str, props: Mapping[str, str]) -> None:
        assert self._tg is not None
        if self._stop.is_set():  # shutting down: queued coordinator calls start nothing
            return
        try:
            resolved = self.providers.resolve(props)  # config providers: ${file:…} etc.
            config = ConnectorConfig.from_properties(resolved, self.settings)
            connector = connector_class(config.connector_class)()
        except Exception as exc:
            self.log.error("connector cannot start", connector=name, error=str(exc))
            self._connectors[name] = _ConnectorUnit(props, None)
            self._tg.start_soon(self._connector_status, name, State.FAILED, str(exc))
            return
        actor = ConnectorActor(
            name,
            connector,
            resolved,
            config.tasks_max,
            on_task_configs=task_configs_sink(props, self.coordinator.submit_task_configs),
            status=partial(self._connector_status, name),
            retry_backoff=self.settings.retry_backoff_ms / 1000,
        )
        unit = _ConnectorUnit(props, actor)
        self._connectors[name] = unit
        self._tg.start_soon(self._run_in_scope, unit.scope, actor.run)

    async def stop_connector(self, name: str) -> None:
        unit = self._connectors.pop(name, None)
        if unit is None:
            return
        if unit.actor is not None:
            unit.scope.cancel()
            with anyio.move_on_after(self.settings.graceful_shutdown_ms / 1000 + 5):
                await unit.actor.stopped.wait()

    def failed(self, name: str, task_id: int | None = None) -> bool:
        if task_id is None:
            unit = self._connectors.get(name)
            return unit is not None and (unit.actor is None or unit.actor.failed)
        task = self._tasks.get((name, task_id))
        return task is not None and task.runner.state is State.FAILED

    async def report(self, name: str, task_id: int | None, state: State) -> None:
        if task_id is None:
            await self._connector_status(name, state, None)
        else:
            await self._task_status(TaskSpec(name, task_id, -1, {}), state, None)

    # ------------------------------------------------------------ Units (tasks)

    def running_tasks(self) -> Mapping[tuple[str, int], int]:
        return {key: unit.spec.generation for key, unit in self._tasks.items()}

    def start_task(
        self, name: str, task_id: int, generation: int, config: Mapping[str, str]
    ) -> None:
        assert self._tg is not None
        if self._stop.is_set():
            return
        spec = TaskSpec(name, task_id, generation, dict(config))
        try:
            props = self.coordinator.config_log.snapshot.connectors.get(name)
            if props is None:
                raise ConflictError(f"connector {name} has no config")
            runner = self._make_runner(spec, props)
        except Exception as exc:
            self.log.error("task cannot start", connector=name, task=task_id, error=str(exc))
            self._tg.start_soon(self._task_status, spec, State.FAILED, str(exc))
            return
        unit = _TaskUnit(spec, runner)
        self._tasks[(name, task_id)] = unit
        self._tg.start_soon(self._run_task, unit)

    def _make_runner(self, spec: TaskSpec, props: Mapping[str, str]) -> SourceTaskRunner:
        s = self.settings
        spec = replace(spec, config=self.providers.resolve(spec.config))  # ${file:…} etc.
        props = self.providers.resolve(props)
        config = ConnectorConfig.from_properties(props, s)
        task = connector_class(config.connector_class)().task_class()()
        client = config.client_config(s)
        own_topic = config.offsets_topic_for(s)
        read_timeout = (config.producer_transaction_timeout_ms(s) + s.worker_sync_timeout_ms) / 1000
        offsets_client = config.offsets_client_config(s)
        own = self._offset_log(offsets_client, own_topic, read_timeout) if own_topic else None
        global_ = self._offset_log(s.client_config, s.offsets_topic, read_timeout)
        deps = TaskDeps(
            client_config=client,
            group_id=s.group_id,
            offsets_topic=own_topic or s.offsets_topic,
            offset_reader=CombinedOffsetReader(spec.connector, own, global_),
            key_converter=make_converter(config.key_converter),
            value_converter=make_converter(config.value_converter),
            status=partial(self._task_status, spec),
            resources=self.resources,
            graceful_timeout=s.graceful_shutdown_ms / 1000,
            flush_interval_ms=s.offset_flush_interval_ms,
            transaction_timeout_ms=config.producer_transaction_timeout_ms(s),
            producer_client=config.task_producer_client(s),
            boundary=config.transaction_boundary,
            boundary_interval_ms=config.boundary_interval_ms(s),
            gate=_StartGate(self, offsets_client, own_topic),
            offsets_committed=self.mirror.submit if own_topic else None,
            topic_discovered=partial(self._topic_discovered, spec) if s.topic_tracking else None,
            observer=self.observer.task(spec.connector, spec.task_id),
            clock=self.clock,
            startup_slots=self._startup_slots,
            batch_size=producer_batch_size(len(self._tasks) + 1),
            explain=partial(explain, s, {spec.connector: props}, declared_topics),
        )
        runner_class = ExactlyOnceTask if s.exactly_once_enabled else AtLeastOnceTask
        return runner_class(spec, deps, task)

    def _offset_log(self, client: ClientConfig, topic: str, read_timeout: float) -> OffsetLog:
        """The worker's one reader of an offsets topic, shared by every task that reads it
        (a 300-task worker holds a few readers, not 600); closed when the worker stops."""
        key = (client.bootstrap_servers, topic)
        log_ = self._offset_logs.get(key)
        if log_ is None:
            log_ = self._offset_logs[key] = OffsetLog(client, topic, read_timeout=read_timeout)
        return log_

    async def _run_task(self, unit: _TaskUnit) -> None:
        try:
            with unit.scope:
                await unit.runner.run()  # opens the offset stores when it first reads them
        finally:
            unit.done.set()
            # A FAILED task stays assigned (and visible in metrics) until it is stopped,
            # restarted or its connector removed, as in Kafka Connect: never restarted
            # behind the user's back.
            if unit.runner.state is not State.FAILED:
                self._forget(unit)

    def _forget(self, unit: _TaskUnit) -> None:
        key = (unit.spec.connector, unit.spec.task_id)
        if self._tasks.get(key) is unit:
            del self._tasks[key]
            unit.runner.deps.observer.close()

    async def stop_tasks(self, tasks: Sequence[tuple[str, int]]) -> None:
        """Stop tasks in parallel: ask, wait until the graceful deadline, then cancel."""
        units = [self._tasks[key] for key in tasks if key in self._tasks]
        if not units:
            return
        for unit in units:
            unit.runner.request_stop()
        with anyio.move_on_after(self.settings.graceful_shutdown_ms / 1000):
            for unit in units:
                await unit.runner.stopped.wait()
        for unit in units:
            if not unit.runner.stopped.is_set():
                self.log.warning(
                    "task did not stop in time; cancelling",
                    connector=unit.spec.connector,
                    task=unit.spec.task_id,
                )
                unit.scope.cancel()
        for unit in units:
            await unit.done.wait()
            self._forget(unit)

    # ----------------------------------------------------------------- status

    async def _task_status(self, spec: TaskSpec, state: State, trace: str | None) -> None:
        try:
            await self.status_log.put_task(
                spec.connector, spec.task_id, state, trace, generation=self.coordinator.generation
            )
        except Exception as exc:
            self.log.warning("status write failed", connector=spec.connector, error=repr(exc))

    async def _connector_status(self, name: str, state: State, trace: str | None) -> None:
        try:
            await self.status_log.put_connector(
                name, state, trace, generation=self.coordinator.generation
            )
        except Exception as exc:
            self.log.warning("status write failed", connector=name, error=repr(exc))

    # ---------------------------------------------------------- active topics

    def _topic_discovered(self, spec: TaskSpec, topic: str) -> None:
        """A task wrote to ``topic`` for the first time in its run (called on its send
        path): the report is written by the worker's own task group."""
        if self._tg is not None and not self._stop.is_set():
            self._tg.start_soon(self._record_topic, spec, topic)

    async def _record_topic(self, spec: TaskSpec, topic: str) -> None:
        name = spec.connector
        if self.status_log.has_topic(name, topic):  # as of the last read: maybe twice
            return
        if name not in self.config_log.snapshot.connectors:  # deleted meanwhile
            return
        active = ActiveTopic(topic, name, spec.task_id, self.clock.wall_ms())
        try:
            await self.status_log.put_topic(active)
        except Exception as exc:  # the next status read lets the task report it again
            self.log.warning("active topic not recorded", connector=name, error=repr(exc))

    def _forget_reset_topics(self) -> None:
        """Tasks forget the topics that have no record (any more): they report them again."""
        status = self.status_log
        for (name, _), unit in self._tasks.items():
            unit.runner.forget_topics(partial(status.has_topic, name))

    async def _watch_topic_resets(self) -> None:
        """While tasks run here, read the status topic now and then: a reset made through
        another worker reaches this one's tasks."""
        interval = self.settings.topic_tracking_refresh_ms / 1000
        while True:
            await anyio.sleep(interval)
            if self._tasks:
                try:
                    await self.read_status()
                except EosError as exc:
                    self.log.info("status topic not read", error=str(exc))

    @staticmethod
    async def _run_in_scope(
        scope: anyio.CancelScope, target: Callable[[], Awaitable[None]]
    ) -> None:
        with scope:
            await target()


PRODUCER_MEMORY_BUDGET = 64 * 2**20
"""Bytes of producer batches a worker aims at across its tasks (docs/sizing.md)."""


def producer_batch_size(tasks: int) -> int:
    """The default ``batch.size`` of a task producer on a worker running ``tasks`` tasks:
    256 KiB (large batches cost less CPU per record) while the worker's tasks share
    :data:`PRODUCER_MEMORY_BUDGET`, then smaller, down to Kafka's 16 KiB."""
    return max(16384, min(262144, PRODUCER_MEMORY_BUDGET // max(1, tasks)))


@dataclass
class _StartCheck:
    """The shared start-up check of one task generation (see _StartGate)."""

    generation: int
    done: anyio.Event = field(default_factory=anyio.Event)
    ok: bool | None = None
    error: Exception | None = None


class _StartGate:
    """The start-up checks of an exactly-once task (docs/exactly-once.md, "Starting a
    task"), against the coordinator and the leader."""

    def __init__(self, worker: Worker, client: ClientConfig, own_topic: str | None) -> None:
        self.worker = worker
        self.client = client
        self.own_topic = own_topic

    async def _current(self, connector: str, generation: int) -> bool:
        snap = await self.worker.coordinator.snapshot()
        return snap.generations.get(connector) == generation and not snap.needs_fencing(connector)

    async def _fenced(self, connector: str) -> bool:
        """Ask the leader for a fencing round until it answers. False: the round was
        cancelled (new task configs, connector deleted): abandon start-up."""
        s = self.worker.settings
        backoff = s.retry_backoff_ms / 1000
        try:
            with anyio.fail_after(s.worker_sync_timeout_ms / 1000):
                while True:
                    try:
                        await self.worker.coordinator.request_fencing(connector)
                        return True
                    except (NotLeaderError, RetriableError) as exc:
                        log.info("fencing request not answered; retrying", error=str(exc))
                    except ConflictError as exc:
                        log.info("fencing round cancelled", connector=connector, reason=str(exc))
                        return False
                    await anyio.sleep(backoff)
                    backoff = min(backoff * 2, 2.0)
        except TimeoutError:
            raise EosError(
                f"no fencing round for {connector} within worker.sync.timeout.ms="
                f"{s.worker_sync_timeout_ms}: is the leader ({self.worker.cluster().leader_url}) "
                "reachable from this worker?"
            ) from None

    async def before_producer(self, connector: str, generation: int) -> bool:
        """Steps 1 and 2 of the start-up, done once per task generation on this worker: the
        tasks of a generation that start together share one fencing request and one
        read (every task still reads again after its producer exists, step 5). A failed
        check fails every task that waited for it; the next start tries again."""
        checks = self.worker._start_checks
        while True:
            check = checks.get(connector)
            if check is not None and check.generation > generation:
                return False  # a newer generation was checked: this one is stale
            if check is None or check.generation < generation:
                check = checks[connector] = _StartCheck(generation)
                try:
                    check.ok = await self._fenced(connector) and await self._current(
                        connector, generation
                    )
                except BaseException as exc:
                    if checks.get(connector) is check:
                        del checks[connector]
                    check.error = exc if isinstance(exc, Exception) else None
                    raise
                finally:
                    check.done.set()
            else:
                await check.done.wait()
                if check.error is not None:
                    raise EosError(f"start-up check failed: {check.error}") from check.error
                if check.ok is None:
                    continue  # the task that checked was stopped: check again
            if not check.ok:
                return False  # the generation is stale, or its fencing round was cancelled
            await self.offsets_topic()
            return True

    async def offsets_topic(self) -> None:
        """Create the connector's own offsets topic if it has one ("already exists" is fine)."""
        if self.own_topic and self.own_topic not in self.worker._topics_ensured:
            s = self.worker.settings
            await ensure_topic(
                self.client,
                self.own_topic,
                partitions=s.offsets_partitions,
                replication_factor=s.offsets_replication_factor,
                compacted=True,
            )
            self.worker._topics_ensured.add(self.own_topic)

    async def after_producer(self, connector: str, generation: int) -> bool:
        return await self._current(connector, generation)
