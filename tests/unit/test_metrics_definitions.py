"""Naming rules, the metrics table in docs/monitoring.md and the package's exports
(tests/unit/test_import_direction.py holds the import boundary of metrics/)."""

from __future__ import annotations

import re
from pathlib import Path

import metrics
from eos.runtime.observer import ProducerStats
from eos.state import State
from metrics import PrometheusObserver

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "monitoring.md"
ALLOWED_LABELS = {
    "connector", "task", "state", "reason", "event", "protocol", "cause", "topic", "partition",
    "stage", "gauge",
    "version", "python", "aiokafka",  # eos_build_info: one series, set at start
    "group", "worker", "exactly_once_source_support",  # eos_worker_info: likewise
    "file", "outcome",  # eos_worker_connector_file_outcome: the files of connectors.dir
    "client",  # eos_task_producer_*: aiokafka or librdkafka
}  # fmt: skip
NO_UNIT_OK = {  # names whose "unit" is a count of things, or that are ratios of them
    "eos_task_transaction_size_min",
    "eos_task_transaction_size_max",
    "eos_task_transaction_size_avg",
    "eos_task_transaction_records",
    "eos_task_state",
    "eos_connector_status",
    "eos_worker_generation",
    "eos_worker_leader",
}


def families() -> dict[str, tuple[str, set[str], str]]:
    """name (as written in queries) → (type, labels, unit) of every eos metric."""
    observer = PrometheusObserver(process_metrics=False)
    task = observer.task("c", 0)
    task.transaction_committed(1, 0.0, 0.0)
    task.task_event("changed_files", 1)
    task.task_value("slot_lag_bytes", 1)
    task.producer_started("aiokafka", ProducerStats)
    observer.fencing_round("c", 0.1, True)
    observer.task_count_record_written("c")
    observer.auto_restarted("c", 0, 1)
    observer.auto_restarted("c", None, 1)
    observer.last_stable_offsets({("t", 0): (1, 2.0)})
    observer.connector_states(lambda: {"c": State.RUNNING})
    observer.worker_info("g", "127.0.0.1:8083", "enabled")
    observer.connector_files({"orders.json": ("orders", "created")})
    found = {}
    for family in observer.registry.collect():
        name = family.name + {"counter": "_total", "info": "_info"}.get(family.type, "")
        labels = {k for s in family.samples for k in s.labels if k != "le"}
        found[name] = (family.type, labels, family.unit)
    return found


def test_naming_conventions() -> None:
    for name, (kind, labels, unit) in families().items():
        assert re.fullmatch(
            r"eos_(task|worker|connector)_[a-z_]+[a-z]|eos_(build|worker)_info", name
        ), name
        assert name.startswith("eos_task_") == ({"connector", "task"} <= labels), name
        assert labels <= ALLOWED_LABELS, (name, labels)
        assert name.endswith("_total") == (kind == "counter"), name
        if kind == "histogram" or name.endswith(("_seconds", "_bytes_total")):
            assert unit or name in NO_UNIT_OK, name
        assert "_ms" not in name, name
        assert "milli" not in name, name


def test_docs_table_lists_every_metric() -> None:
    rows = re.findall(r"^\| `(eos_\w+)` \| (\w+) \|([\w, ]*)\|", DOC.read_text(), re.M)
    documented = {
        name: (kind, {x.strip() for x in labels.split(",") if x.strip()})
        for name, kind, labels in rows
    }
    actual = {name: (kind, labels) for name, (kind, labels, _) in families().items()}
    assert documented == actual


def test_exports() -> None:
    public = {name for name in dir(metrics) if not name.startswith("_")}
    modules = {"definitions", "exporter", "observer"}
    assert public - modules == {
        "OPENMETRICS_CONTENT_TYPE",
        "TEXT_CONTENT_TYPE",
        "PrometheusObserver",
        "PrometheusTaskObserver",
        "TaskMetrics",
        "WorkerMetrics",
        "metrics_response",
        "wants_openmetrics",
    }
