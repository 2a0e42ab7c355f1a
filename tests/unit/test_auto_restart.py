"""Automatic restarts: Strimzi's schedule, when to give up and what never heals, as pure
functions on a manual clock; then the duty against a supervisor that records (a
restart goes the way of a user's restart; waiting and giving up reach the status)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import cast

import pytest
from aiokafka.errors import SaslAuthenticationFailed, TopicAuthorizationFailedError

from eos.config.auto_restart import AutoRestartPolicy
from eos.config.worker import WorkerConfig
from eos.errors import (
    ConfigError,
    ConversionError,
    PluginError,
    RetriableError,
    TaskError,
    TransactionTimedOut,
)
from eos.runtime.clock import ManualClock
from eos.runtime.cluster.coordinator.auto_restarts import AutoRestarts
from eos.runtime.cluster.coordinator.restart_backoff import (
    Action,
    RestartBook,
    RestartRecord,
    backoff_ms,
    cannot_heal,
    decide,
)
from eos.runtime.observer import NullObserver
from eos.state import State
from tests.unit.test_coordinator_duties import SETTINGS, connector_with_tasks, duties

MINUTE = 60.0
STRIMZI = AutoRestartPolicy()  # the defaults: a minute's unit, at most an hour


def test_backoff_is_strimzis_schedule() -> None:
    minutes = [backoff_ms(n, STRIMZI) / 60_000 for n in range(11)]
    assert minutes == [0, 2, 6, 12, 20, 30, 42, 56, 60, 60, 60]
    short = AutoRestartPolicy(backoff_unit_ms=500, backoff_max_ms=5_000)
    assert [backoff_ms(n, short) for n in range(4)] == [0, 1000, 3000, 5000]


def restart_times(policy: AutoRestartPolicy, failures: int, *, step: float = 1.0) -> list[float]:
    """When a unit that fails at once after every start is restarted (seconds from its
    first failure), looking every ``step`` seconds, until it is left FAILED or has failed
    ``failures`` times."""
    clock, record = ManualClock(0.0), None
    times: list[float] = []
    while len(times) < failures and clock.now < 10 * 3600:
        decision = decide(record, failed=True, error=None, policy=policy, now=clock.now)
        if decision.action is Action.LEAVE:
            break
        if decision.action is Action.RESTART:
            times.append(clock.now)
            restarts = record.restarts if record else 0
            record = RestartRecord(restarts=restarts + 1, last_restart=clock.now)
        clock.advance(step)
    return times


def test_a_unit_that_keeps_failing_is_restarted_at_once_then_after_2_6_12_minutes() -> None:
    times = restart_times(STRIMZI, 10, step=MINUTE)
    gaps = [round((b - a) / MINUTE) for a, b in itertools.pairwise(times)]
    assert times[0] == 0
    assert gaps == [2, 6, 12, 20, 30, 42, 56, 60, 60]


def test_it_stops_at_the_maximum_and_says_so() -> None:
    policy = replace(STRIMZI, max_attempts=3)
    assert len(restart_times(policy, 10, step=MINUTE)) == 3
    record = RestartRecord(restarts=3, last_restart=0.0)
    decision = decide(record, failed=True, error=None, policy=policy, now=10 * 3600)
    assert decision.action is Action.LEAVE
    assert decision.reason is not None
    assert "auto.restart.max.attempts (3) reached" in decision.reason


def test_the_wait_is_counted_from_the_last_restart_and_capped() -> None:
    policy = replace(STRIMZI, backoff_max_ms=5 * 60_000)
    record = RestartRecord(restarts=3, last_restart=100.0)  # 12 minutes, capped at 5
    decision = decide(record, failed=True, error=None, policy=policy, now=130.0)
    assert decision.action is Action.WAIT
    assert decision.at == 100.0 + 5 * MINUTE
    assert decide(record, failed=True, error=None, policy=policy, now=decision.at).action is (
        Action.RESTART
    )


def test_running_as_long_as_the_last_wait_starts_the_count_again() -> None:
    record = RestartRecord(restarts=2, last_restart=0.0)  # the next wait: 6 minutes
    assert decide(record, failed=False, error=None, policy=STRIMZI, now=5 * MINUTE).action is (
        Action.RUNNING
    )
    assert decide(record, failed=False, error=None, policy=STRIMZI, now=6 * MINUTE).action is (
        Action.RESET
    )
    # a unit left FAILED that a user restarted: nothing to keep
    left = RestartRecord(reason="auto.restart.enabled is false")
    assert decide(left, failed=False, error=None, policy=STRIMZI, now=0.0).action is Action.RESET
    assert decide(None, failed=False, error=None, policy=STRIMZI, now=0.0).action is Action.NOTHING


def test_disabled_leaves_it_failed() -> None:
    decision = decide(
        None, failed=True, error=None, policy=replace(STRIMZI, enabled=False), now=0.0
    )
    assert decision.action is Action.LEAVE
    assert decision.reason == "auto.restart.enabled is false"


def wrapped(inner: BaseException) -> BaseException:
    """``inner`` as the cause of a task failure, inside an exception group."""
    try:
        try:
            raise inner
        except BaseException as exc:
            raise TaskError("the task failed") from exc
    except TaskError as outer:
        return ExceptionGroup("task", [outer])


def caused(outer: BaseException, cause: BaseException) -> BaseException:
    outer.__cause__ = cause
    return outer


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (ConfigError("topic", "", "must not be empty"), "ConfigError does not heal"),
        (PluginError("no plugin X"), "PluginError does not heal"),
        (wrapped(ConfigError("k", 1, "bad")), "ConfigError does not heal"),
        (TopicAuthorizationFailedError(), "a missing ACL"),
        (wrapped(TopicAuthorizationFailedError()), "TopicAuthorizationFailedError"),
        (TaskError("send failed: TOPIC_AUTHORIZATION_FAILED: denied"), "a missing ACL"),
        (caused(ConversionError("x could not be sent"), SaslAuthenticationFailed()), "credentials"),
    ],
)
def test_what_cannot_heal_is_named_and_never_restarted(error: BaseException, says: str) -> None:
    reason = cannot_heal(error)
    assert reason is not None
    assert says in reason
    decision = decide(None, failed=True, error=error, policy=STRIMZI, now=0.0)
    assert decision.action is Action.LEAVE
    assert decision.reason == reason


@pytest.mark.parametrize(
    "error",
    [
        None,
        RuntimeError("the source went away"),
        RetriableError("broker unavailable"),
        TransactionTimedOut("the broker aborted the transaction"),
        wrapped(OSError("connection reset")),
    ],
)
def test_other_failures_are_restarted(error: BaseException | None) -> None:
    assert cannot_heal(error) is None
    assert decide(None, failed=True, error=error, policy=STRIMZI, now=0.0).action is (
        Action.RESTART
    )


def test_a_connector_overrides_the_workers_policy() -> None:
    worker = AutoRestartPolicy.of_worker(
        {"auto.restart.max.attempts": "5", "auto.restart.backoff.unit.ms": "1000"}
    )
    assert worker == AutoRestartPolicy(True, 5, 1000, 3_600_000)
    own = worker.for_connector({"auto.restart.enabled": "false", "auto.restart.max.attempts": "-1"})
    assert own == AutoRestartPolicy(False, None, 1000, 3_600_000)
    assert worker.for_connector({"auto.restart.backoff.max.ms": "9000"}).backoff_max_ms == 9000
    assert worker.for_connector({"auto.restart.max.attempts": "lots"}) == worker
    assert AutoRestartPolicy.of_worker(SETTINGS.raw) == STRIMZI
    with pytest.raises(ConfigError, match=r"auto\.restart\.max\.attempts"):
        WorkerConfig.from_properties({**SETTINGS.raw, "auto.restart.max.attempts": "-2"})


def test_the_book_says_what_the_status_shows() -> None:
    book = RestartBook()
    unit = ("c", 0)
    assert book.status(unit) is None
    book.restarted(unit, 10.0)
    assert book.waiting(unit, 130.0, 1_700_000_120_000)
    assert not book.waiting(unit, 130.0, 1_700_000_120_000)  # known already
    status = book.status(unit)
    assert status is not None
    assert (status.restarts, status.next_attempt_ms, status.reason) == (1, 1_700_000_120_000, None)
    assert book.left(unit, "auto.restart.max.attempts (1) reached")
    status = book.status(unit)
    assert status is not None
    assert (status.next_attempt_ms, status.reason) == (
        None,
        "auto.restart.max.attempts (1) reached",
    )
    assert book.running(unit)
    assert not book.running(unit)
    assert book.forget(unit)
    assert book.status(unit) is None


class Recorded(NullObserver):
    def __init__(self) -> None:
        self.restarted: list[tuple[str, int | None, int]] = []
        self.in_a_row: dict[tuple[str, int | None], int] = {}

    def auto_restarted(self, connector: str, task: int | None, in_a_row: int) -> None:
        self.restarted.append((connector, task, in_a_row))
        self.in_a_row[(connector, task)] = in_a_row

    def auto_restarts_in_a_row(self, connector: str, task: int | None, in_a_row: int) -> None:
        self.in_a_row[(connector, task)] = in_a_row


async def test_the_duty_restarts_through_the_restart_path_then_waits_then_gives_up() -> None:
    async with duties() as leader:
        await connector_with_tasks(leader)
        observer = Recorded()
        settings = replace(SETTINGS, raw={**SETTINGS.raw, "auto.restart.max.attempts": "2"})
        shared = replace(leader.shared, settings=settings, observer=observer)
        clock = cast(ManualClock, shared.clock)
        book, units = RestartBook(), leader.units
        duty = AutoRestarts(shared, units, leader.reconciler, book)

        units.failing = {("c", 1)}
        await leader.inbox.ask(duty.check)  # the first restart comes at once
        assert units.events == [("stop", "c", 1), ("start", "c", 1)]
        assert units.reports == [("c", 1, State.RESTARTING)]
        assert observer.restarted == [("c", 1, 1)]

        units.events.clear()
        clock.advance(30)  # it fails again: the next restart 2 minutes after the first
        await leader.inbox.ask(duty.check)
        assert units.events == [("status", "c", 1)]  # FAILED, with the next attempt
        record = book.get(("c", 1))
        assert record is not None
        assert record.last_restart is not None
        assert record.next_attempt == record.last_restart + 2 * MINUTE
        await leader.inbox.ask(duty.check)
        assert units.events == [("status", "c", 1)]  # nothing new to say

        units.events.clear()
        clock.advance(90)
        await leader.inbox.ask(duty.check)
        assert units.events == [("stop", "c", 1), ("start", "c", 1)]
        assert observer.restarted[-1] == ("c", 1, 2)

        units.events.clear()
        clock.advance(3600)  # fails a third time: the maximum (2) is reached
        await leader.inbox.ask(duty.check)
        assert units.events == [("status", "c", 1)]
        status = book.status(("c", 1))
        assert status is not None
        assert status.reason is not None
        assert "auto.restart.max.attempts (2)" in status.reason
        assert observer.in_a_row[("c", 1)] == 2

        units.events.clear()
        units.failing = set()  # a user restarted it; it runs as long as its last wait
        clock.advance(2 * MINUTE)
        await leader.inbox.ask(duty.check)
        assert book.get(("c", 1)) is None
        assert observer.in_a_row[("c", 1)] == 0
        assert units.events == [("status", "c", 1)]


async def test_the_duty_names_what_cannot_heal_and_forgets_what_moved_away() -> None:
    async with duties() as leader:
        await connector_with_tasks(leader)
        book, units = RestartBook(), leader.units
        duty = AutoRestarts(leader.shared, units, leader.reconciler, book)
        units.failing = {("c", None)}
        units.errors = {("c", None): ConfigError("tasks.max", "x", "expected an integer")}
        await leader.inbox.ask(duty.check)
        assert units.events == [("status", "c", None)]  # FAILED, and why it stays so
        status = book.status(("c", None))
        assert status is not None
        assert status.reason is not None
        assert "ConfigError does not heal by restarting" in status.reason

        leader.state.assigned = replace(leader.state.assigned, connectors=frozenset())
        await leader.inbox.ask(duty.check)
        assert book.units() == []
