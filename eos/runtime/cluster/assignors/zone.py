"""``zone``: each connector's tasks spread over the racks (zones) present, sticky otherwise.

Every worker says its ``worker.rack`` in its subscription's user data. For each connector,
its tasks are spread over the racks present to within one of each other: a task stays in
the rack of the member that runs it while that rack holds no more than its share, and
the extra task of an uneven split goes to a rack that already holds it, else to the rack
with the fewest tasks so far (so one-task connectors do not pile up in one rack). Within
a rack, its tasks are balanced over its members as ``sticky`` balances them: a task stays
on its member unless that member holds more than its share. Connectors (the connector
instances) are balanced over all members as ``sticky`` does.

So a rack lost moves only its tasks (spread over the racks left), and a rack that returns
takes back only what an even spread gives it. Workers without a rack form one rack of
their own; with no rack anywhere this is ``sticky``.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from typing import Any

from eos.runtime.cluster.assignors._balance import current_owners, member_ids, sticky_share
from eos.runtime.cluster.assignors.base import (
    Assignment,
    AssignmentRequest,
    AssignmentResult,
    Assignor,
    Member,
    TaskId,
)

RACK_SETTING = "worker.rack"


class ZoneAssignor(Assignor):
    name = "zone"

    def subscription(self) -> Any:
        return {"rack": self.settings.raw.get(RACK_SETTING, "")}

    def assign(self, request: AssignmentRequest) -> AssignmentResult:
        ids = member_ids(request)
        if not ids:
            return AssignmentResult({})
        rack_of = {m.member_id: rack_of_member(m) for m in request.members}
        members_of: dict[str, list[str]] = defaultdict(list)
        for member_id in ids:
            members_of[rack_of[member_id]].append(member_id)
        owners_c, owners_t = current_owners(request)
        in_rack = _tasks_per_rack(request.tasks, sorted(members_of), rack_of, owners_t)
        tasks: dict[str, list[TaskId]] = {}
        for rack, members in members_of.items():
            tasks.update(sticky_share(members, in_rack[rack], owners_t))
        connectors = sticky_share(ids, sorted(set(request.connectors)), owners_c)
        return AssignmentResult({m: Assignment.of(connectors[m], tasks[m]) for m in ids})


def rack_of_member(member: Member) -> str:
    """The rack a member's user data names ("" if none)."""
    data = member.user_data
    rack = data.get("rack") if isinstance(data, dict) else None
    return rack if isinstance(rack, str) else ""


def _tasks_per_rack(
    tasks: tuple[TaskId, ...],
    racks: list[str],
    rack_of: dict[str, str],
    owners: dict[TaskId, str],
) -> dict[str, list[TaskId]]:
    """Each connector's tasks spread over ``racks`` to within one, moving the fewest."""
    by_connector: dict[str, list[TaskId]] = defaultdict(list)
    for task in tasks:
        by_connector[task.connector].append(task)
    load = dict.fromkeys(racks, 0)
    result: dict[str, list[TaskId]] = {r: [] for r in racks}
    for name in sorted(by_connector):
        own = sorted(by_connector[name])
        share, extra = divmod(len(own), len(racks))
        held: dict[str, list[TaskId]] = {r: [] for r in racks}
        for task in own:
            owner = owners.get(task)
            if owner is not None and owner in rack_of:
                held[rack_of[owner]].append(task)
        # the extra tasks go to racks that hold more than the share, then the least loaded
        ranked = sorted(racks, key=lambda r: (len(held[r]) <= share, load[r], r))
        quota = {r: share + (1 if rank < extra else 0) for rank, r in enumerate(ranked)}
        placed: set[TaskId] = set()
        for rack in racks:
            kept = held[rack][: quota[rack]]
            result[rack].extend(kept)
            placed.update(kept)
        open_ = [(load[r] + len(held[r][: quota[r]]), r) for r in racks
                 if len(held[r]) < quota[r]]  # fmt: skip
        heapq.heapify(open_)
        room = {r: quota[r] - min(len(held[r]), quota[r]) for r in racks}
        for task in own:
            if task in placed:
                continue
            count, rack = heapq.heappop(open_)
            result[rack].append(task)
            room[rack] -= 1
            if room[rack] > 0:
                heapq.heappush(open_, (count + 1, rack))
        for rack in racks:
            load[rack] += quota[rack]
    return result
