"""promtool accepts the shipped scrape config, alert rules and Connect-compatible
recording rules, and their unit tests (deploy/prometheus/*_test.yml) pass."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from metrics import PrometheusObserver, metrics_response
from tests.metrics_demo import ScriptedWorkload
from tests.prometheus_server import ALERT_RULES, DEPLOY, SCRAPE_CONFIG, promtool, scrape_config

pytestmark = pytest.mark.integration


def check(*args: str | Path) -> str:
    done = promtool(*args)
    assert done.returncode == 0, f"promtool {args}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_check_config() -> None:
    out = check("check", "config", SCRAPE_CONFIG)
    assert "SUCCESS" in out


def test_check_config_as_the_tests_run_it(tmp_path: Path) -> None:
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump(scrape_config(["127.0.0.1:18083"])))
    check("check", "config", config)


def test_check_rules() -> None:
    out = check("check", "rules", ALERT_RULES)
    assert "SUCCESS: 12 rules found" in out


def test_alert_rule_unit_tests() -> None:
    out = check("test", "rules", DEPLOY / "alerts_test.yml")
    assert "SUCCESS" in out


def test_connect_compatible_rules_and_their_unit_tests() -> None:
    """Strimzi's Kafka Connect dashboard and alert queries, as written there, read two eos
    clusters apart through deploy/prometheus/connect-compat.yml."""
    assert "SUCCESS: 26 rules found" in check("check", "rules", DEPLOY / "connect-compat.yml")
    assert "SUCCESS" in check("test", "rules", DEPLOY / "connect-compat_test.yml")


def test_check_metrics_finds_no_naming_problems() -> None:
    """promtool's linter (names, units, _total, help) over a full exposition."""
    workload = ScriptedWorkload(PrometheusObserver())
    for _ in range(70):
        workload.step()
    body, _ = metrics_response(workload.observer.registry, None)
    done = promtool("check", "metrics", stdin=body.decode())
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout + done.stderr == ""
