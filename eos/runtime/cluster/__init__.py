"""The cluster's room: this worker's place among the others — group membership and its
metadata, the leader's assignment and each rebalance round, requests to the leader and
their signatures, the coordinator with its duties, and the assignors (docs/cluster.md)."""
