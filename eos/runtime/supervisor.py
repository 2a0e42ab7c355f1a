"""The supervisor: starts and stops this worker's connectors and tasks, each in its own
cancel scope inside the supervisor's task group, and writes their statuses (the
coordinator's :class:`~eos.runtime.cluster.coordinator.worker_interfaces.Units`).

A task is built here (:meth:`Supervisor._make_runner`): its converters and transforms
(from the connector's config: task configs may lack ``transforms.*``), its offset
readers (one shared reader per offsets topic on this worker), its start gate
(:mod:`eos.runtime.task.start_gate`) and its producer's batch size. Stopping is
two-phase with one deadline (``task.shutdown.graceful.timeout.ms``): every task is
asked to stop and given until the deadline to commit what it polled; what is still
running then is cancelled. A FAILED connector or task stays until it is stopped,
restarted (by a user, or by the auto-restart duty:
:mod:`eos.runtime.cluster.coordinator.auto_restarts`) or its connector removed; the statuses
written here carry what the
:class:`~eos.runtime.cluster.coordinator.restart_backoff.RestartBook` says of
its automatic restarts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from eos.acls.denied import explain
from eos.acls.rules import output_topics as declared_topics
from eos.config.connector import ConnectorConfig
from eos.config.converters import connector_view
from eos.config.providers import ConfigProviders, task_configs_sink
from eos.config.worker import WorkerConfig
from eos.converters import make_converter, make_header_converter
from eos.errors import ConflictError
from eos.kafka.admin import ensure_topic
from eos.kafka.clients import ClientConfig
from eos.runtime.clock import Clock
from eos.runtime.cluster.coordinator.cluster_state import ClusterState
from eos.runtime.cluster.coordinator.leader_requests import LeaderRequests
from eos.runtime.cluster.coordinator.restart_backoff import RestartBook, Unit
from eos.runtime.connector_actor import ConnectorActor
from eos.runtime.observer import WorkerObserver
from eos.runtime.offset_mirror import OffsetMirror
from eos.runtime.plugins import connector_class
from eos.runtime.resources import SharedResources
from eos.runtime.task.at_least_once_task import AtLeastOnceTask
from eos.runtime.task.exactly_once_task import ExactlyOnceTask, boundary_policy
from eos.runtime.task.source_task import SourceTaskRunner, TaskDeps, TaskSpec
from eos.runtime.task.start_gate import StartChecks
from eos.runtime.topic_tracker import TopicTracker
from eos.state import State
from eos.storage.offset_log import CombinedOffsetReader, OffsetLog
from eos.storage.status_log import StatusLog
from eos.transforms import TransformChain

log = structlog.get_logger(__name__)


@dataclass
class _ConnectorUnit:
    props: Mapping[str, str]
    actor: ConnectorActor | None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    error: BaseException | None = None
    """Why it could not even start (``actor`` None)."""

    @property
    def failure(self) -> tuple[BaseException | None, str | None] | None:
        """What failed it and its trace, if it failed."""
        if self.actor is None:
            return self.error, str(self.error)
        return (self.actor.failure, self.actor.trace) if self.actor.failed else None


@dataclass
class _TaskUnit:
    spec: TaskSpec
    runner: SourceTaskRunner
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)
    """Set when the task has stopped."""


class Supervisor:
    def __init__(
        self,
        settings: WorkerConfig,
        state: ClusterState,
        *,
        status_log: StatusLog,
        mirror: OffsetMirror,
        leader: LeaderRequests,
        topics: TopicTracker,
        resources: SharedResources,
        providers: ConfigProviders,
        observer: WorkerObserver,
        clock: Clock,
        book: RestartBook,
        rejoin: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self.settings = settings
        self.state = state
        self.status_log = status_log
        self.mirror = mirror
        self.leader = leader
        self.topics = topics
        self.resources = resources
        self.providers = providers
        self._rejoin = rejoin
        """Asks for a rebalance (after a task was fenced: is it still ours?)."""
        self.observer = observer
        self.clock = clock
        self.book = book
        self.log = log.bind(worker=settings.worker_id, group=settings.group_id)
        self.start_checks = StartChecks(settings, state, leader)
        self._startup_slots = anyio.CapacityLimiter(settings.task_startup_concurrency)
        self._connectors: dict[str, _ConnectorUnit] = {}
        self._tasks: dict[tuple[str, int], _TaskUnit] = {}
        self._start_failures: dict[tuple[str, int], BaseException] = {}
        """Tasks that could not even be built, and why."""
        self.connector_states: dict[str, State] = {}
        """The state this worker last wrote for each connector it reported on (the
        ``eos_connector_status`` metric reads it, with what this worker still owns)."""
        self._offset_logs: dict[tuple[str, str], OffsetLog] = {}
        self._tg: TaskGroup | None = None
        self._closing = False

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run connectors and tasks until cancelled (after :meth:`shutdown`); then close
        the offset readers."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                task_status.started()
                await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT):
                await self._close_offset_logs()

    async def shutdown(self) -> None:
        """Start nothing more; stop every task (within the graceful deadline), then
        every connector."""
        self._closing = True
        await self.stop_tasks(list(self._tasks))
        for name in list(self._connectors):
            await self.stop_connector(name)

    async def ping(self) -> None:
        """Return once the supervisor's task group has run a no-op (for the health
        monitor: the group that runs connectors and tasks is alive)."""
        assert self._tg is not None
        answered = anyio.Event()
        self._tg.start_soon(_set, answered)
        await answered.wait()

    def task_count(self) -> int:
        return len(self._tasks)

    async def _close_offset_logs(self) -> None:
        logs, self._offset_logs = list(self._offset_logs.values()), {}
        for offsets in logs:
            await offsets.close()

    # ------------------------------------------------------- Units (connectors)

    def running_connectors(self) -> Mapping[str, Mapping[str, str]]:
        return {name: unit.props for name, unit in self._connectors.items()}

    def start_connector(self, name: str, props: Mapping[str, str]) -> None:
        assert self._tg is not None
        if self._closing:  # shutting down: queued coordinator calls start nothing
            return
        try:
            resolved = self.providers.resolve(props)  # config providers: ${file:…} etc.
            config = ConnectorConfig.from_properties(resolved, self.settings)
            connector = connector_class(config.connector_class)()
        except Exception as exc:
            self.log.error("connector cannot start", connector=name, error=str(exc))
            self._connectors[name] = _ConnectorUnit(props, None, error=exc)
            self._tg.start_soon(self._connector_status, name, State.FAILED, str(exc))
            return
        actor = ConnectorActor(
            name,
            connector,
            connector_view(resolved, self.settings.raw),
            config.tasks_max,
            on_task_configs=task_configs_sink(props, self.leader.submit_task_configs),
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
        if task is None:
            return (name, task_id) in self._start_failures
        return task.runner.state is State.FAILED

    async def report(self, name: str, task_id: int | None, state: State) -> None:
        if task_id is None:
            await self._connector_status(name, state, None)
        else:
            await self._task_status(TaskSpec(name, task_id, -1, {}), state, None)

    def failures(self) -> dict[Unit, BaseException | None]:
        """Every connector and task here that has FAILED → what failed it."""
        found: dict[Unit, BaseException | None] = {
            (name, None): failure[0]
            for name, unit in self._connectors.items()
            if (failure := unit.failure) is not None
        }
        for key, task in self._tasks.items():
            if task.runner.state is State.FAILED and task.runner.failure is not None:
                found[key] = task.runner.failure[0]
        for key, error in self._start_failures.items():
            found[key] = error
        return found

    async def refresh_status(self, name: str, task_id: int | None) -> None:
        """Write the current status of a connector or task here again (with what the
        restart book now says of it)."""
        if task_id is None:
            unit = self._connectors.get(name)
            if unit is not None:
                failure = unit.failure
                state = State.RUNNING if failure is None else State.FAILED
                await self._connector_status(name, state, None if failure is None else failure[1])
            return
        key = (name, task_id)
        if key in self._start_failures:
            spec = TaskSpec(name, task_id, -1, {})
            await self._task_status(spec, State.FAILED, str(self._start_failures[key]))
        elif (task := self._tasks.get(key)) is not None:
            runner = task.runner
            trace = None if runner.failure is None else runner.failure[1]
            if runner.state is not State.UNASSIGNED:  # starting: it reports RUNNING itself
                await self._task_status(task.spec, runner.state, trace)

    # ------------------------------------------------------------ Units (tasks)

    def running_tasks(self) -> Mapping[tuple[str, int], int]:
        return {key: unit.spec.generation for key, unit in self._tasks.items()}

    def task_progress(self, name: str, task_id: int) -> dict[str, float] | None:
        """The connector-defined figures of task ``name``-``task_id`` if it runs here."""
        unit = self._tasks.get((name, task_id))
        return None if unit is None else dict(unit.runner.figures)

    def start_task(
        self, name: str, task_id: int, generation: int, config: Mapping[str, str]
    ) -> None:
        assert self._tg is not None
        if self._closing:
            return
        spec = TaskSpec(name, task_id, generation, dict(config))
        self._start_failures.pop((name, task_id), None)
        try:
            props = self.state.config.connectors.get(name)
            if props is None:
                raise ConflictError(f"connector {name} has no config")
            runner = self._make_runner(spec, props)
        except Exception as exc:
            self.log.error("task cannot start", connector=name, task=task_id, error=str(exc))
            self._start_failures[(name, task_id)] = exc
            self._tg.start_soon(self._task_status, spec, State.FAILED, str(exc))
            return
        unit = _TaskUnit(spec, runner)
        self._tasks[(name, task_id)] = unit
        self.topics.track((name, task_id), runner.forget_topics)
        self.log.info("task starting", connector=name, task=task_id, generation=generation)
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
        offsets_client = config.output_cluster_config(s)
        own = self._offset_log(offsets_client, own_topic, read_timeout) if own_topic else None
        global_ = self._offset_log(s.client_config, s.offsets_topic, read_timeout)
        transforms = TransformChain.from_config(props) if config.transforms else None
        deps = TaskDeps(
            client_config=client,
            group_id=s.group_id,
            offsets_topic=own_topic or s.offsets_topic,
            offset_reader=CombinedOffsetReader(spec.connector, own, global_),
            key_converter=make_converter(config.key_converter),
            value_converter=make_converter(config.value_converter),
            header_converter=make_header_converter(
                config.header_converter, config.header_converter.props
            ),
            status=partial(self._task_status, spec),
            resources=self.resources,
            graceful_timeout=s.graceful_shutdown_ms / 1000,
            flush_interval_ms=s.offset_flush_interval_ms,
            transaction_timeout_ms=config.producer_transaction_timeout_ms(s),
            producer_client=config.task_producer_client(s),
            boundary=boundary_policy(
                config.transaction_boundary, config.boundary_interval_ms(s), self.clock
            ),
            gate=self.start_checks.gate(offsets_client, own_topic),
            offsets_committed=self.mirror.submit if own_topic else None,
            topic_discovered=partial(self.topics.discovered, spec) if s.topic_tracking else None,
            observer=self.observer.task(spec.connector, spec.task_id),
            clock=self.clock,
            startup_slots=self._startup_slots,
            batch_size=producer_batch_size(len(self._tasks) + 1),
            explain=partial(explain, s, {spec.connector: props}, declared_topics),
            transforms=transforms,
            errors=config.errors,
            converter_names=(
                str(config.key_converter),
                str(config.value_converter),
                str(config.header_converter),
            ),
            create_topic=partial(_create_topic, offsets_client),
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
            # restarted or its connector removed, as in Kafka Connect: the auto-restart
            # duty finds it here (failures()) and restarts it through the same path as a
            # user's restart, or leaves it FAILED and says why in its status.
            if unit.runner.state is not State.FAILED:
                self._forget(unit)
            if unit.runner.fenced and not self._closing:
                # A zombie finds out it lost the task; a task fenced by an instance of an
                # older generation (a worker behind on the config topic) is started again
                # by the reconcile after the rebalance, still assigned here.
                self._rejoin(f"task {unit.spec.connector}-{unit.spec.task_id} was fenced")

    def _forget(self, unit: _TaskUnit) -> None:
        key = (unit.spec.connector, unit.spec.task_id)
        if self._tasks.get(key) is unit:
            del self._tasks[key]
            self.topics.untrack(key)
            unit.runner.deps.observer.close()

    async def stop_tasks(self, tasks: Sequence[tuple[str, int]]) -> None:
        """Stop tasks in parallel: ask, wait until the graceful deadline, then cancel."""
        for key in tasks:
            self._start_failures.pop(key, None)
        units = [self._tasks[key] for key in tasks if key in self._tasks]
        if not units:
            return
        for unit in units:
            self.log.info("task stopping", connector=unit.spec.connector, task=unit.spec.task_id)
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
                spec.connector,
                spec.task_id,
                state,
                trace,
                generation=self.state.generation,
                auto_restart=self.book.status((spec.connector, spec.task_id)),
            )
        except Exception as exc:
            self.log.warning("status write failed", connector=spec.connector, error=repr(exc))

    async def _connector_status(self, name: str, state: State, trace: str | None) -> None:
        try:
            await self.status_log.put_connector(
                name,
                state,
                trace,
                generation=self.state.generation,
                auto_restart=self.book.status((name, None)),
            )
            self.connector_states[name] = state
        except Exception as exc:
            self.log.warning("status write failed", connector=name, error=repr(exc))

    @staticmethod
    async def _run_in_scope(
        scope: anyio.CancelScope, target: Callable[[], Awaitable[None]]
    ) -> None:
        with scope:
            await target()


async def _create_topic(client: ClientConfig, name: str, replication_factor: int) -> None:
    await ensure_topic(client, name, partitions=1, replication_factor=replication_factor)


async def _set(event: anyio.Event) -> None:
    event.set()


CLOSE_TIMEOUT = 10.0
"""Seconds the offset readers get to close when the supervisor ends (not a setting:
a bound on clean-up)."""


PRODUCER_MEMORY_BUDGET = 64 * 2**20
"""Bytes of producer batches a worker aims at across its tasks (docs/sizing.md)."""


def producer_batch_size(tasks: int) -> int:
    """The default ``batch.size`` of a task producer on a worker running ``tasks`` tasks:
    512 KiB while the worker's tasks share :data:`PRODUCER_MEMORY_BUDGET` (large batches
    cost less CPU per record, and a poll that fits one batch a partition is sent in one
    Produce request: docs/sizing.md), then smaller, down to Kafka's 16 KiB."""
    return max(16384, min(524288, PRODUCER_MEMORY_BUDGET // max(1, tasks)))
