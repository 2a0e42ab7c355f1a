"""A Kafka Connect deployment's files, started unchanged by ``eos worker`` (issue 36).

The worker file is written the way Connect's and Confluent's documentation write one:
a String key converter and Confluent's Avro value converter at the worker level, through
an authenticating HTTPS gateway in front of the registry (Basic credentials and a client
certificate). Three connector files:

- ``inherits``: names no converter: its values are Avro, its keys strings (the worker's);
- ``overrides``: its own ``value.converter`` (Connect's JsonConverter with schemas) and an
  SMT chain (InsertField, ReplaceField): JSON, the worker's registry settings unused, read
  back by Kafka's own JsonConverter;
- ``headers``: ``key.converter=…LongConverter`` and ``header.converter=…JsonConverter``,
  its task giving keys and header values as Connect values;
- ``protobuf`` and ``jsonschema``: Confluent's Protobuf and JSON Schema converters of
  their own, with the registry settings each needs (nothing mixes in from the worker's).

Read back ``read_committed`` by confluent-kafka (a client eos does not use to verify
itself): the Avro with its ``AvroDeserializer`` through the same gateway, the subjects in
the registry; the keys of ``headers`` compared with what Kafka's own ``LongSerializer``
writes. Then bad input: a worker converter class that does not exist (exit 2, one line
naming ``value.converter``), credentials the registry refuses (the task FAILED, the
settings named, the password nowhere)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer

from services.dev_registry import RegistryState
from tests.conftest import TopicFactory
from tests.connect_java import connect_classpath, run_java
from tests.integration.auth_proxy import PASSWORD, USER, Gateway
from tests.integration.registry_readers import (
    TOPIC_SUBJECTS,
    context,
    protobuf_class,
    protobuf_reader,
    read_json,
)
from tests.integration.worker_harness import REPO, WorkerProcess, worker_props, write_properties

pytestmark = [pytest.mark.system, pytest.mark.integration, pytest.mark.timeout(300)]

RECORDS = 40
AVRO = "io.confluent.connect.avro.AvroConverter"
PROTOBUF = "io.confluent.connect.protobuf.ProtobufConverter"
JSON_SCHEMA = "io.confluent.connect.json.JsonSchemaConverter"


@pytest.fixture(scope="session")
def gateway(registry_gateway: Gateway) -> Gateway:
    """The session's gateway in front of the registry (tests/conftest.py)."""
    return registry_gateway


def registry_settings(converter: str, gateway: Gateway, password: str) -> dict[str, str]:
    """``value.converter`` and its registry settings, as Confluent's documentation writes
    them for a registry behind TLS with Basic credentials."""
    return {
        "value.converter": converter,
        "value.converter.schema.registry.url": gateway.proxy.url(),
        "value.converter.basic.auth.credentials.source": "USER_INFO",
        "value.converter.basic.auth.user.info": f"{USER}:{password}",
        "value.converter.schema.registry.ssl.ca.location": str(gateway.ca.cafile),
        "value.converter.schema.registry.ssl.certificate.location": str(gateway.client.certfile),
        "value.converter.schema.registry.ssl.key.location": str(gateway.client.keyfile),
    }


def connect_worker_file(bootstrap: str, group: str, gateway: Gateway, password: str) -> dict:
    """A worker.properties as Confluent's documentation writes one for Avro values."""
    return {
        **worker_props(bootstrap, group),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        **registry_settings(AVRO, gateway, password),
    }


def verifiable(name: str, topic: str, **settings: str) -> dict[str, str]:
    return {"name": name, "connector.class": "VerifiableSource", "topic": topic,
            "tasks.max": "1", "partitions.per.task": "1",
            "records.per.partition": str(RECORDS), **settings}  # fmt: skip


OVERRIDES = {
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "true",
    "transforms": "origin,rename",
    "transforms.origin.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.origin.static.field": "origin",
    "transforms.origin.static.value": "connect",
    "transforms.rename.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
    "transforms.rename.renames": "seqno:sequence",
}
"""Its own value converter and an SMT chain, as Connect's documentation writes them."""


