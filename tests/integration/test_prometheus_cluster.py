"""The overview dashboard's cluster row over two real workers of one group, scraped
by a real Prometheus: members, the leader's instance, the assignment per worker and
the revocations are what the group did, while the second worker is in the group
and after it left."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.worker_harness import cluster_worker_props, running_worker
from tests.metrics_demo import DASHBOARDS, dashboard_queries, substitute
from tests.prometheus_server import PrometheusFactory, PrometheusServer, prometheus_factory

pytestmark = pytest.mark.integration
__all__ = ["prometheus_factory"]  # the fixture, imported for this module

TASKS = 4


def panel(title: str) -> str:
    """The one query of an overview panel, as Grafana would send it."""
    (expr,) = [e for t, _, e in dashboard_queries(DASHBOARDS / "eos-overview.json") if t == title]
    return substitute(expr)


def by_instance(result: list[dict[str, Any]]) -> dict[str, float]:
    return {s["metric"].get("instance", ""): float(s["value"][1]) for s in result}


async def settled(prom: PrometheusServer, members: int, tasks: dict[str, float]) -> None:
    """Wait until the cluster row shows ``members`` and exactly ``tasks`` per instance."""

    def shows_members(result: list[dict[str, Any]]) -> bool:
        return [float(s["value"][1]) for s in result] == [members]

    await prom.wait_for(panel("Members"), 60, shows_members)
    await prom.wait_for(panel("Tasks per worker"), 60, lambda r: by_instance(r) == tasks)


async def test_cluster_row_of_two_real_workers(
    bootstrap: str, unique_name: Callable[[str], str], prometheus_factory: PrometheusFactory
) -> None:
    group = unique_name("g")
    connector = {
        "name": "vs",
        "connector.class": "VerifiableSource",
        "tasks.max": str(TASKS),
        "topic": unique_name("out"),
        "records.per.partition": "0",
        "throughput": "100",
    }
    a_props = cluster_worker_props(bootstrap, group)
    b_props = cluster_worker_props(bootstrap, group)
    a, b = (p["listeners"].removeprefix("http://") for p in (a_props, b_props))
    async with running_worker(a_props, [connector]) as worker_a:
        await worker_a.wait_for_tasks("vs", "RUNNING", TASKS)
        prom = prometheus_factory([a, b])
        await settled(prom, 1, {a: TASKS})
        async with running_worker(b_props):
            # cooperative: round 1 revokes from a what moves (b gets nothing yet), round 2
            # hands it to b; the stack of tasks per worker is whole again after round 2

            def balanced(result: list[dict[str, Any]]) -> bool:
                tasks = by_instance(result)
                return sum(tasks.values()) == TASKS and tasks.get(b, 0) > 0

            tasks = by_instance(await prom.wait_for(panel("Tasks per worker"), 60, balanced))
            assert set(tasks) == {a, b}
            await settled(prom, 2, tasks)

            (leader,) = await prom.wait_for(panel("Leader"), 30)
            assert leader["metric"]["instance"] == a  # the first member keeps leading
            connectors = by_instance(await prom.query(panel("Connectors per worker")))
            assert sum(connectors.values()) == 1
            # cooperative: what runs on b now was revoked from a first
            revoked = by_instance(
                await prom.query("sum by (instance) (eos_worker_revoked_tasks_total)")
            )
            assert revoked == {a: tasks[b], b: 0}
            starts = await prom.query(
                'sum(eos_worker_rebalances_total{cause="start", protocol="cooperative"})'
            )
            assert float(starts[0]["value"][1]) == 2  # one per worker
        # b left the group cleanly: its work comes back to a at once, its series go stale
        await settled(prom, 1, {a: TASKS})
        workers = await prom.wait_for(panel("Workers"), 30, lambda r: float(r[0]["value"][1]) == 1)
        assert workers
        (leader,) = await prom.query(panel("Leader"))
        assert leader["metric"]["instance"] == a
        assert float((await prom.query(panel("Leader changes (1h)")))[0]["value"][1]) == 0
