"""Record formats of the internal topics and the config snapshot logic (no I/O)."""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

import pytest
from structlog.testing import capture_logs

import eos.storage
from eos.state import State
from eos.storage.config_log import (
    ConfigState,
    ConnectorConfigRecord,
    SessionKey,
    SessionKeyRecord,
    TargetState,
    TargetStateRecord,
    TaskCommitRecord,
    TaskConfigRecord,
    TaskCountRecord,
    decode_record,
    encode_connector_config,
    encode_connector_tombstone,
    encode_session_key,
    encode_target_state,
    encode_target_state_tombstone,
    encode_task_commit,
    encode_task_config,
    encode_task_count,
)
from eos.storage.offset_log import (
    OffsetBatch,
    canonical_partition,
    decode_offset_record,
    encode_offset_key,
    encode_offset_value,
)
from eos.storage.status_log import (
    Status,
    StatusRecord,
    StatusTable,
    connector_status_key,
    decode_status_record,
    encode_status,
    task_status_key,
)

Record = tuple[bytes, bytes | None]


def _warnings(logs: list[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["log_level"] == "warning"]


def test_export_list() -> None:
    names = {n for n in vars(eos.storage) if not n.startswith("_")}
    assert names >= {
        "ConfigLog",
        "ConfigSnapshot",
        "TargetState",
        "OffsetLog",
        "CombinedOffsetReader",
        "OffsetBatch",
        "StatusLog",
        "Status",
    }


# ── config records ───────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (
            encode_connector_config("my-conn", {"a": "1"}),
            ConnectorConfigRecord("my-conn", {"a": "1"}),
        ),
        (encode_connector_tombstone("my-conn"), ConnectorConfigRecord("my-conn", None)),
        (
            encode_task_config("my-conn", 12, {"t": "x"}),
            TaskConfigRecord("my-conn", 12, {"t": "x"}),
        ),
        (encode_task_commit("my-conn", 3), TaskCommitRecord("my-conn", 3)),
        (
            encode_target_state("my-conn", TargetState.PAUSED),
            TargetStateRecord("my-conn", TargetState.PAUSED),
        ),
        (encode_target_state_tombstone("my-conn"), TargetStateRecord("my-conn", None)),
        (encode_task_count("my-conn", 0), TaskCountRecord("my-conn", 0)),
        (
            encode_session_key(SessionKey(b"\x00secret\xff", "HmacSHA256", 1234)),
            SessionKeyRecord(SessionKey(b"\x00secret\xff", "HmacSHA256", 1234)),
        ),
    ],
)
def test_config_round_trip(record: Record, expected: object) -> None:
    assert decode_record(*record) == expected


def test_config_values_are_versioned_json() -> None:
    key, value = encode_task_count("c", 2)
    assert key == b"tasks-count-c"
    assert value is not None
    assert json.loads(value) == {"v": 1, "tasks": 2}
    key, value = encode_session_key(SessionKey(b"k", created_ms=5))
    assert key == b"session-key"
    assert value is not None
    assert json.loads(value) == {"v": 1, "key": "aw==", "algorithm": "HmacSHA256", "created_ms": 5}


def test_session_key_repr_hides_the_key() -> None:
    assert "secret" not in repr(SessionKey(b"secret"))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (b"connector-c", b'{"v":2,"properties":{}}'),  # newer version
        (b"connector-c", b'{"properties":{}}'),  # no version
        (b"wormhole-c", b'{"v":1}'),  # unknown kind
        (b"connector-c", b"not json"),
        (b"connector-c", b"[1,2]"),
        (b"connector-c", b'{"v":1,"properties":{"a":1}}'),  # not strings
        (b"task-c-x", b'{"v":1,"properties":{}}'),  # bad task number
        (b"commit-c", b'{"v":1,"tasks":-1}'),
        (b"tasks-count-c", b'{"v":1,"tasks":true}'),
        (b"target-state-c", b'{"v":1,"state":"SLEEPING"}'),
        (b"session-key", b'{"v":1,"key":"***","algorithm":"x","created_ms":1}'),
        (b"\xff\xfe", b'{"v":1}'),  # key not UTF-8
        (None, b'{"v":1}'),
    ],
)
def test_unreadable_config_records_are_ignored_with_a_warning(
    key: bytes | None, value: bytes
) -> None:
    with capture_logs() as logs:
        assert decode_record(key, value) is None
    assert len(_warnings(logs)) == 1


