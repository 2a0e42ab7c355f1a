"""The coordinator's duties against an in-memory config topic and a supervisor that
records (no broker): the leader's writes and which of them rebalance, restart
requests acted on where the work runs, key rotation on a manual clock, and fencing
rounds that write the task count record or are cancelled by newer configs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import cast

import anyio
import pytest

from eos.config.worker import WorkerConfig
from eos.errors import ConflictError, EosError, FencedError, NotLeaderError, RetriableError
from eos.runtime.clock import ManualClock
from eos.runtime.cluster.assignors.base import Assignment, TaskId
from eos.runtime.cluster.coordinator.cluster_state import ClusterState
from eos.runtime.cluster.coordinator.config_writes import ConfigWrites
from eos.runtime.cluster.coordinator.duty_context import Shared
from eos.runtime.cluster.coordinator.fencing import FencingRound, FencingRounds
from eos.runtime.cluster.coordinator.inbox import Inbox
from eos.runtime.cluster.coordinator.reconcile import Reconciler
from eos.runtime.cluster.coordinator.session_keys import SessionKeys
from eos.runtime.cluster.coordinator.timers import Timers
from eos.runtime.cluster.coordinator.watcher import ConfigWatcher
from eos.runtime.observer import NullObserver
from eos.state import State
from eos.storage.config_log import ConfigLog, RestartRequest, TargetState, decode_record
from tests.unit.config_fakes import FakeUnits, MemoryConfigLog, Rejoins, leader_state

SETTINGS = WorkerConfig.from_properties(
    {
        "group.id": "g",
        "config.storage.topic": "c",
        "offset.storage.topic": "o",
        "status.storage.topic": "s",
        "inter.worker.key.ttl.ms": "60000",
    }
)
TASKS = [{"i": "0"}, {"i": "1"}]


@dataclass
class Leader:
    config: MemoryConfigLog
    state: ClusterState
    inbox: Inbox
    rejoins: Rejoins
    timers: Timers
    shared: Shared
    writes: ConfigWrites
    units: FakeUnits
    reconciler: Reconciler

    def kinds(self) -> list[str]:
        return [type(decode_record(k, v)).__name__ for k, v in self.config.records]


@asynccontextmanager
async def duties() -> AsyncIterator[Leader]:
    """The leader's duties with their mailbox and timers running."""
    config = MemoryConfigLog()
    state = leader_state(config)
    inbox, rejoins, timers = Inbox(state), Rejoins(), Timers()
    watcher = ConfigWatcher(cast(ConfigLog, config), NullObserver(), interval=1)
    shared = Shared(SETTINGS, state, inbox, rejoins, timers, NullObserver(), ManualClock())
    units = FakeUnits()
    found = Leader(
        config,
        state,
        inbox,
        rejoins,
        timers,
        shared,
        ConfigWrites(shared, watcher),
        units,
        Reconciler(state, units),
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(inbox.serve)
        await tg.start(timers.run)
        try:
            yield found
        finally:
            inbox.close()
            tg.cancel_scope.cancel()


async def connector_with_tasks(leader: Leader) -> None:
    assert await leader.writes.put_connector("c", {"connector.class": "X"}, TargetState.STARTED)
    await leader.writes.put_task_configs("c", TASKS)
    leader.state.assigned = Assignment.of(["c"], [TaskId("c", 0), TaskId("c", 1)])
    await leader.reconciler.reconcile()
    leader.rejoins.reasons.clear()
    leader.units.events.clear()


async def test_new_work_rebalances_lifecycle_changes_do_not() -> None:
    async with duties() as leader:
        assert await leader.writes.put_connector("c", {"connector.class": "X"}, TargetState.STARTED)
        assert leader.rejoins.reasons == ["connector c created"]
        assert not await leader.writes.put_connector(
            "c", {"connector.class": "X"}, TargetState.STARTED
        )  # unchanged
        await leader.writes.put_task_configs("c", TASKS)
        await leader.writes.put_task_configs("c", TASKS)  # the same again: not written
        assert leader.rejoins.reasons == ["connector c created", "new task configs for c"]
        leader.rejoins.reasons.clear()

        await leader.writes.put_connector(
            "c", {"connector.class": "X", "k": "v"}, TargetState.STARTED
        )  # same count
        await leader.writes.restart("c", RestartRequest(include_tasks=True))
        await leader.writes.restart("c", RestartRequest(task=0))
        await leader.writes.set_target_state("c", TargetState.PAUSED)
        await leader.writes.set_target_state("c", TargetState.PAUSED)  # already: not written
        await leader.writes.set_target_state("c", TargetState.STARTED)
        assert leader.rejoins.reasons == []  # every worker reads them: no rebalance

        await leader.writes.set_target_state("c", TargetState.STOPPED)  # 2 tasks → none
        assert leader.rejoins.reasons == ["connector c stopped"]
        await leader.writes.delete_connector("c")
        assert leader.rejoins.reasons[-1] == "connector c deleted"
        assert leader.kinds().count("RestartRecord") == 2
        with pytest.raises(Exception, match="Connector c not found"):
            await leader.writes.restart("c", RestartRequest())


async def test_only_the_leader_writes() -> None:
    async with duties() as leader:
        leader.state.leader_id = "other"
        leader.state.leader_url = "http://other:8083"
        with pytest.raises(NotLeaderError, match="send the request to the leader at http://other"):
            await leader.writes.restart("c", RestartRequest())
        assert leader.config.records == []


async def test_offsets_change_only_while_stopped_and_holds_the_stop() -> None:
    async with duties() as leader:
        await connector_with_tasks(leader)
        with pytest.raises(ConflictError, match="STOPPED state"):
            await leader.writes.begin_offset_change("c")
        await leader.writes.set_target_state("c", TargetState.STOPPED)
        await leader.writes.begin_offset_change("c")
        with pytest.raises(ConflictError, match="being changed already"):
            await leader.writes.begin_offset_change("c")
        with pytest.raises(ConflictError, match="being changed"):
            await leader.writes.set_target_state("c", TargetState.STARTED)
        leader.writes.end_offset_change("c")
        await leader.writes.set_target_state("c", TargetState.STARTED)


async def test_back_to_back_restarts_each_act_where_the_work_runs() -> None:
    """Restart the connector with its tasks, then task 0, read in one go: the connector
    and both tasks stop, task 0 again, and the reconcile starts them all; a worker that
    joined afterwards does not act on requests made before."""
    async with duties() as leader:
        await connector_with_tasks(leader)
        await leader.writes.restart("c", RestartRequest(include_tasks=True))
        await leader.writes.restart("c", RestartRequest(task=0))
        await leader.reconciler.reconcile()
        units = leader.units
        assert units.events == [
            ("stop", "c", None),
            ("stop", "c", 0),
            ("stop", "c", 1),
            ("start", "c", None),
            ("start", "c", 0),
            ("start", "c", 1),
        ]
        assert [r[:2] for r in units.reports] == [("c", None), ("c", 0), ("c", 1), ("c", 0)]
        assert {r[2] for r in units.reports} == {State.RESTARTING}

        newcomer = FakeUnits()
        late = Reconciler(leader.state, newcomer)
        await late.reconcile()
        assert ("stop", "c", 0) not in newcomer.events


async def test_only_failed_restarts_what_failed() -> None:
    async with duties() as leader:
        await connector_with_tasks(leader)
        leader.units.failing = {("c", 1)}
        await leader.writes.restart("c", RestartRequest(include_tasks=True, only_failed=True))
        await leader.reconciler.reconcile()
        assert leader.units.events == [("stop", "c", 1), ("start", "c", 1)]


async def test_pause_stops_and_reports_once_resume_starts() -> None:
    async with duties() as leader:
        await connector_with_tasks(leader)
        await leader.writes.set_target_state("c", TargetState.PAUSED)
        await leader.reconciler.reconcile()
        await leader.reconciler.reconcile()
        stopped = {(what, task) for what, _, task in leader.units.events}
        assert stopped == {("stop", None), ("stop", 0), ("stop", 1)}
        assert len(leader.units.events) == 3
        paused = [(task, state) for _, task, state in leader.units.reports]
        assert sorted(paused, key=str) == [
            (0, State.PAUSED),
            (1, State.PAUSED),
            (None, State.PAUSED),
        ]
        leader.units.events.clear()
        await leader.writes.set_target_state("c", TargetState.STARTED)
        await leader.reconciler.reconcile()
        assert sorted(e for e, *_ in leader.units.events) == ["start"] * 3


async def test_the_leader_rotates_the_session_key_when_due() -> None:
    async with duties() as leader:
        clock = ManualClock()
        keys = SessionKeys(replace(leader.shared, clock=clock), leader.writes)
        await keys.ensure()
        first = leader.config.snapshot.session_key
        assert first is not None
        assert first.created_ms == clock.wall_ms()
        clock.advance(59.999)
        await keys.ensure()
        assert leader.config.snapshot.session_key == first
        clock.advance(0.001)
        await keys.ensure()
        second = leader.config.snapshot.session_key
        assert second is not None
        assert second != first
        assert second.created_ms == clock.wall_ms()
        assert leader.kinds().count("SessionKeyRecord") == 2
        leader.timers.cancel("session-key")


def rounds(leader: Leader) -> FencingRounds:
    return FencingRounds(leader.shared, leader.writes)


async def test_a_fencing_round_writes_the_task_count_once() -> None:
    async with duties() as leader:
        assert await leader.writes.put_connector("c", {"connector.class": "X"}, TargetState.STARTED)
        await leader.writes.put_task_configs("c", [{"i": "0"}])
        fencing = rounds(leader)
        assert leader.config.snapshot.needs_fencing("c")
        with anyio.fail_after(1):
            await anyio.wait_all_tasks_blocked()
            await fencing.fence("c")  # one task, none before: nothing to fence, count written
            await fencing.fence("c")  # done: no round, no record
        assert not leader.config.snapshot.needs_fencing("c")
        assert leader.kinds().count("TaskCountRecord") == 1
        assert await fencing.start("c") is None


async def test_new_configs_cancel_a_running_round() -> None:
    async with duties() as leader:
        assert await leader.writes.put_connector("c", {"connector.class": "X"}, TargetState.STARTED)
        await leader.writes.put_task_configs("c", [{"i": "0"}])
        fencing = rounds(leader)

        async def start_and_reconfigure() -> FencingRound | None:
            round_ = await fencing.start("c")
            assert await fencing.start("c") is round_  # shared while it runs
            await leader.config.put_task_configs("c", [{"i": "0", "new": "1"}])  # meanwhile
            return round_

        round_ = await leader.inbox.ask(start_and_reconfigure)
        assert round_ is not None
        with pytest.raises(ConflictError, match="arrived during its fencing round"):
            await round_.wait()
        with pytest.raises(ConflictError, match="was deleted"):
            await leader.writes.delete_connector("c")
            await leader.inbox.ask(fencing.start, "c")


async def test_a_fenced_or_failed_write_makes_the_leader_rejoin() -> None:
    async with duties() as leader:
        await connector_with_tasks(leader)

        async def fenced(*records: object) -> int:
            raise FencedError("another leader took over")

        async def failed(*records: object) -> int:
            raise RetriableError("no broker answered")

        leader.config._write = fenced  # type: ignore[method-assign]
        with pytest.raises(NotLeaderError, match="rejoins the group: retry"):
            await leader.writes.restart("c", RestartRequest())
        leader.config._write = failed  # type: ignore[method-assign]
        with pytest.raises(ConflictError, match="config topic write failed"):
            await leader.writes.set_target_state("c", TargetState.PAUSED)
        keys = SessionKeys(leader.shared, leader.writes)
        await keys.ensure()  # not written: the next leadership tries again
        assert leader.config.snapshot.session_key is None
        assert leader.rejoins.reasons == [
            "config writer fenced",
            "config write failed",
            "config write failed",
        ]


async def test_a_stop_and_resume_read_together_restart_the_connector() -> None:
    """The stop emptied the task configs; whoever runs the connector restarts it on the
    resume (even if it never saw it stopped), so that it makes its task configs again."""
    async with duties() as leader:
        await connector_with_tasks(leader)
        await leader.writes.set_target_state("c", TargetState.STOPPED)
        await leader.writes.set_target_state("c", TargetState.STARTED)
        await leader.reconciler.reconcile()
        assert leader.units.events == [
            ("stop", "c", None),  # the resume's restart request
            ("start", "c", None),  # it makes its task configs again
            ("stop", "c", 0),  # no tasks any more
            ("stop", "c", 1),
        ]
        assert leader.rejoins.reasons == ["connector c stopped"]  # the resume: none yet


async def test_a_disabled_leader_does_not_fence_and_says_what_to_do() -> None:
    async with duties() as leader:
        assert await leader.writes.put_connector("c", {"connector.class": "X"}, TargetState.STARTED)
        await leader.writes.put_task_configs("c", [{"i": "0"}])
        props = {**SETTINGS.raw, "exactly.once.source.support": "disabled"}
        disabled = replace(leader.shared, settings=WorkerConfig.from_properties(props))
        with pytest.raises(EosError, match="roll every worker to preparing, then to enabled"):
            await FencingRounds(disabled, leader.writes).fence("c")
        assert leader.kinds().count("TaskCountRecord") == 0
