"""The membership state machine against a scripted group coordinator (no broker):
what the worker does for each answer, with a manual clock for the session timeout."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import pytest

from eos.errors import ConfigError, CoordinatorNotAvailable
from eos.kafka import group as g
from eos.runtime.clock import ManualClock
from eos.runtime.cluster.membership import Joined, Membership, MembershipSettings

FAST = MembershipSettings(
    session_timeout_ms=10_000, heartbeat_interval_ms=5, rebalance_timeout_ms=60_000,
    retry_backoff_ms=1,
)  # fmt: skip


@dataclass
class FakeGroup:
    """Answers from queues; when a queue is empty, everything is fine."""

    clock: ManualClock
    joins: deque[g.JoinResponse] = field(default_factory=deque)
    syncs: deque[g.SyncResponse] = field(default_factory=deque)
    heartbeats: deque[int | Exception] = field(default_factory=deque)
    description: g.GroupDescription | None = None
    join_requests: list[str] = field(default_factory=list)
    heartbeat_count: int = 0
    left: list[str] = field(default_factory=list)
    generation: int = 0
    seconds_per_heartbeat: float = 0.0

    async def find_coordinator(self) -> int:
        return 1

    async def join(
        self,
        *,
        member_id: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
    ) -> g.JoinResponse:
        assert protocol_type == "eos"
        self.join_requests.append(member_id)
        if self.joins:
            return self.joins.popleft()
        self.generation += 1
        me = member_id or "m-1"
        return g.JoinResponse(g.NONE, self.generation, protocols[0][0], me, me, ((me, b"meta"),))

    async def sync(
        self, *, generation: int, member_id: str, assignments: Sequence[tuple[str, bytes]]
    ) -> g.SyncResponse:
        if self.syncs:
            return self.syncs.popleft()
        return g.SyncResponse(g.NONE, dict(assignments).get(member_id, b""))

    async def heartbeat(self, *, generation: int, member_id: str) -> int:
        self.heartbeat_count += 1
        self.clock.advance(self.seconds_per_heartbeat)
        if self.heartbeats:
            answer = self.heartbeats.popleft()
            if isinstance(answer, Exception):
                raise answer
            return answer
        return g.NONE

    async def leave(self, *, member_id: str) -> int:
        self.left.append(member_id)
        return g.NONE

    async def describe(self) -> g.GroupDescription:
        assert self.description is not None
        return self.description


@dataclass
class Listener:
    rejoins: list[bool] = field(default_factory=list)
    outcomes: list[Joined] = field(default_factory=list)
    errors: list[str | None] = field(default_factory=list)
    assigned: list[int] = field(default_factory=list)
    joined_event: anyio.Event = field(default_factory=anyio.Event)

    def protocols(self) -> list[tuple[str, bytes]]:
        return [("sessioned/sticky", b"m"), ("eager/sticky", b"m")]

    async def prepare_rejoin(self, lost: bool) -> None:
        self.rejoins.append(lost)

    async def assign(self, join: g.JoinResponse) -> list[tuple[str, bytes]]:
        self.assigned.append(join.generation)
        return [(m, f"work-of-{m}".encode()) for m, _ in join.members]

    def joined(self, outcome: Joined) -> None:
        self.outcomes.append(outcome)
        self.joined_event.set()
        self.joined_event = anyio.Event()

    def group_error(self, message: str | None) -> None:
        self.errors.append(message)

    async def wait_joins(self, count: int) -> None:
        with anyio.fail_after(5):
            while len(self.outcomes) < count:
                await self.joined_event.wait()


@asynccontextmanager
async def running(group: FakeGroup, listener: Listener) -> AsyncIterator[Membership]:
    member = Membership(group, listener, FAST, group_id="grp", clock=group.clock)
    async with anyio.create_task_group() as tg:
        await tg.start(member.run)
        yield member
        tg.cancel_scope.cancel()


@pytest.fixture
def group() -> FakeGroup:
    return FakeGroup(ManualClock())


async def test_member_id_required_then_leads_and_gets_its_assignment(group: FakeGroup) -> None:
    group.joins.append(g.JoinResponse(g.MEMBER_ID_REQUIRED, member_id="m-7"))
    listener = Listener()
    async with running(group, listener) as member:
        await listener.wait_joins(1)
        assert group.join_requests == ["", "m-7"]
        outcome = listener.outcomes[0]
        assert (outcome.member_id, outcome.leader, outcome.assignment) == (
            "m-7",
            True,
            b"work-of-m-7",
        )
        assert outcome.cause == "start"
        assert listener.assigned == [1]
        assert member.stable
    assert group.left == ["m-7"]  # a clean stop leaves the group


async def test_rebalance_in_progress_rejoins_keeping_the_work(group: FakeGroup) -> None:
    listener = Listener()
    async with running(group, listener):
        await listener.wait_joins(1)
        group.heartbeats.append(g.REBALANCE_IN_PROGRESS)
        await listener.wait_joins(2)
    assert listener.rejoins == [False, False]
    assert listener.outcomes[1].cause == "rebalance"
    assert group.join_requests == ["", "m-1"]


@pytest.mark.parametrize("error", [g.UNKNOWN_MEMBER_ID, g.ILLEGAL_GENERATION])
async def test_expelled_member_drops_its_work_before_rejoining(
    group: FakeGroup, error: int
) -> None:
    listener = Listener()
    async with running(group, listener):
        await listener.wait_joins(1)
        group.heartbeats.append(error)
        await listener.wait_joins(2)
    assert listener.rejoins == [False, True]
    assert listener.outcomes[1].cause == "lost"
    expected_id = "" if error == g.UNKNOWN_MEMBER_ID else "m-1"
    assert group.join_requests[-1] == expected_id


async def test_no_heartbeat_for_a_session_timeout_means_the_work_is_lost(group: FakeGroup) -> None:
    listener = Listener()
    async with running(group, listener):
        await listener.wait_joins(1)
        group.seconds_per_heartbeat = 4.0  # the manual clock: 3 failures > 10 s session
        group.heartbeats.extend(CoordinatorNotAvailable("down") for _ in range(3))
        await listener.wait_joins(2)
    assert listener.rejoins == [False, True]
    assert listener.outcomes[1].cause == "lost"


async def test_coordinator_moving_is_retried_without_losing_work(group: FakeGroup) -> None:
    listener = Listener()
    async with running(group, listener):
        await listener.wait_joins(1)
        group.heartbeats.extend([g.NOT_COORDINATOR, CoordinatorNotAvailable("moving")])
        with anyio.fail_after(5):
            while group.heartbeat_count < 5:  # noqa: ASYNC110 - polls the fake's counter
                await anyio.sleep(0.005)
    assert listener.rejoins == [False]
    assert len(listener.outcomes) == 1


async def test_request_rejoin_wakes_the_member_at_once(group: FakeGroup) -> None:
    slow = MembershipSettings(heartbeat_interval_ms=60_000, retry_backoff_ms=1)
    listener = Listener()
    member = Membership(group, listener, slow, group_id="grp", clock=group.clock)
    async with anyio.create_task_group() as tg:
        await tg.start(member.run)
        await listener.wait_joins(1)
        member.request_rejoin("config changed")
        await listener.wait_joins(2)
        tg.cancel_scope.cancel()
    assert listener.outcomes[1].cause == "requested"
    assert group.heartbeat_count == 0


async def test_sync_failures(group: FakeGroup) -> None:
    group.syncs.extend(
        [g.SyncResponse(g.REBALANCE_IN_PROGRESS), g.SyncResponse(g.UNKNOWN_MEMBER_ID)]
    )
    listener = Listener()
    async with running(group, listener):
        await listener.wait_joins(1)
    # 1: sync says a new rebalance began (work kept); 2: the member is unknown (lost, new id)
    assert listener.rejoins == [False, False, True]
    assert group.join_requests == ["", "m-1", ""]


async def test_inconsistent_protocol_is_described_and_reported(group: FakeGroup) -> None:
    group.joins.append(g.JoinResponse(g.INCONSISTENT_GROUP_PROTOCOL))
    group.description = g.GroupDescription(
        "Stable", "eos", "eager/failover", (g.DescribedMember("x", "/10.0.0.5", b""),)
    )
    listener = Listener()
    async with running(group, listener):
        await listener.wait_joins(1)
    message = listener.errors[0]
    assert message is not None
    assert "'eager/failover'" in message
    assert "sessioned/sticky" in message
    assert "connect.protocol and assignor" in message
    assert listener.errors[-1] is None  # cleared once it could join


async def test_group_of_another_protocol_type(group: FakeGroup) -> None:
    group.joins.append(g.JoinResponse(g.INCONSISTENT_GROUP_PROTOCOL))
    group.description = g.GroupDescription("Stable", "consumer", "range", ())
    listener = Listener()
    async with running(group, listener):
        await listener.wait_joins(1)
    assert "protocol type 'consumer'" in str(listener.errors[0])
    assert "group.id of its own" in str(listener.errors[0])


async def test_invalid_session_timeout_is_a_config_error(group: FakeGroup) -> None:
    group.joins.append(g.JoinResponse(g.INVALID_SESSION_TIMEOUT))
    member = Membership(group, Listener(), FAST, group_id="grp", clock=group.clock)
    with pytest.raises(ExceptionGroup) as caught:
        async with anyio.create_task_group() as tg:
            await tg.start(member.run)
    (error,) = caught.value.exceptions
    assert isinstance(error, ConfigError)
    assert error.key == "session.timeout.ms"
    assert group.left == []  # never joined: nothing to leave