def test_task_key_with_dashes_in_connector_name() -> None:
    assert decode_record(*encode_task_config("a-b-7", 10, {})) == TaskConfigRecord("a-b-7", 10, {})


# ── config snapshot logic ────────────────────────────────────────────────────


def _state(*records: Record) -> ConfigState:
    state = ConfigState()
    for offset, (key, value) in enumerate(records):
        state.apply(key, value, 0, offset)
    return state


def test_commit_record_closes_a_task_set() -> None:
    state = _state(
        encode_connector_config("c", {"k": "v"}),
        encode_task_config("c", 0, {"t": "0"}),
        encode_task_config("c", 1, {"t": "1"}),
    )
    snapshot = state.snapshot()
    assert snapshot.offset == 3
    assert snapshot.connectors == {"c": {"k": "v"}}
    assert snapshot.tasks("c") == ()  # not committed: invisible
    assert not snapshot.needs_fencing("c")

    state.apply(*encode_task_commit("c", 2), 0, 3)
    snapshot = state.snapshot()
    assert snapshot.tasks("c") == ({"t": "0"}, {"t": "1"})
    assert snapshot.generations == {"c": 3}
    assert snapshot.target_state("c") is TargetState.STARTED


def test_pending_task_records_after_a_commit_stay_invisible() -> None:
    state = _state(
        encode_connector_config("c", {}),
        encode_task_config("c", 0, {"gen": "1"}),
        encode_task_commit("c", 1),
        encode_task_config("c", 0, {"gen": "2"}),
        encode_task_config("c", 1, {"gen": "2"}),
    )
    assert state.snapshot().tasks("c") == ({"gen": "1"},)
    state.apply(*encode_task_commit("c", 2), 0, 5)
    assert state.snapshot().tasks("c") == ({"gen": "2"}, {"gen": "2"})
    assert state.snapshot().generations["c"] == 5


def test_latest_record_per_task_id_wins_and_commit_takes_only_n() -> None:
    state = _state(
        encode_connector_config("c", {}),
        encode_task_config("c", 0, {"try": "1"}),
        encode_task_config("c", 1, {"try": "1"}),
        encode_task_config("c", 0, {"try": "2"}),
        encode_task_commit("c", 1),
    )
    assert state.snapshot().tasks("c") == ({"try": "2"},)


def test_commit_with_missing_task_records_makes_the_connector_inconsistent() -> None:
    with capture_logs() as logs:
        state = _state(
            encode_connector_config("c", {}),
            encode_task_config("c", 1, {}),
            encode_task_commit("c", 2),  # task 0 was compacted away
        )
    snapshot = state.snapshot()
    assert snapshot.tasks("c") == ()
    assert snapshot.inconsistent == {"c"}
    assert _warnings(logs)
    state.apply(*encode_task_config("c", 0, {}), 0, 3)
    state.apply(*encode_task_commit("c", 1), 0, 4)
    assert state.snapshot().inconsistent == frozenset()
    assert state.snapshot().tasks("c") == ({},)


def test_needs_fencing_until_a_task_count_record_follows_the_task_configs() -> None:
    state = _state(
        encode_connector_config("c", {}),
        encode_task_config("c", 0, {}),
        encode_task_config("c", 1, {}),
        encode_task_commit("c", 2),
    )
    snapshot = state.snapshot()
    assert snapshot.needs_fencing("c")
    assert snapshot.previous_task_count("c") is None

    state.apply(*encode_task_count("c", 2), 0, 4)
    snapshot = state.snapshot()
    assert not snapshot.needs_fencing("c")
    assert snapshot.previous_task_count("c") == 2
    assert snapshot.task_counts == {"c": 2}

    state.apply(*encode_task_config("c", 0, {"new": "y"}), 0, 5)
    assert not state.snapshot().needs_fencing("c")  # pending configs do not count
    state.apply(*encode_task_commit("c", 1), 0, 6)
    snapshot = state.snapshot()
    assert snapshot.needs_fencing("c")
    assert snapshot.previous_task_count("c") == 2  # the generation to fence

    state.apply(*encode_task_count("c", 1), 0, 7)
    assert not state.snapshot().needs_fencing("c")


def test_connector_without_tasks_needs_no_fencing() -> None:
    snapshot = _state(encode_connector_config("c", {})).snapshot()
    assert not snapshot.needs_fencing("c")
    assert not snapshot.needs_fencing("unknown")


