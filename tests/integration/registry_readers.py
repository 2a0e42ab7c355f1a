"""Readers eos does not own, for the converter tests: confluent-kafka's deserializers
through its ``SchemaRegistryClient``, and for Protobuf ``protoc`` compiling the ``.proto``
text the registry holds (Apicurio answers ``?format=serialized`` with raw bytes where
confluent-kafka expects base64, so its Protobuf deserializer is given the compiled class).
"""

from __future__ import annotations

import functools
import importlib
import sys
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import google.protobuf  # type: ignore[import-untyped]
import grpc_tools
import httpx
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from grpc_tools import protoc


def context(topic: str, key: bool = False) -> SerializationContext:
    return SerializationContext(topic, MessageField.KEY if key else MessageField.VALUE)


def schema_id(data: bytes) -> int:
    assert data[0] == 0, "magic byte"
    return int.from_bytes(data[1:5], "big")


TOPIC_SUBJECTS = {"subject.name.strategy.type": "TOPIC"}
"""Deserializers find the subject by topic name, as eos's converters register it. Their
default asks Confluent's associations API first, which Apicurio answers 404; after such an
answer the kept-alive connection stops answering (the next request waits for ever)."""


@functools.cache
def client(url: str) -> SchemaRegistryClient:
    """One client per registry (each keeps its connections open: a client per read would
    exhaust the registry's after a few hundred)."""
    return SchemaRegistryClient({"url": url})


@functools.cache
def _avro(url: str) -> Any:
    return AvroDeserializer(client(url), conf=TOPIC_SUBJECTS)


@functools.cache
def _json(url: str) -> Any:
    return JSONDeserializer(None, schema_registry_client=client(url), conf=TOPIC_SUBJECTS)


def read_avro(url: str, topic: str, data: bytes, key: bool = False) -> Any:
    return _avro(url)(data, context(topic, key))


def read_json(url: str, topic: str, data: bytes) -> Any:
    return _json(url)(data, context(topic))


def protobuf_class(url: str, data: bytes, message: str, workdir: Path) -> Any:
    """The message class ``protoc`` makes of the schema ``data`` was written with."""
    workdir.mkdir(parents=True, exist_ok=True)
    answer = httpx.get(f"{url}/schemas/ids/{schema_id(data)}").json()
    module = f"m{uuid.uuid4().hex}"
    files = [workdir / f"{module}.proto"]
    files[0].write_text(answer["schema"])
    for ref in answer.get("references") or []:
        subject = quote(ref["subject"], safe="")
        text = httpx.get(f"{url}/subjects/{subject}/versions/{ref['version']}").json()["schema"]
        path = workdir / ref["name"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        files.append(path)
    includes = [
        workdir,
        Path(grpc_tools.__file__).parent / "_proto",  # google/protobuf/*.proto
        Path(google.protobuf.__file__).parents[2],  # google/type/*.proto (googleapis)
    ]
    args = ["protoc", *(f"-I{i}" for i in includes), f"--python_out={workdir}"]
    assert protoc.main([*args, *map(str, files)]) == 0, answer["schema"]
    sys.path.insert(0, str(workdir))
    try:
        compiled = importlib.import_module(f"{module}_pb2")
    finally:
        sys.path.remove(str(workdir))
    return getattr(compiled, message)


def read_protobuf(url: str, topic: str, data: bytes, message: str, workdir: Path) -> Any:
    cls = protobuf_class(url, data, message, workdir)
    return protobuf_reader(cls)(data, context(topic))


def protobuf_reader(cls: Any) -> Any:
    """confluent-kafka's ProtobufDeserializer of messages of ``cls``."""
    return ProtobufDeserializer(cls, {"use.deprecated.format": False, **TOPIC_SUBJECTS})
