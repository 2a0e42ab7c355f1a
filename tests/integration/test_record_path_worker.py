"""The record path through a worker in this process, against the real broker (and the
session's schema registry): transform chains with predicates on records and on blocks,
with the outcomes Kafka Connect's documentation gives for the same settings; dead letters
and errors.tolerance; a registry that is down at start-up or goes away while a task runs;
a schema the registry refuses."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from eos.kafka import ClientConfig, read_to_end
from services.dev_registry import RegistryState
from tests.conftest import TopicFactory
from tests.integration.registry_readers import read_avro
from tests.integration.tcp_proxy import proxy_to
from tests.integration.worker_harness import (
    RunningWorker,
    connector_config,
    running_worker,
    worker_props,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

AVRO = "io.confluent.connect.avro.AvroConverter"


async def records_of(config: ClientConfig, topic: str, count: int, timeout: float = 30) -> Any:
    """The committed records of ``topic`` once there are at least ``count``."""
    with anyio.fail_after(timeout):
        while len(found := await read_to_end(config, topic, timeout=timeout)) < count:  # noqa: ASYNC110 - polls Kafka
            await anyio.sleep(0.2)
    return found


async def task_state(worker: RunningWorker, name: str) -> tuple[str, str]:
    body = await worker.status(name)
    tasks = body.get("tasks") or [{"state": "UNASSIGNED"}]
    return tasks[0]["state"], tasks[0].get("trace", "")


async def wait_state(
    worker: RunningWorker, name: str, state: str, timeout: float = 30, *, trace: str = ""
) -> tuple[str, str]:
    """The task's (state, trace) once it is ``state`` with a trace starting ``trace``."""
    with anyio.fail_after(timeout):
        while True:
            found = await task_state(worker, name)
            if found[0] == state and found[1].startswith(trace):
                return found
            await anyio.sleep(0.2)


async def test_chains_with_predicates_on_records_and_blocks_as_connect_documents(
    bootstrap: str,
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    unique_name: Callable[[str], str],
) -> None:
    foo, bar, baz = (await topic_factory(), await topic_factory(), await topic_factory())
    into = await topic_factory(name=unique_name("t") + "-in")
    out = await topic_factory(name=into.removesuffix("-in") + "-out")
    # Kafka's documentation, "Predicates": drop the records of topic foo; extract
    # other_field from the key of every record but those of topic bar.
    documented = connector_config(
        "ScriptSource", "documented", foo, script="predicates", foo_topic=foo, bar_topic=bar,
        baz_topic=baz, **{
            "transforms": "Filter,Extract",
            "transforms.Filter.type": "org.apache.kafka.connect.transforms.Filter",
            "transforms.Filter.predicate": "IsFoo",
            "transforms.Extract.type": "org.apache.kafka.connect.transforms.ExtractField$Key",
            "transforms.Extract.field": "other_field",
            "transforms.Extract.predicate": "IsBar",
            "transforms.Extract.negate": "true",
            "predicates": "IsFoo,IsBar",
            "predicates.IsFoo.type":
                "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
            "predicates.IsFoo.pattern": foo,
            "predicates.IsBar.type":
                "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
            "predicates.IsBar.pattern": bar,
        },
    )  # fmt: skip
    # RegexRouter renames <x>-in to <x>-out; InsertHeader marks the records that have a
    # "source" header (HasHeaderKey); Filter drops tombstones (RecordIsTombstone).
    columns = connector_config(
        "ScriptSource", "columns", into, script="columns", in_topic=into, **{
            "transforms": "route,mark,drop",
            "transforms.route.type": "RegexRouter",
            "transforms.route.regex": "(.*)-in",
            "transforms.route.replacement": "$1-out",
            "transforms.mark.type": "InsertHeader",
            "transforms.mark.header": "checked",
            "transforms.mark.value.literal": "yes",
            "transforms.mark.predicate": "hasSource",
            "transforms.drop.type": "Filter",
            "transforms.drop.predicate": "isTombstone",
            "predicates": "hasSource,isTombstone",
            "predicates.hasSource.type": "HasHeaderKey",
            "predicates.hasSource.name": "source",
            "predicates.isTombstone.type": "RecordIsTombstone",
        },
    )  # fmt: skip
    props = worker_props(bootstrap, unique_name("g"))
    async with running_worker(props, [documented, columns]):
        baz_records = await records_of(client_config, baz, 6)
        bar_records = await records_of(client_config, bar, 6)
        out_records = await records_of(client_config, out, 1 + 12 - 4)
    assert await read_to_end(client_config, foo) == []
    assert await read_to_end(client_config, into) == []
    assert sorted((json.loads(r.key), json.loads(r.value)["n"]) for r in baz_records) == [
        (n, n) for n in range(2, 18, 3)
    ]  # the key is other_field (records, and the block's rows read back)
    assert sorted((json.loads(r.key)["other_field"], json.loads(r.key)["tag"]) for r in bar_records
                  ) == [(n, "k") for n in range(1, 18, 3)]  # fmt: skip
    seen = [(r.key, r.value, list(r.headers)) for r in out_records]
    assert seen[0] == (None, b'{"r":1}', [("source", b"api"), ("checked", b"yes")])
    assert seen[1:] == [
        (f"k{n}".encode(), f"v{n}".encode(),
         [("source", b"db"), ("checked", b"yes")] if n % 2 == 0 else [])
        for n in range(12) if n % 3
    ]  # fmt: skip


