"""Transforms and predicates in the REST API without Kafka: listed as Connect lists them
(``connectorsOnly=false``), their settings (``…/config``), and ``…/config/validate``
showing each transform's settings and problems."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest

from eos.config import WorkerConfig
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
    worker = SimpleNamespace(settings=WorkerConfig.from_properties(BASE))
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
    assert len(by_type["transformation"]) == 26  # 10 with $Key and $Value, 6 without
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
