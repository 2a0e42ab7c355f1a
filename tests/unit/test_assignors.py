"""The bundled assignors (round-robin, sticky, cooperative, failover, zone) and the
registry that finds them: pure functions, checked on hand-made cases and on
many random ones (seeded, so every run checks the same cases)."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest

import eos.runtime.cluster.assignors
from eos.errors import ConfigError
from eos.runtime.cluster.assignors import (
    ENTRY_POINT_GROUP,
    Assignment,
    AssignmentRequest,
    AssignmentResult,
    Assignor,
    AssignorSettings,
    CooperativeAssignor,
    FailoverAssignor,
    Member,
    RoundRobinAssignor,
    StickyAssignor,
    TaskId,
    ZoneAssignor,
    available_assignors,
    make_assignor,
)
from eos.runtime.cluster.assignors.base import EMPTY

DELAY = 60_000
SETTLE = 10_000
SETTINGS = AssignorSettings(scheduled_rebalance_max_delay_ms=DELAY, failover_settle_ms=SETTLE)
ALL = [RoundRobinAssignor, StickyAssignor, CooperativeAssignor, FailoverAssignor, ZoneAssignor]
BALANCED = [RoundRobinAssignor, StickyAssignor, CooperativeAssignor, ZoneAssignor]
SEEDS = range(300)


# ── helpers ──────────────────────────────────────────────────────────────────


def tasks(connector: str, count: int) -> list[TaskId]:
    return [TaskId(connector, n) for n in range(count)]


def request(
    members: Iterable[Member],
    connectors: Iterable[str] = (),
    task_ids: Iterable[TaskId] = (),
    *,
    now_ms: int = 0,
    memory: Mapping[str, Any] | None = None,
) -> AssignmentRequest:
    return AssignmentRequest(
        tuple(sorted(members, key=lambda m: m.member_id)),
        tuple(sorted(connectors)),
        tuple(sorted(task_ids)),
        now_ms,
        memory or {},
    )


def owning(result: AssignmentResult) -> list[Member]:
    """Members that run what ``result`` assigned them."""
    return [Member(m, owned=a) for m, a in sorted(result.assignments.items())]


def random_request(rng: random.Random) -> AssignmentRequest:
    """0 to 7 members, 0 to 6 connectors of 0 to 8 tasks; each item run by nobody, one
    member, or (rarely) two; members also claim work that no longer exists."""
    ids = [f"m{n}" for n in rng.sample(range(20), rng.randint(0, 7))]
    connectors = [f"c{n}" for n in rng.sample(range(10), rng.randint(0, 6))]
    work: list[str | TaskId] = [*connectors]
    for name in connectors:
        work.extend(tasks(name, rng.randint(0, 8)))
    gone: list[str | TaskId] = [
        "gone",
        TaskId("gone", 0),
        TaskId(connectors[0] if connectors else "x", 99),
    ]
    owned: dict[str, list[str | TaskId]] = {m: [] for m in ids}
    for item in [*work, *gone] if ids else []:
        for _ in range(rng.choice([0, 1, 1, 1, 2])):
            owned[rng.choice(ids)].append(item)
    members = [
        Member(
            m,
            priority=rng.randint(0, 3),
            tenure_ms=rng.choice([0, 5_000, 60_000]),
            owned=_of(items),
        )
        for m, items in owned.items()
    ]
    return request(members, connectors, [t for t in work if isinstance(t, TaskId)])


def _of(items: Iterable[str | TaskId]) -> Assignment:
    return Assignment.of(
        (i for i in items if isinstance(i, str)), (i for i in items if isinstance(i, TaskId))
    )


def check_well_formed(req: AssignmentRequest, result: AssignmentResult) -> None:
    assert set(result.assignments) == {m.member_id for m in req.members}
    counts = Counter[str | TaskId]()
    for got in result.assignments.values():
        counts.update(got.connectors)
        counts.update(got.tasks)
    assert all(n == 1 for n in counts.values()), counts
    assert set(counts) <= {*req.connectors, *req.tasks}
    json.dumps(dict(result.memory))
    assert result.next_rebalance_ms is None or result.next_rebalance_ms > 0


def spread(values: Sequence[int]) -> int:
    return max(values) - min(values) if values else 0


def check_balanced(req: AssignmentRequest, result: AssignmentResult) -> None:
    got = list(result.assignments.values())
    if not got:
        return
    assert sum(len(a.connectors) for a in got) == len(req.connectors)
    assert sum(len(a.tasks) for a in got) == len(req.tasks)
    assert spread([len(a.connectors) for a in got]) <= 1
    assert spread([len(a.tasks) for a in got]) <= 1


def moved(before: Iterable[Member], after: Mapping[str, Assignment]) -> int:
    """How many items someone ran before and someone else should run now."""
    count = 0
    for member in before:
        mine = after.get(member.member_id, EMPTY)
        count += len(member.owned - mine)
    return count


def placed(result: AssignmentResult) -> Assignment:
    everything = EMPTY
    for got in result.assignments.values():
        everything = everything | got
    return everything


# ── every assignor ───────────────────────────────────────────────────────────


@pytest.mark.parametrize("cls", ALL)
def test_random_requests_are_answered_well_formed(cls: type[Assignor]) -> None:
    for seed in SEEDS:
        req = random_request(random.Random(seed))
        check_well_formed(req, cls(SETTINGS).assign(req))


@pytest.mark.parametrize("cls", ALL)
def test_deterministic_whatever_the_member_order(cls: type[Assignor]) -> None:
    for seed in SEEDS:
        req = random_request(random.Random(seed))
        first = cls(SETTINGS).assign(req)
        shuffled = list(req.members)
        random.Random(seed).shuffle(shuffled)
        again = cls(SETTINGS).assign(AssignmentRequest(tuple(shuffled), req.connectors, req.tasks))
        assert again == first


@pytest.mark.parametrize("cls", ALL)
def test_no_members_and_no_work(cls: type[Assignor]) -> None:
    assert cls(SETTINGS).assign(request([], ["a"], tasks("a", 3))).assignments == {}
    result = cls(SETTINGS).assign(request([Member("m1"), Member("m2", owned=Assignment.of(["x"]))]))
    assert result.assignments == {"m1": EMPTY, "m2": EMPTY}
    assert result.next_rebalance_ms is None


@pytest.mark.parametrize("cls", ALL)
def test_the_name_is_the_entry_point(cls: type[Assignor]) -> None:
    assert available_assignors()[cls.name] == f"{cls.__module__}:{cls.__qualname__}"


@pytest.mark.parametrize("cls", BALANCED)
def test_balanced_on_random_requests(cls: type[Assignor]) -> None:
    for seed in SEEDS:
        req = random_request(random.Random(seed))
        check_balanced(req, cls(SETTINGS).assign(req))


# ── round-robin ──────────────────────────────────────────────────────────────


def test_round_robin_deals_connectors_then_tasks_continuing_the_rotation() -> None:
    members = [Member("b"), Member("a"), Member("c", owned=Assignment.of(["x", "y"]))]
    req = request(members, ["y", "x"], [*tasks("y", 2), *tasks("x", 3)])
    assert RoundRobinAssignor(SETTINGS).assign(req).assignments == {
        "a": Assignment.of(["x"], [TaskId("x", 1), TaskId("y", 1)]),
        "b": Assignment.of(["y"], [TaskId("x", 2)]),
        "c": Assignment.of([], [TaskId("x", 0), TaskId("y", 0)]),
    }


def test_round_robin_ignores_who_runs_what() -> None:
    for seed in range(50):
        req = random_request(random.Random(seed))
        fresh = [Member(m.member_id) for m in req.members]
        same = AssignmentRequest(tuple(fresh), req.connectors, req.tasks)
        assert RoundRobinAssignor(SETTINGS).assign(req) == RoundRobinAssignor(SETTINGS).assign(same)


def test_round_robin_balances_the_total_too() -> None:
    for seed in SEEDS:
        req = random_request(random.Random(seed))
        got = RoundRobinAssignor(SETTINGS).assign(req).assignments.values()
        assert spread([len(a) for a in got]) <= 1


# ── sticky ───────────────────────────────────────────────────────────────────


def test_sticky_keeps_a_balanced_assignment() -> None:
    for seed in range(100):
        req = random_request(random.Random(seed))
        first = StickyAssignor(SETTINGS).assign(req)
        again = StickyAssignor(SETTINGS).assign(request(owning(first), req.connectors, req.tasks))
        assert again == first


def test_sticky_moves_the_fewest_on_random_requests() -> None:
    """A member keeps as many of its items as its share allows, and is given
    new items only once it keeps all of its own."""
    for seed in SEEDS:
        req = random_request(random.Random(seed))
        got = StickyAssignor(SETTINGS).assign(req).assignments
        owners = req.owners()
        for member in req.members:
            mine = [i for i, claim in owners.items() if claim[0] == member.member_id]
            held = _of(mine) & Assignment.of(req.connectors, req.tasks)
            kept = held & got[member.member_id]
            assert len(kept.connectors) == min(
                len(held.connectors), len(got[member.member_id].connectors)
            )
            assert len(kept.tasks) == min(len(held.tasks), len(got[member.member_id].tasks))


def test_sticky_adding_a_member_moves_its_share_only() -> None:
    connectors = ["a", "b", "c", "d"]
    work = [t for c in connectors for t in tasks(c, 3)]
    three = [Member("m1"), Member("m2"), Member("m3")]
    before = owning(StickyAssignor(SETTINGS).assign(request(three, connectors, work)))
    after = StickyAssignor(SETTINGS).assign(request([*before, Member("m4")], connectors, work))
    assert moved(before, after.assignments) == 1 + 3
    assert len(after.assignments["m4"].connectors) == 1
    assert len(after.assignments["m4"].tasks) == 3


def test_sticky_adding_a_member_moves_only_what_it_gets() -> None:
    for seed in range(100):
        rng = random.Random(seed)
        ids = [f"m{n}" for n in range(rng.randint(1, 7))]
        connectors = [f"c{n}" for n in range(rng.randint(0, 9))]
        work = [t for c in connectors for t in tasks(c, rng.randint(0, 9))]
        first = StickyAssignor(SETTINGS).assign(request([Member(m) for m in ids], connectors, work))
        before = owning(first)
        after = StickyAssignor(SETTINGS).assign(request([*before, Member("new")], connectors, work))
        assert moved(before, after.assignments) == len(after.assignments["new"])
        check_balanced(request([*before, Member("new")], connectors, work), after)


def test_sticky_removing_a_member_moves_its_work_only() -> None:
    for seed in range(100):
        rng = random.Random(seed)
        ids = [f"m{n}" for n in range(rng.randint(2, 7))]
        connectors = [f"c{n}" for n in range(rng.randint(0, 9))]
        work = [t for c in connectors for t in tasks(c, rng.randint(0, 9))]
        first = StickyAssignor(SETTINGS).assign(request([Member(m) for m in ids], connectors, work))
        gone = rng.choice(ids)
        stay = [m for m in owning(first) if m.member_id != gone]
        after = StickyAssignor(SETTINGS).assign(request(stay, connectors, work))
        assert moved(stay, after.assignments) == 0
        check_balanced(request(stay, connectors, work), after)


def test_sticky_gives_new_work_to_the_least_loaded() -> None:
    a = tasks("a", 6)
    members = [
        Member("m1", owned=Assignment.of([], a[:3])),
        Member("m2", owned=Assignment.of([], [a[3]])),
        Member("m3"),
    ]
    got = StickyAssignor(SETTINGS).assign(request(members, [], a)).assignments
    assert got == {
        "m1": Assignment.of([], a[:2]),
        "m2": Assignment.of([], [a[3], a[4]]),
        "m3": Assignment.of([], [a[2], a[5]]),
    }


def test_sticky_double_claim_the_first_member_id_keeps_it() -> None:
    x = TaskId("a", 0)
    members = [
        Member("m2", owned=Assignment.of([], [x])),
        Member("m1", owned=Assignment.of([], [x])),
    ]
    got = StickyAssignor(SETTINGS).assign(request(members, [], [x, TaskId("a", 1)])).assignments
    assert got["m1"].tasks == {x}
    assert got["m2"].tasks == {TaskId("a", 1)}


def test_sticky_drops_deleted_work() -> None:
    members = [Member("m1", owned=Assignment.of(["a", "old"], [*tasks("a", 2), TaskId("old", 0)]))]
    got = StickyAssignor(SETTINGS).assign(request(members, ["a"], tasks("a", 1))).assignments
    assert got == {"m1": Assignment.of(["a"], [TaskId("a", 0)])}


# ── cooperative ──────────────────────────────────────────────────────────────


def run_rounds(assignor: Assignor, reqs: Iterable[AssignmentRequest]) -> list[AssignmentResult]:
    """Each request gets the memory of the previous result."""
    results: list[AssignmentResult] = []
    memory: Mapping[str, Any] = {}
    for req in reqs:
        threaded = AssignmentRequest(req.members, req.connectors, req.tasks, req.now_ms, memory)
        results.append(assignor.assign(threaded))
        memory = results[-1].memory
    return results


CONNECTORS = ["a", "b", "c"]
WORK = [*tasks("a", 3), *tasks("b", 3), *tasks("c", 3)]


def three_then_one_lost(coop: CooperativeAssignor) -> tuple[AssignmentResult, AssignmentResult]:
    """m1, m2, m3 at t=0; m3 vanishes at t=1000."""
    first = coop.assign(request([Member("m1"), Member("m2"), Member("m3")], CONNECTORS, WORK))
    stay = [m for m in owning(first) if m.member_id != "m3"]
    lost = coop.assign(request(stay, CONNECTORS, WORK, now_ms=1_000, memory=first.memory))
    return first, lost


def test_cooperative_holds_back_the_work_of_a_vanished_member() -> None:
    first, lost = three_then_one_lost(CooperativeAssignor(SETTINGS))
    assert lost.assignments == {m: first.assignments[m] for m in ("m1", "m2")}
    assert lost.next_rebalance_ms == DELAY
    assert not placed(lost) & first.assignments["m3"]


def test_cooperative_releases_held_work_when_the_delay_expires() -> None:
    coop = CooperativeAssignor(SETTINGS)
    _, lost = three_then_one_lost(coop)
    stay = owning(lost)
    later = coop.assign(request(stay, CONNECTORS, WORK, now_ms=31_000, memory=lost.memory))
    assert later.next_rebalance_ms == DELAY - 30_000
    assert placed(later) == placed(lost)
    due = coop.assign(request(stay, CONNECTORS, WORK, now_ms=1_000 + DELAY, memory=later.memory))
    assert due.next_rebalance_ms is None
    assert placed(due) == Assignment.of(CONNECTORS, WORK)
    assert moved(stay, due.assignments) == 0
    check_balanced(request(stay, CONNECTORS, WORK), due)


def test_cooperative_gives_held_work_to_a_new_member_at_once() -> None:
    coop = CooperativeAssignor(SETTINGS)
    first, lost = three_then_one_lost(coop)
    back = [*owning(lost), Member("m3-new")]
    joined = coop.assign(request(back, CONNECTORS, WORK, now_ms=2_000, memory=lost.memory))
    assert joined.next_rebalance_ms is None
    assert joined.assignments["m3-new"] == first.assignments["m3"]
    assert moved(back, joined.assignments) == 0


def test_cooperative_a_member_back_with_its_id_gets_its_work() -> None:
    coop = CooperativeAssignor(SETTINGS)
    first, lost = three_then_one_lost(coop)
    back = [*owning(lost), Member("m3")]
    result = coop.assign(request(back, CONNECTORS, WORK, now_ms=2_000, memory=lost.memory))
    assert result.assignments == first.assignments
    assert result.next_rebalance_ms is None


def test_cooperative_counts_the_delay_from_the_first_round_that_missed_the_member() -> None:
    coop = CooperativeAssignor(SETTINGS)
    _, lost = three_then_one_lost(coop)
    stay = owning(lost)
    memory = lost.memory
    for now in (5_000, 20_000, 60_000):
        result = coop.assign(request(stay, CONNECTORS, WORK, now_ms=now, memory=memory))
        assert result.next_rebalance_ms == 1_000 + DELAY - now
        memory = result.memory


def test_cooperative_holds_only_what_nobody_runs_and_what_still_exists() -> None:
    coop = CooperativeAssignor(SETTINGS)
    first, _ = three_then_one_lost(coop)
    theirs = sorted(first.assignments["m3"].tasks)
    stolen, deleted = theirs[0], theirs[1]
    members = [m for m in owning(first) if m.member_id != "m3"]
    members[0] = Member("m1", owned=members[0].owned | Assignment.of([], [stolen]))
    work = [t for t in WORK if t != deleted]
    result = coop.assign(request(members, CONNECTORS, work, now_ms=1_000, memory=first.memory))
    everything = placed(result)
    assert stolen in everything.tasks
    assert deleted not in everything.tasks
    assert Assignment.of(CONNECTORS, work) - everything == first.assignments["m3"] - Assignment.of(
        [], [stolen, deleted]
    )


def test_cooperative_new_work_during_the_delay_goes_to_the_live_members() -> None:
    coop = CooperativeAssignor(SETTINGS)
    _, lost = three_then_one_lost(coop)
    more = [*WORK, *tasks("d", 4)]
    result = coop.assign(
        request(owning(lost), [*CONNECTORS, "d"], more, now_ms=2_000, memory=lost.memory)
    )
    assert set(tasks("d", 4)) <= placed(result).tasks
    assert "d" in placed(result).connectors
    assert result.next_rebalance_ms == DELAY - 1_000


def test_cooperative_with_no_delay_is_sticky() -> None:
    coop = CooperativeAssignor(AssignorSettings(scheduled_rebalance_max_delay_ms=0))
    _, lost = three_then_one_lost(coop)
    assert lost.next_rebalance_ms is None
    assert placed(lost) == Assignment.of(CONNECTORS, WORK)
    for seed in range(100):
        rng = random.Random(seed)
        reqs = [random_request(rng) for _ in range(4)]
        sticky = [StickyAssignor(SETTINGS).assign(r) for r in reqs]
        assert [r.assignments for r in run_rounds(coop, reqs)] == [r.assignments for r in sticky]


def test_cooperative_a_new_leader_holds_nothing_back() -> None:
    coop = CooperativeAssignor(SETTINGS)
    first, _ = three_then_one_lost(coop)
    stay = [m for m in owning(first) if m.member_id != "m3"]
    result = coop.assign(request(stay, CONNECTORS, WORK, now_ms=1_000))
    assert result.next_rebalance_ms is None
    sticky = StickyAssignor(SETTINGS).assign(request(stay, CONNECTORS, WORK))
    assert result.assignments == sticky.assignments


def test_cooperative_survives_memory_it_did_not_write() -> None:
    members = [Member("m1"), Member("m2")]
    for memory in ({"assignments": 3}, {"assignments": {"m9": {"tasks": [[1]]}}}, {"lost": [1]}):
        result = CooperativeAssignor(SETTINGS).assign(
            request(members, ["a"], tasks("a", 2), memory=memory)
        )
        assert placed(result) == Assignment.of(["a"], tasks("a", 2))


def test_cooperative_random_sequences_stay_well_formed_and_balanced() -> None:
    """Random rounds with memory threaded through: every result is well formed,
    the work assigned is balanced, and only work of vanished members is held."""
    coop = CooperativeAssignor(SETTINGS)
    for seed in range(100):
        rng = random.Random(seed)
        memory: Mapping[str, Any] = {}
        for now in range(0, 5 * 40_000, 40_000):
            base = random_request(rng)
            req = AssignmentRequest(base.members, base.connectors, base.tasks, now, memory)
            result = coop.assign(req)
            check_well_formed(req, result)
            got = list(result.assignments.values())
            assert spread([len(a.connectors) for a in got]) <= 1
            assert spread([len(a.tasks) for a in got]) <= 1
            held = Assignment.of(req.connectors, req.tasks) - placed(result)
            assert not held & Assignment.of(*_owned_items(req))
            if req.members:
                assert bool(held) == (result.next_rebalance_ms is not None)
            memory = result.memory


def _owned_items(req: AssignmentRequest) -> tuple[set[str], set[TaskId]]:
    owned = EMPTY
    for member in req.members:
        owned = owned | member.owned
    return set(owned.connectors), set(owned.tasks)


# ── failover ─────────────────────────────────────────────────────────────────

EVERYTHING = Assignment.of(CONNECTORS, WORK)


def on(result: AssignmentResult) -> list[str]:
    """The members that are given any work."""
    return sorted(m for m, got in result.assignments.items() if got)


def test_failover_everything_on_the_highest_priority() -> None:
    members = [Member("m1", priority=1), Member("m2", priority=3), Member("m3", priority=2)]
    result = FailoverAssignor(SETTINGS).assign(request(members, CONNECTORS, WORK))
    assert result.assignments["m2"] == EVERYTHING
    assert on(result) == ["m2"]
    assert result.next_rebalance_ms is None


def test_failover_ties_go_to_the_smallest_member_id() -> None:
    members = [Member("m3", priority=2), Member("m2", priority=2), Member("m1", priority=1)]
    assert on(FailoverAssignor(SETTINGS).assign(request(members, CONNECTORS, WORK))) == ["m2"]


def test_failover_the_whole_story() -> None:
    fo = FailoverAssignor(SETTINGS)
    old = SETTLE * 10
    first = Member("first", priority=3, tenure_ms=old, owned=EVERYTHING)
    second = Member("second", priority=2, tenure_ms=old)
    third = Member("third", priority=1, tenure_ms=old)
    assert on(fo.assign(request([first, second, third], CONNECTORS, WORK))) == ["first"]

    lost = fo.assign(request([second, third], CONNECTORS, WORK))
    assert on(lost) == ["second"]
    assert lost.next_rebalance_ms is None
    second = Member("second", priority=2, tenure_ms=old, owned=EVERYTHING)

    for tenure in (0, 4_000, SETTLE - 1):
        back = Member("first-2", priority=3, tenure_ms=tenure)
        result = fo.assign(request([back, second, third], CONNECTORS, WORK))
        assert on(result) == ["second"]
        assert result.next_rebalance_ms == SETTLE - tenure

    settled = Member("first-2", priority=3, tenure_ms=SETTLE)
    result = fo.assign(request([settled, second, third], CONNECTORS, WORK))
    assert on(result) == ["first-2"]
    assert result.next_rebalance_ms is None


def test_failover_nothing_runs_so_the_best_gets_it_at_once() -> None:
    members = [Member("m1", priority=1, tenure_ms=SETTLE * 2), Member("m2", priority=5)]
    result = FailoverAssignor(SETTINGS).assign(request(members, CONNECTORS, WORK))
    assert on(result) == ["m2"]
    assert result.next_rebalance_ms is None


def test_failover_owning_only_deleted_work_is_owning_nothing() -> None:
    members = [Member("m1", owned=Assignment.of(["old"])), Member("m2", priority=5)]
    result = FailoverAssignor(SETTINGS).assign(request(members, CONNECTORS, WORK))
    assert on(result) == ["m2"]
    assert result.next_rebalance_ms is None


def test_failover_the_unsettled_best_that_runs_everything_keeps_it() -> None:
    members = [
        Member("m1", priority=1, tenure_ms=SETTLE),
        Member("m2", priority=5, owned=EVERYTHING),
    ]
    result = FailoverAssignor(SETTINGS).assign(request(members, CONNECTORS, WORK))
    assert on(result) == ["m2"]
    assert result.next_rebalance_ms is None


def test_failover_split_work_stays_put_until_the_best_settles() -> None:
    a0, b0 = TaskId("a", 0), TaskId("b", 0)
    members = [
        Member("m1", priority=1, owned=Assignment.of(["a"], [a0])),
        Member("m2", priority=2, owned=Assignment.of([], [b0])),
        Member("m3", priority=3, tenure_ms=2_000),
    ]
    result = FailoverAssignor(SETTINGS).assign(request(members, CONNECTORS, WORK))
    assert result.assignments["m1"] == Assignment.of(["a"], [a0])
    assert result.assignments["m2"] == EVERYTHING - Assignment.of(["a"], [a0])
    assert result.assignments["m3"] == EMPTY
    assert result.next_rebalance_ms == SETTLE - 2_000


def test_failover_gives_the_best_member_everything_on_random_requests() -> None:
    fo = FailoverAssignor(AssignorSettings(failover_settle_ms=0))
    for seed in SEEDS:
        req = random_request(random.Random(seed))
        result = fo.assign(req)
        if req.members:
            best = min(req.members, key=lambda m: (-m.priority, m.member_id))
            assert result.assignments[best.member_id] == Assignment.of(req.connectors, req.tasks)


# ── registry ─────────────────────────────────────────────────────────────────


def test_the_bundled_assignors_are_installed() -> None:
    assert ENTRY_POINT_GROUP == "eos.assignors"
    assert {"round-robin", "sticky", "cooperative", "failover"} <= set(available_assignors())


@pytest.mark.parametrize("cls", ALL)
def test_make_by_name(cls: type[Assignor]) -> None:
    assignor = make_assignor(cls.name, SETTINGS)
    assert type(assignor) is cls
    assert assignor.settings == SETTINGS


@pytest.mark.parametrize(
    "path",
    [
        "eos.runtime.cluster.assignors.sticky:StickyAssignor",
        "eos.runtime.cluster.assignors.sticky.StickyAssignor",
    ],
)
def test_make_by_class_path(path: str) -> None:
    assert type(make_assignor(path, SETTINGS)) is StickyAssignor


def test_unknown_name_lists_the_installed_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        make_assignor("stiky", SETTINGS)
    assert caught.value.key == "assignor"
    assert caught.value.value == "stiky"
    message = str(caught.value)
    for name in ("cooperative", "failover", "round-robin", "sticky", "class path"):
        assert name in message


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("eos.runtime.cluster.assignors.base:TaskId", "not a concrete Assignor subclass"),
        ("eos.runtime.cluster.assignors.base:Assignor", "not a concrete Assignor subclass"),
        ("eos.runtime.cluster.assignors.nowhere:Nothing", "cannot import"),
        ("eos.runtime.cluster.assignors.sticky:Nothing", "has no class"),
    ],
)
def test_a_class_path_that_is_no_assignor(path: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as caught:
        make_assignor(path, SETTINGS)
    assert "round-robin" in str(caught.value)


def test_package_exports() -> None:
    names = {n for n in vars(eos.runtime.cluster.assignors) if not n.startswith("_")}
    assert names >= {
        "Assignment",
        "AssignmentRequest",
        "AssignmentResult",
        "Assignor",
        "AssignorSettings",
        "Member",
        "TaskId",
        "RoundRobinAssignor",
        "StickyAssignor",
        "CooperativeAssignor",
        "FailoverAssignor",
        "ENTRY_POINT_GROUP",
        "available_assignors",
        "make_assignor",
    }
