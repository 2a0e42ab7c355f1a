"""Fakes for the coordinator's duties: an in-memory config topic read by the real
:class:`~eos.storage.config_log.ConfigState`, a rejoin signal that records why, and
a supervisor that records what it was told (no broker, no tasks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from eos.runtime.cluster.coordinator.cluster_state import ClusterState
from eos.state import State
from eos.storage._store import Record
from eos.storage.config_log import (
    ConfigLog,
    ConfigSnapshot,
    ConfigState,
    ConfigWriters,
)


class MemoryConfigLog(ConfigWriters):
    """The config topic in memory: the real writers append records to a list, :meth:`refresh`
    reads them."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self._state = ConfigState()
        self._read = 0
        self.snapshot = ConfigSnapshot()

    async def refresh(self, timeout: float | None = None) -> ConfigSnapshot:
        for offset in range(self._read, len(self.records)):
            key, value = self.records[offset]
            self._state.apply(key, value, 0, offset)
        self._read = len(self.records)
        self.snapshot = self._state.snapshot(self._read)
        return self.snapshot

    async def lag(self) -> int:
        return len(self.records) - self._read

    async def claim_write_privileges(self) -> None:
        return None

    async def _write(self, *records: Record) -> int:
        self.records.extend(records)
        return len(self.records) - 1


def leader_state(config_log: MemoryConfigLog, *, leader: bool = True) -> ClusterState:
    """A cluster state in which this worker leads (or follows) generation 1."""
    state = ClusterState(cast(ConfigLog, config_log), "http://me:8083")
    state.serving = True
    state.generation, state.member_id = 1, "me"
    state.leader_id = "me" if leader else "other"
    state.leader_url = "http://me:8083" if leader else "http://other:8083"
    state.joined_once.set()
    return state


@dataclass
class Rejoins:
    reasons: list[str] = field(default_factory=list)

    def request_rejoin(self, reason: str) -> None:
        self.reasons.append(reason)


@dataclass
class FakeUnits:
    """A supervisor that runs nothing: it records starts, stops and reports."""

    connectors: dict[str, Mapping[str, str]] = field(default_factory=dict)
    tasks: dict[tuple[str, int], int] = field(default_factory=dict)
    failing: set[tuple[str, int | None]] = field(default_factory=set)
    errors: dict[tuple[str, int | None], BaseException] = field(default_factory=dict)
    """What failed the units in ``failing`` (none: a plain failure)."""
    events: list[tuple[str, str, int | None]] = field(default_factory=list)
    reports: list[tuple[str, int | None, State]] = field(default_factory=list)

    def running_connectors(self) -> Mapping[str, Mapping[str, str]]:
        return dict(self.connectors)

    def running_tasks(self) -> Mapping[tuple[str, int], int]:
        return dict(self.tasks)

    def start_connector(self, name: str, props: Mapping[str, str]) -> None:
        self.connectors[name] = props
        self.events.append(("start", name, None))

    async def stop_connector(self, name: str) -> None:
        if self.connectors.pop(name, None) is not None:
            self.events.append(("stop", name, None))

    def start_task(
        self, name: str, task_id: int, generation: int, config: Mapping[str, str]
    ) -> None:
        self.tasks[(name, task_id)] = generation
        self.events.append(("start", name, task_id))

    async def stop_tasks(self, tasks: Sequence[tuple[str, int]]) -> None:
        for key in tasks:
            if self.tasks.pop(key, None) is not None:
                self.events.append(("stop", *key))

    def failed(self, name: str, task_id: int | None = None) -> bool:
        return (name, task_id) in self.failing

    async def report(self, name: str, task_id: int | None, state: State) -> None:
        self.reports.append((name, task_id, state))

    def failures(self) -> dict[tuple[str, int | None], BaseException | None]:
        return {unit: self.errors.get(unit) for unit in self.failing}

    async def refresh_status(self, name: str, task_id: int | None) -> None:
        self.events.append(("status", name, task_id))
