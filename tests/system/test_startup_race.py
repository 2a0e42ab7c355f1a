"""Three workers of a new cluster started at the same instant against three brokers, ten
times: every one comes up, whichever of them creates the internal topics. (A broker
that has not seen a new topic's configuration yet answers with no ``cleanup.policy``:
that is "wait and look again", not an error.) In-process workers on one shared Kafka
cluster, a fresh group and fresh topics each round, to keep it fast."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from eos.runtime.worker import Worker
from services.dev_kafka import DevKafka
from services.worker_service import worker_settings
from tests.integration.worker_harness import cluster_worker_props

pytestmark = [pytest.mark.system, pytest.mark.cluster, pytest.mark.timeout(600)]

ROUNDS = 10


async def start_together(bootstrap: str, group: str) -> None:
    workers = [Worker(worker_settings(cluster_worker_props(bootstrap, group))) for _ in range(3)]
    async with anyio.create_task_group() as tg:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as starting:
                for worker in workers:
                    starting.start_soon(tg.start, worker.run)
        for worker in workers:
            worker.stop()


async def test_three_workers_started_together_on_three_brokers_all_come_up(
    kafka_cluster3: DevKafka, unique_name: Callable[[str], str]
) -> None:
    state = kafka_cluster3.state()
    assert state is not None
    for round_ in range(ROUNDS):
        await start_together(state.bootstrap, unique_name(f"race{round_}"))
