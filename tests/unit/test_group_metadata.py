"""The formats workers exchange through the group protocol, and the request signatures."""

from __future__ import annotations

from collections import Counter

import pytest

from eos.runtime.cluster.assignors.base import Assignment, TaskId
from eos.runtime.cluster.group_metadata import (
    MalformedGroupData,
    MemberAssignment,
    MemberInfo,
    MemberMetadata,
    assignor_of,
    protocol_names,
    style_of,
)
from eos.runtime.cluster.signatures import ALGORITHM, SIGNATURE, TIMESTAMP, key_bytes, sign, verify

KEY = b"k" * 32


def test_protocol_names_offer_fallbacks_with_the_same_assignor() -> None:
    assert protocol_names("sessioned", ["sticky"]) == [
        "sessioned/sticky",
        "compatible/sticky",
        "eager/sticky",
    ]
    assert protocol_names("eager", ["failover"]) == ["eager/failover"]
    assert protocol_names("compatible", ["sticky", "failover"]) == [
        "compatible/sticky", "compatible/failover", "eager/sticky", "eager/failover",
    ]  # fmt: skip
    assert style_of("eager/sticky") == "eager"
    assert style_of("compatible/round-robin") == "cooperative"
    assert assignor_of("sessioned/failover") == "failover"


def broker_choice(members: list[list[str]]) -> str:
    """The group coordinator's rule: of the protocols every member offers, each member
    votes for the first in its own order; the most votes win."""
    candidates = set.intersection(*(set(offered) for offered in members))
    votes = Counter(next(p for p in offered if p in candidates) for offered in members)
    return votes.most_common(1)[0][0]


def test_a_cluster_changes_assignor_one_worker_at_a_time() -> None:
    """sticky on all → sticky,failover rolled over them → failover rolled over them: at each
    step every member offers what the broker picks, and the pick moves only once every
    member lists failover."""
    steps = [
        ["sticky"], ["sticky"], ["sticky"],
    ], [
        ["sticky", "failover"], ["sticky"], ["sticky"],
    ], [
        ["sticky", "failover"], ["sticky", "failover"], ["sticky", "failover"],
    ], [
        ["failover"], ["sticky", "failover"], ["sticky", "failover"],
    ], [
        ["failover"], ["failover"], ["failover"],
    ]  # fmt: skip
    chosen = [
        assignor_of(broker_choice([protocol_names("sessioned", a) for a in step])) for step in steps
    ]
    assert chosen == ["sticky", "sticky", "sticky", "failover", "failover"]


def test_member_metadata_round_trip() -> None:
    owned = Assignment.of(["a"], [TaskId("a", 0), TaskId("b", 3)])
    meta = MemberMetadata(
        "http://h:1", "h:1", 42, "sessioned", "sticky", 3, 1500, 7, owned, "preparing"
    )
    assert MemberMetadata.decode(meta.encode()) == meta
    assert b'"tasks":[["a",0],["b",3]]' in meta.encode()
    assert b'"exactly_once":"preparing"' in meta.encode()


def test_a_member_of_the_previous_metadata_has_no_mode() -> None:
    """A worker of an earlier release sends no exactly_once: read as "" (unknown), in its
    metadata and in the member list of an assignment."""
    earlier = (
        b'{"v":1,"url":"u","worker_id":"w","config_offset":1,"protocol":"sessioned",'
        b'"assignor":"sticky","priority":0,"tenure_ms":0,"generation":1,"tasks":[]}'
    )
    assert MemberMetadata.decode(earlier).exactly_once == ""
    listed = (
        b'{"v":1,"error":"none","leader":"m1","leader_url":"u","config_offset":1,'
        b'"delay_ms":0,"members":[{"id":"m1","url":"u","worker_id":"w"}]}'
    )
    assert MemberAssignment.decode(listed).members == (MemberInfo("m1", "u", "w", ""),)


@pytest.mark.parametrize(
    "user_data", [None, {"priority": 3, "zone": "a"}, [1, "x"], b"\x00\xffraw", {"$bytes": 1}]
)
def test_user_data_travels_both_ways_as_json_or_bytes(user_data: object) -> None:
    meta = MemberMetadata("http://h:1", "h:1", 1, "sessioned", "x", user_data=user_data)
    assert MemberMetadata.decode(meta.encode()).user_data == user_data
    answer = MemberAssignment("m1", "http://h:1", 1, user_data=user_data)
    assert MemberAssignment.decode(answer.encode()).user_data == user_data
    assert (b'"user_data"' in meta.encode()) is (user_data is not None)


def test_assignment_round_trip() -> None:
    assignment = MemberAssignment(
        leader_id="m1",
        leader_url="http://h:1",
        config_offset=9,
        assigned=Assignment.of(["a"], [TaskId("a", 1)]),
        revoked=Assignment.of([], [TaskId("a", 0)]),
        delay_ms=250,
        members=(MemberInfo("m1", "http://h:1", "h:1", "enabled"),),
    )
    assert MemberAssignment.decode(assignment.encode()) == assignment


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"not json", "not JSON"),
        (b"[]", "not a JSON object"),
        (b'{"v":2}', "version 2"),
        (b'{"v":1,"url":1}', "url must be a string"),
        (
            b'{"v":1,"url":"u","worker_id":"w","config_offset":1,"protocol":"p","assignor":"a",'
            b'"priority":0,"tenure_ms":0,"generation":1,"tasks":[["a","0"]]}',
            "tasks must be a list of [connector, task]",
        ),
    ],
)
def test_unreadable_metadata_is_rejected_with_the_reason(data: bytes, why: str) -> None:
    with pytest.raises(MalformedGroupData, match=why.replace("[", r"\[").replace("]", r"\]")):
        MemberMetadata.decode(data)


def signed(path: str = "/connectors/a/fence", body: bytes = b"", now: int = 1000) -> dict[str, str]:
    return sign(KEY, "HmacSHA256", "PUT", path, body, now)


def check(headers: dict[str, str], *, key: bytes | None = KEY, path: str = "/connectors/a/fence",
          body: bytes = b"", now: int = 1000, method: str = "PUT") -> int | None:  # fmt: skip
    rejection = verify(
        headers, key=key, method=method, path=path, body=body, now_ms=now, window_ms=60_000
    )
    return None if rejection is None else rejection.status


def test_signed_request_is_accepted() -> None:
    assert check(signed()) is None
    assert check(signed(body=b"[{}]", path="/x"), body=b"[{}]", path="/x") is None


def test_signatures_cannot_be_moved_replayed_or_forged() -> None:
    headers = signed()
    assert check(headers, path="/connectors/b/fence") == 403  # another connector
    assert check(headers, method="POST") == 403
    assert check(headers, body=b"x") == 403
    assert check(headers, now=1000 + 60_001) == 403  # stale
    assert check(headers, key=b"o" * 32) == 403  # rotated-out key
    assert check({**headers, SIGNATURE: "AAAA"}) == 403
    assert check({**headers, TIMESTAMP: "soon"}) == 403


def test_missing_signature_unknown_algorithm_and_no_key() -> None:
    assert check({}) == 400
    assert check({k: v for k, v in signed().items() if k != TIMESTAMP}) == 400
    assert check({**signed(), ALGORITHM: "HmacMD5"}) == 400
    assert check(signed(), key=None) == 503


def test_key_sizes() -> None:
    assert key_bytes("HmacSHA256") == 32
    assert key_bytes("HmacSHA512") == 64
