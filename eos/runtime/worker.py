"""The worker: the root of a worker process's actors, and the one interface the
REST API and the service talk to.

It wires everything at start-up, each collaborator given what it needs at
construction: the Kafka clients and stores (config, status, global offsets), the
offset mirror, the cluster state and the coordinator's duties
(:mod:`eos.runtime.cluster.coordinator`), the group membership, the supervisor that runs
this worker's connectors and tasks (:mod:`eos.runtime.supervisor`) and the
active-topic tracker (:mod:`eos.runtime.topic_tracker`). Then it creates the
internal topics and runs them all in its task group. Its health monitor
(:mod:`eos.runtime.health`) follows the stages of start-up and asks the supervisor
and the coordinator's mailbox every second whether they answer.

Shutdown is two-phase with one deadline (``task.shutdown.graceful.timeout.ms``):
the supervisor asks every task to stop and gives it until the deadline to commit
what it polled; what is still running then is cancelled. Only then does the worker
leave its group (so the others take its work over at once, after its final
commits). Whatever start-up opened is closed again, also when start-up fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack

import anyio
import structlog
from anyio.abc import TaskStatus

from eos.acls.denied import check_worker_access
from eos.acls.rules import output_topics as declared_topics
from eos.config.connector import writes_elsewhere
from eos.config.providers import ConfigProviders
from eos.config.worker import WorkerConfig
from eos.errors import (
    ConfigError,
    EosError,
    NotFoundError,
    NotLeaderError,
    PluginError,
    RetriableError,
    ValidationError,
)
from eos.kafka.admin import ensure_topic, kafka_cluster_id, transaction_max_timeout_ms
from eos.kafka.group import GroupClient
from eos.runtime.capacity import capacity_warning
from eos.runtime.clock import Clock, SystemClock
from eos.runtime.cluster.assignors.base import AssignorSettings
from eos.runtime.cluster.assignors.loader import make_assignor
from eos.runtime.cluster.coordinator import ClusterState, ClusterView, Coordinator
from eos.runtime.cluster.coordinator.auto_restarts import AutoRestarts
from eos.runtime.cluster.coordinator.config_writes import ConfigWrites
from eos.runtime.cluster.coordinator.duty_context import Shared
from eos.runtime.cluster.coordinator.fencing import FencingRounds
from eos.runtime.cluster.coordinator.group_listener import GroupListener
from eos.runtime.cluster.coordinator.inbox import Inbox
from eos.runtime.cluster.coordinator.leader_requests import LeaderRequests
from eos.runtime.cluster.coordinator.offset_changes import OffsetChanges, Offsets, read_offsets
from eos.runtime.cluster.coordinator.reconcile import Reconciler
from eos.runtime.cluster.coordinator.restart_backoff import RestartBook
from eos.runtime.cluster.coordinator.session_keys import SessionKeys
from eos.runtime.cluster.coordinator.timers import Timers
from eos.runtime.cluster.coordinator.watcher import ConfigWatcher
from eos.runtime.cluster.group_metadata import assignor_of
from eos.runtime.cluster.leader_client import LeaderClient
from eos.runtime.cluster.membership import Membership, MembershipSettings, RejoinSignal
from eos.runtime.cluster.signatures import Rejection, verify
from eos.runtime.declared_connectors import DeclaredConnectors
from eos.runtime.health import HealthMonitor
from eos.runtime.lso_monitor import LsoMonitor, output_topics
from eos.runtime.observer import NullObserver, WorkerObserver
from eos.runtime.offset_mirror import OffsetMirror
from eos.runtime.plugins import connector_class
from eos.runtime.resources import SharedResources
from eos.runtime.supervisor import Supervisor
from eos.runtime.supervisor import producer_batch_size as producer_batch_size
from eos.runtime.topic_tracker import TopicTracker
from eos.runtime.validation import validate_connector
from eos.state import State
from eos.storage.config_log import ConfigLog, ConfigSnapshot, RestartRequest, TargetState
from eos.storage.status_log import StatusLog

log = structlog.get_logger(__name__)


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
        self.state = ClusterState(self.config_log, s.rest_url)
        self.link = LeaderClient(
            self.state.session_key,
            timeout=sync_timeout,
            clock=self.clock,
            verify=s.rest_tls.client_context(),
        )
        assignor_settings = AssignorSettings(
            s.scheduled_rebalance_max_delay_ms, s.failover_settle_ms, s.raw
        )
        if not s.assignor_names:
            raise ConfigError("assignor", s.assignor, "name an assignor (e.g. sticky)")
        self.assignors = [make_assignor(name, assignor_settings) for name in s.assignor_names]
        """This worker's assignors, in its order of preference (``assignor=a,b``)."""
        self.resources = SharedResources(plugin_settings or {}, s.thread_pool_size, self.observer)
        self.topics = TopicTracker(s, self.status_log, self.config_log, self.clock)
        self.broker_max_ms: int | None = None
        """The brokers' ``transaction.max.timeout.ms``, read at start with exactly-once
        enabled (None: not read, or not allowed): connectors above it are refused."""
        self.providers = ConfigProviders.from_worker(s.raw)
        """Resolves ``${file:…}``-style variables where a connector or task starts."""
        self.kafka_cluster_id: str | None = None
        self.health = HealthMonitor(self.clock, detail=lambda: self.state.error)
        """What ``GET /health`` answers (:mod:`eos.runtime.health`)."""
        self._stop = anyio.Event()
        self.stopped = anyio.Event()
        self._wire_cluster()
        self.lso = LsoMonitor(
            client,
            self.observer,
            self._watched_topics,
            interval=s.lso_check_interval_ms / 1000,
            clock=self.clock,
        )
        self.observer.worker_info(s.group_id, s.worker_id, s.exactly_once)
        self.observer.connector_states(self._reported_connector_states)
        self.declared = DeclaredConnectors(self, s, self.observer) if s.connectors_dir else None
        """The leader's reconcile of ``connectors.dir`` (None without one)."""

    def _reported_connector_states(self) -> dict[str, State]:
        """The state this worker last reported for each connector it owns (read from the
        metrics exporter's thread: copies, no awaits)."""
        owned = self.state.assigned.connectors
        configs = self.config_log.snapshot.connectors
        return {
            name: state
            for name, state in list(self.supervisor.connector_states.items())
            if name in owned and name in configs
        }

    def _watched_topics(self) -> set[str]:
        """The output topics the LSO monitor watches: those of the connectors running here
        that write to the workers' cluster (another cluster's are not reached)."""
        configs = self.config_log.snapshot.connectors
        here = {
            name
            for name, _ in self.supervisor.running_tasks()
            if not writes_elsewhere(configs.get(name, {}), self.settings)
        }
        return output_topics(here, configs, self.status_log, declared_topics)

    def _wire_cluster(self) -> None:
        """The coordinator's duties, the supervisor and the membership: the shared pieces
        (cluster state, mailbox, rejoin signal, timers, config watcher) first, so that
        every collaborator is given at construction."""
        s, state = self.settings, self.state
        rejoin = RejoinSignal(s.group_id)
        self.inbox = Inbox(state)
        shared = Shared(
            s, state, self.inbox, rejoin, Timers(), self.observer, self.clock, self.providers
        )
        watcher = ConfigWatcher(
            self.config_log, self.observer, interval=s.heartbeat_interval_ms / 1000
        )
        self.writes = ConfigWrites(shared, watcher)
        self.rounds = FencingRounds(shared, self.writes)
        self.offset_changes = OffsetChanges(shared, self.writes, self.rounds)
        book = RestartBook()  # the supervisor reports what the auto-restart duty decides
        self.supervisor = Supervisor(
            s,
            state,
            status_log=self.status_log,
            mirror=self.mirror,
            leader=LeaderRequests(state, self.link, self.writes, self.rounds),
            topics=self.topics,
            resources=self.resources,
            providers=self.providers,
            observer=self.observer,
            clock=self.clock,
            book=book,
            rejoin=rejoin.request_rejoin,
        )
        reconciler = Reconciler(state, self.supervisor)
        listener = GroupListener(
            shared,
            assignors=self.assignors,
            units=self.supervisor,
            reconciler=reconciler,
            writes=self.writes,
            rounds=self.rounds,
            keys=SessionKeys(shared, self.writes),
        )
        self.coordinator = Coordinator(
            shared,
            watcher=watcher,
            reconciler=reconciler,
            auto_restarts=AutoRestarts(shared, self.supervisor, reconciler, book),
        )
        self.group = GroupClient(
            s.client_config,
            s.group_id,
            client_id=f"eos-group-{s.worker_id}",
            request_timeout=(s.rebalance_timeout_ms + 5000) / 1000,
            short_timeout=s.session_timeout_ms / 1000,
        )
        self.membership = Membership(
            self.group,
            listener,
            MembershipSettings(
                s.session_timeout_ms,
                s.heartbeat_interval_ms,
                s.rebalance_timeout_ms,
                s.retry_backoff_ms,
            ),
            group_id=s.group_id,
            clock=self.clock,
            rejoin=rejoin,
        )

    # ------------------------------------------------------------- lifecycle

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run until :meth:`stop`; ready (``task_status``) once it has joined its group."""
        try:
            async with anyio.create_task_group() as monitor:
                await monitor.start(self.health.run)
                await self._run(task_status)
                monitor.cancel_scope.cancel()
        finally:
            self.coordinator.close()

    async def _run(self, task_status: TaskStatus[None]) -> None:
        group = self.settings.group_id
        self.health.enter("creating its internal topics")
        await self._create_internal_topics()
        await check_worker_access(self.settings)  # every missing ACL named (docs/security.md)
        if self.settings.exactly_once_enabled:
            self.broker_max_ms = await transaction_max_timeout_ms(self.settings.client_config)
        self.health.enter("reading its config and status topics")
        stack = AsyncExitStack()
        try:
            await stack.enter_async_context(self.config_log)
            await stack.enter_async_context(self.status_log)
            stack.push_async_callback(self.group.close)
            await self.group.start()
            stack.push_async_callback(self.resources.aclose)
            async with anyio.create_task_group() as tg:
                await tg.start(self.mirror.run)
                await tg.start(self.supervisor.run)
                self.health.watch("the supervisor", self.supervisor.ping)
                await tg.start(self.topics.run)
                tg.start_soon(self.lso.run)
                await tg.start(self.coordinator.run)
                if self.declared is not None:
                    await tg.start(self.declared.run)
                self.health.watch("the coordinator", self.inbox.ping, self.inbox.busy_with)
                membership = anyio.CancelScope()
                tg.start_soon(self._membership, membership)
                self.health.enter(f"joining group {group}")
                await self._until_joined()
                if not self._stop.is_set():
                    self.health.started(f"running in group {group}")
                self.log.info("worker started", rest_url=self.settings.rest_url)
                task_status.started()
                await self._stop.wait()
                self.topics.close()
                await self.supervisor.shutdown()
                membership.cancel()  # leaves the group (shielded LeaveGroup)
                self.coordinator.close()
                tg.cancel_scope.cancel()
        finally:
            # Also when start-up failed or was cancelled: every client opened is closed.
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT):
                await stack.aclose()
        self.log.info("worker stopped")
        self.stopped.set()

    async def _membership(self, scope: anyio.CancelScope) -> None:
        with scope:
            await self.membership.run()

    async def _until_joined(self) -> None:
        """Until the first assignment arrived — or a stop was asked for (a worker that
        cannot join must still stop on SIGTERM)."""

        async def joined() -> None:
            with anyio.move_on_after(self.settings.session_timeout_ms / 1000) as waiting:
                await self.state.joined_once.wait()
            if waiting.cancelled_caught:
                self.log.warning("still joining the group", error=self.state.error)
                await self.state.joined_once.wait()
            race.cancel_scope.cancel()

        async def stopped() -> None:
            await self._stop.wait()
            race.cancel_scope.cancel()

        async with anyio.create_task_group() as race:
            race.start_soon(joined)
            race.start_soon(stopped)

    @property
    def stopping(self) -> bool:
        """:meth:`stop` was called."""
        return self._stop.is_set()

    def stop(self) -> None:
        """Begin a graceful shutdown; :meth:`run` returns when it is done."""
        self.health.stopping()
        self._stop.set()

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
        return await self.state.snapshot()

    def declared_connectors(self) -> dict[str, object] | None:
        """The last reconcile of ``connectors.dir`` per file (None without one)."""
        return self.declared.view() if self.declared is not None else None

    def cluster(self) -> ClusterView:
        """The cluster as this worker sees it."""
        assignor = assignor_of(self.state.protocol) or self.assignors[0].name  # the group's
        return self.state.view(assignor, rebalancing=not self.membership.stable)

    async def settled(self) -> ClusterView:
        """The cluster once no rebalance is under way, waiting up to
        ``session.timeout.ms`` for the one under way to end (a write that meets a
        rebalance the cluster started a moment ago waits instead of failing)."""
        with anyio.move_on_after(self.settings.session_timeout_ms / 1000):
            await self.membership.until_stable()
        return self.cluster()

    def require_leader(self) -> None:
        """Raise :class:`~eos.errors.NotLeaderError` (naming the leader) unless this
        worker leads the cluster: only the leader serves writes."""
        self.state.require_leader()

    async def put_connector(
        self,
        name: str,
        props: Mapping[str, str],
        initial_state: TargetState = TargetState.STARTED,
    ) -> bool:
        """Validate, then create or update (leader only); True if new. A new connector
        starts in ``initial_state``."""
        props = {**props, "name": name}
        self.state.require_leader()
        self.validate_connector(props)
        self._warn_capacity(name, props)
        return await self.writes.put_connector(name, props, initial_state)

    def _warn_capacity(self, name: str, props: Mapping[str, str]) -> None:
        try:
            tasks_max = int(props.get("tasks.max", "1"))
        except ValueError:
            return  # validation named it already
        members = max(1, len(self.cluster().members))
        warning = capacity_warning(name, tasks_max, members, self.supervisor.task_count())
        if warning is not None:
            self.log.warning("connector may not fit on the workers", detail=warning)

    async def set_target_state(self, name: str, state: TargetState) -> None:
        """Pause (PAUSED), stop (STOPPED) or resume (STARTED) a connector (leader only)."""
        await self.writes.set_target_state(name, state)

    async def restart(self, name: str, request: RestartRequest) -> None:
        """Have the connector and/or its tasks restarted where they run (leader only)."""
        await self.writes.restart(name, request)

    async def offsets(self, name: str) -> Offsets:
        """The connector's committed offsets, as its tasks would read them."""
        snap = await self.snapshot()
        if name not in snap.connectors:
            raise NotFoundError(f"Connector {name} not found")
        return await read_offsets(
            self.settings, name, self.providers.resolve(snap.connectors[name])
        )

    async def change_offsets(self, name: str, changes: Offsets | None) -> None:
        """Alter (``changes``: partition → new offset, None to reset it) or, with None,
        reset all of a STOPPED connector's offsets (leader only: the coordinator's
        offset-change duty)."""
        await self.offset_changes.change(name, changes)

    async def delete_connector(self, name: str) -> None:
        """Delete the connector (leader only); its active topics are forgotten too."""
        await self.writes.delete_connector(name)
        try:
            await self.reset_active_topics(name)
        except EosError as exc:
            self.log.warning("active topics not reset", connector=name, error=str(exc))

    async def active_topics(self, name: str) -> list[str]:
        """The topics the connector's tasks have written to since the last reset
        (KIP-558; empty for a connector that never wrote, or does not exist)."""
        return await self.topics.active_topics(name)

    async def reset_active_topics(self, name: str) -> None:
        """Forget the connector's active topics: its tasks report them again as they
        write (those of this worker at once, the others' within
        ``topic.tracking.refresh.interval.ms``)."""
        await self.topics.reset(name)

    async def apply_connector(self, name: str, props: Mapping[str, str]) -> bool:
        """A connector config given to this worker at start: applied by the leader,
        wherever it is (retried while the group settles). True if new."""
        props = {**props, "name": name}
        backoff = self.settings.retry_backoff_ms / 1000
        with anyio.fail_after(self.settings.worker_sync_timeout_ms / 1000):
            while not self._stop.is_set():
                try:
                    view = self.cluster()
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
        return validate_connector(props, self.settings, connector, self.broker_max_ms)

    async def fence(self, name: str) -> None:
        """Internal (a worker about to start tasks of ``name``): a fencing round."""
        await self.rounds.fence(name)

    async def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Internal (a connector running on some worker): its task configs."""
        await self.writes.put_task_configs(name, configs)

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

    async def read_status(self) -> StatusLog:
        """The status topic read to its end."""
        return await self.topics.read_status()

    def task_progress(self, name: str, task_id: int) -> dict[str, float] | None:
        """The figures task ``name``-``task_id`` counts and sets of its own
        (``context.count``, ``context.gauge``), if it runs on this worker."""
        return self.supervisor.task_progress(name, task_id)


CLOSE_TIMEOUT = 10.0
"""Seconds the worker's clients get to close when it ends (a bound on clean-up, also
after a failed start-up; not a setting)."""
