"""The coordinator and its duties, one module each (:mod:`.router` says who does what)."""

from eos.runtime.cluster.coordinator.router import Coordinator as Coordinator
from eos.runtime.cluster.coordinator.state import ClusterState as ClusterState
from eos.runtime.cluster.coordinator.state import ClusterView as ClusterView
