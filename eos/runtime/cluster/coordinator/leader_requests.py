"""What this worker's connectors and tasks ask of the leader, wherever it is: a
connector hands over its task configs, a starting task asks for a fencing round.
On the leader they go to its own duties; elsewhere over a signed internal request
(:class:`~eos.runtime.cluster.leader_client.LeaderClient`); while no leader is known they
fail with a :class:`~eos.errors.RetriableError` (the caller retries)."""

from __future__ import annotations

from eos.errors import RetriableError
from eos.runtime.cluster.coordinator.cluster_state import ClusterState
from eos.runtime.cluster.coordinator.config_writes import ConfigWrites
from eos.runtime.cluster.coordinator.fencing import FencingRounds
from eos.runtime.cluster.coordinator.worker_interfaces import LeaderLink


class LeaderRequests:
    def __init__(
        self, state: ClusterState, link: LeaderLink, writes: ConfigWrites, rounds: FencingRounds
    ) -> None:
        self._state = state
        self._link = link
        self._writes = writes
        self._rounds = rounds

    async def submit_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """From a connector running here: its task configs, to the leader."""
        if self._state.is_leader:
            await self._writes.put_task_configs(name, configs)
        elif self._state.leader_url:
            await self._link.put_task_configs(self._state.leader_url, name, configs)
        else:
            raise RetriableError("no leader is known yet")

    async def request_fencing(self, name: str) -> None:
        """From a task starting here: a fencing round by the leader."""
        if self._state.is_leader:
            await self._rounds.fence(name)
        elif self._state.leader_url:
            await self._link.fence(self._state.leader_url, name)
        else:
            raise RetriableError("no leader is known yet")
