"""``…/config/validate`` on a connector's ``errors.*`` settings, as Connect reports them:
each bad value under its own setting, a dead-letter topic with ``errors.tolerance=none``
accepted (it is simply unused), one that collides with the connector's topics refused."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest

from eos.config import WorkerConfig
from eos.runtime.worker import Worker
from services.rest import build_app
from tests.unit.test_rest_transforms import BASE

CONNECTOR = {"connector.class": "VerifiableSource", "name": "v", "topic": "out"}


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    worker = SimpleNamespace(settings=WorkerConfig.from_properties(BASE))
    worker.problems = lambda props: Worker.problems(cast(Worker, worker), props)
    transport = httpx.ASGITransport(app=build_app(cast(Worker, worker)))
    async with httpx.AsyncClient(transport=transport, base_url="http://eos") as http:
        yield http


async def validate(client: httpx.AsyncClient, **errors: str) -> dict[str, Any]:
    config = {**CONNECTOR, **{f"errors.{k.replace('_', '.')}": v for k, v in errors.items()}}
    answer = await client.put("/connector-plugins/VerifiableSource/config/validate", json=config)
    assert answer.status_code == 200
    body: dict[str, Any] = answer.json()
    return body


def problems(body: dict[str, Any]) -> dict[str, list[str]]:
    return {
        c["value"]["name"]: c["value"]["errors"] for c in body["configs"] if c["value"]["errors"]
    }


async def test_every_bad_errors_value_is_reported_under_its_setting(
    client: httpx.AsyncClient,
) -> None:
    body = await validate(
        client,
        tolerance="some",
        retry_timeout="-5",
        retry_delay_max_ms="0",
        log_enable="maybe",
        log_include_messages="x",
        deadletterqueue_topic_name="bad topic!",
        deadletterqueue_topic_replication_factor="-2",
        deadletterqueue_context_headers_enable="nope",
    )
    found = problems(body)
    assert found == {
        "errors.tolerance": [
            "invalid value 'some' for setting 'errors.tolerance': must be one of: none, all"
        ],
        "errors.retry.timeout": [
            "invalid value -5 for setting 'errors.retry.timeout': must be at least -1"
        ],
        "errors.retry.delay.max.ms": [
            "invalid value 0 for setting 'errors.retry.delay.max.ms': must be at least 1"
        ],
        "errors.log.enable": [
            "invalid value 'maybe' for setting 'errors.log.enable': expected true or false"
        ],
        "errors.log.include.messages": [
            "invalid value 'x' for setting 'errors.log.include.messages': expected true or false"
        ],
        "errors.deadletterqueue.topic.name": [
            "invalid value 'bad topic!' for setting 'errors.deadletterqueue.topic.name': must be "
            "a Kafka topic name: 1 to 249 characters from a-z, A-Z, 0-9, '.', '_' and '-', "
            "other than '.' and '..'"
        ],
        "errors.deadletterqueue.topic.replication.factor": [
            "invalid value -2 for setting 'errors.deadletterqueue.topic.replication.factor': "
            "must be at least -1"
        ],
        "errors.deadletterqueue.context.headers.enable": [
            "invalid value 'nope' for setting 'errors.deadletterqueue.context.headers.enable': "
            "expected true or false"
        ],
    }
    assert body["error_count"] == 8
    group = {c["value"]["name"]: c["definition"]["group"] for c in body["configs"]}
    assert group["errors.tolerance"] == "errors"


async def test_good_errors_settings_pass(client: httpx.AsyncClient) -> None:
    # Connect's CaseInsensitiveValidString; a dead-letter topic with tolerance none is unused
    for settings in (
        {"tolerance": "ALL", "deadletterqueue_topic_name": "dlq", "retry_timeout": "-1"},
        {"tolerance": "none", "deadletterqueue_topic_name": "dlq"},
        {"log_enable": "true", "log_include_messages": "TRUE"},
    ):
        body = await validate(client, **settings)
        assert body["error_count"] == 0, (settings, problems(body))


@pytest.mark.parametrize(
    ("topic", "why"),
    [
        ("out", "is the topic this connector writes its records to ('topic')"),
        ("eos-offsets", "is an offsets topic of this connector"),
    ],
)
async def test_a_dead_letter_topic_that_collides_is_refused(
    client: httpx.AsyncClient, topic: str, why: str
) -> None:
    body = await validate(client, tolerance="all", deadletterqueue_topic_name=topic)
    assert problems(body) == {
        "errors.deadletterqueue.topic.name": [
            f"invalid value '{topic}' for setting 'errors.deadletterqueue.topic.name': {why}: "
            "name another topic for dead letters"
        ]
    }
