"""``failover``: all work on one member, the one with the highest priority.

Every connector and task goes to the live member with the highest
``worker.priority`` (ties: the smallest member id); the others stand by.

- If that member leaves, everything moves at once to the next one.
- When a member with a higher priority joins (or comes back), the work moves
  to it only once it has been in the group for ``failover.settle.ms``, so a
  worker that restarts in a loop does not drag the work along. Until then each
  connector and task stays on the member that runs it, new work joins the
  best-ranked member that runs some, and the assignor asks the leader to
  rebalance again when the settle time is up.
- If no member runs any of the work (a new cluster, or the only member that
  ran it is gone), it all goes to the best member at once, settled or not.
"""

from __future__ import annotations

from eos.runtime.cluster.assignors._balance import by_priority, current_owners, everything_to
from eos.runtime.cluster.assignors.base import (
    Assignment,
    AssignmentRequest,
    AssignmentResult,
    Assignor,
    TaskId,
)


class FailoverAssignor(Assignor):
    name = "failover"

    def assign(self, request: AssignmentRequest) -> AssignmentResult:
        ranked = by_priority(request.members)
        if not ranked:
            return AssignmentResult({})
        best = ranked[0].member_id
        wait = self.settings.failover_settle_ms - ranked[0].tenure_ms
        runners = _runners(request)
        if wait <= 0 or not runners or runners == {best}:
            return AssignmentResult(everything_to(request, best))
        holder = next(m.member_id for m in ranked if m.member_id in runners)
        return AssignmentResult(_stay(request, holder), wait)


def _runners(request: AssignmentRequest) -> set[str]:
    """The live members that run some of the request's work now."""
    owners_c, owners_t = current_owners(request)
    connectors = {owners_c[c] for c in request.connectors if c in owners_c}
    return connectors | {owners_t[t] for t in request.tasks if t in owners_t}


def _stay(request: AssignmentRequest, holder: str) -> dict[str, Assignment]:
    """Everything stays on the member that runs it; work nobody runs goes to ``holder``."""
    owners_c, owners_t = current_owners(request)
    connectors: dict[str, list[str]] = {m.member_id: [] for m in request.members}
    tasks: dict[str, list[TaskId]] = {m.member_id: [] for m in request.members}
    for name in request.connectors:
        connectors[owners_c.get(name, holder)].append(name)
    for task in request.tasks:
        tasks[owners_t.get(task, holder)].append(task)
    return {m: Assignment.of(connectors[m], tasks[m]) for m in connectors}
