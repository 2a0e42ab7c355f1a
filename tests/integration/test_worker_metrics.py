"""A real worker scraped by a real Prometheus: the committed transactions it
reports equal the transactions that the topics show."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import eos
from eos.kafka import ClientConfig, read_to_end
from eos.state import TASK_STATES
from eos.storage.offset_log import decode_offset_record
from metrics import TEXT_CONTENT_TYPE
from services.dev_kafka import free_ports
from services.verify import verify
from tests.integration.worker_harness import RunningWorker, running_worker, worker_props
from tests.prometheus_server import PrometheusFactory, prometheus_factory

pytestmark = pytest.mark.integration
__all__ = ["prometheus_factory"]  # the fixture, imported for this module

RECORDS, BATCH = 3000, 100


async def test_prometheus_counts_match_the_topic(
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    prometheus_factory: PrometheusFactory,
) -> None:
    group, topic = unique_name("g"), unique_name("out")
    wprops = worker_props(bootstrap, group)
    connector = {
        "name": "vs",
        "connector.class": "VerifiableSource",
        "tasks.max": "1",
        "topic": topic,
        "partitions.per.task": "1",
        "records.per.partition": str(RECORDS),
        "batch.size": str(BATCH),
        "throughput": "3000",
    }
    async with running_worker(wprops, [connector]) as w:
        target = wprops["listeners"].removeprefix("http://")
        prom = prometheus_factory([target])
        await w.wait_for_tasks("vs", "RUNNING", 1)
        result = await verify(client_config, topic, RECORDS, 60, {})
        assert result.ok(RECORDS)

        def all_in(samples: list[dict[str, Any]]) -> bool:
            return bool(samples) and float(samples[0]["value"][1]) >= RECORDS

        await prom.wait_for('sum(eos_task_records_written_total{connector="vs"})', 30, all_in)
        await anyio.sleep(2)  # one more scrape after the last commit
        committed = await prom.query('sum(eos_task_transactions_committed_total{connector="vs"})')
        size_max = await prom.query('max(eos_task_transaction_size_max{connector="vs"})')
        size_avg = await prom.query('max(eos_task_transaction_size_avg{connector="vs"})')
        state = await prom.query('eos_task_state{connector="vs",state="RUNNING"}')
        connector_state = await prom.query('eos_connector_status{connector="vs"} == 1')
        build = await prom.query("eos_build_info")
        worker = await prom.query("eos_worker_info")
        text = (await w.http.get("/metrics")).text
        openmetrics = await w.http.get(
            "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
        )

    # One task with one source partition writes one offset record per committed
    # transaction, in that transaction: the offsets topic counts the transactions.
    offsets = [
        e
        for r in await read_to_end(client_config, wprops["offset.storage.topic"])
        if (e := decode_offset_record(r.key, r.value)) is not None and e[0] == "vs"
    ]
    assert offsets[-1][2] == {"seqno": RECORDS}
    transactions = len(offsets)
    assert transactions >= RECORDS // BATCH
    assert int(float(committed[0]["value"][1])) == transactions
    assert float(size_max[0]["value"][1]) <= BATCH
    assert float(size_avg[0]["value"][1]) == pytest.approx(RECORDS / transactions)
    assert [s["value"][1] for s in state] == ["1"]
    assert [s["metric"]["state"] for s in connector_state] == ["RUNNING"]
    assert [s["metric"]["version"] for s in build] == [eos.__version__]
    assert [(s["metric"]["group"], s["metric"]["exactly_once_source_support"]) for s in worker] == [
        (group, "enabled")
    ]

    families = {f.name for f in text_string_to_metric_families(text)}
    assert "eos_task_transactions_committed" in families
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    assert json.dumps(sorted(families))  # parsed without error


async def test_failed_task_stays_visible_as_failed(
    bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    bad = {
        "name": "bad",
        "connector.class": "tests.integration.connectors:BadRecordSource",
        "topic": unique_name("out"),
    }
    async with running_worker(worker_props(bootstrap, unique_name("g")), [bad]) as w:
        await w.wait_for_tasks("bad", "FAILED", 1)
        text = (await w.http.get("/metrics")).text
    failed = [
        s
        for f in text_string_to_metric_families(text)
        if f.name == "eos_task_state"
        for s in f.samples
        if s.labels.get("connector") == "bad" and s.labels.get("state") == "FAILED"
    ]
    assert [s.value for s in failed] == [1.0]


async def test_connector_status_follows_the_connector_on_the_worker_that_runs_it(
    bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    """eos_connector_status: RUNNING, then PAUSED after a pause, gone once deleted."""
    connector = {
        "name": "vs",
        "connector.class": "VerifiableSource",
        "topic": unique_name("out"),
        "records.per.partition": "0",
        "throughput": "10",
    }

    async def states(w: RunningWorker) -> dict[str, float]:
        text = (await w.http.get("/metrics")).text
        return {
            s.labels["state"]: s.value
            for f in text_string_to_metric_families(text)
            if f.name == "eos_connector_status"
            for s in f.samples
            if s.labels["connector"] == "vs"
        }

    async def until(w: RunningWorker, state: str | None) -> None:
        with anyio.fail_after(30):
            while True:
                found = await states(w)
                current = [k for k, v in found.items() if v == 1]
                if current == ([state] if state else []) and (state or not found):
                    return
                await anyio.sleep(0.2)

    async with running_worker(worker_props(bootstrap, unique_name("g")), [connector]) as w:
        await until(w, "RUNNING")
        assert sorted(await states(w)) == sorted(s.value for s in TASK_STATES)
        assert (await w.http.put("/connectors/vs/pause")).status_code == 202
        await until(w, "PAUSED")
        assert (await w.http.delete("/connectors/vs")).status_code == 204
        await until(w, None)


async def test_metrics_listeners_serves_metrics_on_its_own_port(
    bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    (port,) = free_ports(1)
    props = worker_props(bootstrap, unique_name("g"), metrics_listeners=f"http://127.0.0.1:{port}")
    async with (
        running_worker(props) as w,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as scraper,
    ):
        separate = await scraper.get("/metrics")
        other = await scraper.get("/connectors")  # the REST API is not on this port
        rest = await w.http.get("/metrics")
    assert separate.status_code == 200
    assert separate.headers["content-type"] == TEXT_CONTENT_TYPE
    assert "eos_worker_generation" in {
        f.name for f in text_string_to_metric_families(separate.text)
    }
    assert other.status_code == 404
    assert rest.status_code == 200


@pytest.mark.parametrize(
    ("client", "exactly_once"),
    [("aiokafka", "enabled"), ("librdkafka", "enabled"), ("aiokafka", "disabled")],
)
async def test_the_task_producers_client_metrics_count_what_they_sent(
    client: str,
    exactly_once: str,
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
) -> None:
    """eos_task_producer_*: what the task's producer sent, its requests and batches, for
    both producers (librdkafka's from its statistics, asked for every second here, and
    served by the scrape itself once the task is idle), with and without transactions."""
    group, topic = unique_name("g"), unique_name("out")
    records = 1500
    connector = {
        "name": "vs", "connector.class": "VerifiableSource", "tasks.max": "1",
        "topic": topic, "partitions.per.task": "1", "records.per.partition": str(records),
        "batch.size": "100", "throughput": "1000",
        "producer.override.statistics.interval.ms": "1000",
    }  # fmt: skip
    labels = {"connector": "vs", "task": "0", "client": client}
    props = worker_props(
        bootstrap, group, producer_client=client, exactly_once_source_support=exactly_once
    )
    async with running_worker(props, [connector]) as w:
        result = await verify(client_config, topic, records, 60, {})
        assert result.ok(records)
        with anyio.fail_after(20):  # librdkafka's statistics: every second
            while True:
                sent = scraped(await w.http.get("/metrics"), labels)
                if sent["eos_task_producer_records_sent_total"] >= records:
                    break
                await anyio.sleep(0.5)
    assert sent["eos_task_producer_record_errors_total"] == 0
    assert sent["eos_task_producer_request_latency_seconds_count"] > 0
    assert 0 < sent["eos_task_producer_request_latency_seconds_sum"] < 60
    batches = sent["eos_task_producer_batch_size_bytes_count"]
    assert 0 < batches <= sent["eos_task_producer_records_sent_total"]
    assert sent["eos_task_producer_batch_size_bytes_sum"] > records * 20  # each value > 20 B
    assert sent["eos_task_producer_buffered_bytes"] >= 0


def scraped(answer: httpx.Response, labels: dict[str, str]) -> dict[str, float]:
    """The eos_task_producer_* samples of ``labels`` in a scrape, by sample name."""
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
        if sample.name.startswith("eos_task_producer_") and sample.labels == labels
    }