def overriding(topic: str) -> dict[str, str]:
    return verifiable("overrides", topic, **OVERRIDES)


def typed_headers(topic: str) -> dict[str, str]:
    return {
        "name": "headers",
        "connector.class": "tests.integration.connectors:TypedHeaderSource",
        "topic": topic,
        "count": str(RECORDS),
        "key.converter": "org.apache.kafka.connect.converters.LongConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "header.converter": "org.apache.kafka.connect.json.JsonConverter",
        "header.converter.schemas.enable": "false",
    }


def committed(bootstrap: str, topic: str, count: int, timeout: float = 120) -> list[Message]:
    """``count`` records of ``topic`` as a read_committed confluent-kafka consumer sees them."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
        "isolation.level": "read_committed", "enable.auto.commit": False,
    })  # fmt: skip
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        got: list[Message] = []
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            got += [m for m in consumer.consume(1000, timeout=0.5) if m.error() is None]
        assert len(got) == count, f"{topic}: {len(got)} of {count} records"
        assert not [m for m in consumer.consume(1000, timeout=1.0) if m.error() is None]
        return got
    finally:
        consumer.close()


async def test_a_connect_deployments_files_run_unchanged(
    bootstrap: str,
    dev_registry: RegistryState,
    topic_factory: TopicFactory,
    unique_name: Callable[[str], str],
    gateway: Gateway,
    tmp_path: Path,
) -> None:
    inherits, overrides, headers = (await topic_factory(), await topic_factory(),
                                    await topic_factory())  # fmt: skip
    props = connect_worker_file(bootstrap, unique_name("g"), gateway, PASSWORD)
    protobuf, jsonschema = await topic_factory(), await topic_factory()
    connectors = [
        verifiable("inherits", inherits), overriding(overrides), typed_headers(headers),
        verifiable("protobuf", protobuf, **registry_settings(PROTOBUF, gateway, PASSWORD)),
        verifiable("jsonschema", jsonschema, **registry_settings(JSON_SCHEMA, gateway, PASSWORD)),
    ]  # fmt: skip
    worker = WorkerProcess(tmp_path, props, connectors)
    worker.start()
    try:
        for props in connectors:
            await anyio.to_thread.run_sync(worker.wait_running, props["name"], 1, 120)
        avro, plain, typed, protos, jsons = [
            await anyio.to_thread.run_sync(committed, bootstrap, topic, RECORDS)
            for topic in (inherits, overrides, headers, protobuf, jsonschema)
        ]
        async with httpx.AsyncClient(base_url=worker.rest_url) as http:
            config = (await http.get("/connectors/inherits/config")).json()
    finally:
        worker.stop()
    assert "value.converter" not in config  # as submitted: the worker's is not written in

    with SchemaRegistryClient({
        "url": gateway.proxy.url(), "basic.auth.user.info": f"{USER}:{PASSWORD}",
        "ssl.ca.location": str(gateway.ca.cafile),
        "ssl.certificate.location": str(gateway.reader.certfile),
        "ssl.key.location": str(gateway.reader.keyfile),
    }) as reader:  # fmt: skip
        deserializer = AvroDeserializer(reader, conf=TOPIC_SUBJECTS)
        values = [deserializer(m.value(), context(inherits)) for m in avro]
        subjects = reader.get_subjects()
    assert sorted(v["seqno"] for v in values) == list(range(RECORDS))
    assert {m.key() for m in avro} == {b"0-0"}  # StringConverter: the partition id as text
    assert {f"{inherits}-value", f"{protobuf}-value", f"{jsonschema}-value"} <= set(subjects)
    url = dev_registry.url  # the registry itself, for the readers
    read = protobuf_reader(protobuf_class(url, raw(protos[0].value()), "Record", tmp_path))
    messages = [read(raw(m.value()), context(protobuf)) for m in protos]
    assert sorted(m.seqno for m in messages) == list(range(RECORDS))
    documents = [read_json(url, jsonschema, raw(m.value())) for m in jsons]
    assert sorted(d["seqno"] for d in documents) == list(range(RECORDS))

    envelopes = [raw(m.value()) for m in plain]
    lines = "".join(base64.b64encode(e).decode() + "\n" for e in envelopes)
    pairs = [line.split(" ") for line in run_java(
        connect_classpath(), "ConnectJson.java", lines, "BASE64").splitlines()]  # fmt: skip
    # Kafka's JsonConverter reads each envelope and writes the same bytes again
    assert [base64.b64decode(again) for again, _ in pairs] == envelopes
    objects = [json.loads(base64.b64decode(payload)) for _, payload in pairs]
    assert sorted(o["sequence"] for o in objects) == list(range(RECORDS))
    assert {o["origin"] for o in objects} == {"connect"}
    assert all("seqno" not in o for o in objects)
    assert f"{overrides}-value" not in subjects

    keys = [int.from_bytes(raw(m.key()), "big", signed=True) for m in typed]
    lines = "".join(f"number Long {key}\n" for key in keys)
    kafka_longs = [base64.b64decode(x) for x in run_java(
        connect_classpath(), "ConnectHeaders.java", lines).splitlines()]  # fmt: skip
    assert [m.key() for m in typed] == kafka_longs  # what Kafka's LongSerializer writes
    assert sorted(keys) == list(range(RECORDS))
    for message, n in zip(typed, keys, strict=True):
        assert message.value() == f"v{n}".encode()
        assert message.headers() == [("n", str(n).encode()), ("tags", b'["a","b"]'),
                                     ("raw", b"\x01")]  # fmt: skip


def test_a_worker_converter_that_does_not_exist_is_one_line_and_exit_2(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    props = {**worker_props(bootstrap, unique_name("g")),
             "value.converter": "io.confluent.connect.avro.AvroConvertor"}  # fmt: skip
    path = write_properties(tmp_path / "worker.properties", props)
    done = subprocess.run(
        [sys.executable, "-m", "services.cli", "worker", str(path)],
        capture_output=True, text=True, cwd=REPO, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    assert "value.converter" in line
    assert "io.confluent.connect.avro.AvroConvertor" in line


async def test_credentials_the_registry_refuses_fail_the_task_naming_the_settings(
    bootstrap: str,
    topic_factory: TopicFactory,
    unique_name: Callable[[str], str],
    gateway: Gateway,
    tmp_path: Path,
) -> None:
    wrong = "not-the-Pa55word"
    props = connect_worker_file(bootstrap, unique_name("g"), gateway, wrong)
    worker = WorkerProcess(tmp_path, props, [verifiable("refused", await topic_factory())])
    worker.start()
    try:
        trace = await failed_trace(worker.rest_url, "refused")
        log = worker.tail(400)
    finally:
        worker.stop()
    assert "basic.auth.credentials.source and basic.auth.user.info" in trace, trace
    assert wrong not in trace
    assert wrong not in log


def raw(data: bytes | str | None) -> bytes:
    assert isinstance(data, bytes), data
    return data


async def failed_trace(rest_url: str, name: str, timeout: float = 120) -> str:
    """The trace of ``name``'s task once it is FAILED."""
    async with httpx.AsyncClient(base_url=rest_url) as http:
        with anyio.fail_after(timeout):
            while True:
                try:
                    answer = await http.get(f"/connectors/{name}/status")
                except httpx.TransportError:  # not listening yet
                    await anyio.sleep(0.5)
                    continue
                tasks: list[dict[str, Any]] = answer.json().get("tasks", []) if (
                    answer.is_success) else []  # fmt: skip
                if tasks and tasks[0]["state"] == "FAILED":
                    return str(tasks[0].get("trace", ""))
                await anyio.sleep(0.5)
