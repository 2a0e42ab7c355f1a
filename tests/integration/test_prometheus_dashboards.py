"""Every dashboard query and every alert rule, evaluated by a real Prometheus that
scrapes two registries fed by the scripted workload (tests/metrics_demo.py): two
clusters, ``demo`` and ``other``, and the dashboards set to ``demo``."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from metrics import PrometheusObserver
from tests.metrics_demo import (
    CLUSTER_STORY,
    DASHBOARDS,
    VARIABLES,
    ScriptedWorkload,
    dashboard_queries,
    substitute,
    variable_query,
)
from tests.prometheus_server import ALERT_RULES, PrometheusServer, serving, start_prometheus

pytestmark = pytest.mark.integration

QUERIES = [
    pytest.param(expr, id=f"{path.stem}:{title}:{i}")
    for path in sorted(DASHBOARDS.glob("*.json"))
    for i, (title, _legend, expr) in enumerate(dashboard_queries(path))
]
ALERTS = [
    pytest.param(rule["expr"], id=rule["alert"])
    for group in yaml.safe_load(ALERT_RULES.read_text())["groups"]
    for rule in group["rules"]
]


@dataclass
class Scraped:
    prom: PrometheusServer
    workload: ScriptedWorkload
    target: str
    other: str
    """The worker of the other cluster."""

    def substitute(self, expr: str) -> str:
        """``expr`` as Grafana sends it with ``$cluster`` = demo: ``$instance`` is the
        list of demo's workers, here its one."""
        return substitute(expr, {**VARIABLES, "$instance": self.target})


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    """The workloads run (a tick every 100 ms) while Prometheus scrapes them every second."""
    workload = ScriptedWorkload(PrometheusObserver())
    other = ScriptedWorkload(PrometheusObserver(), seed=11, group="other")
    with (
        serving(workload.observer.registry) as (target, portal),
        serving(other.observer.registry) as (other_target, other_portal),
    ):
        portal.start_task_soon(workload.run)
        other_portal.start_task_soon(other.run)
        prom = start_prometheus([target, other_target], tmp_path_factory.mktemp("prometheus"))
        try:
            yield Scraped(prom, workload, target, other_target)
        finally:
            prom.stop()


def has_finite_value(result: list[dict[str, Any]]) -> bool:
    return any(math.isfinite(float(sample["value"][1])) for sample in result)


@pytest.mark.parametrize("expr", QUERIES)
async def test_dashboard_query_returns_data(scraped: Scraped, expr: str) -> None:
    query = scraped.substitute(expr)
    assert "$" not in query, f"unsubstituted variable in {query}"
    result = await scraped.prom.wait_for(query, timeout=30, predicate=has_finite_value)
    # one cluster's series: nothing of the other cluster's worker, and the same query
    # set to the other cluster reads only that one
    assert scraped.other not in {s["metric"].get("instance") for s in result}
    elsewhere = await scraped.prom.query(query.replace(scraped.target, scraped.other))
    assert scraped.target not in {s["metric"].get("instance") for s in elsewhere}


def panel_exprs(title: str) -> list[str]:
    found = [e for t, _, e in dashboard_queries(DASHBOARDS / "eos-overview.json") if t == title]
    assert found, title
    return found


async def test_cluster_row_shows_what_the_worker_reported(scraped: Scraped) -> None:
    """The leader is named by instance; rebalances of every cause of the scripted
    story reach Prometheus, each protocol has a series (eager at 0); the members
    and the assignment are values the story reported."""
    (leader,) = panel_exprs("Leader")
    result = await scraped.prom.wait_for(scraped.substitute(leader), timeout=40)
    assert [s["metric"]["instance"] for s in result] == [scraped.target]

    def every_cause(result: list[dict[str, Any]]) -> bool:
        return {s["metric"]["cause"] for s in result if float(s["value"][1]) > 0} == {
            "start", "requested", "rebalance", "lost"
        }  # fmt: skip

    await scraped.prom.wait_for(
        "sum by (cause) (eos_worker_rebalances_total)", timeout=40, predicate=every_cause
    )
    (by_protocol,) = panel_exprs("Rebalances (1h)")
    result = await scraped.prom.query(scraped.substitute(by_protocol))
    counted = {s["metric"]["protocol"]: float(s["value"][1]) for s in result}
    assert set(counted) == {"eager", "cooperative"}
    assert counted["eager"] == 0
    assert counted["cooperative"] > 0

    story: list[dict[str, object]] = [{"members": 1, "tasks": 4}, *CLUSTER_STORY]
    for title, field in (("Members", "members"), ("Tasks per worker", "tasks")):
        (expr,) = panel_exprs(title)
        values = {float(s["value"][1]) for s in await scraped.prom.query(scraped.substitute(expr))}
        assert len(values) == 1
        assert values <= {float(str(d[field])) for d in story}, title


