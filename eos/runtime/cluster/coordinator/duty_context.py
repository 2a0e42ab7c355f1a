"""What every duty of the coordinator is given at construction, in one frozen object."""

from __future__ import annotations

from dataclasses import dataclass

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
