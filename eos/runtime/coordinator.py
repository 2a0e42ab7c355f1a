"""The coordinator actor: the single owner of cluster state on a worker
(docs/cluster.md).

It is the :class:`~eos.runtime.membership.GroupListener` of the worker's
membership: it says what the worker offers when it joins, drops work before a
rebalance when it must, computes the assignment when the worker leads, and
applies every assignment it receives to the worker's connectors and tasks.

As **leader** it alone writes the config topic (connector configs, target
states, task configs, task count records, the session key) through the
transactional producer ``eos-cluster-${group.id}``, which it initialises when
it becomes leader (fencing any deposed leader); it runs the fencing rounds
(:meth:`Coordinator.fence`); and it starts a rebalance after every change of
the cluster's work, so that every member re-reads the config topic and the
assignment places the new work.

As **follower** it answers users' writes with a :class:`~eos.errors.NotLeaderError`
naming the leader, and hands its connectors' task configs and its tasks'
fencing requests to the leader over signed internal requests.

All state changes run in the actor's mailbox, one at a time. Nothing in the
mailbox waits for another worker: requests to the leader and the wait for a
fencing round happen outside it.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from eos.config.worker import WorkerConfig
from eos.errors import (
    ConflictError,
    EosError,
    FencedError,
    NotFoundError,
    NotLeaderError,
    ReadToEndTimeout,
    RetriableError,
    WorkerStartingError,
)
from eos.kafka.fencing import fence_producers
from eos.kafka.group import JoinResponse
from eos.kafka.transactional_ids import task_transactional_id
from eos.runtime.actor import Mailbox
from eos.runtime.assignment import (
    LeaderView,
    decode_members,
    lead_round,
    mismatched_settings,
)
from eos.runtime.assignors.base import EMPTY, Assignment, Assignor
from eos.runtime.clock import Clock, SystemClock
from eos.runtime.group_metadata import (
    MalformedGroupData,
    MemberAssignment,
    MemberInfo,
    MemberMetadata,
    Style,
    protocol_names,
    style_of,
)
from eos.runtime.membership import Joined
from eos.runtime.observer import Rebalanced, WorkerObserver
from eos.runtime.signatures import key_bytes
from eos.state import State
from eos.storage.config_log import (
    ConfigLog,
    ConfigSnapshot,
    RestartRequest,
    SessionKey,
    TargetState,
)

log = structlog.get_logger(__name__)

_IDLE = {TargetState.PAUSED: State.PAUSED, TargetState.STOPPED: State.STOPPED}


class Units(Protocol):
    """What the coordinator drives on its worker: connectors and tasks."""

    def running_connectors(self) -> Mapping[str, Mapping[str, str]]: ...

    def running_tasks(self) -> Mapping[tuple[str, int], int]:
        """(connector, task id) → task generation of every task running here."""

    def start_connector(self, name: str, props: Mapping[str, str]) -> None: ...

    async def stop_connector(self, name: str) -> None: ...

    def start_task(
        self, name: str, task_id: int, generation: int, config: Mapping[str, str]
    ) -> None: ...

    async def stop_tasks(self, tasks: Sequence[tuple[str, int]]) -> None: ...

    def failed(self, name: str, task_id: int | None = None) -> bool:
        """Whether the connector (or one of its tasks) runs here and has FAILED."""

    async def report(self, name: str, task_id: int | None, state: State) -> None:
        """Write a status for a connector (``task_id`` None) or task this worker owns."""


class LeaderLink(Protocol):
    """Internal requests to the leader (signed; see :mod:`eos.runtime.leader_client`)."""

    async def fence(self, leader_url: str, connector: str) -> None: ...

    async def put_task_configs(
        self, leader_url: str, connector: str, configs: list[dict[str, str]]
    ) -> None: ...


class Rejoin(Protocol):
    """The part of :class:`~eos.runtime.membership.Membership` the coordinator uses."""

    def request_rejoin(self, reason: str) -> None: ...

    @property
    def stable(self) -> bool:
        """In a generation with an assignment and no rebalance pending."""


@dataclass
class FencingRound:
    """One fencing round of a connector's task generation (see :meth:`Coordinator.fence`)."""

    connector: str
    generation: int
    ids: list[str]
    count: int
    started: float
    done: anyio.Event = field(default_factory=anyio.Event)
    error: Exception | None = None

    def finish(self, error: Exception | None = None) -> None:
        self.error = error
        self.done.set()

    async def wait(self) -> None:
        await self.done.wait()
        if self.error is not None:
            raise self.error


