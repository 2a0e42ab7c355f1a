"""The leader's round as a pure function: config mismatch, the work of the cluster,
and the assignments every member receives."""

from __future__ import annotations

from types import MappingProxyType

from eos.runtime.cluster.assignment import (
    LeaderView,
    decode_members,
    exactly_once_modes,
    lead_round,
    work_of,
)
from eos.runtime.cluster.assignors.base import EMPTY, Assignment, AssignorSettings, TaskId
from eos.runtime.cluster.assignors.sticky import StickyAssignor
from eos.runtime.cluster.group_metadata import MemberAssignment, MemberMetadata
from eos.storage.config_log import ConfigSnapshot

SNAPSHOT = ConfigSnapshot(
    offset=40,
    connectors=MappingProxyType({"a": {"x": "1"}, "b": {"x": "2"}}),
    task_configs=MappingProxyType({"a": ({}, {}, {}), "b": ({},)}),
)


def meta(offset: int, owned: Assignment = EMPTY) -> MemberMetadata:
    return MemberMetadata("http://w", "w", offset, "sessioned", "sticky", owned=owned)


def test_work_is_every_connector_and_every_task() -> None:
    assert work_of(SNAPSHOT) == (
        ("a", "b"),
        (TaskId("a", 0), TaskId("a", 1), TaskId("a", 2), TaskId("b", 0)),
    )


def test_a_leader_behind_a_member_answers_config_mismatch() -> None:
    members = {"m1": meta(40), "m2": meta(41)}
    round_ = lead_round(
        LeaderView("m1", "http://leader", SNAPSHOT),
        members,
        assignor=StickyAssignor(AssignorSettings()),
        style="cooperative",
        memory={},
        now_ms=0,
    )
    assert round_.mismatch
    assert {a.error for a in round_.assignments.values()} == {"config_mismatch"}
    assert all(not a.assigned for a in round_.assignments.values())


def test_cooperative_round_revokes_before_handing_out() -> None:
    everything = Assignment.of(["a", "b"], work_of(SNAPSHOT)[1])
    members = {"m1": meta(40, everything), "m2": meta(40), "bad": None}
    round_ = lead_round(
        LeaderView("m1", "http://leader", SNAPSHOT),
        members,
        assignor=StickyAssignor(AssignorSettings()),
        style="cooperative",
        memory={},
        now_ms=0,
    )
    mine, theirs = round_.assignments["m1"], round_.assignments["m2"]
    assert mine.revoked  # m1 gives up what moves...
    assert not theirs.assigned  # ...and nobody gets it before m1 has stopped it
    assert mine.assigned | mine.revoked == everything
    decoded = MemberAssignment.decode(mine.encode())
    assert (decoded.leader_url, decoded.config_offset) == ("http://leader", 40)
    assert [m.member_id for m in decoded.members] == ["bad", "m1", "m2"]


def test_unreadable_metadata_becomes_a_member_without_work() -> None:
    decoded = decode_members([("m1", meta(1).encode()), ("m2", b"\xff")])
    assert decoded["m1"] == meta(1)
    assert decoded["m2"] is None


def test_every_members_mode_reaches_every_member_and_a_mix_is_named() -> None:
    def member(worker_id: str, mode: str) -> MemberMetadata:
        return MemberMetadata(f"http://{worker_id}", worker_id, 40, "sessioned", "sticky",
                              exactly_once=mode)  # fmt: skip

    members = {"m1": member("h1", "enabled"), "m2": member("h2", "preparing"), "m3": None}
    leader = LeaderView("m1", "http://h1", SNAPSHOT)
    round_ = lead_round(
        leader, members, assignor=StickyAssignor(AssignorSettings()), style="cooperative",
        memory={}, now_ms=0,
    )  # fmt: skip
    listed = MemberAssignment.decode(round_.assignments["m2"].encode()).members
    assert [(m.worker_id, m.exactly_once) for m in listed] == [
        ("h1", "enabled"), ("h2", "preparing"), ("", ""),
    ]  # fmt: skip
    assert exactly_once_modes(members) == "enabled: h1; preparing: h2"
    assert exactly_once_modes({"m1": member("h1", "enabled")}) == ""
    assert exactly_once_modes({"m1": member("h1", ""), "m2": member("h2", "disabled")}) == (
        "disabled: h2; unknown: h1"
    )
