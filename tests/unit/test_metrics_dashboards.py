"""The Grafana dashboards and Prometheus files under deploy/: up to date with their
generator, well-formed, and referring only to metrics that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.metrics_demo import variable_query
from tests.scripts import load_script
from tests.unit.test_metrics_definitions import families

REPO = Path(__file__).resolve().parents[2]
GRAFANA = REPO / "deploy" / "grafana"
PROMETHEUS = REPO / "deploy" / "prometheus"
DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))
SUFFIXES = ("_bucket", "_sum", "_count")
OTHER_METRICS = {"process_cpu_seconds_total", "process_resident_memory_bytes"}


def generator() -> ModuleType:
    return load_script("deploy/grafana/build_dashboards.py")


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def exprs(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\b((?:eos|process)_[a-z_]+)\b", expr))


def known_metric(name: str) -> bool:
    defined = families()
    histograms = {n for n, (kind, _, _) in defined.items() if kind == "histogram"}
    if name in defined or name in OTHER_METRICS:
        return True
    return any(name == h + s for h in histograms for s in SUFFIXES)


def test_checked_in_json_is_what_the_generator_writes() -> None:
    rendered = generator().render()
    assert sorted(rendered) == [p.name for p in DASHBOARDS]
    for path in DASHBOARDS:
        assert path.read_text() == rendered[path.name], f"{path.name} is stale"


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_dashboard_structure(path: Path) -> None:
    dashboard = load(path)
    assert dashboard["uid"].startswith("eos-")
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert "datasource" in variables
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] >= 0, panel["title"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        assert panel["description"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(set(refs)) == len(refs), panel["title"]
        for target in panel["targets"]:
            used = set(re.findall(r"\$\{?(\w+)", target["expr"]))
            assert used <= variables | {"__rate_interval"}, (panel["title"], used)


def test_overview_covers_the_issue() -> None:
    text = "\n".join(exprs(load(GRAFANA / "dashboards" / "eos-overview.json")))
    for needle in (
        "eos_task_records_written_total",
        "eos_task_transactions_committed_total",
        "eos_task_transactions_aborted_total",
        "histogram_quantile(0.5, sum by (le) (rate(eos_task_commit_duration_seconds_bucket",
        "histogram_quantile(0.99, sum by (le) (rate(eos_task_commit_duration_seconds_bucket",
        'eos_task_state{instance=~"$instance", state="FAILED"}',
        "eos_worker_rebalances_total",
        "eos_worker_fencing_rounds_total",
    ):
        assert needle in text, needle


def test_overview_has_a_cluster_row() -> None:
    """Issue 10: members, leader, generation, rebalances by cause, time in rebalance,
    assignment per worker (stacked by instance), revocations, scheduled delays."""
    panels = load(GRAFANA / "dashboards" / "eos-overview.json")["panels"]
    rows = [i for i, p in enumerate(panels) if p["type"] == "row"]
    start = next(i for i in rows if panels[i]["title"] == "Cluster")
    end = next((i for i in rows if i > start), len(panels))
    row = {p["title"]: p for p in panels[start + 1 : end]}
    text = "\n".join(t["expr"] for p in row.values() for t in p["targets"])
    for needle in (
        "eos_worker_group_members",
        '(eos_worker_leader{instance=~"$instance"} == 1)',
        "eos_worker_generation",
        "sum by (cause) (rate(eos_worker_rebalances_total",
        "histogram_quantile(0.5, sum by (le) (rate(eos_worker_rebalance_duration_seconds_bucket",
        "histogram_quantile(0.99, sum by (le) (rate(eos_worker_rebalance_duration_seconds_bucket",
        "eos_worker_leader_changes_total",
        'sum by (instance) (eos_worker_assigned_tasks{instance=~"$instance"})',
        'sum by (instance) (eos_worker_assigned_connectors{instance=~"$instance"})',
        "eos_worker_revoked_tasks_total",
        "eos_worker_revoked_connectors_total",
        "eos_worker_scheduled_rebalance_delay_seconds",
        "eos_worker_scheduled_rebalances_total",
    ):
        assert needle in text, needle
    leader = row["Leader"]
    assert leader["targets"][0]["legendFormat"] == "{{instance}}"
    assert leader["options"]["textMode"] == "name"
    for title in ("Tasks per worker", "Connectors per worker", "Rebalances / min by cause"):
        stacking = row[title]["fieldConfig"]["defaults"]["custom"]["stacking"]
        assert stacking["mode"] == "normal", title
    # the rebalance panels moved here from the workers' row
    elsewhere = [p for p in panels[:start] + panels[end:] if p["type"] != "row"]
    assert not any("eos_worker_rebalance" in e for p in elsewhere for e in exprs({"panels": [p]}))


def test_drilldown_has_connector_and_task_variables() -> None:
    dashboard = load(GRAFANA / "dashboards" / "eos-connector.json")
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert (
        variable_query(variables["connector"])
        == 'label_values(eos_task_state{instance=~"$instance"}, connector)'
    )
    assert "$connector" in variable_query(variables["task"])
    for expr in exprs(dashboard):
        if expr.count("eos_task_"):
            assert '$connector"' in expr, expr
            assert '$task"' in expr, expr
    sizes = "\n".join(exprs(dashboard))
    for kind in ("min", "max", "avg"):
        assert f"eos_task_transaction_size_{kind}" in sizes


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_every_query_reads_only_the_chosen_clusters_workers(path: Path) -> None:
    """Two clusters in one Prometheus: ``$namespace`` and ``$cluster`` (a group.id from
    eos_worker_info) choose; the hidden ``$instance`` lists that cluster's workers (its
    "All" is that list, never ``.*``), and every selector of a worker metric has it."""
    dashboard = load(path)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variable_query(variables["cluster"]) == (
        'label_values(eos_worker_info{namespace=~"$namespace"}, group)'
    )
    instance = variables["instance"]
    assert variable_query(instance) == (
        'label_values(eos_worker_info{namespace=~"$namespace", group="$cluster"}, instance)'
    )
    assert instance["hide"] == 2
    assert instance["includeAll"]
    assert not instance.get("allValue")
    for expr in exprs(dashboard):
        selectors = re.findall(r"\b(?:eos|process|python)_\w+(\{[^}]*\})?", expr)
        assert selectors, expr
        assert all(s.startswith('{instance=~"$instance"') for s in selectors), expr


def test_scoped_narrows_each_selector_once() -> None:
    scoped = generator().scoped
    assert scoped('sum(rate(eos_task_x_total{connector="a"}[5m])) / process_cpu') == (
        'sum(rate(eos_task_x_total{instance=~"$instance", connector="a"}[5m])) '
        '/ process_cpu{instance=~"$instance"}'
    )
    assert scoped("eos_a == scalar(max(eos_a{}))") == (
        'eos_a{instance=~"$instance"} == scalar(max(eos_a{instance=~"$instance"}))'
    )


def test_queries_and_rules_refer_to_existing_metrics() -> None:
    queries = [e for path in DASHBOARDS for e in exprs(load(path))]
    rules = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())["groups"]
    queries += [r["expr"] for group in rules for r in group["rules"]]
    for expr in queries:
        for name in metric_names(expr):
            assert known_metric(name), (name, expr)


def test_the_docs_table_lists_every_alert() -> None:
    rules = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())["groups"]
    alerts = {r["alert"] for group in rules for r in group["rules"]}
    text = (PROMETHEUS.parents[1] / "docs" / "monitoring.md").read_text()
    listed = set(re.findall(r"^\| `(Eos\w+)` \|", text, re.M))
    assert listed == alerts


def test_provisioning_files() -> None:
    datasources = yaml.safe_load((GRAFANA / "provisioning/datasources/prometheus.yml").read_text())
    (source,) = datasources["datasources"]
    assert source["type"] == "prometheus"
    providers = yaml.safe_load((GRAFANA / "provisioning/dashboards/eos.yml").read_text())
    (provider,) = providers["providers"]
    assert provider["type"] == "file"
    assert provider["options"]["path"].startswith("/")


def test_scrape_config_targets_the_default_listener() -> None:
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"] == [{"targets": ["127.0.0.1:8083"]}]
    assert config["rule_files"] == ["alerts.yml"]
