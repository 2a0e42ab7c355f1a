"""The coordinator and its duties, one module each (:mod:`.router` says who does what)."""

from eos.runtime.cluster.coordinator.cluster_state import ClusterState as ClusterState
from eos.runtime.cluster.coordinator.cluster_state import ClusterView as ClusterView
from eos.runtime.cluster.coordinator.router import Coordinator as Coordinator
