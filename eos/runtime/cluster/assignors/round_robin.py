"""``round-robin``: balanced, ignoring history (like Kafka Connect's eager assignor).

Members are sorted by member id; connectors (sorted by name) and then tasks
(sorted by connector and task number) are dealt to them in turn, the rotation
continuing from connectors into tasks. The result depends only on the member
ids and the work, not on who runs what now, so a rebalance may move work that
did not need to move: choose ``sticky`` to keep tasks where they run.
"""

from __future__ import annotations

from eos.runtime.cluster.assignors._balance import member_ids
from eos.runtime.cluster.assignors.base import (
    Assignment,
    AssignmentRequest,
    AssignmentResult,
    Assignor,
    TaskId,
)


class RoundRobinAssignor(Assignor):
    name = "round-robin"

    def assign(self, request: AssignmentRequest) -> AssignmentResult:
        ids = member_ids(request)
        if not ids:
            return AssignmentResult({})
        connectors: dict[str, list[str]] = {m: [] for m in ids}
        tasks: dict[str, list[TaskId]] = {m: [] for m in ids}
        names = sorted(set(request.connectors))
        for n, name in enumerate(names):
            connectors[ids[n % len(ids)]].append(name)
        for n, task in enumerate(sorted(set(request.tasks)), start=len(names)):
            tasks[ids[n % len(ids)]].append(task)
        return AssignmentResult({m: Assignment.of(connectors[m], tasks[m]) for m in ids})
