"""The zone assignor (``assignor=zone``, ``worker.rack``): properties on seeded random
clusters — every task assigned once, each connector's tasks spread over the racks present
within one of even, a steady round moves nothing, a rack lost moves only its tasks, a rack
that returns takes back no more than an even spread gives it — and its subscription."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from eos.runtime.cluster.assignors import (
    Assignment,
    AssignmentRequest,
    AssignorSettings,
    Member,
    TaskId,
    ZoneAssignor,
)

ZONE = ZoneAssignor(AssignorSettings())


def cluster(rng: random.Random) -> tuple[dict[str, str], list[str], list[TaskId]]:
    """member id → rack; connectors; tasks (1 to 12 per connector)."""
    racks = [f"zone-{r}" for r in range(rng.randint(1, 4))]
    members = {f"w{i:03d}": rng.choice(racks) for i in range(rng.randint(len(racks), 12))}
    for i, rack in enumerate(racks):  # every rack has a member
        members[f"w{i:03d}"] = rack
    connectors = [f"c{n:02d}" for n in range(rng.randint(1, 15))]
    task_ids = [TaskId(c, t) for c in connectors for t in range(rng.randint(1, 12))]
    return members, connectors, task_ids


def assign(
    racks: dict[str, str],
    connectors: list[str],
    task_ids: list[TaskId],
    owned: dict[str, Assignment] | None = None,
) -> dict[str, Assignment]:
    owned = owned or {}
    request = AssignmentRequest(
        tuple(
            Member(m, user_data={"rack": r}, owned=owned.get(m, Assignment()))
            for m, r in sorted(racks.items())
        ),
        tuple(sorted(connectors)),
        tuple(sorted(task_ids)),
    )
    return dict(ZONE.assign(request).assignments)


def owner_of(result: dict[str, Assignment]) -> dict[TaskId, str]:
    return {t: m for m, a in result.items() for t in a.tasks}


def check_spread(racks: dict[str, str], result: dict[str, Assignment]) -> None:
    present = sorted(set(racks.values()))
    owners = owner_of(result)
    per: Counter[tuple[str, str]] = Counter((t.connector, racks[m]) for t, m in owners.items())
    for name in {t.connector for t in owners}:
        counts = [per[(name, r)] for r in present]
        assert max(counts) - min(counts) <= 1, (name, counts)


@pytest.mark.parametrize("seed", range(200))
def test_every_task_once_spread_over_racks_and_steady(seed: int) -> None:
    rng = random.Random(seed)
    racks, connectors, task_ids = cluster(rng)
    result = assign(racks, connectors, task_ids)
    assigned = [t for a in result.values() for t in a.tasks]
    assert sorted(assigned) == sorted(task_ids)
    assert sorted(c for a in result.values() for c in a.connectors) == sorted(connectors)
    check_spread(racks, result)
    for rack in set(racks.values()):  # within a rack, tasks balanced to within one
        counts = [len(result[m].tasks) for m, r in racks.items() if r == rack]
        assert max(counts) - min(counts) <= 1
    assert assign(racks, connectors, task_ids, result) == result  # a steady round moves nothing


@pytest.mark.parametrize("seed", range(200))
def test_a_rack_lost_moves_only_its_tasks_and_its_return_only_its_share(seed: int) -> None:
    rng = random.Random(seed)
    racks, connectors, task_ids = cluster(rng)
    if len(set(racks.values())) < 2:
        return
    before = assign(racks, connectors, task_ids)
    gone = rng.choice(sorted(set(racks.values())))
    left = {m: r for m, r in racks.items() if r != gone}
    after = assign(left, connectors, task_ids, before)
    check_spread(left, after)
    was, now = owner_of(before), owner_of(after)
    moved = {t for t in task_ids if was[t] != now[t]}
    assert {t for t in moved if racks[was[t]] != gone} == set()  # only the lost rack's tasks
    back = assign(racks, connectors, task_ids, after)
    check_spread(racks, back)
    again = owner_of(back)
    into = {t for t in task_ids if racks[again[t]] == gone}
    per_connector = Counter(t.connector for t in task_ids)
    assert len(into) <= sum(-(-n // len(set(racks.values()))) for n in per_connector.values())
    across = {t for t in task_ids if racks[again[t]] not in (gone, racks[now[t]])}
    assert across == set()  # between the racks that stayed, nothing moves


def test_without_racks_it_is_sticky() -> None:
    members = [Member(f"w{i}") for i in range(3)]
    request = AssignmentRequest(tuple(members), ("a",), tuple(TaskId("a", t) for t in range(7)))
    counts = sorted(len(a.tasks) for a in ZONE.assign(request).assignments.values())
    assert counts == [2, 2, 3]


def test_one_task_connectors_do_not_pile_up_in_one_rack() -> None:
    racks = {"w0": "a", "w1": "b", "w2": "c"}
    connectors = [f"c{n}" for n in range(30)]
    result = assign(racks, connectors, [TaskId(c, 0) for c in connectors])
    assert sorted(len(a.tasks) for a in result.values()) == [10, 10, 10]


def test_the_subscription_says_the_workers_rack() -> None:
    assert ZoneAssignor(AssignorSettings(raw={"worker.rack": "eu-1a"})).subscription() == {
        "rack": "eu-1a"
    }
