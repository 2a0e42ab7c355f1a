"""Transforms and predicates in the REST API without Kafka: listed as Connect lists them
(``connectorsOnly=false``), their settings (``…/config``), and ``…/config/validate``
showing each transform's settings and problems, and its ``errors.*`` settings' problems
as Connect reports them (docs/transforms.md, "Errors and dead letters")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest

from eos.config import WorkerConfig
from eos.config.providers import ConfigProviders
from eos.runtime.worker import Worker
from services.rest import build_app

BASE = {
    "group.id": "workers",
    "config.storage.topic": "eos-configs",
    "offset.storage.topic": "eos-offsets",
    "status.storage.topic": "eos-status",
}


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    worker = SimpleNamespace(
        settings=WorkerConfig.from_properties(BASE),
        providers=ConfigProviders.from_worker({}),
        broker_max_ms=None,
    )
    worker._problems = lambda props: Worker._problems(cast(Worker, worker), props)
    worker.problems = lambda props: Worker.problems(cast(Worker, worker), props)
    transport = httpx.ASGITransport(app=build_app(cast(Worker, worker)))
    async with httpx.AsyncClient(transport=transport, base_url="http://eos") as http:
        yield http


async def test_transforms_and_predicates_are_listed_as_connect_lists_them(
    client: httpx.AsyncClient,
) -> None:
    connectors = (await client.get("/connector-plugins")).json()
    assert {p["type"] for p in connectors} == {"source"}
    listed = (await client.get("/connector-plugins?connectorsOnly=false")).json()
    by_type: dict[str, set[str]] = {}
    for plugin in listed:
        by_type.setdefault(plugin["type"], set()).add(plugin["class"])
    assert {
        "org.apache.kafka.connect.transforms.InsertField$Key",
        "org.apache.kafka.connect.transforms.InsertField$Value",
        "org.apache.kafka.connect.transforms.RegexRouter",
        "org.apache.kafka.connect.transforms.Filter",
    } <= by_type["transformation"]
    # 10 with $Key and $Value, 6 without, and Debezium's ExtractNewRecordState
    assert len(by_type["transformation"]) == 27
    assert by_type["predicate"] == {
        "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
        "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
        "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    }


@pytest.mark.parametrize(
    ("plugin", "names"),
    [
        ("org.apache.kafka.connect.transforms.RegexRouter", ["regex", "replacement"]),
        ("TimestampRouter", ["topic.format", "timestamp.format"]),
        ("TopicNameMatches", ["pattern"]),
    ],
)
async def test_a_transforms_settings(
    client: httpx.AsyncClient, plugin: str, names: list[str]
) -> None:
    answer = await client.get(f"/connector-plugins/{plugin}/config")
    assert answer.status_code == 200
    assert [d["name"] for d in answer.json()] == names
    missing = await client.get("/connector-plugins/Nope$Value/config")
    assert missing.status_code == 404


async def test_validate_lists_each_transforms_settings_and_problems(
    client: httpx.AsyncClient,
) -> None:
    config: dict[str, Any] = {
        "connector.class": "VerifiableSource",
        "name": "v",
        "topic": "out",
        "transforms": "route,key",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": "(",
        "transforms.route.predicate": "p",
        "transforms.key.type": "ValueToKey",
        "predicates": "p",
        "predicates.p.type": "TopicNameMatches",
        "predicates.p.pattern": "o.*",
    }
    answer = (
        await client.put("/connector-plugins/VerifiableSource/config/validate", json=config)
    ).json()
    configs = {c["value"]["name"]: c for c in answer["configs"]}
    route = configs["transforms.route.regex"]
    assert route["definition"]["group"] == "Transforms: route"
    assert route["value"]["errors"] == [
        "invalid value '(' for setting 'transforms.route.regex': not a valid regular expression: "
        "missing ), unterminated subpattern at position 0"
    ]
    assert configs["transforms.key.fields"]["value"]["errors"][0].startswith(
        "invalid value None for setting 'transforms.key.fields': required setting is missing."
    )
    for name in (
        "transforms.route.type",
        "transforms.route.predicate",
        "transforms.route.negate",
        "transforms.route.replacement",
        "predicates.p.type",
        "predicates.p.pattern",
    ):
        assert name in configs, name
    assert configs["predicates.p.pattern"]["value"]["errors"] == []
    assert "Transforms: route" in answer["groups"]
    assert answer["error_count"] == 3  # regex, replacement, fields


async def test_validate_refuses_value_transforms_on_encoded_rows(
    client: httpx.AsyncClient,
) -> None:
    config = {
        "connector.class": "VerifiableSource",
        "name": "v",
        "topic": "out",
        "output": "blocks",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",  # schemas: no reader
        "transforms": "key,route",
        "transforms.key.type": "ValueToKey",
        "transforms.key.fields": "seqno",
        "transforms.route.type": "RegexRouter",
        "transforms.route.regex": "(.*)",
        "transforms.route.replacement": "x-$1",
    }
    answer = (
        await client.put("/connector-plugins/VerifiableSource/config/validate", json=config)
    ).json()
    errors = {c["value"]["name"]: c["value"]["errors"] for c in answer["configs"]}
    assert errors["transforms.key.type"] == [
        "invalid value 'ValueToKey' for setting 'transforms.key.type': this transformation reads "
        "record keys or values, but VerifiableSource hands its rows over already encoded with "
        "this configuration; only transforms of topics, headers and timestamps (RegexRouter, "
        "TimestampRouter, InsertHeader, DropHeaders, Filter) and the predicates "
        "TopicNameMatches, HasHeaderKey and RecordIsTombstone run on them"
    ]
    assert errors["transforms.route.type"] == []
    config["output"] = "records"
    answer = (
        await client.put("/connector-plugins/VerifiableSource/config/validate", json=config)
    ).json()
    assert answer["error_count"] == 0
    config.update({"output": "blocks", "value.converter": "json"})  # schemaless: read back
    answer = (
        await client.put("/connector-plugins/VerifiableSource/config/validate", json=config)
    ).json()
    assert answer["error_count"] == 0


ERRORS_CONNECTOR = {"connector.class": "VerifiableSource", "name": "v", "topic": "out"}


async def validate(client: httpx.AsyncClient, **errors: str) -> dict[str, Any]:
    config = {**ERRORS_CONNECTOR, **{f"errors.{k.replace('_', '.')}": v for k, v in errors.items()}}
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
