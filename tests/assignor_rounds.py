"""Rebalance rounds of a simulated cluster, for the assignors at scale: what each
round moved against the fewest moves its goal needs, what it held back, how
balanced the answer is, and (when asked) how long the leader took.

Each round starts from the state the previous one reached: every member runs its
target (with the cooperative rebalance style that takes a follow-up round, which
is assumed done). Work an assignor holds back stays with the member that ran it,
so a later round that hands it out counts it as moved. Used by
``tests/unit/test_assignors_at_scale.py`` (properties) and ``bench/assignors.py``
(the table, with times).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eos.runtime.cluster.assignment import LeaderView, decode_members, lead_round
from eos.runtime.cluster.assignors import Assignment, AssignmentRequest, Assignor, Member, TaskId
from eos.runtime.cluster.group_metadata import MemberMetadata
from eos.storage.config_log import ConfigSnapshot

Item = str | TaskId
STEP_MS = 1_000
"""Time between two rounds (well below the cooperative delay and the failover settle)."""


@dataclass(frozen=True)
class RoundReport:
    name: str
    members: int
    moved: int
    """Items some member ran (or an assignor held for it) that another should run now."""
    minimum: int
    """The fewest moves that reach the assignor's goal (balanced, or all on one member)."""
    held: int
    """Items assigned to nobody (held back for a member that left)."""
    connector_spread: int
    task_spread: int
    assign_ms: tuple[float, ...] = ()
    """The assignor alone, once per repeat."""
    leader_ms: tuple[float, ...] = ()
    """The leader's whole round, once per repeat: decode every member's metadata,
    assign, plan the round, encode every member's assignment."""

    @property
    def balanced(self) -> bool:
        return self.connector_spread <= 1 and self.task_spread <= 1

    def median_ms(self, which: str) -> float:
        times: tuple[float, ...] = getattr(self, which)
        return statistics.median(times) if times else 0.0


