"""What workers tell each other through the group protocol (docs/cluster.md).

A worker joins the group (protocol type ``eos``) offering one protocol per
rebalance style it accepts, most preferred first, each named
``<rebalance protocol>/<assignor>``::

    connect.protocol=sessioned   →  sessioned/<assignor>, compatible/<assignor>, eager/<assignor>
    connect.protocol=compatible  →  compatible/<assignor>, eager/<assignor>
    connect.protocol=eager       →  eager/<assignor>

so the broker settles a mixed cluster on the best style every member accepts
(a rolling change of ``connect.protocol`` keeps the cluster up), while members
with different assignors share no protocol and the newcomer is refused with
INCONSISTENT_GROUP_PROTOCOL.

Every protocol carries the same **member metadata** (JSON, UTF-8)::

    {"v": 1,
     "url": "http://host:8083",        the worker's REST URL
     "worker_id": "host:8083",
     "config_offset": 42,              how far it has read the config topic
     "protocol": "sessioned",          its connect.protocol setting
     "assignor": "sticky",             its assignor setting
     "priority": 0,                    its worker.priority
     "tenure_ms": 12000,               how long it has been in the group
     "generation": 7,                  generation of the assignment it holds (-1: none)
     "exactly_once": "enabled",        its exactly.once.source.support (absent from a
                                       worker of an earlier release: "" here)
     "user_data": …,                   its assignor's subscription() (JSON; bytes as
                                       {"$bytes": "<base64>"}; absent: none)
     "connectors": ["a"],              what it runs now (cooperative) or ran (eager)
     "tasks": [["a", 0], ["a", 1]]}

and the leader answers each member with its **assignment** (JSON, UTF-8)::

    {"v": 1,
     "error": "none" | "config_mismatch",
     "message": "…",                    why, when error is not none
     "leader": "<member id>", "leader_url": "http://…",
     "config_offset": 42,               read the config topic at least this far first
     "connectors": ["a"], "tasks": [["a", 0]],          everything to run after this round
     "revoked_connectors": [], "revoked_tasks": [],     stop these now, then rejoin
     "delay_ms": 0,                     the leader rebalances again after this long
     "user_data": …,                    for the assignor's on_assignment() (absent: none)
     "members": [{"id": "…", "url": "…", "worker_id": "…", "exactly_once": "enabled"}]}

Readers ignore fields they do not know; a value of another version ``v`` is
rejected (the member then waits for a leader that speaks its version).
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from eos.runtime.cluster.assignors.base import EMPTY, Assignment, TaskId

VERSION = 1
STYLES: dict[str, tuple[str, ...]] = {
    "sessioned": ("sessioned", "compatible", "eager"),
    "compatible": ("compatible", "eager"),
    "eager": ("eager",),
}
"""The rebalance protocols a worker offers for its ``connect.protocol``, best first."""

Style = Literal["eager", "cooperative"]


class MalformedGroupData(ValueError):
    """Member metadata or an assignment this worker cannot read."""


def protocol_names(protocol: str, assignors: Sequence[str]) -> list[str]:
    """The protocols a member offers, best first: each rebalance style its
    ``connect.protocol`` accepts with each of its assignors in its order of preference.
    The broker picks one every member offers (each member votes for the first of its
    own it can: a cluster changes assignor one worker at a time)."""
    return [f"{style}/{assignor}" for style in STYLES[protocol] for assignor in assignors]


def assignor_of(protocol_name: str) -> str:
    """The assignor of the protocol the broker chose."""
    return protocol_name.partition("/")[2]


def style_of(protocol_name: str) -> Style:
    """How a generation rebalances, from the protocol the broker chose."""
    return "eager" if protocol_name.partition("/")[0] == "eager" else "cooperative"


class MemberInfo(NamedTuple):
    """A member as every assignment lists it (a named tuple: each of a round's
    assignments hashes the whole member list, see :func:`_members_json`)."""

    member_id: str
    url: str
    worker_id: str
    exactly_once: str = ""
    """Its ``exactly.once.source.support`` ("": a worker that does not say)."""


@dataclass(frozen=True)
class MemberMetadata:
    url: str
    worker_id: str
    config_offset: int
    protocol: str
    assignor: str
    priority: int = 0
    tenure_ms: int = 0
    generation: int = -1
    owned: Assignment = EMPTY
    exactly_once: str = ""
    """Its ``exactly.once.source.support`` ("": a worker of an earlier release)."""
    user_data: Any = None
    """Its assignor's :meth:`~eos.runtime.cluster.assignors.base.Assignor.subscription`."""

    def encode(self) -> bytes:
        return _encode(
            {
                "url": self.url,
                "worker_id": self.worker_id,
                "config_offset": self.config_offset,
                "protocol": self.protocol,
                "assignor": self.assignor,
                "priority": self.priority,
                "tenure_ms": self.tenure_ms,
                "generation": self.generation,
                "exactly_once": self.exactly_once,
                **_work(self.owned),
                **_user_data(self.user_data),
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> MemberMetadata:
        d = _decode(data)
        return cls(
            url=_str(d, "url"),
            worker_id=_str(d, "worker_id"),
            config_offset=_int(d, "config_offset"),
            protocol=_str(d, "protocol"),
            assignor=_str(d, "assignor"),
            priority=_int(d, "priority"),
            tenure_ms=_int(d, "tenure_ms"),
            generation=_int(d, "generation"),
            owned=_assignment(d, "connectors", "tasks"),
            exactly_once=_optional_str(d, "exactly_once"),
            user_data=_user_data_of(d),
        )


@dataclass(frozen=True)
class MemberAssignment:
    leader_id: str
    leader_url: str
    config_offset: int
    assigned: Assignment = EMPTY
    revoked: Assignment = EMPTY
    delay_ms: int = 0
    members: tuple[MemberInfo, ...] = ()
    error: str = "none"
    message: str = ""
    user_data: Any = None
    """For the assignor's :meth:`~eos.runtime.cluster.assignors.base.Assignor.on_assignment`."""

    def encode(self) -> bytes:
        revoked = _work(self.revoked)
        head = _encode(
            {
                "error": self.error,
                "message": self.message,
                "leader": self.leader_id,
                "leader_url": self.leader_url,
                "config_offset": self.config_offset,
                **_work(self.assigned),
                "revoked_connectors": revoked["connectors"],
                "revoked_tasks": revoked["tasks"],
                "delay_ms": self.delay_ms,
                **_user_data(self.user_data),
            }
        )
        return head[:-1] + b',"members":' + _members_json(self.members) + b"}"

    @classmethod
    def decode(cls, data: bytes) -> MemberAssignment:
        d = _decode(data)
        members = d.get("members", [])
        if not isinstance(members, list):
            raise MalformedGroupData("members must be a list")
        return cls(
            leader_id=_str(d, "leader"),
            leader_url=_str(d, "leader_url"),
            config_offset=_int(d, "config_offset"),
            assigned=_assignment(d, "connectors", "tasks"),
            revoked=_assignment(d, "revoked_connectors", "revoked_tasks"),
            delay_ms=_int(d, "delay_ms"),
            members=tuple(
                MemberInfo(
                    _str(m, "id"),
                    _str(m, "url"),
                    _str(m, "worker_id"),
                    _optional_str(m, "exactly_once"),
                )
                for m in members
            ),
            error=_str(d, "error"),
            message=str(d.get("message", "")),
            user_data=_user_data_of(d),
        )


def _encode(document: dict[str, Any]) -> bytes:
    return json.dumps({"v": VERSION, **document}, separators=(",", ":")).encode()


@functools.lru_cache(maxsize=1)
def _members_json(members: tuple[MemberInfo, ...]) -> bytes:
    """The member list every assignment of a round repeats, encoded once a round
    (at 100 members it was half the time of encoding the round's assignments)."""
    listed = [
        {"id": m.member_id, "url": m.url, "worker_id": m.worker_id, "exactly_once": m.exactly_once}
        for m in members
    ]
    return json.dumps(listed, separators=(",", ":")).encode()


def _user_data(value: Any) -> dict[str, Any]:
    """The ``user_data`` field of a document: absent for None, bytes as base64."""
    if value is None:
        return {}
    if isinstance(value, bytes | bytearray):
        return {"user_data": {"$bytes": base64.b64encode(value).decode()}}
    return {"user_data": value}


def _user_data_of(d: Mapping[str, Any]) -> Any:
    value = d.get("user_data")
    if isinstance(value, dict) and list(value) == ["$bytes"] and isinstance(value["$bytes"], str):
        try:
            return base64.b64decode(value["$bytes"], validate=True)
        except (ValueError, TypeError) as exc:
            raise MalformedGroupData(f"user_data: bad base64 ({exc})") from exc
    return value


def _decode(data: bytes) -> dict[str, Any]:
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedGroupData(f"not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise MalformedGroupData("not a JSON object")
    if document.get("v") != VERSION:
        raise MalformedGroupData(f"version {document.get('v')!r}; this worker reads {VERSION}")
    return document


def _work(assignment: Assignment) -> dict[str, list[Any]]:
    # A TaskId is a tuple: JSON writes it as the array [connector, task].
    return {"connectors": sorted(assignment.connectors), "tasks": sorted(assignment.tasks)}


def _str(d: Mapping[str, Any], key: str) -> str:
    value = d.get(key)
    if not isinstance(value, str):
        raise MalformedGroupData(f"{key} must be a string")
    return value


def _optional_str(d: Mapping[str, Any], key: str) -> str:
    """A string a member of an earlier release leaves out ("")."""
    value = d.get(key, "")
    if not isinstance(value, str):
        raise MalformedGroupData(f"{key} must be a string")
    return value


def _int(d: Mapping[str, Any], key: str) -> int:
    value = d.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedGroupData(f"{key} must be an integer")
    return value


def _assignment(d: Mapping[str, Any], connectors: str, tasks: str) -> Assignment:
    names, pairs = d.get(connectors, []), d.get(tasks, [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise MalformedGroupData(f"{connectors} must be a list of names")
    if not isinstance(pairs, list):
        raise MalformedGroupData(f"{tasks} must be a list of [connector, task]")
    return Assignment.of(names, _task_ids(pairs, tasks))


def _task_ids(pairs: Iterable[Any], key: str) -> list[TaskId]:
    # Exact types (a bool is no task number), in one comprehension: a leader reads
    # 10 000 of these a round.
    pairs = list(pairs)
    ids = [
        TaskId(p[0], p[1])
        for p in pairs
        if type(p) is list and len(p) == 2 and type(p[0]) is str and type(p[1]) is int
    ]
    if len(ids) != len(pairs):
        raise MalformedGroupData(f"{key} must be a list of [connector, task]")
    return ids
