"""The assignor plugin API's four parts with the seed's failover assignor, the very code
docs/cluster.md shows: each worker's priority travels in its subscription's user data
(bytes) through the member metadata; the leader's round gives everything to the highest;
every member's on_assignment learns whether it is the active one."""

from __future__ import annotations

import re
from pathlib import Path
from types import MappingProxyType
from typing import Any

from eos.runtime.cluster.assignment import LeaderView, decode_members, lead_round
from eos.runtime.cluster.assignors import Assignor, AssignorSettings, TaskId
from eos.runtime.cluster.group_metadata import MemberAssignment, MemberMetadata
from eos.storage.config_log import ConfigSnapshot

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cluster.md"
SNAPSHOT = ConfigSnapshot(
    offset=7,
    connectors=MappingProxyType({"a": {}, "b": {}}),
    task_configs=MappingProxyType({"a": ({}, {}), "b": ({},)}),
)


def docs_assignor() -> type[Assignor]:
    text = DOCS.read_text()
    found = re.search(r"<!-- assignor-example[^>]*-->\n```python\n(.*?)```", text, re.S)
    assert found, "the assignor example is gone from docs/cluster.md"
    namespace: dict[str, Any] = {"__name__": "priority_failover"}
    exec(compile(found.group(1), str(DOCS), "exec"), namespace)
    cls: type[Assignor] = namespace["PriorityFailoverAssignor"]
    return cls


def test_the_documented_failover_assignor_runs_through_a_round() -> None:
    cls = docs_assignor()
    workers = {  # member id → its priority
        "m1": "1",
        "m2": "5",
        "m3": "3",
    }
    assignors = {
        m: cls(AssignorSettings(raw={"assignment.consumer.priority": p}))
        for m, p in workers.items()
    }
    joins = [
        (m, MemberMetadata(f"http://{m}", m, 7, "sessioned", cls.name,
                           user_data=a.subscription()).encode())
        for m, a in assignors.items()
    ]  # fmt: skip
    members = decode_members(joins)
    assert members["m2"] is not None
    assert members["m2"].user_data == b"\x00\x00\x00\x05"
    round_ = lead_round(
        LeaderView("m1", "http://m1", SNAPSHOT), members, assignor=assignors["m1"],
        style="cooperative", memory={}, now_ms=0,
    )  # fmt: skip
    for member_id, answer in round_.assignments.items():
        received = MemberAssignment.decode(answer.encode())  # as each member reads it
        assignors[member_id].on_assignment(received.assigned, received.user_data)
    assigned = {m: a.assigned for m, a in round_.assignments.items()}
    assert assigned["m2"].connectors == {"a", "b"}
    assert assigned["m2"].tasks == {TaskId("a", 0), TaskId("a", 1), TaskId("b", 0)}
    assert not assigned["m1"]
    assert not assigned["m3"]
    assert {m: a.active for m, a in assignors.items()} == {  # type: ignore[attr-defined]
        "m1": False,
        "m2": True,
        "m3": False,
    }


def test_a_worker_without_a_priority_comes_last() -> None:
    cls = docs_assignor()
    silent = MemberMetadata("http://m0", "m0", 7, "sessioned", cls.name).encode()
    low = cls(AssignorSettings(raw={"assignment.consumer.priority": "-5"}))
    loud = MemberMetadata(
        "http://m9", "m9", 7, "sessioned", cls.name, user_data=low.subscription()
    ).encode()
    members = decode_members([("m0", silent), ("m9", loud)])
    round_ = lead_round(
        LeaderView("m0", "http://m0", SNAPSHOT), members, assignor=low,
        style="eager", memory={}, now_ms=0,
    )  # fmt: skip
    assert round_.assignments["m9"].assigned.connectors == {"a", "b"}
