"""The coordinator's side of each rebalance: the membership's
:class:`~eos.runtime.cluster.membership.GroupListener` (docs/cluster.md, "One round, step by step").

- What this worker offers when it joins (its metadata: URL, config offset, what
  it runs, priority, tenure).
- Before it rejoins: an eager member (or one whose work was lost) drops all of
  it; a cooperative one of an exactly-once cluster stops the tasks whose configs await
  fencing.
- As leader: reads the config topic, claims the config writer, and computes every
  member's assignment (:func:`~eos.runtime.cluster.assignment.lead_round`).
- When an assignment arrives: reads the config topic up to the leader's offset,
  stops what was revoked, records the new facts in the cluster state, reconciles,
  and (leader) does the leader's duties: the session key, the fencing rounds that
  are due, a scheduled rebalance.

The calls that change state run in the coordinator's mailbox.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from eos.errors import ConflictError, ReadToEndTimeout
from eos.kafka.group import JoinResponse
from eos.runtime.cluster.assignment import (
    LeaderView,
    decode_members,
    exactly_once_modes,
    lead_round,
    mismatched_settings,
)
from eos.runtime.cluster.assignors.base import EMPTY, Assignment, Assignor
from eos.runtime.cluster.coordinator.config_writes import ConfigWrites
from eos.runtime.cluster.coordinator.duty_context import Shared
from eos.runtime.cluster.coordinator.fencing import FencingRounds
from eos.runtime.cluster.coordinator.reconcile import Reconciler
from eos.runtime.cluster.coordinator.session_keys import TIMER as KEY_TIMER
from eos.runtime.cluster.coordinator.session_keys import SessionKeys
from eos.runtime.cluster.coordinator.worker_interfaces import Units
from eos.runtime.cluster.group_metadata import (
    MalformedGroupData,
    MemberAssignment,
    MemberMetadata,
    assignor_of,
    protocol_names,
    style_of,
)
from eos.runtime.cluster.membership import Joined
from eos.runtime.observer import Rebalanced

log = structlog.get_logger(__name__)


class GroupListener:
    def __init__(
        self,
        shared: Shared,
        *,
        assignors: Sequence[Assignor],
        units: Units,
        reconciler: Reconciler,
        writes: ConfigWrites,
        rounds: FencingRounds,
        keys: SessionKeys,
    ) -> None:
        self._settings, self._state, self._inbox = shared.settings, shared.state, shared.inbox
        self._config_log, self._rejoin, self._timers = (
            shared.state.config_log,
            shared.rejoin,
            shared.timers,
        )
        self._observer, self._clock = shared.observer, shared.clock
        self._assignors = {a.name: a for a in assignors}
        """This worker's assignors by name, in its order of preference."""
        self._memory_of = ""
        """The assignor the leader's memory belongs to."""
        self._units, self._reconciler = units, reconciler
        self._writes, self._rounds, self._keys = writes, rounds, keys
        self._tenure_since: float | None = None
        self._memory: Mapping[str, Any] = {}
        self._dropped: Assignment = EMPTY
        """What an eager member ran before it dropped everything to rejoin."""

    # --------------------------------------------------- the membership's calls

    def protocols(self) -> list[tuple[str, bytes]]:
        """One protocol per rebalance style and assignor, best first; each carries this
        member's metadata with that assignor's name and subscription (user data)."""
        s, state = self._settings, self._state
        tenure = 0
        if self._tenure_since is not None:
            tenure = int((self._clock.monotonic() - self._tenure_since) * 1000)
        metadata = {
            name: MemberMetadata(
                url=s.rest_url,
                worker_id=s.worker_id,
                config_offset=self._config_log.snapshot.offset,
                protocol=s.rebalance_protocol,
                assignor=name,
                priority=s.worker_priority,
                tenure_ms=tenure,
                generation=state.generation,
                owned=state.assigned or self._dropped,
                exactly_once=s.exactly_once,
                user_data=_subscription(assignor),
            ).encode()
            for name, assignor in self._assignors.items()
        }
        names = protocol_names(s.rebalance_protocol, list(self._assignors))
        return [(name, metadata[assignor_of(name)]) for name in names]

    async def prepare_rejoin(self, lost: bool) -> None:
        with contextlib.suppress(ConflictError):  # stopping: the worker stops everything
            await self._inbox.ask(self._prepare_rejoin, lost)

    async def assign(self, join: JoinResponse) -> list[tuple[str, bytes]]:
        return await self._inbox.ask(self._assign, join)

    def joined(self, outcome: Joined) -> None:
        self._inbox.tell(self._joined, outcome)

    def group_error(self, message: str | None) -> None:
        self._state.error = message

    # ---------------------------------------------------------- rebalance steps

    async def _prepare_rejoin(self, lost: bool) -> None:
        if lost:
            self._tenure_since = None
        if lost or self._state.style == "eager":
            await self._drop_all("lost" if lost else "eager rebalance", lost=lost)
            return
        # Courtesy (docs/cluster.md): tasks of a generation about to be fenced stop first.
        # Only an exactly-once cluster fences (and writes task count records): elsewhere
        # every task would look as if it awaited fencing.
        if not self._settings.exactly_once_enabled:
            return
        try:
            snap = await self._config_log.refresh()
        except ReadToEndTimeout as exc:
            log.info("config read before rejoining timed out", error=str(exc))
            return
        doomed = [key for key in self._units.running_tasks() if snap.needs_fencing(key[0])]
        if doomed:
            log.info("stopping tasks whose configs await fencing", tasks=len(doomed))
            await self._units.stop_tasks(doomed)

    async def _drop_all(self, why: str, *, lost: bool) -> None:
        units = self._units
        tasks, connectors = list(units.running_tasks()), list(units.running_connectors())
        if tasks or connectors:
            log.info("stopping all work before rejoining", reason=why, tasks=len(tasks))
        await units.stop_tasks(tasks)
        for name in connectors:
            await units.stop_connector(name)
        # An eager member still tells the leader what it ran (stickiness, failover's
        # settle time); a member that lost its place does not: others may run it now.
        self._dropped = EMPTY if lost else self._state.assigned
        self._state.assigned = EMPTY

    async def _assign(self, join: JoinResponse) -> list[tuple[str, bytes]]:
        members = decode_members(join.members)
        try:
            snap = await self._config_log.refresh()
            await self._writes.claim()
        except Exception as exc:
            log.warning("leader cannot read or claim the config topic", error=repr(exc))
            snap = self._config_log.snapshot  # stale: members further on get config_mismatch
        mine = members.get(join.member_id)
        if mine is not None and (warning := mismatched_settings(members, mine)):
            log.warning("rebalance styles differ", detail=warning)
        if modes := exactly_once_modes(members):
            log.info("workers differ in exactly.once.source.support", modes=modes)
        leader = LeaderView(join.member_id, self._settings.rest_url, snap)
        assignor = self._assignors[assignor_of(join.protocol)]
        if self._memory_of != assignor.name:  # the group changed assignor: start afresh
            self._memory, self._memory_of = {}, assignor.name
        round_ = lead_round(
            leader,
            members,
            assignor=assignor,
            style=style_of(join.protocol),
            memory=self._memory,
            now_ms=int(self._clock.monotonic() * 1000),
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
        state = self._state
        try:
            assignment = MemberAssignment.decode(outcome.assignment)
        except MalformedGroupData as exc:
            log.warning("assignment unreadable; rejoining", error=str(exc))
            self._rejoin_later("bad data")
            return
        was_leader, previous_leader = state.is_leader, state.leader_id
        state.generation, state.member_id = outcome.generation, outcome.member_id
        state.leader_id, state.leader_url = assignment.leader_id, assignment.leader_url
        state.members, state.protocol = assignment.members, outcome.protocol
        state.style = style_of(outcome.protocol)
        if self._tenure_since is None:
            self._tenure_since = self._clock.monotonic()
        if not state.is_leader:
            self._writes.release()
            self._timers.cancel("delayed", KEY_TIMER)
        if was_leader != state.is_leader:
            log.info("leadership changed", leader=state.is_leader, leader_url=state.leader_url)
        state.joined_once.set()
        self._dropped = EMPTY
        if assignment.error != "none":
            self._report(outcome, assignment, previous_leader)
            log.info("assignment refused by the leader", reason=assignment.message)
            await self._read_config()
            self._rejoin.request_rejoin(assignment.error)
            return
        if not await self._read_config(assignment.config_offset):
            self._rejoin_later("config")
            return
        await self._stop_revoked(assignment.revoked)
        state.assigned = assignment.assigned
        _on_assignment(self._assignors.get(assignor_of(outcome.protocol)), assignment)
        self._report(outcome, assignment, previous_leader)
        await self._reconciler.reconcile()
        if assignment.revoked and state.style == "cooperative":
            self._rejoin.request_rejoin("revoked work handed over")
        if state.is_leader:
            await self._lead(assignment)

    def _rejoin_later(self, reason: str) -> None:
        self._timers.later(
            "rejoin", self._settings.retry_backoff_ms, lambda: self._rejoin.request_rejoin(reason)
        )

    def _report(self, outcome: Joined, assignment: MemberAssignment, previous_leader: str) -> None:
        state = self._state
        self._observer.rebalance_completed(
            Rebalanced(
                generation=outcome.generation,
                leader=state.is_leader,
                leader_changed=bool(previous_leader) and previous_leader != assignment.leader_id,
                protocol=state.style,
                cause=outcome.cause,
                seconds=outcome.seconds,
                members=len(assignment.members),
                connectors=len(state.assigned.connectors),
                tasks=len(state.assigned.tasks),
                revoked_connectors=len(assignment.revoked.connectors),
                revoked_tasks=len(assignment.revoked.tasks),
                delay_ms=assignment.delay_ms,
            )
        )

    async def _read_config(self, at_least: int = 0) -> bool:
        """Read the config topic to its end; False if that failed or stays short of
        ``at_least`` (the leader's offset)."""
        try:
            snap = await self._config_log.refresh()
        except ReadToEndTimeout as exc:
            log.warning("config topic not read to its end", error=str(exc))
            return False
        return snap.offset >= at_least

    async def _stop_revoked(self, revoked: Assignment) -> None:
        if not revoked:
            return
        log.info("revoked", connectors=sorted(revoked.connectors), tasks=len(revoked.tasks))
        await self._units.stop_tasks([(t.connector, t.task) for t in revoked.tasks])
        for name in sorted(revoked.connectors):
            await self._units.stop_connector(name)

    async def _lead(self, assignment: MemberAssignment) -> None:
        """The leader's duties after each rebalance it leads."""
        await self._keys.ensure()
        snap = self._config_log.snapshot
        for name in sorted(snap.connectors):
            if self._settings.transactional_config_writes and snap.needs_fencing(name):
                await self._rounds.start(name)
        if assignment.delay_ms > 0:
            self._timers.later(
                "delayed", assignment.delay_ms, lambda: self._rejoin.request_rejoin("scheduled")
            )


def _subscription(assignor: Assignor) -> Any:
    """The assignor's user data for a join; a failing plugin sends none (logged)."""
    try:
        return assignor.subscription()
    except Exception as exc:
        log.error("assignor subscription() failed", assignor=assignor.name, error=repr(exc))
        return None


def _on_assignment(assignor: Assignor | None, assignment: MemberAssignment) -> None:
    if assignor is None:
        return
    try:
        assignor.on_assignment(assignment.assigned, assignment.user_data)
    except Exception as exc:
        log.error("assignor on_assignment() failed", assignor=assignor.name, error=repr(exc))
