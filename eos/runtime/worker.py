"""The worker: the root of a worker process's actors.

It creates the internal topics, owns the Kafka clients and stores (config,
status, global offsets), the offset mirror and the coordinator, and runs the
connectors and tasks the coordinator assigns to it, each in its own cancel
scope inside the worker's task group.

Shutdown is two-phase with one deadline (``task.shutdown.graceful.timeout.ms``):
every task is asked to stop and given until the deadline to commit what it
polled; what is still running then is cancelled.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from functools import partial

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from eos.api import SourceConnector
from eos.config.connector import ConnectorConfig, validate_connector
from eos.config.worker import WorkerConfig
from eos.errors import ConflictError, PluginError, ValidationError
from eos.kafka.admin import ensure_topic
from eos.kafka.clients import ClientConfig
from eos.runtime.clock import Clock, SystemClock
from eos.runtime.connector_actor import ConnectorActor
from eos.runtime.converters import make_converter
from eos.runtime.coordinator import Coordinator
from eos.runtime.exactly_once_task import ExactlyOnceTask
from eos.runtime.observer import NullObserver, WorkerObserver
from eos.runtime.offset_mirror import OffsetMirror
from eos.runtime.plugins import connector_class
from eos.runtime.resources import SharedResources
from eos.runtime.source_task import AtLeastOnceTask, SourceTaskRunner, TaskDeps, TaskSpec
from eos.storage.config_log import ConfigLog
from eos.storage.offset_log import CombinedOffsetReader, OffsetLog
from eos.storage.status_log import StatusLog, StatusState

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
    stores: list[OffsetLog]
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)
    """Set when the task has stopped and its offset stores are closed."""


class Worker:
    def __init__(
        self,
        settings: WorkerConfig,
        *,
        observer: WorkerObserver | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings
        self.observer = observer or NullObserver()
        self.clock = clock or SystemClock()
        self.log = log.bind(worker=settings.worker_id, group=settings.group_id)
        client = settings.client_config
        sync_timeout = settings.worker_sync_timeout_ms / 1000
        self.config_log = ConfigLog(
            client, settings.config_topic, settings.group_id, read_timeout=sync_timeout
        )
        self.status_log = StatusLog(
            client, settings.status_topic, settings.worker_id, read_timeout=sync_timeout
        )
        self.mirror = OffsetMirror(client, settings.offsets_topic, observer=self.observer)
        self.coordinator = Coordinator(settings, self.config_log, self, self.observer)
        threads = settings.thread_pool_size
        plugin_settings = {k: v for k, v in settings.raw.items() if k.startswith("spark.")}
        self.resources = SharedResources(plugin_settings, threads, self.observer)
        self._connectors: dict[str, _ConnectorUnit] = {}
        self._tasks: dict[tuple[str, int], _TaskUnit] = {}
        self._tg: TaskGroup | None = None
        self._stop = anyio.Event()
        self.stopped = anyio.Event()
        self._status_lock = anyio.Lock()

    # ------------------------------------------------------------- lifecycle

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        try:
            await self._run(task_status)
        finally:
            self.coordinator.close()

    async def _run(self, task_status: TaskStatus[None]) -> None:
        await self._create_internal_topics()
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(self.config_log)
            await stack.enter_async_context(self.status_log)
            stack.push_async_callback(self.resources.aclose)
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await tg.start(self.mirror.run)
                await tg.start(self.coordinator.run)
                self.log.info("worker started", rest_url=self.settings.rest_url)
                task_status.started()
                await self._stop.wait()
                await self._shutdown()
                tg.cancel_scope.cancel()
        self.log.info("worker stopped")
        self.stopped.set()

    def stop(self) -> None:
        """Begin a graceful shutdown; :meth:`run` returns when it is done."""
        self._stop.set()

    async def _shutdown(self) -> None:
        self.coordinator.close()
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

    # ------------------------------------------------------------ requests

    async def put_connector(self, name: str, props: Mapping[str, str]) -> bool:
        """Validate (SPEC §12 pre-flight included), then create or update; True if new."""
        props = {**props, "name": name}
        self.validate_connector(props)
        return await self.coordinator.put_connector(name, props)

    def validate_connector(self, props: Mapping[str, str]) -> dict[str, list[str]]:
        """Problems per setting; raises :class:`ValidationError` if there are any."""
        try:
            connector: SourceConnector | None = connector_class(props.get("connector.class", ""))()
        except PluginError as exc:
            raise ValidationError({"connector.class": [str(exc)]}) from exc
        problems = validate_connector(props, self.settings, connector)
        if any(problems.values()):
            raise ValidationError(problems)
        return problems

    # ------------------------------------------------------- Units (connectors)

    def running_connectors(self) -> Mapping[str, Mapping[str, str]]:
        return {name: unit.props for name, unit in self._connectors.items()}

    def start_connector(self, name: str, props: Mapping[str, str]) -> None:
        assert self._tg is not None
        if self._stop.is_set():  # shutting down: queued coordinator calls start nothing
            return
        try:
            config = ConnectorConfig.from_properties(props, self.settings)
            connector = connector_class(config.connector_class)()
        except Exception as exc:
            self.log.error("connector cannot start", connector=name, error=str(exc))
            self._connectors[name] = _ConnectorUnit(props, None)
            self._tg.start_soon(self._connector_status, name, "FAILED", str(exc))
            return
        actor = ConnectorActor(
            name,
            connector,
            props,
            config.tasks_max,
            on_task_configs=self.coordinator.task_configs_generated,
            status=partial(self._connector_status, name),
        )
        unit = _ConnectorUnit(props, actor)
        self._connectors[name] = unit
        self._tg.start_soon(self._run_in_scope, unit.scope, actor.run)

    async def stop_connector(self, name: str) -> None:
        unit = self._connectors.pop(name, None)
        if unit is None:
            return
        await self.stop_tasks([key for key in self._tasks if key[0] == name])
        if unit.actor is not None:
            unit.scope.cancel()
            with anyio.move_on_after(self.settings.graceful_shutdown_ms / 1000 + 5):
                await unit.actor.stopped.wait()

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
        props = self._connectors[name].props if name in self._connectors else None
        try:
            if props is None:
                raise ConflictError(f"connector {name} is not running on this worker")
            runner, stores = self._make_runner(spec, props)
        except Exception as exc:
            self.log.error("task cannot start", connector=name, task=task_id, error=str(exc))
            self._tg.start_soon(self._task_status, spec, "FAILED", str(exc))
            return
        unit = _TaskUnit(spec, runner, stores)
        self._tasks[(name, task_id)] = unit
        self._tg.start_soon(self._run_task, unit)

    def _make_runner(
        self, spec: TaskSpec, props: Mapping[str, str]
    ) -> tuple[SourceTaskRunner, list[OffsetLog]]:
        s = self.settings
        config = ConnectorConfig.from_properties(props, s)
        task = connector_class(config.connector_class)().task_class()()
        client = config.client_config(s)
        own_topic = config.offsets_topic_for(s)
        read_timeout = (config.producer_transaction_timeout_ms(s) + s.worker_sync_timeout_ms) / 1000
        offsets_client = config.offsets_client_config(s)
        own = OffsetLog(offsets_client, own_topic, read_timeout=read_timeout) if own_topic else None
        global_ = OffsetLog(s.client_config, s.offsets_topic, read_timeout=read_timeout)
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
            boundary=config.transaction_boundary,
            boundary_interval_ms=config.boundary_interval_ms(s),
            gate=_StartGate(self, offsets_client, own_topic),
            offsets_committed=self.mirror.submit if own_topic else None,
            observer=self.observer.task(spec.connector, spec.task_id),
            clock=self.clock,
        )
        runner_class = ExactlyOnceTask if s.exactly_once_enabled else AtLeastOnceTask
        return runner_class(spec, deps, task), [global_, *([own] if own else [])]

    async def _run_task(self, unit: _TaskUnit) -> None:
        try:
            with unit.scope:
                for store in unit.stores:
                    await store.start()
                await unit.runner.run()
        finally:
            with anyio.CancelScope(shield=True):
                for store in unit.stores:
                    await store.close()
            unit.done.set()
            # A FAILED task stays assigned (and visible in metrics) until it is stopped,
            # restarted or its connector removed, as in Kafka Connect: never restarted
            # behind the user's back.
            if unit.runner.state != "FAILED":
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

    async def task_failed(self, name: str, task_id: int, generation: int, trace: str) -> None:
        await self._task_status(TaskSpec(name, task_id, generation, {}), "FAILED", trace)

    # ----------------------------------------------------------------- status

    async def _task_status(self, spec: TaskSpec, state: str, trace: str | None) -> None:
        try:
            await self.status_log.put_task(
                spec.connector, spec.task_id, StatusState(state), trace, generation=spec.generation
            )
        except Exception as exc:
            self.log.warning("status write failed", connector=spec.connector, error=repr(exc))

    async def _connector_status(self, name: str, state: str, trace: str | None) -> None:
        try:
            await self.status_log.put_connector(name, StatusState(state), trace)
        except Exception as exc:
            self.log.warning("status write failed", connector=name, error=repr(exc))

    async def read_status(self) -> StatusLog:
        """The status topic read to its end."""
        async with self._status_lock:
            await self.status_log.refresh()
        return self.status_log

    @staticmethod
    async def _run_in_scope(
        scope: anyio.CancelScope, target: Callable[[], Awaitable[None]]
    ) -> None:
        with scope:
            await target()


class _StartGate:
    """SPEC §10's start-up checks for an exactly-once task, against the coordinator."""

    def __init__(self, worker: Worker, client: ClientConfig, own_topic: str | None) -> None:
        self.worker = worker
        self.client = client
        self.own_topic = own_topic

    async def _current(self, connector: str, generation: int) -> bool:
        snap = await self.worker.coordinator.snapshot()
        return snap.generations.get(connector) == generation and not snap.needs_fencing(connector)

    async def before_producer(self, connector: str, generation: int) -> bool:
        await self.worker.coordinator.fence(connector)
        if not await self._current(connector, generation):
            return False
        if self.own_topic:
            s = self.worker.settings
            await ensure_topic(
                self.client,
                self.own_topic,
                partitions=s.offsets_partitions,
                replication_factor=s.offsets_replication_factor,
                compacted=True,
            )
        return True

    async def after_producer(self, connector: str, generation: int) -> bool:
        return await self._current(connector, generation)
