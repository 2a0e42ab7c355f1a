"""The coordinator's decisions as pure functions, without a broker: which producers a
fencing round fences as the task count changes, when a session key is due, what a
restart request stops on a worker, which restart requests are new to a worker, and
which config changes need a rebalance."""

from __future__ import annotations

import pytest

from eos.runtime.clock import ManualClock
from eos.runtime.cluster.assignors.base import Assignment, TaskId
from eos.runtime.cluster.coordinator.config_writes import placement_changed
from eos.runtime.cluster.coordinator.fencing import fencing_plan
from eos.runtime.cluster.coordinator.reconcile import idle_states, wanted_connectors, wanted_tasks
from eos.runtime.cluster.coordinator.restart_requests import RestartPlan, new_restarts, restart_plan
from eos.runtime.cluster.coordinator.session_keys import key_due, key_remaining_ms
from eos.state import State
from eos.storage.config_log import (
    ConfigState,
    RestartRequest,
    SessionKey,
    TargetState,
    encode_connector_config,
    encode_restart,
    encode_target_state,
    encode_task_commit,
    encode_task_config,
)

GROUP = "g"


def ids(*tasks: int) -> list[str]:
    return [f"{GROUP}-c-{t}" for t in tasks]


# ----------------------------------------------------------------- fencing plan


@pytest.mark.parametrize(
    ("previous", "count", "fenced"),
    [
        (None, 3, []),  # a new connector: nothing ran before
        (1, 1, []),  # one task stays one: its producer takes over the id itself
        (0, 1, []),  # nothing ran (stopped before)
        (0, 0, []),
        (1, 2, ids(0)),  # 1 → 2: task 0's predecessor fenced before task 1 may start
        (1, 0, ids(0)),  # stopped: no successor takes the id over
        (3, 1, ids(0, 1, 2)),  # shrinking: every old id, also those that will not return
        (2, 5, ids(0, 1)),  # growing: every old id
        (3, 3, ids(0, 1, 2)),  # same count, new configs: all of them
        (3, 0, ids(0, 1, 2)),  # stopped
    ],
)
def test_fencing_plan_for_task_count_changes(
    previous: int | None, count: int, fenced: list[str]
) -> None:
    assert fencing_plan(GROUP, "c", previous, count) == fenced


# ------------------------------------------------------------------ key rotation

TTL = 3_600_000


def test_a_key_is_due_when_missing_old_or_of_another_algorithm() -> None:
    clock = ManualClock()
    key = SessionKey(b"k" * 32, "HmacSHA256", clock.wall_ms())
    assert key_due(None, algorithm="HmacSHA256", ttl_ms=TTL, now_ms=clock.wall_ms())
    assert not key_due(key, algorithm="HmacSHA256", ttl_ms=TTL, now_ms=clock.wall_ms())
    assert key_due(key, algorithm="HmacSHA512", ttl_ms=TTL, now_ms=clock.wall_ms())
    assert key_remaining_ms(key, ttl_ms=TTL, now_ms=clock.wall_ms()) == TTL

    clock.advance(TTL / 1000 - 0.001)
    assert not key_due(key, algorithm="HmacSHA256", ttl_ms=TTL, now_ms=clock.wall_ms())
    assert key_remaining_ms(key, ttl_ms=TTL, now_ms=clock.wall_ms()) == 1
    clock.advance(0.001)
    assert key_due(key, algorithm="HmacSHA256", ttl_ms=TTL, now_ms=clock.wall_ms())
    assert key_remaining_ms(key, ttl_ms=TTL, now_ms=clock.wall_ms()) == 0
    clock.advance(60)  # long overdue (the leader was away): due, never negative
    assert key_remaining_ms(key, ttl_ms=TTL, now_ms=clock.wall_ms()) == 0


# ------------------------------------------------------------------ restart plans

ALL = RestartRequest(include_tasks=True)
ALL_FAILED = RestartRequest(include_tasks=True, only_failed=True)


