"""How one rebalance round turns the assignor's target into what each member
runs (docs/cluster.md).

- **eager**: every member stopped all its work before it rejoined, so each one
  simply gets its whole target; what it dropped is reported as revoked.
- **cooperative** (KIP-415): a member keeps what it runs and should keep,
  revokes what it runs but should not, and starts the items of its target that
  no member runs now. An item of its target that another member still runs is
  not handed out in this round: that member revokes it and rejoins at once, and
  the next round gives the item to its new owner. So a rebalance never has two
  members run the same task (fencing covers every other case), and a target
  is reached in at most two rounds.

An item several members claim is revoked by every claimant but its target
owner, which keeps it if it runs it (and otherwise gets it in the next round).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from eos.runtime.cluster.assignors.base import EMPTY, Assignment, Member


@dataclass(frozen=True)
class MemberPlan:
    """What a member is told in one round."""

    assigned: Assignment
    """Everything the member runs after this round (not just what is new)."""
    revoked: Assignment
    """What it stops now (cooperative), or what it ran before joining and does not get
    back (eager: already stopped)."""


def plan_round(
    protocol: Literal["eager", "cooperative"],
    members: Sequence[Member],
    target: Mapping[str, Assignment],
) -> dict[str, MemberPlan]:
    """Each member's plan for this round, given what it owns and its ``target``
    (a member without a target entry gets nothing)."""
    if protocol == "eager":
        return {
            m.member_id: MemberPlan(
                target.get(m.member_id, EMPTY), m.owned - target.get(m.member_id, EMPTY)
            )
            for m in members
        }
    running = Assignment.union(m.owned for m in members)
    plans: dict[str, MemberPlan] = {}
    for member in members:
        goal = target.get(member.member_id, EMPTY)
        kept = member.owned & goal
        plans[member.member_id] = MemberPlan(kept | (goal - running), member.owned - goal)
    return plans


def needs_follow_up(plans: Mapping[str, MemberPlan]) -> bool:
    """Whether a cooperative round must be followed by another: members revoke
    work, rejoin at once, and the next round hands that work out. (An eager
    round never needs one; its ``revoked`` is only reported.)"""
    return any(plan.revoked for plan in plans.values())