def test_connector_tombstone_drops_everything_of_the_connector() -> None:
    state = _state(
        encode_connector_config("c", {"a": "b"}),
        encode_connector_config("d", {}),
        encode_target_state("c", TargetState.PAUSED),
        encode_task_config("c", 0, {}),
        encode_task_commit("c", 1),
        encode_task_count("c", 1),
        encode_connector_tombstone("c"),
        encode_target_state_tombstone("c"),
    )
    snapshot = state.snapshot()
    assert snapshot.connectors == {"d": {}}
    assert snapshot.tasks("c") == ()
    assert snapshot.target_states == {}
    assert snapshot.task_counts == {}
    assert snapshot.generations == {}
    assert not snapshot.needs_fencing("c")

    # Re-created: starts from nothing.
    state.apply(*encode_connector_config("c", {"new": "1"}), 0, 8)
    snapshot = state.snapshot()
    assert snapshot.connectors["c"] == {"new": "1"}
    assert snapshot.tasks("c") == ()
    assert snapshot.previous_task_count("c") is None


def test_target_state_and_session_key() -> None:
    key = SessionKey(b"k1", "HmacSHA256", 10)
    state = _state(
        encode_connector_config("c", {}),
        encode_target_state("c", TargetState.STOPPED),
        encode_session_key(key),
    )
    snapshot = state.snapshot()
    assert snapshot.target_state("c") is TargetState.STOPPED
    assert snapshot.session_key == key
    state.apply(*encode_target_state_tombstone("c"), 0, 3)
    assert state.snapshot().target_state("c") is TargetState.STARTED


def test_state_of_connectors_without_config_is_hidden() -> None:
    # Connector deleted and its tombstone compacted away: task records remain.
    snapshot = _state(
        encode_task_config("gone", 0, {}),
        encode_task_commit("gone", 1),
        encode_task_count("gone", 1),
        encode_target_state("gone", TargetState.PAUSED),
    ).snapshot()
    assert snapshot.connectors == {}
    assert snapshot.task_configs == {}
    assert snapshot.task_counts == {}
    assert snapshot.target_states == {}


def test_unknown_records_do_not_disturb_the_snapshot() -> None:
    with capture_logs() as logs:
        state = _state(
            encode_connector_config("c", {"a": "1"}),
            (b"connector-c", b'{"v":2,"properties":{"a":"2"},"shiny":true}'),
            (b"future-kind-c", b'{"v":1}'),
        )
    assert state.snapshot().connectors == {"c": {"a": "1"}}
    assert state.snapshot().offset == 3
    assert len(_warnings(logs)) == 2


def test_snapshot_is_immutable() -> None:
    snapshot = _state(encode_connector_config("c", {"a": "1"})).snapshot()
    with pytest.raises(TypeError):
        snapshot.connectors["d"] = {}  # type: ignore[index]
    with pytest.raises(TypeError):
        snapshot.connectors["c"]["a"] = "2"  # type: ignore[index]


# ── offsets ──────────────────────────────────────────────────────────────────


def test_offset_key_is_canonical() -> None:
    a = encode_offset_key("conn", {"file": "x", "part": 1})
    b = encode_offset_key("conn", {"part": 1, "file": "x"})
    assert a == b == b'["conn",{"file":"x","part":1}]'
    assert canonical_partition({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'


def test_offset_round_trip_and_tombstone() -> None:
    key = encode_offset_key("conn", {"p": 0})
    assert decode_offset_record(key, encode_offset_value({"pos": 5})) == (
        "conn",
        {"p": 0},
        {"pos": 5},
    )
    assert encode_offset_value(None) is None
    assert decode_offset_record(key, None) == ("conn", {"p": 0}, None)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (b"not json", b"{}"),
        (b'["conn"]', b"{}"),
        (b'[1,{"p":0}]', b"{}"),
        (b'["conn","p"]', b"{}"),
        (b'["conn",{"p":0}]', b"[1]"),
        (b'["conn",{"p":0}]', b"\xff"),
        (None, b"{}"),
    ],
)
def test_unreadable_offset_records_are_ignored_with_a_warning(
    key: bytes | None, value: bytes
) -> None:
    with capture_logs() as logs:
        assert decode_offset_record(key, value) is None
    assert len(_warnings(logs)) == 1


