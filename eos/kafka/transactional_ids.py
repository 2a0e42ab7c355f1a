"""The transactional ids eos uses (docs/exactly-once.md, "ACLs"): one per source task,
and one for the leader's writes to the config topic."""

from __future__ import annotations


def task_transactional_id(group_id: str, connector: str, task_id: int) -> str:
    """The producer of task ``task_id`` of ``connector``: ``${group.id}-${connector}-${task}``."""
    return f"{group_id}-{connector}-{task_id}"


def leader_transactional_id(group_id: str) -> str:
    """The leader's config-topic writer: ``eos-cluster-${group.id}``."""
    return f"eos-cluster-{group_id}"


def offsets_transactional_id(group_id: str, connector: str) -> str:
    """The writer of a stopped connector's offsets when a user alters or resets them:
    ``${group.id}-${connector}-offsets`` (covered by the task ids' prefix ACL)."""
    return f"{group_id}-{connector}-offsets"
