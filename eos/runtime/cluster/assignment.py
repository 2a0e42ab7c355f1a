"""The leader's part of a rebalance, as a pure function: members' metadata and
the config topic in, every member's assignment out (docs/cluster.md).

1. Every member reports how far it has read the config topic. If the leader
   has read less than the furthest member, it cannot know every connector: it
   answers ``config_mismatch`` to everyone, and everyone rejoins after reading on.
2. The work of the cluster is every connector with a config and every task of
   its current task configs.
3. The assignor computes the target owner of each connector and task.
4. The rebalance style turns the target into this round's assignment
   (:func:`eos.runtime.cluster.rebalance.plan_round`): eager hands out the target;
   cooperative first revokes what moves and hands it out in the next round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from eos.runtime.cluster.assignors.base import (
    AssignmentRequest,
    Assignor,
    Member,
    TaskId,
)
from eos.runtime.cluster.group_metadata import (
    MalformedGroupData,
    MemberAssignment,
    MemberInfo,
    MemberMetadata,
    Style,
)
from eos.runtime.cluster.rebalance import plan_round
from eos.storage.config_log import ConfigSnapshot

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class LeaderView:
    """Who leads this generation, and how far it has read the config topic."""

    member_id: str
    url: str
    snapshot: ConfigSnapshot


@dataclass(frozen=True)
class Round:
    """The leader's answer: an assignment per member, and what to remember."""

    assignments: dict[str, MemberAssignment]
    memory: Mapping[str, Any]
    next_rebalance_ms: int | None
    mismatch: bool = False


def decode_members(members: Sequence[tuple[str, bytes]]) -> dict[str, MemberMetadata | None]:
    """Each member's metadata; None (logged) for one this worker cannot read."""
    decoded: dict[str, MemberMetadata | None] = {}
    for member_id, data in members:
        try:
            decoded[member_id] = MemberMetadata.decode(data)
        except MalformedGroupData as exc:
            log.warning("member metadata unreadable", member_id=member_id, error=str(exc))
            decoded[member_id] = None
    return decoded


def work_of(snapshot: ConfigSnapshot) -> tuple[tuple[str, ...], tuple[TaskId, ...]]:
    """Every connector of the cluster and every task of its current task configs."""
    connectors = tuple(sorted(snapshot.connectors))
    tasks = tuple(
        TaskId(name, task) for name in connectors for task in range(len(snapshot.tasks(name)))
    )
    return connectors, tasks


def lead_round(
    leader: LeaderView,
    members: Mapping[str, MemberMetadata | None],
    *,
    assignor: Assignor,
    style: Style,
    memory: Mapping[str, Any],
    now_ms: int,
) -> Round:
    infos = tuple(
        MemberInfo(m, meta.url, meta.worker_id, meta.exactly_once)
        if meta
        else MemberInfo(m, "", "")
        for m, meta in sorted(members.items())
    )
    furthest = max((meta.config_offset for meta in members.values() if meta), default=0)
    if leader.snapshot.offset < furthest:
        message = (
            f"the leader has read the config topic to offset {leader.snapshot.offset}, a member "
            f"to {furthest}: everyone rejoins after reading further"
        )
        return Round(_all(infos, leader, "config_mismatch", message), memory, None, True)
    connectors, tasks = work_of(leader.snapshot)
    request = AssignmentRequest(
        members=tuple(_member(m, meta) for m, meta in sorted(members.items())),
        connectors=connectors,
        tasks=tasks,
        now_ms=now_ms,
        memory=memory,
    )
    result = assignor.assign(request)
    plans = plan_round(style, request.members, result.assignments)
    delay = result.next_rebalance_ms or 0
    assignments = {
        m.member_id: MemberAssignment(
            leader_id=leader.member_id,
            leader_url=leader.url,
            config_offset=leader.snapshot.offset,
            assigned=plans[m.member_id].assigned,
            revoked=plans[m.member_id].revoked,
            delay_ms=delay,
            members=infos,
            user_data=result.user_data.get(m.member_id),
        )
        for m in request.members
    }
    return Round(assignments, result.memory, result.next_rebalance_ms)


def _member(member_id: str, meta: MemberMetadata | None) -> Member:
    if meta is None:
        return Member(member_id)
    return Member(member_id, meta.url, meta.priority, meta.tenure_ms, meta.owned, meta.user_data)


def _all(
    infos: tuple[MemberInfo, ...], leader: LeaderView, error: str, message: str
) -> dict[str, MemberAssignment]:
    return {
        info.member_id: MemberAssignment(
            leader_id=leader.member_id,
            leader_url=leader.url,
            config_offset=leader.snapshot.offset,
            members=infos,
            error=error,
            message=message,
        )
        for info in infos
    }


def mismatched_settings(members: Mapping[str, MemberMetadata | None], mine: MemberMetadata) -> str:
    """A warning naming members whose connect.protocol differs from the leader's
    (the group then rebalances in the best style every member offers), or ''."""
    others = sorted(
        f"{meta.worker_id} ({meta.protocol})"
        for meta in members.values()
        if meta is not None and meta.protocol != mine.protocol
    )
    if not others:
        return ""
    return (
        f"members with another connect.protocol than this leader's {mine.protocol}: "
        f"{', '.join(others)}; the group rebalances in the best style all of them offer"
    )


def exactly_once_modes(members: Mapping[str, MemberMetadata | None]) -> str:
    """The members' ``exactly.once.source.support`` when they differ (a rolling upgrade
    or downgrade under way), e.g. ``enabled: h1:8083; preparing: h2:8083``, or ''."""
    modes: dict[str, list[str]] = {}
    for meta in members.values():
        if meta is not None:
            modes.setdefault(meta.exactly_once or "unknown", []).append(meta.worker_id)
    if len(modes) < 2:
        return ""
    return "; ".join(f"{mode}: {', '.join(sorted(ids))}" for mode, ids in sorted(modes.items()))