@pytest.mark.parametrize(
    ("path", "variable", "expected"),
    [
        ("eos-connector.json", "connector", {"orders", "clicks", "payments"}),
        ("eos-connector.json", "task", {"0", "1"}),
        ("eos-overview.json", "cluster", {"demo", "other"}),
    ],
)
async def test_template_variables_list_values(
    scraped: Scraped, path: str, variable: str, expected: set[str]
) -> None:
    (definition,) = [
        variable_query(v)
        for v in yaml.safe_load((DASHBOARDS / path).read_text())["templating"]["list"]
        if v["name"] == variable
    ]
    match = re.fullmatch(r"label_values\((.+), (\w+)\)", definition)
    assert match, definition
    selector, label = scraped.substitute(match[1]), match[2]
    await scraped.prom.wait_for(selector)
    values = await scraped.prom.api(f"label/{label}/values", **{"match[]": selector})
    assert set(values) == expected


async def test_the_hidden_instance_variable_lists_the_chosen_clusters_workers(
    scraped: Scraped,
) -> None:
    for path in ("eos-overview.json", "eos-connector.json"):
        (definition,) = [
            variable_query(v)
            for v in yaml.safe_load((DASHBOARDS / path).read_text())["templating"]["list"]
            if v["name"] == "instance"
        ]
        match = re.fullmatch(r"label_values\((.+), instance\)", definition)
        assert match, definition
        selector = scraped.substitute(match[1])
        await scraped.prom.wait_for(selector)
        values = await scraped.prom.api("label/instance/values", **{"match[]": selector})
        assert values == [scraped.target]


@pytest.mark.parametrize("expr", ALERTS)
async def test_alert_expression_evaluates(scraped: Scraped, expr: str) -> None:
    await scraped.prom.targets_up()
    await scraped.prom.query(expr)  # raises on a PromQL error


async def test_alert_rules_loaded_and_healthy(scraped: Scraped) -> None:
    await scraped.prom.targets_up()
    with anyio.fail_after(30):
        while True:
            groups = (await scraped.prom.api("rules", type="alert"))["groups"]
            rules = [rule for group in groups for rule in group["rules"]]
            if rules and all(r["lastEvaluation"] > "1970-01-02" for r in rules):
                break
            await anyio.sleep(0.5)
    assert {r["name"] for r in rules} == {p.id for p in ALERTS}
    for rule in rules:
        assert rule["health"] == "ok", (rule["name"], rule.get("lastError"))


async def test_failed_task_alert_is_pending_or_firing(scraped: Scraped) -> None:
    """payments/0 fails six seconds in: EosTaskFailed goes pending (its `for` is 1m)."""
    result = await scraped.prom.wait_for(
        'ALERTS{alertname="EosTaskFailed", connector="payments"}', timeout=40
    )
    assert {s["metric"]["alertstate"] for s in result} <= {"pending", "firing"}


def test_rule_files_are_the_shipped_ones(scraped: Scraped) -> None:
    config = yaml.safe_load((scraped.prom.workdir / "prometheus.yml").read_text())
    assert [Path(p) for p in config["rule_files"]] == [ALERT_RULES]


async def test_prometheus_scrapes_openmetrics(scraped: Scraped) -> None:
    """Units reach Prometheus only through OpenMetrics' ``# UNIT`` lines."""
    await scraped.prom.targets_up()
    metadata = await scraped.prom.api("metadata", metric="eos_task_commit_duration_seconds")
    assert metadata["eos_task_commit_duration_seconds"][0]["unit"] == "seconds"


async def test_restarting_repeatedly_alert_fires(scraped: Scraped) -> None:
    """payments/0 is restarted automatically a third time 14 s in: the alert fires for it
    (and not for the clicks connector, restarted once)."""
    result = await scraped.prom.wait_for(
        'ALERTS{alertname="EosTaskRestartingRepeatedly", alertstate="firing"}', timeout=40
    )
    assert {(s["metric"]["connector"], s["metric"].get("task")) for s in result} == {
        ("payments", "0")
    }