async def test_a_poison_record_is_a_dead_letter_or_fails_the_task_naming_it(
    bootstrap: str,
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    unique_name: Callable[[str], str],
) -> None:
    """BadRecordSource: records n = 0..4 convert, n = 5 (an object()) does not."""
    tolerant_topic, strict_topic, dead = [await topic_factory() for _ in range(3)]
    tolerant = connector_config(
        "BadRecordSource", "tolerant", tolerant_topic, **{
            "errors.tolerance": "all", "errors.log.enable": "true",
            "errors.deadletterqueue.topic.name": dead,
            "errors.deadletterqueue.context.headers.enable": "true",
        },
    )  # fmt: skip
    strict = connector_config("BadRecordSource", "strict", strict_topic)
    props = worker_props(bootstrap, unique_name("g"))
    async with running_worker(props, [tolerant, strict]) as worker:
        (letter,) = await records_of(client_config, dead, 1)
        _, trace = await wait_state(worker, "strict", "FAILED")
        good = await records_of(client_config, tolerant_topic, 5)
    assert [json.loads(r.value) for r in good] == [{"n": n} for n in range(5)]
    assert letter.value is not None
    assert letter.value.startswith(b'"<object object at')  # not JSON: its repr
    headers = dict(letter.headers)
    assert headers["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert headers["__connect.errors.class.name"] == b"json"
    assert headers["__connect.errors.connector.name"] == b"tolerant"
    assert headers["__connect.errors.topic"] == tolerant_topic.encode()
    assert b"object is not JSON serialisable" in headers["__connect.errors.exception.message"]
    assert json.loads(headers["__eos.errors.source.offset"]) == {"n": 6}
    assert trace.splitlines()[0] == (
        f"the record for topic {strict_topic!r} from source partition {{'p': 'only'}} at "
        "offset {'n': 6} could not be converted: object is not JSON serialisable"
    )
    assert len(await read_to_end(client_config, strict_topic)) == 3  # the first batch


async def test_registry_down_at_start_up_gone_for_a_while_gone_for_good_and_refusing(
    bootstrap: str,
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    unique_name: Callable[[str], str],
    dev_registry: RegistryState,
) -> None:
    versions_topic, refused_topic = await topic_factory(), await topic_factory()
    host, port = dev_registry.url.removeprefix("http://").split("/")[0].split(":")
    with proxy_to(host, int(port), opened=False) as proxy:
        url = proxy.url("/apis/ccompat/v7")
        versions = connector_config(
            "SchemaSource", "versions", versions_topic, mode="versions", **{
                "value.converter": AVRO, "value.converter.schema.registry.url": url,
                "errors.retry.timeout": "4000", "errors.retry.delay.max.ms": "1000",
            },
        )  # fmt: skip
        refused = connector_config(
            "SchemaSource", "refused", refused_topic, mode="incompatible", **{
                "value.converter": AVRO,
                "value.converter.schema.registry.url": dev_registry.url,
            },
        )  # fmt: skip
        props = worker_props(bootstrap, unique_name("g"))
        async with running_worker(props, [versions, refused]) as worker:
            await wait_state(worker, "versions", "UNASSIGNED", trace=(
                f"waiting for the schema registry: schema registry {url} cannot be reached"
            ))  # fmt: skip
            proxy.open()  # start-up goes on
            await wait_state(worker, "versions", "RUNNING")
            await records_of(client_config, versions_topic, 3)
            proxy.close()  # a second: retried within errors.retry.timeout
            await anyio.sleep(1)
            proxy.open()
            assert (await task_state(worker, "versions"))[0] == "RUNNING"
            before = len(await read_to_end(client_config, versions_topic))
            await records_of(client_config, versions_topic, before + 6)
            proxy.close()  # for good: the task fails naming the registry
            _, trace = await wait_state(worker, "versions", "FAILED", timeout=20)
            _, refusal = await wait_state(worker, "refused", "FAILED")
        written = await read_to_end(client_config, versions_topic)
        refused_records = await read_to_end(client_config, refused_topic)
    first = trace.splitlines()[0]
    assert f"schema registry {url} cannot be reached" in first, first
    assert "errors.retry.timeout=4000" in first, first
    ids = [read_avro(dev_registry.url, versions_topic, r.value)["id"] for r in written]
    assert ids == list(range(len(ids)))  # each once, in order, across the outages
    assert len({r.value[1:5] for r in written}) == len(ids) // 3  # a schema version a poll
    first = refusal.splitlines()[0]
    assert (f"refused the schema for subject '{refused_topic}-value' (compatibility "
            "BACKWARD), incompatible change") in first, first  # fmt: skip
    assert "\n" not in first
    assert [read_avro(dev_registry.url, refused_topic, r.value) for r in refused_records] == [
        {"id": n} for n in range(6)
    ]  # the two compatible polls; nothing of the refused one
