"""Before a cooperative rejoin, a worker stops the tasks whose configs await a fencing
round (KIP-618's courtesy). Only an ``exactly.once.source.support=enabled`` cluster fences:
in ``disabled`` and ``preparing`` no task count record is written, so every task would
look as if it awaited fencing — a worker joining stopped every running task of the others
(issue 39); now only what the assignment moves stops."""

from __future__ import annotations

from typing import cast

import anyio
import pytest

from eos.config.worker import WorkerConfig
from eos.runtime.clock import ManualClock
from eos.runtime.cluster.assignors.base import AssignorSettings
from eos.runtime.cluster.assignors.sticky import StickyAssignor
from eos.runtime.cluster.coordinator.config_writes import ConfigWrites
from eos.runtime.cluster.coordinator.duty_context import Shared
from eos.runtime.cluster.coordinator.fencing import FencingRounds
from eos.runtime.cluster.coordinator.group_listener import GroupListener
from eos.runtime.cluster.coordinator.inbox import Inbox
from eos.runtime.cluster.coordinator.reconcile import Reconciler
from eos.runtime.cluster.coordinator.session_keys import SessionKeys
from eos.runtime.cluster.coordinator.timers import Timers
from eos.runtime.cluster.coordinator.watcher import ConfigWatcher
from eos.runtime.observer import NullObserver
from eos.storage.config_log import ConfigLog
from tests.unit.config_fakes import FakeUnits, MemoryConfigLog, Rejoins, leader_state


def settings(mode: str) -> WorkerConfig:
    return WorkerConfig.from_properties(
        {
            "group.id": "g",
            "config.storage.topic": "c",
            "offset.storage.topic": "o",
            "status.storage.topic": "s",
            "exactly.once.source.support": mode,
        }
    )


async def running_before_rejoin(mode: str) -> FakeUnits:
    """Two tasks of a connector whose task configs no task count record covers, running
    here, and a cooperative rejoin prepared."""
    config = MemoryConfigLog()
    await config.put_connector_config("c", {"connector.class": "FileSource"})
    await config.put_task_configs("c", [{"i": "0"}, {"i": "1"}])
    state = leader_state(config)
    state.style = "cooperative"
    inbox = Inbox(state)
    shared = Shared(settings(mode), state, inbox, Rejoins(), Timers(), NullObserver(),
                    ManualClock())  # fmt: skip
    units = FakeUnits()
    units.tasks = {("c", 0): 1, ("c", 1): 1}
    writes = ConfigWrites(
        shared, ConfigWatcher(cast(ConfigLog, config), NullObserver(), interval=1)
    )
    rounds = FencingRounds(shared, writes)
    listener = GroupListener(
        shared,
        assignors=[StickyAssignor(AssignorSettings())],
        units=units,
        reconciler=Reconciler(state, units),
        writes=writes,
        rounds=rounds,
        keys=SessionKeys(shared, writes),
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(inbox.serve)
        await listener.prepare_rejoin(lost=False)  # through the mailbox, as the membership
        inbox.close()
    return units


@pytest.mark.parametrize("mode", ["disabled", "preparing"])
async def test_without_fencing_no_task_stops_before_a_cooperative_rejoin(mode: str) -> None:
    units = await running_before_rejoin(mode)
    assert units.events == []
    assert set(units.tasks) == {("c", 0), ("c", 1)}


async def test_with_exactly_once_the_tasks_awaiting_fencing_stop_first() -> None:
    units = await running_before_rejoin("enabled")
    assert sorted(units.events) == [("stop", "c", 0), ("stop", "c", 1)]
