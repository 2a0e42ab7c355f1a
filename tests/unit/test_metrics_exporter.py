"""metrics_response: content negotiation, and output that prometheus-client's own
parsers read back in both formats with the values the observer was told."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import parser as openmetrics_parser
from prometheus_client.parser import text_string_to_metric_families as parse_text

from eos.runtime.observer import rebalanced
from eos.state import State
from metrics import (
    OPENMETRICS_CONTENT_TYPE,
    TEXT_CONTENT_TYPE,
    PrometheusObserver,
    metrics_response,
    wants_openmetrics,
)

parse_om: Callable[[str], Iterator[Metric]] = openmetrics_parser.text_string_to_metric_families
#: What Prometheus 2.42 sends (captured from a real scrape).
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


@pytest.mark.parametrize(
    ("accept", "openmetrics"),
    [
        (PROMETHEUS_ACCEPT, True),
        ("application/openmetrics-text", True),
        ("application/openmetrics-text; version=1.0.0; charset=utf-8", True),
        ("text/plain;version=0.0.4;q=0.9, application/openmetrics-text;q=0.95", True),
        (None, False),
        ("", False),
        ("*/*", False),
        ("text/plain", False),
        ("text/plain;version=0.0.4, application/openmetrics-text;q=0.5", False),
        ("application/openmetrics-text;q=0", False),
        ("application/openmetrics-text;q=bogus, text/html", False),
        ("application/json", False),
    ],
)
def test_negotiation(accept: str | None, openmetrics: bool) -> None:
    assert wants_openmetrics(accept) is openmetrics


@pytest.fixture
def observer() -> PrometheusObserver:
    observer = PrometheusObserver(clock=lambda: 1_700_000_000.0)  # scrape-time values fixed
    task = observer.task("orders", 0)
    task.state_changed(State.RUNNING)
    for records in (4, 8, 3):
        task.transaction_committed(records, 0.004, 0.2)
    task.transaction_aborted(2, "error")
    task.records_written(15, 1_500)
    observer.task('we"ird\\name', 1).poll_completed(1, 0.01)  # label escaping
    observer.rebalance_completed(rebalanced(2, True))
    observer.fencing_round("orders", 0.3, False)
    return observer


def samples(families: object) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in families  # type: ignore[attr-defined]
        for s in family.samples
    }


def test_text_format_parses_with_the_values_reported(observer: PrometheusObserver) -> None:
    body, content_type = metrics_response(observer.registry, "text/plain")
    assert content_type == TEXT_CONTENT_TYPE
    parsed = samples(parse_text(body.decode()))
    orders = frozenset({("connector", "orders"), ("task", "0")})
    assert parsed[("eos_task_transaction_size_avg", orders)] == 5
    assert parsed[("eos_task_transactions_committed_total", orders)] == 3
    assert parsed[("eos_task_state", orders | {("state", "RUNNING")})] == 1
    assert (
        parsed[("eos_worker_fencing_round_failures_total", frozenset({("connector", "orders")}))]
        == 1
    )
    weird = frozenset({("connector", 'we"ird\\name'), ("task", "1")})
    assert parsed[("eos_task_records_polled_total", weird)] == 1
    assert any(name.startswith("process_") for name, _ in parsed)


def test_openmetrics_parses_with_the_same_values(observer: PrometheusObserver) -> None:
    body, content_type = metrics_response(observer.registry, PROMETHEUS_ACCEPT)
    assert content_type == OPENMETRICS_CONTENT_TYPE
    text = body.decode()
    assert text.endswith("# EOF\n")
    assert "# UNIT eos_task_commit_duration_seconds seconds" in text
    families = {f.name: f for f in parse_om(text)}
    assert families["eos_task_transactions_committed"].type == "counter"
    assert families["eos_task_commit_duration_seconds"].unit == "seconds"
    assert families["eos_task_state"].type == "gauge"

    in_text = samples(parse_text(metrics_response(observer.registry, None)[0].decode()))
    in_om = samples(families.values())
    eos = {k: v for k, v in in_om.items() if k[0].startswith("eos_")}
    assert eos, "no eos samples"
    for key, value in eos.items():
        if not key[0].endswith("_created"):
            assert in_text[key] == value, key


def test_empty_registry_still_answers() -> None:
    from prometheus_client import CollectorRegistry

    body, _ = metrics_response(CollectorRegistry(), PROMETHEUS_ACCEPT)
    assert body == b"# EOF\n"
    assert metrics_response(CollectorRegistry(), None)[0] == b""
