"""One rebalance round: from the assignor's target to what each member runs
(eager, and cooperative with its two-round handover)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import pytest

from eos.runtime.cluster.assignors import (
    Assignment,
    AssignmentRequest,
    Assignor,
    AssignorSettings,
    CooperativeAssignor,
    FailoverAssignor,
    Member,
    RoundRobinAssignor,
    StickyAssignor,
    TaskId,
)
from eos.runtime.cluster.assignors.base import EMPTY
from eos.runtime.cluster.rebalance import MemberPlan, needs_follow_up, plan_round

T = [TaskId("a", n) for n in range(8)]


def tasks(*numbers: int) -> Assignment:
    return Assignment.of([], (T[n] for n in numbers))


def applied(members: Sequence[Member], plans: Mapping[str, MemberPlan]) -> list[Member]:
    """The members after they acted on their plans: each runs what it was assigned."""
    return [
        Member(m.member_id, priority=m.priority, owned=plans[m.member_id].assigned) for m in members
    ]


def running_twice(members: Iterable[Member]) -> set[str | TaskId]:
    counts = Counter[str | TaskId]()
    for member in members:
        counts.update(member.owned.connectors)
        counts.update(member.owned.tasks)
    return {item for item, n in counts.items() if n > 1}


# ── eager ────────────────────────────────────────────────────────────────────


def test_eager_everyone_gets_its_target_and_reports_what_it_does_not_get_back() -> None:
    members = [Member("m1", owned=tasks(0, 1)), Member("m2", owned=tasks(2)), Member("m3")]
    target = {"m1": tasks(1, 2), "m2": tasks(0), "m3": Assignment.of(["a"])}
    plans = plan_round("eager", members, target)
    assert plans == {
        "m1": MemberPlan(tasks(1, 2), tasks(0)),
        "m2": MemberPlan(tasks(0), tasks(2)),
        "m3": MemberPlan(Assignment.of(["a"]), EMPTY),
    }


def test_eager_a_member_without_a_target_gets_nothing() -> None:
    plans = plan_round("eager", [Member("m1", owned=tasks(0))], {"other": tasks(0)})
    assert plans == {"m1": MemberPlan(EMPTY, tasks(0))}


# ── cooperative ──────────────────────────────────────────────────────────────


def test_cooperative_keeps_revokes_and_hands_out_free_work() -> None:
    members = [Member("m1", owned=tasks(0, 1, 2)), Member("m2", owned=tasks(3))]
    target = {"m1": tasks(0, 1, 4), "m2": tasks(3, 5)}
    plans = plan_round("cooperative", members, target)
    assert plans == {
        "m1": MemberPlan(tasks(0, 1, 4), tasks(2)),
        "m2": MemberPlan(tasks(3, 5), EMPTY),
    }
    assert needs_follow_up(plans)


def test_cooperative_nothing_moves_nothing_to_follow_up() -> None:
    members = [Member("m1", owned=tasks(0)), Member("m2", owned=tasks(1))]
    plans = plan_round("cooperative", members, {"m1": tasks(0, 2), "m2": tasks(1)})
    assert plans["m1"] == MemberPlan(tasks(0, 2), EMPTY)
    assert not needs_follow_up(plans)


def test_cooperative_two_round_handover_to_a_new_member() -> None:
    members = [Member("m1", owned=tasks(0, 1, 2, 3)), Member("m2")]
    target = {"m1": tasks(0, 1), "m2": tasks(2, 3)}
    first = plan_round("cooperative", members, target)
    assert first == {
        "m1": MemberPlan(tasks(0, 1), tasks(2, 3)),
        "m2": MemberPlan(EMPTY, EMPTY),
    }
    assert needs_follow_up(first)
    second = plan_round("cooperative", applied(members, first), target)
    assert second == {
        "m1": MemberPlan(tasks(0, 1), EMPTY),
        "m2": MemberPlan(tasks(2, 3), EMPTY),
    }
    assert not needs_follow_up(second)


def test_cooperative_double_claims() -> None:
    both = [Member("m1", owned=tasks(0)), Member("m2", owned=tasks(0)), Member("m3")]
    to_m2 = plan_round("cooperative", both, {"m2": tasks(0)})
    assert to_m2["m1"] == MemberPlan(EMPTY, tasks(0))
    assert to_m2["m2"] == MemberPlan(tasks(0), EMPTY)
    to_m3 = plan_round("cooperative", both, {"m3": tasks(0)})
    assert to_m3["m1"].revoked == to_m3["m2"].revoked == tasks(0)
    assert to_m3["m3"] == MemberPlan(EMPTY, EMPTY)
    to_nobody = plan_round("cooperative", both, {})
    assert to_nobody["m1"].revoked == to_nobody["m2"].revoked == tasks(0)


def test_cooperative_deleted_and_held_work_is_revoked_and_not_given() -> None:
    members = [Member("m1", owned=Assignment.of(["gone"], [T[0], T[1]]))]
    plans = plan_round("cooperative", members, {"m1": tasks(0)})
    assert plans["m1"] == MemberPlan(tasks(0), Assignment.of(["gone"], [T[1]]))


def random_members(rng: random.Random) -> list[Member]:
    ids = [f"m{n}" for n in range(rng.randint(1, 6))]
    owned: dict[str, list[TaskId]] = {m: [] for m in ids}
    for task in T:
        for _ in range(rng.choice([0, 1, 1, 2])):
            owned[rng.choice(ids)].append(task)
    return [Member(m, priority=rng.randint(0, 2), owned=Assignment.of([], owned[m])) for m in ids]


def random_target(rng: random.Random, members: Sequence[Member]) -> dict[str, Assignment]:
    ids = [m.member_id for m in members]
    target: dict[str, list[TaskId]] = {m: [] for m in ids}
    for task in T:
        if rng.random() < 0.9:
            target[rng.choice(ids)].append(task)
    return {m: Assignment.of([], got) for m, got in target.items()}


def test_cooperative_reaches_a_fixed_target_in_two_rounds() -> None:
    for seed in range(300):
        rng = random.Random(seed)
        members = random_members(rng)
        target = random_target(rng, members)
        first = plan_round("cooperative", members, target)
        members = applied(members, first)
        assert not running_twice(members)
        second = plan_round("cooperative", members, target)
        members = applied(members, second)
        assert not needs_follow_up(second)
        assert {m.member_id: m.owned for m in members} == target
        assert plan_round("cooperative", members, target) == {
            m: MemberPlan(got, EMPTY) for m, got in target.items()
        }


def random_cluster(rng: random.Random) -> tuple[list[Member], list[str], list[TaskId]]:
    """1 to 6 members, up to 4 connectors of up to 12 tasks; members run part of
    the work, some of it twice, and some work that no longer exists."""
    ids = [f"m{n}" for n in range(rng.randint(1, 6))]
    connectors = [f"c{n}" for n in range(rng.randint(0, 4))]
    work = [TaskId(c, n) for c in connectors for n in range(rng.randint(0, 12))]
    owned: dict[str, list[str | TaskId]] = {m: [] for m in ids}
    items: list[str | TaskId] = [*connectors, *work, "gone", TaskId("gone", 0)]
    for item in items:
        for _ in range(rng.choice([0, 1, 1, 1, 2])):
            owned[rng.choice(ids)].append(item)
    members = [
        Member(
            m,
            priority=rng.randint(0, 2),
            owned=Assignment.of(
                (i for i in owned[m] if isinstance(i, str)),
                (i for i in owned[m] if isinstance(i, TaskId)),
            ),
        )
        for m in ids
    ]
    return members, connectors, work


@pytest.mark.parametrize(
    "cls", [RoundRobinAssignor, StickyAssignor, CooperativeAssignor, FailoverAssignor]
)
@pytest.mark.parametrize("delay_ms", [0, 60_000])
def test_cooperative_rounds_with_each_assignor_settle_in_two(
    cls: type[Assignor], delay_ms: int
) -> None:
    """The leader runs the assignor again in every round, as the cluster does
    (here after a member vanished, so the cooperative assignor may hold work
    back); after the second round nobody revokes and everyone runs its target."""
    assignor = cls(AssignorSettings(delay_ms, failover_settle_ms=0))
    for seed in range(300):
        rng = random.Random(seed)
        members, connectors, work = random_cluster(rng)
        everyone = (*members, Member("zz-vanished"))
        memory = assignor.assign(AssignmentRequest(everyone, tuple(connectors), tuple(work))).memory
        for now in (1_000, 2_000):
            req = AssignmentRequest(tuple(members), tuple(connectors), tuple(work), now, memory)
            result = assignor.assign(req)
            plans = plan_round("cooperative", members, result.assignments)
            members, memory = applied(members, plans), result.memory
            assert not running_twice(members)
        assert not needs_follow_up(plans), seed
        assert {m.member_id: m.owned for m in members} == dict(result.assignments)
