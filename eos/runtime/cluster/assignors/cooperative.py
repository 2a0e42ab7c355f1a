"""``cooperative``: Kafka Connect's incremental cooperative algorithm (KIP-415).

It balances like ``sticky``, with one difference: the work of a member that
vanished is held back for a while, in case the member comes back (a restart, a
long GC pause, a short network cut), instead of moving at once.

- A member has vanished when it was in this leader's previous assignment and
  is not in the group now. Its work is held back (assigned to nobody) if no
  member runs it now.
- The work is held for ``scheduled.rebalance.max.delay.ms`` counted from the
  first rebalance that missed the member; the assignor asks the leader to
  rebalance again when that time is up, and then hands the work out.
- If a new member joins meanwhile (a member id the previous assignment did not
  have: a restarted worker comes back with a new one), the held work is handed
  out at once; being the least loaded, the new members get it first.
- Handed-out work goes to the least-loaded members (ties by member id), as in
  ``sticky``.

With a delay of 0 it is ``sticky``. The previous assignment lives in the
leader's memory only: a new leader remembers nothing, so it holds nothing back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eos.runtime.cluster.assignors._balance import sticky_assignments
from eos.runtime.cluster.assignors.base import (
    Assignment,
    AssignmentRequest,
    AssignmentResult,
    Assignor,
    TaskId,
)


class CooperativeAssignor(Assignor):
    name = "cooperative"

    def assign(self, request: AssignmentRequest) -> AssignmentResult:
        live = {m.member_id for m in request.members}
        before, gone, lost_before = _recall(request.memory, live)
        lost = {m: lost_before.get(m, request.now_ms) for m in gone}
        newcomers = bool(live - before)
        held = {} if newcomers else self._held(request, gone, lost)
        withheld = Assignment.union(held.values())
        connectors = [c for c in request.connectors if c not in withheld.connectors]
        tasks = [t for t in request.tasks if t not in withheld.tasks]
        assignments = sticky_assignments(request, connectors, tasks)
        waiting = {m: lost[m] for m in held}
        memory = {"assignments": _encode({**held, **assignments}), "lost": waiting}
        return AssignmentResult(assignments, self._next_rebalance(request, waiting), memory)

    def _held(
        self,
        request: AssignmentRequest,
        gone: Mapping[str, Assignment],
        lost: Mapping[str, int],
    ) -> dict[str, Assignment]:
        """Each vanished member whose delay runs → its work that nobody runs now
        (``gone``: what each vanished member was assigned last time)."""
        delay = self.settings.scheduled_rebalance_max_delay_ms
        waiting = sorted(m for m, since in lost.items() if request.now_ms - since < delay)
        if not waiting:
            return {}
        work = Assignment.of(request.connectors, request.tasks)
        running = Assignment.union(m.owned for m in request.members)
        held = {}
        for member_id in waiting:
            keep = (gone[member_id] - running) & work
            if keep:
                held[member_id] = keep
        return held

    def _next_rebalance(self, request: AssignmentRequest, waiting: Mapping[str, int]) -> int | None:
        """Milliseconds until the first held work is due to be handed out."""
        delay = self.settings.scheduled_rebalance_max_delay_ms
        due = [delay - (request.now_ms - since) for since in waiting.values()]
        return max(min(due), 1) if due else None


def _recall(
    memory: Mapping[str, Any], live: set[str]
) -> tuple[set[str], dict[str, Assignment], dict[str, int]]:
    """The members of the previous assignment, the previous assignment of each of
    them that is not ``live`` now (only theirs is decoded: at 10 000 tasks decoding
    everyone's was a third of the round), and since when each vanished member is
    missed (all empty if ``memory`` is not what :func:`_encode` wrote)."""
    try:
        previous = {str(m): w for m, w in memory.get("assignments", {}).items()}
        gone = {
            m: Assignment.of(w["connectors"], (TaskId(c, int(t)) for c, t in w["tasks"]))
            for m, w in previous.items()
            if m not in live
        }
        lost = {str(m): int(since) for m, since in memory.get("lost", {}).items()}
    except (AttributeError, KeyError, TypeError, ValueError):
        return set(), {}, {}
    return set(previous), gone, lost


def _encode(assignments: Mapping[str, Assignment]) -> dict[str, Any]:
    return {
        m: {
            "connectors": sorted(a.connectors),
            "tasks": [[t.connector, t.task] for t in sorted(a.tasks)],
        }
        for m, a in sorted(assignments.items())
    }
