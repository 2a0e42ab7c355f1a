"""The transactional ids eos uses, as docs/exactly-once.md ("Security (ACLs)") names
them: ACLs are granted on these exact strings."""

from __future__ import annotations

from eos.kafka.transactional_ids import leader_transactional_id, task_transactional_id


def test_task_ids_are_group_connector_task() -> None:
    assert task_transactional_id("workers", "orders", 0) == "workers-orders-0"
    assert task_transactional_id("workers", "orders", 12) == "workers-orders-12"


def test_the_leader_writes_as_eos_cluster_group() -> None:
    assert leader_transactional_id("workers") == "eos-cluster-workers"
