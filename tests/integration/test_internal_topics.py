"""Creating the internal topics: workers of a new cluster started at the same instant
all create-or-check the same three topics, and every one of them must come up."""

from __future__ import annotations

import anyio
import pytest

from eos.config.worker import TopicKind, WorkerConfig
from eos.kafka import ClientConfig
from eos.kafka.admin import ensure_topic

pytestmark = pytest.mark.integration

WORKERS = 3


def settings(bootstrap: str, group: str) -> WorkerConfig:
    return WorkerConfig.from_properties(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
        }
    )


async def create_internal_topics(s: WorkerConfig) -> None:
    """What a worker does at start-up: each topic in turn, checked if it exists."""
    topics: list[tuple[str, int, int, TopicKind]] = [
        (s.config_topic, 1, s.config_replication_factor, "config"),
        (s.offsets_topic, s.offsets_partitions, s.offsets_replication_factor, "offset"),
        (s.status_topic, s.status_partitions, s.status_replication_factor, "status"),
    ]
    for topic, partitions, rf, kind in topics:
        await ensure_topic(
            s.client_config,
            topic,
            partitions=partitions,
            replication_factor=rf,
            topic_configs=s.topic_settings(kind),
            compacted=True,
            check=True,
        )


async def test_workers_started_together_all_create_or_accept_the_topics(
    bootstrap: str, group_id: str, client_config: ClientConfig
) -> None:
    s = settings(bootstrap, group_id)
    failures: list[BaseException] = []

    async def worker() -> None:
        try:
            await create_internal_topics(s)
        except Exception as exc:
            failures.append(exc)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for _ in range(WORKERS):
                tg.start_soon(worker)
    assert failures == []
    # and a later worker finds them in order
    await create_internal_topics(s)
