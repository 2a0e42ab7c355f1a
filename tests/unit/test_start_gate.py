"""The start-up gate of exactly-once tasks (eos/runtime/task/start_gate.py) against a fake
leader and a fake config snapshot (issue 39, item 4): one fencing request and one config
read per task generation on a worker, shared by the tasks that start together; the
request retried while the leader is moving, given up naming worker.sync.timeout.ms, and
abandoned when the round is cancelled; no request while the leader runs
exactly.once.source.support=disabled (the tasks wait, said once per leader); a stale
generation refused before and after the producer; a failed check failing every task that
waited on it, the next start trying again; a cancelled checker leaving the others to check again."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import pytest
import structlog.testing

from eos.config import WorkerConfig
from eos.errors import ConflictError, EosError, NotLeaderError, RetriableError
from eos.runtime.cluster.coordinator.cluster_state import ClusterState
from eos.runtime.cluster.coordinator.leader_requests import LeaderRequests
from eos.runtime.task.start_gate import StartChecks
from eos.storage.config_log import ConfigSnapshot
from tests.unit.test_config_connector import WORKER

C = "orders"


@dataclass
class FakeState:
    """The config topic as the gate reads it: the connector's generation; ``reads``."""

    generation: int = 1
    fencing_due: bool = False
    reads: int = 0
    leader_url: str = "http://leader:8083"
    leader_id: str = "leader-1"
    leader_exactly_once: str = "enabled"

    async def snapshot(self) -> ConfigSnapshot:
        self.reads += 1
        fenced = {} if self.fencing_due else {C: self.generation}
        return ConfigSnapshot(
            generations={C: self.generation},
            task_count_offsets=fenced,  # a task count record at or after the generation
            task_configs={C: ({}, {})},
        )


@dataclass
class FakeLeader:
    """Answers fencing requests from a script: an exception to raise, or None (done)."""

    script: list[Exception | None] = field(default_factory=list)
    requests: int = 0
    hold: anyio.Event | None = None
    """Set: each request waits for it (tasks meet at the gate)."""

    async def request_fencing(self, connector: str) -> None:
        self.requests += 1
        if self.hold is not None:
            await self.hold.wait()
        if self.script:
            outcome = self.script.pop(0)
            if outcome is not None:
                raise outcome


def gate(state: FakeState, leader: FakeLeader, **settings: str) -> Any:
    worker = WorkerConfig.from_properties({**WORKER, "retry.backoff.ms": "1", **settings})
    checks = StartChecks(worker, cast(ClusterState, state), cast(LeaderRequests, leader))
    return checks.gate(cast(Any, None), None)


async def test_tasks_of_a_generation_share_one_fencing_request_and_one_read() -> None:
    state, leader = FakeState(), FakeLeader(hold=anyio.Event())
    start = gate(state, leader)
    results: list[bool] = []

    async def task() -> None:
        results.append(await start.before_producer(C, 1))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(task)
        await anyio.wait_all_tasks_blocked()
        assert leader.hold is not None
        leader.hold.set()
    assert results == [True, True, True]
    assert (leader.requests, state.reads) == (1, 1)
    assert await start.after_producer(C, 1)  # each task reads again after its producer
    assert state.reads == 2
    assert await start.before_producer(C, 1)  # cached for the generation
    assert leader.requests == 1


async def test_the_request_is_retried_while_the_leader_moves() -> None:
    leader = FakeLeader(script=[NotLeaderError("moving", None), RetriableError("busy"), None])
    assert await gate(FakeState(), leader).before_producer(C, 1)
    assert leader.requests == 3


async def test_a_cancelled_round_abandons_start_up() -> None:
    leader = FakeLeader(script=[ConflictError("new task configs")])
    assert not await gate(FakeState(), leader).before_producer(C, 1)


async def test_no_round_within_the_sync_timeout_names_the_setting_and_the_leader() -> None:
    leader = FakeLeader(script=[NotLeaderError("gone", None)] * 1000)
    with pytest.raises(EosError) as failed:
        await gate(FakeState(), leader, **{"worker.sync.timeout.ms": "200"}).before_producer(C, 1)
    assert "worker.sync.timeout.ms=200" in str(failed.value)
    assert "http://leader:8083" in str(failed.value)


async def test_a_stale_generation_is_refused_before_and_after_the_producer() -> None:
    state = FakeState(generation=2)
    start = gate(state, FakeLeader())
    assert not await start.before_producer(C, 1)  # the topic has generation 2 already
    assert await start.before_producer(C, 2)
    assert not await start.before_producer(C, 1)  # a newer one was checked: no request
    state.generation = 3  # new task configs while the producer started
    assert not await start.after_producer(C, 2)


async def test_a_generation_awaiting_fencing_is_not_current() -> None:
    assert not await gate(FakeState(fencing_due=True), FakeLeader()).before_producer(C, 1)


async def test_a_failed_check_fails_every_waiting_task_and_the_next_start_tries_again() -> None:
    leader = FakeLeader(script=[RuntimeError("leader broke")], hold=anyio.Event())
    start = gate(FakeState(), leader)
    outcomes: list[str] = []

    async def task() -> None:
        try:
            await start.before_producer(C, 1)
            outcomes.append("started")
        except Exception as exc:
            outcomes.append(type(exc).__name__)

    async with anyio.create_task_group() as tg:
        tg.start_soon(task)
        tg.start_soon(task)
        await anyio.wait_all_tasks_blocked()
        assert leader.hold is not None
        leader.hold.set()
    assert sorted(outcomes) == ["EosError", "RuntimeError"]  # the checker's, the waiter's
    assert await start.before_producer(C, 1)  # not cached: tried again
    assert leader.requests == 2


async def test_a_cancelled_checker_leaves_the_waiting_task_to_check_again() -> None:
    leader = FakeLeader(hold=anyio.Event())
    start = gate(FakeState(), leader)
    waited: list[bool] = []

    async with anyio.create_task_group() as tg:
        checker = anyio.CancelScope()

        async def first() -> None:
            with checker:
                await start.before_producer(C, 1)

        async def second() -> None:
            waited.append(await start.before_producer(C, 1))

        tg.start_soon(first)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(second)
        await anyio.wait_all_tasks_blocked()
        checker.cancel()  # the task that asked is stopped mid-request
        await anyio.wait_all_tasks_blocked()
        assert leader.hold is not None
        leader.hold.set()
    assert waited == [True]
    assert leader.requests == 2  # the second asked again itself


async def test_tasks_wait_while_the_leader_is_disabled_said_once_per_leader() -> None:
    state, leader = FakeState(leader_exactly_once="disabled"), FakeLeader()
    start = gate(state, leader)
    results: list[bool] = []

    async def task() -> None:
        results.append(await start.before_producer(C, 1))

    with structlog.testing.capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            tg.start_soon(task)
            await anyio.sleep(0.1)  # ten turns of waiting
            assert (results, leader.requests) == ([], 0)
            state.leader_exactly_once = "preparing"  # the rolling upgrade reached it
    assert (results, leader.requests) == ([True], 1)
    waits = [e for e in logs if e["event"].startswith("exactly-once tasks wait")]
    assert len(waits) == 1
    assert "roll every worker to preparing, then to enabled" in waits[0]["event"]
    assert waits[0]["leader"] == "http://leader:8083"


async def test_a_leader_of_an_earlier_release_is_asked() -> None:
    leader = FakeLeader()
    assert await gate(FakeState(leader_exactly_once=""), leader).before_producer(C, 1)
    assert leader.requests == 1