def test_offset_batch_keeps_the_latest_offset_per_partition() -> None:
    batch = OffsetBatch("conn")
    assert not batch
    batch.add({"p": 0}, {"pos": 1})
    batch.add({"p": 1}, {"pos": 1})
    batch.add({"p": 0}, {"pos": 2})
    batch.add({"p": 2}, None)  # a record without an offset advances nothing
    assert len(batch) == 2
    assert dict(batch.records()) == {
        b'["conn",{"p":0}]': b'{"pos":2}',
        b'["conn",{"p":1}]': b'{"pos":1}',
    }
    batch.reset({"p": 1})
    assert dict(batch.records())[b'["conn",{"p":1}]'] is None
    assert batch.offsets() == [({"p": 0}, {"pos": 2}), ({"p": 1}, None)]
    # Equal partitions whose keys arrive in another order are one partition: latest wins.
    batch.add({"a": 1, "b": 2}, {"pos": 5})
    batch.add({"b": 2, "a": 1}, {"pos": 6})
    assert dict(batch.records())[b'["conn",{"a":1,"b":2}]'] == b'{"pos":6}'
    batch.clear()
    assert batch.records() == []


# ── statuses ─────────────────────────────────────────────────────────────────


def test_status_round_trip() -> None:
    status = Status(State.FAILED, "Traceback ...", "worker-1:8083", 7)
    value = encode_status(status)
    assert json.loads(value) == {
        "v": 1,
        "state": "FAILED",
        "trace": "Traceback ...",
        "worker_id": "worker-1:8083",
        "generation": 7,
    }
    assert decode_status_record(connector_status_key("my-c"), value) == StatusRecord(
        "my-c", None, status
    )
    assert decode_status_record(task_status_key("my-c", 3), value) == StatusRecord(
        "my-c", 3, status
    )
    assert decode_status_record(task_status_key("my-c", 3), None) == StatusRecord("my-c", 3, None)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (b"status-connector-c", b'{"v":2,"state":"RUNNING"}'),
        (b"status-topic-c", b'{"v":1}'),
        (b"status-task-c-x", b'{"v":1}'),
        (
            b"status-task-c-0",
            b'{"v":1,"state":"DANCING","trace":null,"worker_id":"w","generation":1}',
        ),
        (b"status-task-c-0", b'{"v":1,"state":"RUNNING","trace":null,"worker_id":"w"}'),
    ],
)
def test_unreadable_status_records_are_ignored_with_a_warning(key: bytes, value: bytes) -> None:
    with capture_logs() as logs:
        assert decode_status_record(key, value) is None
    assert len(_warnings(logs)) == 1


def test_status_table() -> None:
    table = StatusTable()
    running = encode_status(Status(State.RUNNING, None, "w", 1))
    table.apply(connector_status_key("c"), running, 0, 0)
    table.apply(task_status_key("c", 0), running, 0, 1)
    table.apply(task_status_key("c", 1), running, 0, 2)
    table.apply(task_status_key("c", 1), None, 0, 3)
    assert table.connectors["c"].state is State.RUNNING
    assert set(table.tasks["c"]) == {0}


def test_a_stale_owner_never_overwrites_a_newer_status() -> None:
    table = StatusTable()
    key = task_status_key("c", 0)

    def put(state: State, worker: str, generation: int) -> None:
        table.apply(key, encode_status(Status(state, None, worker, generation)), 0, 0)

    put(State.RUNNING, "zombie:8083", 5)
    put(State.RUNNING, "new-owner:8083", 7)  # the task moved in generation 7
    put(State.UNASSIGNED, "zombie:8083", 5)  # the paused worker wakes up and reports
    assert table.tasks["c"][0] == Status(State.RUNNING, None, "new-owner:8083", 7)
    put(State.FAILED, "new-owner:8083", 7)  # the owner's own reports always apply
    put(State.RUNNING, "new-owner:8083", 1)  # ... even after its group was recreated
    assert table.tasks["c"][0].state is State.RUNNING
    put(State.RUNNING, "third:8083", 8)
    assert table.tasks["c"][0].worker_id == "third:8083"
    connector = connector_status_key("c")
    table.apply(connector, encode_status(Status(State.RUNNING, None, "b", 9)), 0, 1)
    table.apply(connector, encode_status(Status(State.FAILED, None, "a", 3)), 0, 2)
    assert table.connectors["c"].worker_id == "b"