class Cluster:
    """``workers`` members running ``connectors`` x ``tasks_per_connector`` tasks, all
    with priority 0 (so failover's best member is the smallest member id)."""

    def __init__(
        self, assignor: Assignor, *, workers: int, connectors: int, tasks_per_connector: int
    ) -> None:
        self.assignor = assignor
        self.balanced_goal = assignor.name != "failover"
        self.connectors = tuple(f"c{n:04d}" for n in range(connectors))
        self.tasks = tuple(
            TaskId(c, t) for c in self.connectors for t in range(tasks_per_connector)
        )
        self.now_ms = 0
        self.joined: dict[str, int] = {}
        self.owner: dict[Item, str] = {}
        self.memory: Mapping[str, Any] = {}
        self._next_id = 0
        self._add(workers)
        self._snapshot = ConfigSnapshot(
            offset=1,
            connectors={c: {} for c in self.connectors},
            task_configs={c: ({},) * tasks_per_connector for c in self.connectors},
        )

    def rebalance(self, name: str, *, lose: int = 0, join: int = 0, repeat: int = 0) -> RoundReport:
        """One round after the ``lose`` smallest member ids left and ``join`` new members
        came; with ``repeat`` > 0 the round is timed that many times."""
        for member_id in sorted(self.joined)[:lose]:
            del self.joined[member_id]
        self._add(join)
        request = self._request()
        result = self.assignor.assign(request)
        assign_ms = tuple(self._time(lambda: self.assignor.assign(request)) for _ in range(repeat))
        leader_ms = tuple(self._time_leader(request) for _ in range(repeat))
        target: dict[Item, str] = {}
        for member_id, assignment in result.assignments.items():
            target.update(dict.fromkeys(assignment.connectors, member_id))
            target.update(dict.fromkeys(assignment.tasks, member_id))
        report = self._report(name, target, assign_ms, leader_ms)
        work: tuple[Item, ...] = (*self.connectors, *self.tasks)
        # Held work stays with the member that ran it; deleted work is forgotten.
        self.owner = {
            i: target.get(i) or self.owner[i] for i in work if i in target or i in self.owner
        }
        self.memory = result.memory
        self.now_ms += STEP_MS
        return report

    def _add(self, count: int) -> None:
        for _ in range(count):
            self.joined[f"w{self._next_id:03d}"] = self.now_ms
            self._next_id += 1

    def _members(self) -> list[Member]:
        owned: dict[str, list[Item]] = {m: [] for m in self.joined}
        for item, member_id in self.owner.items():
            if member_id in owned:
                owned[member_id].append(item)
        return [
            Member(
                m,
                url=f"http://{m}:8083",
                tenure_ms=self.now_ms - self.joined[m],
                user_data={"rack": f"zone-{int(m[1:]) % 3}"},  # three zones, for zone
                owned=Assignment.of(
                    (i for i in owned[m] if isinstance(i, str)),
                    (i for i in owned[m] if isinstance(i, TaskId)),
                ),
            )
            for m in sorted(self.joined)
        ]

    def _request(self) -> AssignmentRequest:
        return AssignmentRequest(
            tuple(self._members()), self.connectors, self.tasks, self.now_ms, self.memory
        )

    def _report(
        self,
        name: str,
        target: Mapping[Item, str],
        assign_ms: tuple[float, ...],
        leader_ms: tuple[float, ...],
    ) -> RoundReport:
        moved = sum(1 for i, m in target.items() if self.owner.get(i, m) != m)
        held = len(self.connectors) + len(self.tasks) - len(target)
        per_member = {m: Counter[bool]() for m in self.joined}
        for item, member_id in target.items():
            per_member[member_id][isinstance(item, str)] += 1
        connectors = [c[True] for c in per_member.values()]
        tasks = [c[False] for c in per_member.values()]
        return RoundReport(
            name,
            len(self.joined),
            moved,
            self._minimum(),
            held,
            max(connectors) - min(connectors),
            max(tasks) - min(tasks),
            assign_ms,
            leader_ms,
        )

    def _minimum(self) -> int:
        if not self.balanced_goal:
            runs = Counter(m for m in self.owner.values() if m in self.joined)
            return len(self.owner) - max(runs.values(), default=0)
        return self._balance_minimum(self.connectors) + self._balance_minimum(self.tasks)

    def _balance_minimum(self, items: tuple[Item, ...]) -> int:
        """Orphans (run by a member that left) plus what members hold above their quota,
        the +1 quotas of an uneven split going to those that hold the most."""
        share, extra = divmod(len(items), len(self.joined))
        counts = Counter(self.owner[i] for i in items if i in self.owner)
        orphans = sum(n for m, n in counts.items() if m not in self.joined)
        held = sorted((counts.get(m, 0) for m in self.joined), reverse=True)
        excess = sum(max(0, n - share - (1 if rank < extra else 0)) for rank, n in enumerate(held))
        return orphans + excess

    @staticmethod
    def _time(call: Any) -> float:
        gc.collect()
        start = time.perf_counter()
        call()
        return (time.perf_counter() - start) * 1000

    def _time_leader(self, request: AssignmentRequest) -> float:
        metadata = [
            (
                m.member_id,
                MemberMetadata(
                    m.url,
                    m.member_id,
                    1,
                    "sessioned",
                    self.assignor.name,
                    tenure_ms=m.tenure_ms,
                    owned=m.owned,
                ).encode(),
            )
            for m in request.members
        ]
        leader = LeaderView(request.members[0].member_id, request.members[0].url, self._snapshot)

        def round_() -> None:
            members = decode_members(metadata)
            answer = lead_round(
                leader,
                members,
                assignor=self.assignor,
                style="cooperative",
                memory=self.memory,
                now_ms=self.now_ms,
            )
            for assignment in answer.assignments.values():
                assignment.encode()

        return self._time(round_)