@dataclass(frozen=True)
class ClusterView:
    """The cluster as this worker sees it (``GET /``)."""

    generation: int
    member_id: str
    leader_id: str
    leader_url: str
    is_leader: bool
    members: tuple[MemberInfo, ...]
    protocol: str
    assignor: str
    error: str | None
    assigned: Assignment
    rebalancing: bool
    """A rebalance is pending or under way (the leader may change)."""


class Coordinator:
    def __init__(
        self,
        settings: WorkerConfig,
        config_log: ConfigLog,
        units: Units,
        observer: WorkerObserver,
        *,
        assignor: Assignor,
        link: LeaderLink,
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings
        self.config_log = config_log
        self.units = units
        self.observer = observer
        self.assignor = assignor
        self.link = link
        self.clock = clock or SystemClock()
        self.mailbox = Mailbox("coordinator")
        self.rejoin: Rejoin | None = None
        self.generation = -1
        self.member_id = ""
        self.leader_id = ""
        self.leader_url = ""
        self.members: tuple[MemberInfo, ...] = ()
        self.protocol = ""
        self.style: Style = "cooperative"
        self.assigned: Assignment = EMPTY
        self.error: str | None = None
        self.joined_once = anyio.Event()
        self._tenure_since: float | None = None
        self._leader_claimed = False
        self._memory: Mapping[str, Any] = {}
        self._rounds: dict[str, FencingRound] = {}
        self._reported: dict[tuple[str, int | None], State] = {}
        self._restarts_seen: dict[str, int] = {}
        self._restarts_initialised = False
        self._altering: set[str] = set()
        self._dropped: Assignment = EMPTY
        """What an eager member ran before it dropped everything to rejoin."""
        self._timers: dict[str, anyio.CancelScope] = {}
        self._tg: TaskGroup | None = None
        self._closed = False
        self._serving = False
        """True once the config topic was first read: requests may be answered."""

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader_id

    # ------------------------------------------------------------------ actor

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        await self.config_log.refresh()
        self._serving = True
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self._watch_lag)
            task_status.started()
            await self.mailbox.serve()  # until close(): queued calls still run
            tg.cancel_scope.cancel()

    def close(self) -> None:
        self._closed = True
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

    async def _ask(self, call: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """``mailbox.ask``, or ConflictError once the worker is stopping."""
        if self._closed:
            raise ConflictError("the worker is shutting down")
        try:
            return await self.mailbox.ask(call, *args)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise ConflictError("the worker is shutting down") from None

    # ------------------------------------------------------- the group listener

    def protocols(self) -> list[tuple[str, bytes]]:
        s = self.settings
        tenure = 0
        if self._tenure_since is not None:
            tenure = int((self.clock.monotonic() - self._tenure_since) * 1000)
        metadata = MemberMetadata(
            url=s.rest_url,
            worker_id=s.worker_id,
            config_offset=self.config_log.snapshot.offset,
            protocol=s.rebalance_protocol,
            assignor=self.assignor.name,
            priority=s.worker_priority,
            tenure_ms=tenure,
            generation=self.generation,
            owned=self.assigned or self._dropped,
        ).encode()
        return [(name, metadata) for name in protocol_names(s.rebalance_protocol, s.assignor)]

    async def prepare_rejoin(self, lost: bool) -> None:
        with contextlib.suppress(ConflictError):  # stopping: the worker stops everything
            await self._ask(self._prepare_rejoin, lost)

    async def assign(self, join: JoinResponse) -> list[tuple[str, bytes]]:
        assignments: list[tuple[str, bytes]] = await self._ask(self._assign, join)
        return assignments

    def joined(self, outcome: Joined) -> None:
        if not self._closed:
            self.mailbox.tell(self._joined, outcome)

    def group_error(self, message: str | None) -> None:
        self.error = message

    # ----------------------------------------------------------- public requests

    async def snapshot(self) -> ConfigSnapshot:
        """The config topic read to its end. Not through the mailbox: reads are
        serialised (and shared by concurrent callers) in the store, and a snapshot is
        immutable, so REST answers and task start-ups never queue behind the actor."""
        if self._closed:
            raise ConflictError("the worker is shutting down")
        if not self._serving:
            raise WorkerStartingError(
                "the worker is starting (creating its internal topics and reading the"
                " config topic); try again in a few seconds"
            )
        return await self.config_log.refresh()

    def view(self) -> ClusterView:
        return ClusterView(
            generation=self.generation,
            member_id=self.member_id,
            leader_id=self.leader_id,
            leader_url=self.leader_url,
            is_leader=self.is_leader,
            members=self.members,
            protocol=self.protocol,
            assignor=self.assignor.name,
            error=self.error,
            assigned=self.assigned,
            rebalancing=self.rejoin is None or not self.rejoin.stable,
        )

    def require_leader(self) -> None:
        """Raise :class:`NotLeaderError` unless this worker leads the group."""
        if self.is_leader:
            return
        if not self.leader_url:
            raise NotLeaderError(
                "no leader is known yet (the worker is joining its group); retry shortly", None
            )
        raise NotLeaderError(
            f"this worker ({self.settings.rest_url}) is not the leader of the cluster; "
            f"send the request to the leader at {self.leader_url}",
            self.leader_url,
        )

    async def put_connector(
        self,
        name: str,
        props: Mapping[str, str],
        initial_state: TargetState = TargetState.STARTED,
    ) -> bool:
        """Create or update a connector (already validated). True if it is new. Leader
        only. A new connector starts in ``initial_state``."""
        self.require_leader()
        created: bool = await self._ask(self._put_connector, name, dict(props), initial_state)
        return created

    async def set_target_state(self, name: str, state: TargetState) -> None:
        """Pause, stop or resume a connector and its tasks. Leader only."""
        self.require_leader()
        await self._ask(self._set_target_state, name, state)

    async def begin_offset_change(self, name: str) -> ConfigSnapshot:
        """Hold the connector STOPPED while its offsets change (leader only): until
        :meth:`end_offset_change`, it cannot be resumed. Raises ConflictError unless it
        is STOPPED now (docs/rest.md)."""
        self.require_leader()
        snap: ConfigSnapshot = await self._ask(self._begin_offset_change, name)
        return snap

    def end_offset_change(self, name: str) -> None:
        self._altering.discard(name)

    async def _begin_offset_change(self, name: str) -> ConfigSnapshot:
        snap = await self.config_log.refresh()
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

    async def restart(self, name: str, request: RestartRequest) -> None:
        """Ask the workers that run them to restart a connector and/or its tasks. Leader only."""
        self.require_leader()
        await self._ask(self._restart, name, request)

    async def delete_connector(self, name: str) -> None:
        self.require_leader()
        await self._ask(self._delete_connector, name)

    async def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Write a connector's task configs if they changed. Leader only."""
        self.require_leader()
        await self._ask(self._task_configs, name, configs)

    async def fence(self, name: str) -> None:
        """Run (or join) the fencing round of ``name``'s latest task generation and wait
        until its task count record is written. Leader only.

        Raises :class:`ConflictError` if the connector was deleted or new task configs
        arrived meanwhile (the round is cancelled), :class:`FencingError` if fencing failed.
        """
        self.require_leader()
        snap = await self.snapshot()  # most callers find the round done: no mailbox trip
        if name in snap.connectors and not snap.needs_fencing(name):
            return
        round_: FencingRound | None = await self._ask(self._start_round, name)
        if round_ is not None:
            await round_.wait()

    async def submit_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """From a connector running here: its task configs, to the leader."""
        if self.is_leader:
            await self.put_task_configs(name, configs)
        elif self.leader_url:
            await self.link.put_task_configs(self.leader_url, name, configs)
        else:
            raise RetriableError("no leader is known yet")

    async def request_fencing(self, name: str) -> None:
        """From a task starting here: a fencing round by the leader."""
        if self.is_leader:
            await self.fence(name)
        elif self.leader_url:
            await self.link.fence(self.leader_url, name)
        else:
            raise RetriableError("no leader is known yet")

    # ---------------------------------------------------------- rebalance steps

    async def _prepare_rejoin(self, lost: bool) -> None:
        if lost:
            self._tenure_since = None
        if lost or self.style == "eager":
            await self._drop_all("lost" if lost else "eager rebalance", lost=lost)
            return
        # Courtesy (docs/cluster.md): tasks of a generation about to be fenced stop first.
        try:
            snap = await self.config_log.refresh()
        except ReadToEndTimeout as exc:
            log.info("config read before rejoining timed out", error=str(exc))
            return
        doomed = [key for key in self.units.running_tasks() if snap.needs_fencing(key[0])]
        if doomed:
            log.info("stopping tasks whose configs await fencing", tasks=len(doomed))
            await self.units.stop_tasks(doomed)

    async def _drop_all(self, why: str, *, lost: bool) -> None:
        tasks, connectors = list(self.units.running_tasks()), list(self.units.running_connectors())
        if tasks or connectors:
            log.info("stopping all work before rejoining", reason=why, tasks=len(tasks))
        await self.units.stop_tasks(tasks)
        for name in connectors:
            await self.units.stop_connector(name)
        # An eager member still tells the leader what it ran (stickiness, failover's
        # settle time); a member that lost its place does not: others may run it now.
        self._dropped = EMPTY if lost else self.assigned
        self.assigned = EMPTY

    async def _assign(self, join: JoinResponse) -> list[tuple[str, bytes]]:
        members = decode_members(join.members)
        try:
            snap = await self.config_log.refresh()
            if not self._leader_claimed:
                await self.config_log.claim_write_privileges()
                self._leader_claimed = True
        except Exception as exc:
            log.warning("leader cannot read or claim the config topic", error=repr(exc))
            snap = self.config_log.snapshot  # stale: members further on get config_mismatch
        mine = members.get(join.member_id)
        if mine is not None and (warning := mismatched_settings(members, mine)):
            log.warning("rebalance styles differ", detail=warning)
        leader = LeaderView(join.member_id, self.settings.rest_url, snap)
        round_ = lead_round(
            leader,
            members,
            assignor=self.assignor,
            style=style_of(join.protocol),
            memory=self._memory,
            now_ms=int(self.clock.monotonic() * 1000),
        )
        self._memory = round_.memory
        log.info(
            "assignment computed",
            generation=join.generation,
            members=len(members),
            mismatch=round_.mismatch,
            delay_ms=round_.next_rebalance_ms,
        )
        return [(m, a.encode()) for m, a in round_.assignments.items()]

    async def _joined(self, outcome: Joined) -> None:
        try:
            assignment = MemberAssignment.decode(outcome.assignment)
        except MalformedGroupData as exc:
            log.warning("assignment unreadable; rejoining", error=str(exc))
            self._later(
                "rejoin", self.settings.retry_backoff_ms, partial(self._request_rejoin, "bad data")
            )
            return
        was_leader, previous_leader = self.is_leader, self.leader_id
        self.generation, self.member_id = outcome.generation, outcome.member_id
        self.leader_id, self.leader_url = assignment.leader_id, assignment.leader_url
        self.members, self.protocol = assignment.members, outcome.protocol
        self.style = style_of(outcome.protocol)
        if self._tenure_since is None:
            self._tenure_since = self.clock.monotonic()
        if not self.is_leader:
            self._leader_claimed = False
            self._cancel_leader_timers()
        if was_leader != self.is_leader:
            log.info("leadership changed", leader=self.is_leader, leader_url=self.leader_url)
        self.joined_once.set()
        self._dropped = EMPTY
        if assignment.error != "none":
            self._report(outcome, assignment, previous_leader)
            log.info("assignment refused by the leader", reason=assignment.message)
            await self._read_config()
            self._request_rejoin(assignment.error)
            return
        if not await self._read_config(assignment.config_offset):
            self._later(
                "rejoin", self.settings.retry_backoff_ms, partial(self._request_rejoin, "config")
            )
            return
        await self._stop_revoked(assignment.revoked)
        self.assigned = assignment.assigned
        self._report(outcome, assignment, previous_leader)
        await self._reconcile()
        if assignment.revoked and self.style == "cooperative":
            self._request_rejoin("revoked work handed over")
        if self.is_leader:
            await self._lead(assignment)

    def _report(self, outcome: Joined, assignment: MemberAssignment, previous_leader: str) -> None:
        self.observer.rebalance_completed(
            Rebalanced(
                generation=outcome.generation,
                leader=self.is_leader,
                leader_changed=bool(previous_leader) and previous_leader != assignment.leader_id,
                protocol=self.style,
                cause=outcome.cause,
                seconds=outcome.seconds,
                members=len(assignment.members),
                connectors=len(self.assigned.connectors),
                tasks=len(self.assigned.tasks),
                revoked_connectors=len(assignment.revoked.connectors),
                revoked_tasks=len(assignment.revoked.tasks),
                delay_ms=assignment.delay_ms,
            )
        )

    async def _read_config(self, at_least: int = 0) -> bool:
        """Read the config topic to its end; False if that failed or stays short of
        ``at_least`` (the leader's offset)."""
        try:
            snap = await self.config_log.refresh()
        except ReadToEndTimeout as exc:
            log.warning("config topic not read to its end", error=str(exc))
            return False
        return snap.offset >= at_least

    async def _stop_revoked(self, revoked: Assignment) -> None:
        if not revoked:
            return
        log.info("revoked", connectors=sorted(revoked.connectors), tasks=len(revoked.tasks))
        await self.units.stop_tasks([(t.connector, t.task) for t in revoked.tasks])
        for name in sorted(revoked.connectors):
            await self.units.stop_connector(name)

    async def _lead(self, assignment: MemberAssignment) -> None:
        await self._ensure_session_key()
        snap = self.config_log.snapshot
        for name in sorted(snap.connectors):
            if self.settings.transactional_config_writes and snap.needs_fencing(name):
                await self._start_round(name)
        if assignment.delay_ms > 0:
            self._later("delayed", assignment.delay_ms, partial(self._request_rejoin, "scheduled"))

    def _request_rejoin(self, reason: str) -> None:
        if self.rejoin is not None:
            self.rejoin.request_rejoin(reason)

    # ------------------------------------------------------------- reconcile

    async def _reconcile(self) -> None:
        """Bring running connectors and tasks in line with the assignment and the
        config topic: stale task generations stop, new ones start (their start-up
        asks the leader for a fencing round first)."""
        snap = self.config_log.snapshot
        await self._restarts(snap)
        for name, props in list(self.units.running_connectors().items()):
            if name not in self._wanted_connectors(snap) or props != snap.connectors.get(name):
                await self.units.stop_connector(name)
        running = self.units.running_connectors()
        for name in sorted(self._wanted_connectors(snap) - set(running)):
            self.units.start_connector(name, snap.connectors[name])
        wanted = self._wanted_tasks(snap)
        stale = [k for k, gen in self.units.running_tasks().items() if wanted.get(k) != gen]
        if stale:
            await self.units.stop_tasks(stale)
        running_tasks = self.units.running_tasks()
        for (name, task_id), generation in sorted(wanted.items()):
            if (name, task_id) not in running_tasks:
                self.units.start_task(name, task_id, generation, snap.tasks(name)[task_id])
        await self._report_idle(snap)

    async def _report_idle(self, snap: ConfigSnapshot) -> None:
        """Status PAUSED / STOPPED for what this worker owns but must not run (once)."""
        idle: dict[tuple[str, int | None], State] = {}
        for name in self.assigned.connectors:
            state = _IDLE.get(snap.target_state(name)) if name in snap.connectors else None
            if state is not None:
                idle[(name, None)] = state
        for task in self.assigned.tasks:
            state = _IDLE.get(snap.target_state(task.connector))
            if state is State.PAUSED and task.task < len(snap.tasks(task.connector)):
                idle[(task.connector, task.task)] = state
        for key, state in idle.items():
            if self._reported.get(key) is not state:
                await self.units.report(key[0], key[1], state)
        self._reported = idle

    async def _restarts(self, snap: ConfigSnapshot) -> None:
        """Act on restart requests newer than those seen: stop what must restart (the
        rest of the reconcile starts it again)."""
        fresh = {
            name: request
            for name, (offset, request) in snap.restarts.items()
            if offset > self._restarts_seen.get(name, -1)
        }
        self._restarts_seen = {name: offset for name, (offset, _) in snap.restarts.items()}
        if not self._restarts_initialised:  # requests made before this worker joined are done
            self._restarts_initialised = True
            return
        for name, request in sorted(fresh.items()):
            await self._restart_here(name, request)

    async def _restart_here(self, name: str, request: RestartRequest) -> None:
        units = self.units
        mine = request.task is None and name in self.assigned.connectors
        if mine and (not request.only_failed or units.failed(name)):
            log.info("restarting connector", connector=name)
            await units.report(name, None, State.RESTARTING)
            await units.stop_connector(name)
        if request.task is None and not request.include_tasks:
            return
        tasks = [
            (t.connector, t.task)
            for t in sorted(self.assigned.tasks)
            if t.connector == name
            and (request.task is None or t.task == request.task)
            and (not request.only_failed or units.failed(name, t.task))
        ]
        if tasks:
            log.info("restarting tasks", connector=name, tasks=[t for _, t in tasks])
            for _, task_id in tasks:
                await units.report(name, task_id, State.RESTARTING)
            await units.stop_tasks(tasks)

    def _wanted_connectors(self, snap: ConfigSnapshot) -> set[str]:
        return {
            name
            for name in self.assigned.connectors
            if name in snap.connectors and snap.target_state(name) is TargetState.STARTED
        }

    def _wanted_tasks(self, snap: ConfigSnapshot) -> dict[tuple[str, int], int]:
        """(connector, task) → generation of every assigned task that should run."""
        wanted = {}
        for task in self.assigned.tasks:
            generation = snap.generations.get(task.connector)
            if (
                generation is not None
                and task.task < len(snap.tasks(task.connector))
                and snap.target_state(task.connector) is TargetState.STARTED
            ):
                wanted[(task.connector, task.task)] = generation
        return wanted

    # --------------------------------------------------------------- handlers

    async def _put_connector(
        self, name: str, props: dict[str, str], initial_state: TargetState
    ) -> bool:
        self.require_leader()
        snap = await self.config_log.refresh()
        created = name not in snap.connectors
        if not created and dict(snap.connectors[name]) == props:
            return False
        await self._write(self.config_log.put_connector_config(name, props))
        if created:
            await self._write(self.config_log.put_target_state(name, initial_state))
        await self._changed(f"connector {name} {'created' if created else 'updated'}")
        return created

    async def _set_target_state(self, name: str, state: TargetState) -> None:
        self.require_leader()
        snap = await self.config_log.refresh()
        if name not in snap.connectors:
            raise NotFoundError(f"Connector {name} not found")
        if snap.target_state(name) is state:
            return
        if name in self._altering:
            raise ConflictError(f"the offsets of {name} are being changed; retry afterwards")
        await self._write(self.config_log.put_target_state(name, state))
        if state is TargetState.STOPPED and snap.tasks(name):
            # As in Kafka Connect (KIP-875): a stopped connector has no tasks at all.
            await self._write(self.config_log.put_task_configs(name, []))
        await self._changed(f"connector {name} {state.value.lower()}")

    async def _restart(self, name: str, request: RestartRequest) -> None:
        self.require_leader()
        snap = await self.config_log.refresh()
        if name not in snap.connectors:
            raise NotFoundError(f"Connector {name} not found")
        await self._write(self.config_log.put_restart(name, request))
        await self._changed(f"restart of {name}")

    async def _delete_connector(self, name: str) -> None:
        self.require_leader()
        snap = await self.config_log.refresh()
        if name not in snap.connectors:
            raise NotFoundError(f"Connector {name} not found")
        await self._write(self.config_log.remove_connector(name))
        await self._changed(f"connector {name} deleted")

    async def _task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        self.require_leader()
        snap = await self.config_log.refresh()
        if name not in snap.connectors:
            raise NotFoundError(f"Connector {name} not found")
        if name in snap.generations and [dict(c) for c in snap.tasks(name)] == configs:
            return
        log.info("writing new task configs", connector=name, tasks=len(configs))
        await self._write(self.config_log.put_task_configs(name, configs))
        await self._changed(f"new task configs for {name}")

    async def _write(self, write: Awaitable[int]) -> int:
        """A config write by the leader. Fenced (a newer leader took over) or failed:
        this worker rejoins the group, and the request fails (the caller retries)."""
        try:
            return await write
        except FencedError as exc:
            self._leader_claimed = False
            self._request_rejoin("config writer fenced")
            raise NotLeaderError(f"{exc}; this worker rejoins the group: retry", None) from exc
        except EosError as exc:
            self._request_rejoin("config write failed")
            raise ConflictError(f"config topic write failed ({exc}); retry") from exc

    async def _changed(self, reason: str) -> None:
        """After a config write: read it back, apply it here, and rebalance so that
        every member reads it and the assignment places the work."""
        await self.config_log.refresh()
        await self._reconcile()
        self._request_rejoin(reason)

    # --------------------------------------------------------------- fencing

    async def _start_round(self, name: str) -> FencingRound | None:
        """The fencing round of ``name``'s latest task generation (docs/exactly-once.md),
        started in the background if none runs; None if none is needed.

        Every caller read the config topic to its end just before asking (:meth:`fence`,
        :meth:`_lead`), so the last snapshot is fresh enough: hundreds of tasks that start
        together cost one read, not one each."""
        self.require_leader()
        snap = self.config_log.snapshot
        if name not in snap.connectors:
            raise ConflictError(f"connector {name} was deleted")
        if not snap.needs_fencing(name):
            return None
        generation = snap.generations[name]
        running = self._rounds.get(name)
        if running is not None and running.generation == generation and not running.done.is_set():
            return running
        previous = snap.previous_task_count(name)
        count = len(snap.tasks(name))
        ids = []
        # A single task that stays single fences its predecessor itself (its producer
        # takes over the id); stopping (0 tasks) leaves no successor, so fence it here.
        if previous is not None and (previous > 1 or count != 1):
            ids = [task_transactional_id(self.settings.group_id, name, i) for i in range(previous)]
        round_ = FencingRound(name, generation, ids, count, time.perf_counter())
        self._rounds[name] = round_
        assert self._tg is not None
        self._tg.start_soon(self._run_round, round_)
        log.info("fencing round started", connector=name, fence=len(ids), tasks=count)
        return round_

    async def _run_round(self, round_: FencingRound) -> None:
        """Fence the previous generation's producers (outside the mailbox), then write
        the task count record (inside it)."""
        try:
            if round_.ids:
                timeout = self.settings.session_timeout_ms / 1000
                await fence_producers(self.settings.client_config, round_.ids, timeout=timeout)
            await self._ask(self._finish_round, round_)
        except Exception as exc:
            self.observer.fencing_round(
                round_.connector, time.perf_counter() - round_.started, False
            )
            log.warning("fencing round failed", connector=round_.connector, error=str(exc))
            round_.finish(exc)

    async def _finish_round(self, round_: FencingRound) -> None:
        name = round_.connector
        snap = await self.config_log.refresh()
        if snap.generations.get(name) != round_.generation:
            raise ConflictError(
                f"new task configs for {name} arrived during its fencing round; the round "
                "was cancelled and the new configs get one of their own"
            )
        if snap.needs_fencing(name):
            await self._write(self.config_log.put_task_count(name, round_.count))
            await self.config_log.refresh()
            self.observer.task_count_record_written(name)
        seconds = time.perf_counter() - round_.started
        self.observer.fencing_round(name, seconds, True)
        log.info(
            "fencing round done",
            connector=name,
            fenced=len(round_.ids),
            tasks=round_.count,
            seconds=round(seconds, 3),
        )
        round_.finish()
        if seconds > self.settings.session_timeout_ms / 2000:
            # Tasks that gave up waiting start after this rebalance (docs/exactly-once.md).
            self._request_rejoin(f"late fencing round of {name}")

    # ----------------------------------------------------------- session key

    async def _ensure_session_key(self) -> None:
        s = self.settings
        key = self.config_log.snapshot.session_key
        now = self.clock.wall_ms()
        if (
            key is None
            or key.algorithm != s.signature_algorithm
            or now >= key.created_ms + s.key_ttl_ms
        ):
            new = SessionKey(
                secrets.token_bytes(key_bytes(s.signature_algorithm)), s.signature_algorithm, now
            )
            try:
                await self._write(self.config_log.put_session_key(new))
                await self.config_log.refresh()
            except EosError as exc:
                log.warning("session key not written", error=str(exc))
                return
            log.info("session key written", algorithm=new.algorithm)
            key = new
        remaining = max(key.created_ms + s.key_ttl_ms - now, 0)
        self._later("session-key", remaining, partial(self.mailbox.tell, self._rotate_key))

    async def _rotate_key(self) -> None:
        if self.is_leader:
            await self._ensure_session_key()

    # ---------------------------------------------------------------- timers

    def _later(self, name: str, delay_ms: int, action: Callable[[], None]) -> None:
        """Run ``action`` after ``delay_ms``; replaces a pending timer of the same name."""
        if self._tg is None or self._closed:
            return
        previous = self._timers.pop(name, None)
        if previous is not None:
            previous.cancel()
        scope = anyio.CancelScope()
        self._timers[name] = scope

        async def fire() -> None:
            with scope:
                await anyio.sleep(delay_ms / 1000)
                if self._timers.get(name) is scope:
                    del self._timers[name]
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    action()  # the mailbox may be closed: the worker is stopping

        self._tg.start_soon(fire)

    def _cancel_leader_timers(self) -> None:
        for name in ("delayed", "session-key"):
            scope = self._timers.pop(name, None)
            if scope is not None:
                scope.cancel()
