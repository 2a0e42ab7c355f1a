"""A running task's ``progress`` across two real workers of one group: the status read
from either worker carries it for every RUNNING task, the other worker's tasks asked of
that worker over its REST listener."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from tests.integration.worker_harness import cluster_worker_props, running_worker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
TASKS = 4


async def test_either_worker_answers_with_every_running_task_s_progress(
    bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    group = unique_name("g")
    connector = {
        "name": "vs", "connector.class": "VerifiableSource", "tasks.max": str(TASKS),
        "topic": unique_name("out"), "records.per.partition": "0", "throughput": "100",
    }  # fmt: skip
    async with (
        running_worker(cluster_worker_props(bootstrap, group), [connector]) as a,
        running_worker(cluster_worker_props(bootstrap, group)) as b,
    ):
        with anyio.fail_after(90):
            while True:
                status = await a.status("vs")
                running = [t for t in status["tasks"] if t["state"] == "RUNNING"]
                owners = {t["worker_id"] for t in running}
                if len(running) == TASKS and owners == {a.settings.worker_id, b.settings.worker_id}:
                    break
                await anyio.sleep(0.5)
        for worker in (a, b):
            status = await worker.status("vs")
            # VerifiableSource counts nothing of its own: an empty progress, from each owner
            assert [t.get("progress") for t in status["tasks"]] == [{}] * TASKS, status
        remote = next(t for t in status["tasks"] if t["worker_id"] == a.settings.worker_id)
        answer = await b.http.get(f"/connectors/vs/tasks/{remote['id']}/progress")
        assert answer.status_code == 404  # it runs on a, not b
        assert (await a.http.get(f"/connectors/vs/tasks/{remote['id']}/progress")).json() == {}
