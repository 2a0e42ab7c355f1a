"""What Prometheus stores equals what the observer was told: the shape of the lead's
end-to-end check (committed transactions in Prometheus vs the verifier's count)."""

from __future__ import annotations

from pathlib import Path

import pytest

from metrics import PrometheusObserver
from tests.metrics_demo import ScriptedWorkload
from tests.prometheus_server import PrometheusFactory, prometheus_factory, serving

pytestmark = pytest.mark.integration
__all__ = ["prometheus_factory"]  # the fixture, imported for this module


async def test_committed_transactions_match(
    prometheus_factory: PrometheusFactory, tmp_path: Path
) -> None:
    workload = ScriptedWorkload(PrometheusObserver())
    for _ in range(120):
        workload.step()
    with serving(workload.observer.registry) as (target, _portal):
        prom = prometheus_factory([target])
        result = await prom.wait_for(
            "sum by (connector, task) (eos_task_transactions_committed_total)"
        )
        seen = {(s["metric"]["connector"], int(s["metric"]["task"])): s["value"][1] for s in result}
        assert seen == {key: str(n) for key, n in workload.committed.items()}

        sizes = await prom.query("eos_task_transaction_size_avg")
        assert {s["metric"]["connector"] for s in sizes} == {"orders", "clicks", "payments"}
        fenced = await prom.query('eos_worker_producers_fenced_total{connector="clicks"}')
        assert [s["value"][1] for s in fenced] == ["1"]
