"""Producer settings exactly-once needs, checked against the real broker before a task
starts (issue 39): the worker reads the brokers' ``transaction.max.timeout.ms`` at start
(DescribeConfigs) and refuses a connector whose task ``transaction.timeout.ms`` is above
it, naming the setting, as it refuses ``acks=1``; the same config under the limit runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from eos.kafka import ClientConfig
from eos.kafka.admin import transaction_max_timeout_ms
from tests.integration.worker_harness import running_worker, worker_props

pytestmark = pytest.mark.integration

TIMEOUT = "producer.override.transaction.timeout.ms"


async def test_the_brokers_limit_is_read(client_config: ClientConfig) -> None:
    assert await transaction_max_timeout_ms(client_config) == 900000  # Kafka's default


async def test_a_connector_above_the_limit_or_with_acks_1_is_refused_by_name(
    bootstrap: str, unique_name: Callable[[str], str], topic_factory: Callable[..., Any]
) -> None:
    topic = await topic_factory()
    base = {"connector.class": "VerifiableSource", "topic": topic, "tasks.max": "1",
            "records.per.partition": "10"}  # fmt: skip
    async with running_worker(worker_props(bootstrap, unique_name("g"))) as w:
        assert w.worker.broker_max_ms == 900000
        for key, value, says in (
            (TIMEOUT, "900001", "above the brokers' transaction.max.timeout.ms (900000)"),
            ("producer.override.acks", "1", "exactly-once needs acks=all"),
        ):
            refused = await w.http.put(
                "/connector-plugins/VerifiableSource/config/validate", json={**base, key: value}
            )
            assert refused.status_code == 200, refused.text
            (entry,) = [c for c in refused.json()["configs"] if c["value"]["name"] == key]
            assert any(says in e for e in entry["value"]["errors"]), entry
            created = await w.http.post(
                "/connectors", json={"name": "refused", "config": {**base, key: value}}
            )
            assert created.status_code == 400, created.text
            assert key in created.text
        fine = await w.http.post(
            "/connectors", json={"name": "fine", "config": {**base, TIMEOUT: "900000"}}
        )
        assert fine.status_code == 201, fine.text
        await w.wait_for_tasks("fine", "RUNNING", 1)
