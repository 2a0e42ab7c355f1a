"""What the REST API asks of a worker, as an interface: :class:`WorkerApi`.

:class:`~eos.runtime.worker.Worker` is the one implementation; the REST handlers
(``services/rest/``) depend on this protocol only, so a handler can be read, and tested,
without the worker's wiring. Writes that only the leader may do raise
:class:`~eos.errors.NotLeaderError` elsewhere (the REST layer forwards them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from eos.config.worker import WorkerConfig
    from eos.runtime.cluster.coordinator import ClusterView
    from eos.runtime.cluster.coordinator.offset_changes import Offsets
    from eos.runtime.cluster.signatures import Rejection
    from eos.runtime.health import HealthMonitor
    from eos.storage.config_log import ConfigSnapshot, RestartRequest, TargetState
    from eos.storage.status_log import StatusLog


class WorkerApi(Protocol):
    """A worker as its REST API sees it (each method documented on
    :class:`~eos.runtime.worker.Worker`)."""

    settings: WorkerConfig
    kafka_cluster_id: str | None
    health: HealthMonitor
    """What ``GET /health`` answers, also from the listener's own thread."""

    # ---------------------------------------------------------------- reads
    async def snapshot(self) -> ConfigSnapshot: ...

    def cluster(self) -> ClusterView: ...

    def declared_connectors(self) -> dict[str, object] | None: ...

    async def settled(self) -> ClusterView: ...

    async def read_status(self) -> StatusLog: ...

    def task_progress(self, name: str, task_id: int) -> dict[str, float] | None: ...

    async def offsets(self, name: str) -> Offsets: ...

    async def active_topics(self, name: str) -> list[str]: ...

    def problems(self, props: Mapping[str, str]) -> dict[str, list[str]]: ...

    # ------------------------------------------------------ writes (leader)
    def require_leader(self) -> None: ...

    async def put_connector(
        self, name: str, props: Mapping[str, str], initial_state: TargetState = ...
    ) -> bool: ...

    async def set_target_state(self, name: str, state: TargetState) -> None: ...

    async def restart(self, name: str, request: RestartRequest) -> None: ...

    async def change_offsets(self, name: str, changes: Offsets | None) -> None: ...

    async def delete_connector(self, name: str) -> None: ...

    async def reset_active_topics(self, name: str) -> None: ...

    # ------------------------------------------------- internal (workers')
    async def fence(self, name: str) -> None: ...

    async def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None: ...

    def check_signature(
        self, headers: Mapping[str, str], method: str, path: str, body: bytes
    ) -> Rejection | None: ...
