"""Building blocks shared by the bundled assignors: who runs what now, the
sticky balance, and "everything to one member"."""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

from eos.runtime.cluster.assignors.base import EMPTY, Assignment, AssignmentRequest, Member, TaskId

Item = TypeVar("Item", bound=Hashable)


def member_ids(request: AssignmentRequest) -> list[str]:
    """The request's member ids, sorted."""
    return sorted(m.member_id for m in request.members)


def sticky_share(
    members: Sequence[str], items: Sequence[Item], owner: Mapping[Item, str]
) -> dict[str, list[Item]]:
    """Spread ``items`` over ``members`` to within one of each other, moving the
    fewest: an item stays with its ``owner`` unless that owner holds more than its
    share (the extra items of an uneven split go to those that hold the most,
    ties by member id); the rest go one by one to the least-loaded members (ties
    by member id)."""
    if not members:
        return {}
    share, extra = divmod(len(items), len(members))
    held: dict[str, list[Item]] = {m: [] for m in members}
    for item in items:
        if owner.get(item) in held:
            held[owner[item]].append(item)
    ranked = sorted(members, key=lambda m: (-len(held[m]), m))
    quota = {m: share + (1 if rank < extra else 0) for rank, m in enumerate(ranked)}
    result = {m: held[m][: quota[m]] for m in members}
    placed = {i for kept in result.values() for i in kept}
    # The members with room, least loaded first (ties by member id): a heap, since a
    # scan of every member per item took 250 ms at 100 members x 11 000 items.
    open_ = [(len(result[m]), m) for m in members if len(result[m]) < quota[m]]
    heapq.heapify(open_)
    for item in items:
        if item in placed:
            continue
        count, target = heapq.heappop(open_)
        result[target].append(item)
        if count + 1 < quota[target]:
            heapq.heappush(open_, (count + 1, target))
    return result


def current_owners(request: AssignmentRequest) -> tuple[dict[str, str], dict[TaskId, str]]:
    """The member that runs each connector and task now; when several claim one,
    the first by member id."""
    connectors: dict[str, str] = {}
    tasks: dict[TaskId, str] = {}
    for member in sorted(request.members, key=lambda m: m.member_id):
        for name in member.owned.connectors:
            connectors.setdefault(name, member.member_id)
        for task in member.owned.tasks:
            tasks.setdefault(task, member.member_id)
    return connectors, tasks


def sticky_assignments(
    request: AssignmentRequest, connectors: Iterable[str], tasks: Iterable[TaskId]
) -> dict[str, Assignment]:
    """The sticky balance of the given work over the request's members:
    connectors and tasks each balanced to within one, counted separately."""
    ids = member_ids(request)
    owners_c, owners_t = current_owners(request)
    by_c = sticky_share(ids, sorted(set(connectors)), owners_c)
    by_t = sticky_share(ids, sorted(set(tasks)), owners_t)
    return {m: Assignment.of(by_c[m], by_t[m]) for m in ids}


def everything_to(request: AssignmentRequest, member_id: str) -> dict[str, Assignment]:
    """All of the request's work to ``member_id``, nothing to the others."""
    work = Assignment.of(request.connectors, request.tasks)
    return {m.member_id: work if m.member_id == member_id else EMPTY for m in request.members}


def by_priority(members: Iterable[Member]) -> list[Member]:
    """Highest ``priority`` first; ties by the smallest member id."""
    return sorted(members, key=lambda m: (-m.priority, m.member_id))
