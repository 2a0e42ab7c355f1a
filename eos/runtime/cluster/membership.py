"""The membership actor: this worker's place in the group (docs/cluster.md).

It runs Kafka's group protocol for the worker, one step at a time::

    find the coordinator → JoinGroup → (leader: compute the assignment) → SyncGroup
    → heartbeat every heartbeat.interval.ms until a rebalance is needed → JoinGroup …

and tells its :class:`GroupListener` (the coordinator) what happens: before it
rejoins (so eager members can drop their work), when it is the leader (to compute
the assignment), and when an assignment arrived. It decides nothing about
connectors or tasks.

What each answer of the group coordinator means:

- MEMBER_ID_REQUIRED: the broker handed out a member id; join again with it.
- UNKNOWN_MEMBER_ID: the group forgot this member (session expired): join anew
  with no member id, and the work this worker ran is *lost* (someone else may
  run it already), so the listener drops all of it before rejoining.
- ILLEGAL_GENERATION on a heartbeat: the group moved on without this member —
  lost as well. On SyncGroup it only means another rebalance began.
- REBALANCE_IN_PROGRESS: rejoin (cooperative members keep their work).
- NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, or
  no answer: look the coordinator up again and retry after ``retry.backoff.ms``.
  If no heartbeat succeeds for a whole session timeout, the group has certainly
  removed this member: its work is treated as lost.
- INCONSISTENT_GROUP_PROTOCOL: the group runs another protocol, another
  assignor, or is not an eos group at all. The group is described and the
  listener told which (shown by ``GET /``); the worker keeps trying, slowly.
- INVALID_SESSION_TIMEOUT, GROUP_AUTHORIZATION_FAILED: settings or ACLs are
  wrong; :meth:`Membership.run` raises :class:`~eos.errors.ConfigError`.

On a clean stop the member sends LeaveGroup, so the others take its work over
at once instead of after the session timeout. Heartbeats stop only when the
actor's own cancel scope ends.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import anyio
import structlog
from anyio.abc import TaskStatus

from eos.errors import ConfigError, CoordinatorNotAvailable
from eos.kafka import group as g
from eos.runtime.clock import Clock, SystemClock

log = structlog.get_logger(__name__)

PROTOCOL_TYPE = "eos"
"""The group protocol type of eos workers (Kafka Connect's is ``connect``)."""


class GroupTransport(Protocol):
    """The requests of :class:`eos.kafka.group.GroupClient` the membership uses."""

    async def find_coordinator(self) -> int: ...

    async def join(
        self,
        *,
        member_id: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
    ) -> g.JoinResponse: ...

    async def sync(
        self, *, generation: int, member_id: str, assignments: Sequence[tuple[str, bytes]]
    ) -> g.SyncResponse: ...

    async def heartbeat(self, *, generation: int, member_id: str) -> int: ...

    async def leave(self, *, member_id: str) -> int: ...

    async def describe(self) -> g.GroupDescription: ...


@dataclass(frozen=True)
class Joined:
    """The outcome of a completed rebalance, as this member saw it."""

    generation: int
    member_id: str
    leader_id: str
    protocol: str
    assignment: bytes
    cause: str
    """Why this member (re)joined: ``start``, ``requested``, ``rebalance``, ``lost``."""
    seconds: float
    """From the decision to rejoin until the assignment arrived."""

    @property
    def leader(self) -> bool:
        return self.leader_id == self.member_id


class GroupListener(Protocol):
    """What the membership asks of and tells the coordinator."""

    def protocols(self) -> list[tuple[str, bytes]]:
        """JoinGroup's protocols, most preferred first, each with this member's metadata."""

    async def prepare_rejoin(self, lost: bool) -> None:
        """Before JoinGroup: drop what must not run during the rebalance (all of it
        if ``lost``)."""

    async def assign(self, join: g.JoinResponse) -> list[tuple[str, bytes]]:
        """As leader: the assignment of every member (member id, bytes)."""

    def joined(self, outcome: Joined) -> None:
        """A rebalance completed; must not block."""

    def group_error(self, message: str | None) -> None:
        """Why this member cannot join (None once it could)."""


class RejoinSignal:
    """Whether this member must (re)join its group, and why. Whoever needs a rebalance
    (the coordinator's duties) calls :meth:`request_rejoin`; the membership reads and
    clears it. Made before both, so that neither needs the other at construction."""

    def __init__(self, group_id: str = "") -> None:
        self.needed = True
        self.cause = "start"
        """Why: ``start``, ``requested``, ``rebalance``, ``lost``."""
        self.lost = False
        """The work this worker ran is lost (someone else may run it already)."""
        self.wakeup = anyio.Event()
        self.settled = anyio.Event()
        """Set when a rebalance completed, replaced when another becomes needed."""
        self._log = log.bind(group=group_id)

    def request_rejoin(self, reason: str) -> None:
        """Join the group again soon (the leader uses it to start a rebalance)."""
        if not self.needed:
            self._log.info("rejoining the group", reason=reason)
            self.mark("requested")
        self.wakeup.set()

    def mark(self, cause: str, *, lost: bool = False) -> None:
        if not self.needed:
            self.cause = cause
            self.settled = anyio.Event()
        self.needed = True
        self.lost = self.lost or lost

    def done(self) -> None:
        """The rebalance completed (the membership says so)."""
        self.needed = False
        self.settled.set()


@dataclass(frozen=True)
class MembershipSettings:
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 3_000
    rebalance_timeout_ms: int = 60_000
    retry_backoff_ms: int = 100


class Membership:
    def __init__(
        self,
        transport: GroupTransport,
        listener: GroupListener,
        settings: MembershipSettings,
        *,
        group_id: str,
        clock: Clock | None = None,
        rejoin: RejoinSignal | None = None,
    ) -> None:
        """``rejoin``: how others ask this member to rejoin (made before both; one of
        its own if None)."""
        self._transport = transport
        self._listener = listener
        self._settings = settings
        self._clock = clock or SystemClock()
        self.group_id = group_id
        self.member_id = ""
        self.generation = -1
        self.leader_id = ""
        self.protocol = ""
        self._signal = rejoin or RejoinSignal(group_id)
        self._last_error: str | None = None
        self.log = log.bind(group=group_id)

    # ------------------------------------------------------------------ control

    @property
    def stable(self) -> bool:
        """In a generation with an assignment and no rebalance pending."""
        return not self._signal.needed and self.generation >= 0

    def request_rejoin(self, reason: str) -> None:
        """Join the group again soon (the leader uses it to start a rebalance)."""
        self._signal.request_rejoin(reason)

    async def until_stable(self) -> None:
        """Until :attr:`stable`."""
        while not self.stable:
            await self._signal.settled.wait()

    def _rejoin_pending(self) -> bool:
        return self._signal.needed

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            while True:
                if self._signal.needed:
                    await self._rebalance()
                await self._heartbeat_until_rejoin()
        finally:
            with anyio.CancelScope(shield=True):
                await self._leave()

    # ---------------------------------------------------------------- rebalance

    async def _rebalance(self) -> None:
        started = time.perf_counter()
        while True:
            try:
                outcome = await self._join_and_sync()
            except CoordinatorNotAvailable as exc:
                self.log.info("group coordinator not available; retrying", error=str(exc))
                outcome = None
            if outcome is not None:
                break
            await self._backoff()
        self._signal.done()
        self._report_error(None)
        joined = Joined(
            self.generation,
            self.member_id,
            self.leader_id,
            self.protocol,
            outcome,
            self._signal.cause,
            time.perf_counter() - started,
        )
        self.log.info(
            "joined group",
            generation=self.generation,
            member_id=self.member_id,
            leader=joined.leader,
            protocol=self.protocol,
            cause=self._signal.cause,
        )
        self._listener.joined(joined)

    async def _join_and_sync(self) -> bytes | None:
        """One JoinGroup + SyncGroup; the assignment, or None to try again."""
        await self._transport.find_coordinator()
        await self._listener.prepare_rejoin(self._signal.lost)
        self._signal.lost = False
        join = await self._transport.join(
            member_id=self.member_id,
            session_timeout_ms=self._settings.session_timeout_ms,
            rebalance_timeout_ms=self._settings.rebalance_timeout_ms,
            protocol_type=PROTOCOL_TYPE,
            protocols=self._listener.protocols(),
        )
        if join.error != g.NONE:
            await self._join_failed(join)
            return None
        self.generation, self.member_id = join.generation, join.member_id
        self.leader_id, self.protocol = join.leader_id, join.protocol
        assignments: list[tuple[str, bytes]] = []
        if join.leader_id == join.member_id:
            assignments = await self._listener.assign(join)
        sync = await self._transport.sync(
            generation=join.generation, member_id=join.member_id, assignments=assignments
        )
        if sync.error == g.NONE:
            return sync.assignment
        self.log.info("sync failed; rejoining", error=g.error_name(sync.error))
        if sync.error == g.UNKNOWN_MEMBER_ID:
            self._reset(lost=True)
        elif sync.error not in (g.REBALANCE_IN_PROGRESS, g.ILLEGAL_GENERATION):
            await self._backoff()
        return None

    async def _join_failed(self, join: g.JoinResponse) -> None:
        error = join.error
        if error == g.MEMBER_ID_REQUIRED:
            self.member_id = join.member_id
            return
        if error == g.UNKNOWN_MEMBER_ID:
            self._reset(lost=True)
            return
        if error == g.INVALID_SESSION_TIMEOUT:
            raise ConfigError(
                "session.timeout.ms",
                self._settings.session_timeout_ms,
                "the broker refused it: keep it between the broker's "
                "group.min.session.timeout.ms (6000 by default) and "
                "group.max.session.timeout.ms (1800000 by default)",
            )
        if error == g.GROUP_AUTHORIZATION_FAILED:
            raise ConfigError(
                "group.id",
                self.group_id,
                "not authorized: grant this worker's principal Read on Group "
                f"{self.group_id} (and Describe)",
            )
        if error == g.INCONSISTENT_GROUP_PROTOCOL:
            self._report_error(await self._describe_mismatch())
            await anyio.sleep(self._settings.heartbeat_interval_ms / 1000)
            return
        self.log.info("join failed; retrying", error=g.error_name(error))
        await self._backoff()

    async def _describe_mismatch(self) -> str:
        mine = ", ".join(name for name, _ in self._listener.protocols())
        try:
            group = await self._transport.describe()
        except Exception as exc:
            return (
                f"group {self.group_id!r} runs a protocol this worker does not offer "
                f"({mine}); describing it failed: {exc!r}"
            )
        hosts = ", ".join(sorted({m.client_host for m in group.members})) or "none"
        if group.protocol_type != PROTOCOL_TYPE:
            return (
                f"group.id {self.group_id!r} is used by Kafka clients of protocol type "
                f"{group.protocol_type!r} (protocol {group.protocol!r}, members at {hosts}), "
                "not by eos workers: give this eos cluster a group.id of its own"
            )
        return (
            f"the group {self.group_id!r} runs {group.protocol!r} (members at {hosts}) but "
            f"this worker offers {mine}: set connect.protocol and assignor the same on "
            "every worker"
        )

    def _report_error(self, message: str | None) -> None:
        if message != self._last_error:
            if message is not None:
                self.log.error("cannot join the group", reason=message)
            self._last_error = message
            self._listener.group_error(message)

    def _reset(self, *, lost: bool) -> None:
        self.member_id, self.generation = "", -1
        self._signal.lost = self._signal.lost or lost

    async def _backoff(self) -> None:
        await anyio.sleep(self._settings.retry_backoff_ms / 1000)

    # ---------------------------------------------------------------- heartbeat

    async def _heartbeat_until_rejoin(self) -> None:
        interval = self._settings.heartbeat_interval_ms / 1000
        session = self._settings.session_timeout_ms / 1000
        last_ok = self._clock.monotonic()
        wait = interval
        while not self._signal.needed:
            with anyio.move_on_after(wait):
                await self._signal.wakeup.wait()
            self._signal.wakeup = anyio.Event()
            if self._rejoin_pending():
                return
            error = await self._heartbeat()
            if error == g.NONE:
                last_ok, wait = self._clock.monotonic(), interval
                continue
            self._heartbeat_failed(error)
            wait = self._settings.retry_backoff_ms / 1000
            if not self._signal.needed and self._clock.monotonic() - last_ok >= session:
                self.log.warning("no heartbeat succeeded for a session timeout; work is lost")
                self._signal.mark("lost", lost=True)

    async def _heartbeat(self) -> int:
        try:
            return await self._transport.heartbeat(
                generation=self.generation, member_id=self.member_id
            )
        except CoordinatorNotAvailable as exc:
            self.log.info("heartbeat not answered", error=str(exc))
            return g.COORDINATOR_NOT_AVAILABLE

    def _heartbeat_failed(self, error: int) -> None:
        if error == g.REBALANCE_IN_PROGRESS:
            self._signal.mark("rebalance")
        elif error == g.ILLEGAL_GENERATION:
            self.log.warning("the group moved on without this member; its work is lost")
            self._signal.mark("lost", lost=True)
        elif error == g.UNKNOWN_MEMBER_ID:
            self.log.warning("the group no longer knows this member; its work is lost")
            self._reset(lost=True)
            self._signal.mark("lost", lost=True)
        elif error not in (g.NOT_COORDINATOR, g.COORDINATOR_NOT_AVAILABLE):
            self.log.info("heartbeat failed", error=g.error_name(error))

    # -------------------------------------------------------------------- leave

    async def _leave(self) -> None:
        if not self.member_id:
            return
        with anyio.move_on_after(self._settings.retry_backoff_ms / 1000 + 2):
            try:
                error = await self._transport.leave(member_id=self.member_id)
                self.log.info("left the group", error=g.error_name(error))
            except Exception as exc:
                self.log.info("could not leave the group", error=repr(exc))
        self.member_id, self.generation = "", -1
