"""What every duty of the coordinator is given at construction, in one frozen object."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from eos.config.connector import ConnectorConfig
from eos.config.providers import ConfigProviders
from eos.config.worker import WorkerConfig
from eos.runtime.clock import Clock
from eos.runtime.cluster.coordinator.cluster_state import ClusterState
from eos.runtime.cluster.coordinator.inbox import Inbox
from eos.runtime.cluster.coordinator.timers import Timers
from eos.runtime.cluster.coordinator.worker_interfaces import Rejoin
from eos.runtime.observer import WorkerObserver


@dataclass(frozen=True)
class Shared:
    settings: WorkerConfig
    state: ClusterState
    """The cluster as this worker knows it (and its config log)."""
    inbox: Inbox
    """The coordinator's mailbox: every state change runs in it."""
    rejoin: Rejoin
    """Asks the membership for a rebalance."""
    timers: Timers
    observer: WorkerObserver
    clock: Clock
    providers: ConfigProviders = field(default_factory=lambda: ConfigProviders.from_worker({}))
    """The worker's config providers (``${file:…}`` in a connector's settings)."""

    def connector_config(self, props: Mapping[str, str]) -> ConnectorConfig:
        """A connector's settings as its tasks get them (variables resolved)."""
        return ConnectorConfig.from_properties(self.providers.resolve(props), self.settings)