@pytest.mark.parametrize(
    ("request_", "connector_here", "failed_connector", "failed_tasks", "plan"),
    [
        # the connector alone (POST /connectors/c/restart)
        (RestartRequest(), True, False, set(), RestartPlan(True)),
        (RestartRequest(), False, False, set(), RestartPlan(False)),
        # includeTasks: the connector and every task of it here
        (ALL, True, False, set(), RestartPlan(True, (0, 2))),
        (ALL, False, False, set(), RestartPlan(False, (0, 2))),
        # onlyFailed: only what FAILED
        (ALL_FAILED, True, False, {2}, RestartPlan(False, (2,))),
        (ALL_FAILED, True, True, set(), RestartPlan(True, ())),
        (ALL_FAILED, True, False, set(), RestartPlan(False, ())),
        (RestartRequest(only_failed=True), True, True, {0}, RestartPlan(True)),
        (RestartRequest(only_failed=True), True, False, {0}, RestartPlan(False)),
        # one task (POST /connectors/c/tasks/2/restart): that task only, if it runs here
        (RestartRequest(task=2), True, True, {0}, RestartPlan(False, (2,))),
        (RestartRequest(task=1), True, False, set(), RestartPlan(False, ())),
    ],
)
def test_restart_plan(
    request_: RestartRequest,
    connector_here: bool,
    failed_connector: bool,
    failed_tasks: set[int],
    plan: RestartPlan,
) -> None:
    made = restart_plan(
        request_,
        connector_here=connector_here,
        tasks_here=[2, 0],
        connector_failed=failed_connector,
        failed_tasks=failed_tasks,
    )
    assert made == plan
    assert bool(made) == (plan.connector or bool(plan.tasks))


def test_new_restarts_are_those_after_the_last_seen_in_order() -> None:
    first, second = RestartRequest(include_tasks=True), RestartRequest(task=0)
    log_ = [(5, "a", first), (9, "a", second), (12, "b", first)]
    assert new_restarts(log_, None) == ([], 12)  # made before this worker looked: done
    assert new_restarts([], None) == ([], -1)
    assert new_restarts(log_, 5) == ([("a", second), ("b", first)], 12)
    assert new_restarts(log_, 12) == ([], 12)
    assert new_restarts(log_[:1], 9) == ([], 9)  # a re-read after compaction: nothing again


def test_back_to_back_restarts_are_all_in_one_read() -> None:
    """Two requests for one connector read together: both are seen, in order (only the
    latest is kept per connector, the log keeps both)."""
    state = ConfigState()
    records = [
        encode_connector_config("c", {"k": "v"}),
        encode_restart("c", ALL),
        encode_restart("c", RestartRequest(task=0)),
    ]
    for offset, (key, value) in enumerate(records):
        state.apply(key, value, 0, offset)
    snap = state.snapshot()
    assert snap.restarts == {"c": (2, RestartRequest(task=0))}
    assert snap.restart_log == ((1, "c", ALL), (2, "c", RestartRequest(task=0)))
    assert new_restarts(snap.restart_log, 0)[0] == [("c", ALL), ("c", RestartRequest(task=0))]


# --------------------------------------------------------- rebalance or not


def snapshot(tasks: dict[str, int], states: dict[str, TargetState] | None = None) -> ConfigState:
    state = ConfigState()
    records = []
    for name, count in tasks.items():
        records.append(encode_connector_config(name, {"tasks.max": str(count)}))
        records.extend(encode_task_config(name, i, {"i": str(i)}) for i in range(count))
        records.append(encode_task_commit(name, count))
    for name, target in (states or {}).items():
        records.append(encode_target_state(name, target))
    for offset, (key, value) in enumerate(records):
        state.apply(key, value, 0, offset)
    return state


def test_only_new_or_removed_work_needs_a_rebalance() -> None:
    before = snapshot({"a": 2, "b": 1}).snapshot()
    paused = snapshot({"a": 2, "b": 1}, {"a": TargetState.PAUSED}).snapshot()
    assert not placement_changed(before, paused)  # pause, resume, restart: no rebalance
    assert not placement_changed(before, before)
    assert placement_changed(before, snapshot({"a": 0, "b": 1}).snapshot())  # stop: 2 → 0
    assert placement_changed(before, snapshot({"a": 3, "b": 1}).snapshot())
    assert placement_changed(before, snapshot({"a": 2}).snapshot())  # deleted
    assert placement_changed(before, snapshot({"a": 2, "b": 1, "c": 0}).snapshot())  # created


# --------------------------------------------------------------------- reconcile


def test_what_should_run_and_what_is_reported_idle() -> None:
    snap = snapshot(
        {"run": 2, "paused": 2, "stopped": 0}, {"paused": TargetState.PAUSED,
                                                 "stopped": TargetState.STOPPED}
    ).snapshot()  # fmt: skip
    mine = Assignment.of(
        ["run", "paused", "stopped", "gone"],
        [TaskId("run", 0), TaskId("run", 5), TaskId("paused", 1), TaskId("gone", 0)],
    )
    assert wanted_connectors(mine, snap) == {"run"}
    assert wanted_tasks(mine, snap) == {("run", 0): snap.generations["run"]}
    assert idle_states(mine, snap) == {
        ("paused", None): State.PAUSED,
        ("stopped", None): State.STOPPED,
        ("paused", 1): State.PAUSED,
    }
