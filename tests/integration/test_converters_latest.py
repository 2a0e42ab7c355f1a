"""``use.latest.version`` with each registry format against the real registry (Apicurio's
Confluent-compatible API), read back by confluent-kafka's deserializers: the bytes are
written in the subject's latest schema (a field it adds takes its default), labelled with
its id; under ``latest.compatibility.strict`` (the default) a field that does not fit is
refused by name, and without it left out; ``normalize.schemas`` reaches the registry."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from eos.api import SchemaBuilder, Struct
from eos.api.schema import INT32_SCHEMA, STRING_SCHEMA
from eos.converters import make_converter
from eos.errors import SchemaRegistryError
from services.dev_registry import RegistryState
from tests.conftest import made_converters
from tests.integration.registry_readers import read_avro, read_json, read_protobuf, schema_id

pytestmark = pytest.mark.integration

AVRO = "io.confluent.connect.avro.AvroConverter"
PROTOBUF = "io.confluent.connect.protobuf.ProtobufConverter"
JSON_SCHEMA = "io.confluent.connect.json.JsonSchemaConverter"
RECORD = (
    SchemaBuilder.struct().name("Order").field("id", INT32_SCHEMA).field("name", STRING_SCHEMA)
    .build()
)  # fmt: skip
ROW = Struct(RECORD, {"id": 7, "name": "seven"})
CONTENT = "application/vnd.schemaregistry.v1+json"


def latest_converter(name: str, url: str, **settings: str) -> Any:
    made = make_converter(name, {"schema.registry.url": url, "auto.register.schemas": "false",
                                 "use.latest.version": "true", **settings})  # fmt: skip
    made_converters.append(made)
    return made


def register(url: str, subject: str, kind: str, schema: Any) -> int:
    text = schema if isinstance(schema, str) else json.dumps(schema)
    body = {"schema": text, **({} if kind == "AVRO" else {"schemaType": kind})}
    answer = httpx.post(f"{url}/subjects/{subject}/versions", json=body,
                        headers={"Content-Type": CONTENT})  # fmt: skip
    assert answer.status_code == 200, answer.text
    return int(answer.json()["id"])


def avro_with(*extra: dict[str, Any]) -> dict[str, Any]:
    fields = [{"name": "id", "type": "int"}, {"name": "name", "type": "string"}, *extra]
    return {"type": "record", "name": "Order", "fields": fields}


def json_with(extra: dict[str, Any], required: list[str], closed: bool = False) -> Any:
    properties = {"id": {"type": "integer"}, "name": {"type": "string"}, **extra}
    schema: dict[str, Any] = {"type": "object", "title": "Order", "properties": properties,
                              "required": required}  # fmt: skip
    if closed:
        schema["additionalProperties"] = False
    return schema


def unique() -> str:
    return f"p{uuid.uuid4().hex[:8]}"


def topic() -> str:
    return f"latest-{uuid.uuid4().hex[:8]}"


def test_avro_writes_in_the_latest_schema_with_its_default(dev_registry: RegistryState) -> None:
    t, url = topic(), dev_registry.url
    latest = register(url, f"{t}-value", "AVRO",
                      avro_with({"name": "added", "type": "int", "default": 5}))  # fmt: skip
    data = latest_converter(AVRO, url).from_connect_data(t, RECORD, ROW)
    assert schema_id(data) == latest
    assert read_avro(url, t, data) == {"id": 7, "name": "seven", "added": 5}


def test_json_schema_writes_in_the_latest_schema_with_its_default(
    dev_registry: RegistryState,
) -> None:
    t, url = topic(), dev_registry.url
    latest = register(url, f"{t}-value", "JSON",
                      json_with({"added": {"type": "integer", "default": 5}}, ["id"]))  # fmt: skip
    data = latest_converter(JSON_SCHEMA, url).from_connect_data(t, RECORD, ROW)
    assert schema_id(data) == latest
    assert read_json(url, t, data) == {"id": 7, "name": "seven", "added": 5}


def test_protobuf_writes_in_the_latest_schema_under_its_message_index(
    dev_registry: RegistryState, tmp_path: Path
) -> None:
    t, url = topic(), dev_registry.url
    text = (
        'syntax = "proto3";\n\nmessage Other {\n  string x = 1;\n}\n\n'
        "message Order {\n  int32 id = 1;\n  string name = 2;\n  int32 added = 3;\n}\n"
    )
    latest = register(url, f"{t}-value", "PROTOBUF", text)
    data = latest_converter(PROTOBUF, url).from_connect_data(t, RECORD, ROW)
    assert schema_id(data) == latest
    assert data[5:7] == b"\x02\x02"  # message indexes [1]: Order is the second message
    message = read_protobuf(url, t, data, "Order", tmp_path)
    assert (message.id, message.name, message.added) == (7, "seven", 0)


def test_protobuf_refuses_a_latest_that_numbers_a_field_otherwise(
    dev_registry: RegistryState,
) -> None:
    t, url = topic(), dev_registry.url
    register(
        url,
        f"{t}-value",
        "PROTOBUF",
        'syntax = "proto3";\nmessage Order {\n  string name = 1;\n  int32 id = 2;\n}\n',
    )
    with pytest.raises(SchemaRegistryError, match="gives field 'id' another number or type"):
        latest_converter(PROTOBUF, url).from_connect_data(t, RECORD, ROW)


@pytest.mark.parametrize(
    ("name", "kind", "schema"),
    [
        (AVRO, "AVRO", avro_with({"name": "code", "type": "string"})),
        (JSON_SCHEMA, "JSON", json_with({"code": {"type": "string"}}, ["id", "code"])),
    ],
)
def test_strict_refuses_a_latest_field_without_default_that_the_record_lacks(
    dev_registry: RegistryState, name: str, kind: str, schema: Any
) -> None:
    t, url = topic(), dev_registry.url
    register(url, f"{t}-value", kind, schema)
    with pytest.raises(SchemaRegistryError, match=r"has field 'code' without a default.*strict"):
        latest_converter(name, url).from_connect_data(t, RECORD, ROW)


@pytest.mark.parametrize(
    ("name", "kind", "schema"),
    [
        (AVRO, "AVRO", {"type": "record", "name": "Order",
                        "fields": [{"name": "id", "type": "int"}]}),
        (JSON_SCHEMA, "JSON", {"type": "object", "title": "Order",
                               "properties": {"id": {"type": "integer"}},
                               "additionalProperties": False}),
        (PROTOBUF, "PROTOBUF", "message Order {\n  int32 id = 1;\n}\n"),
    ],
)  # fmt: skip
def test_a_record_field_the_latest_lacks_is_refused_when_strict_left_out_when_not(
    dev_registry: RegistryState, tmp_path: Path, name: str, kind: str, schema: Any
) -> None:
    t, url = topic(), dev_registry.url
    if kind == "PROTOBUF":  # a package of its own: protoc's classes share one pool
        schema = f'syntax = "proto3";\npackage {unique()};\n{schema}'
    register(url, f"{t}-value", kind, schema)
    with pytest.raises(SchemaRegistryError, match="has no field 'name', which the record has"):
        latest_converter(name, url).from_connect_data(t, RECORD, ROW)
    loose = latest_converter(name, url, **{"latest.compatibility.strict": "false"})
    data = loose.from_connect_data(t, RECORD, ROW)
    if kind == "AVRO":
        assert read_avro(url, t, data) == {"id": 7}
    elif kind == "JSON":
        assert read_json(url, t, data) == {"id": 7}
    else:
        message = read_protobuf(url, t, data, "Order", tmp_path)
        assert message.id == 7
        assert data[6:] == b"\x08\x07"  # field 1 only: the name is not in the bytes


def test_normalize_schemas_is_sent_to_the_registry(dev_registry: RegistryState) -> None:
    t, url = topic(), dev_registry.url
    normalized: Any = make_converter(
        AVRO, {"schema.registry.url": url, "normalize.schemas": "true"}
    )
    made_converters.append(normalized)
    sent: list[str] = []
    normalized.client.http.event_hooks["request"].append(lambda r: sent.append(str(r.url)))
    data = normalized.from_connect_data(t, RECORD, ROW)
    assert read_avro(url, t, data) == {"id": 7, "name": "seven"}
    assert sent == [f"{url}/subjects/{t}-value/versions?normalize=true"]
