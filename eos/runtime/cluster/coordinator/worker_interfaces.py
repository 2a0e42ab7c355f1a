"""What the coordinator's duties need of the rest of the worker, as interfaces: the
supervisor that runs connectors and tasks (:class:`Units`), the membership that
rebalances (:class:`Rejoin`) and the signed requests to the leader
(:class:`LeaderLink`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from eos.state import State


class Units(Protocol):
    """What the coordinator drives on its worker: connectors and tasks
    (:class:`~eos.runtime.supervisor.Supervisor`)."""

    def running_connectors(self) -> Mapping[str, Mapping[str, str]]: ...

    def running_tasks(self) -> Mapping[tuple[str, int], int]:
        """(connector, task id) → task generation of every task running here."""

    def start_connector(self, name: str, props: Mapping[str, str]) -> None: ...

    async def stop_connector(self, name: str) -> None: ...

    def start_task(
        self, name: str, task_id: int, generation: int, config: Mapping[str, str]
    ) -> None: ...

    async def stop_tasks(self, tasks: Sequence[tuple[str, int]]) -> None: ...

    def failed(self, name: str, task_id: int | None = None) -> bool:
        """Whether the connector (or one of its tasks) runs here and has FAILED."""

    async def report(self, name: str, task_id: int | None, state: State) -> None:
        """Write a status for a connector (``task_id`` None) or task this worker owns."""

    def failures(self) -> Mapping[tuple[str, int | None], BaseException | None]:
        """Every connector (task None) and task here that has FAILED → what failed it."""

    async def refresh_status(self, name: str, task_id: int | None) -> None:
        """Write the current status of a connector or task here again."""


class Rejoin(Protocol):
    """How a duty asks for a rebalance (:class:`~eos.runtime.cluster.membership.RejoinSignal`)."""

    def request_rejoin(self, reason: str) -> None: ...


class LeaderLink(Protocol):
    """Internal requests to the leader (signed; see :mod:`eos.runtime.cluster.leader_client`)."""

    async def fence(self, leader_url: str, connector: str) -> None: ...

    async def put_task_configs(
        self, leader_url: str, connector: str, configs: list[dict[str, str]]
    ) -> None: ...
