"""The registry converters against a real schema registry (Apicurio, started once per
session), each one's bytes read back by a reader eos does not own (registry_readers):
every type of the schema model, schema evolution, subject strategies, the registry's
refusals, a registry that is down, TLS."""

from __future__ import annotations

import datetime
import decimal
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from eos.api import Date, Decimal, Schema, SchemaBuilder, Struct, Time, Timestamp
from eos.api.schema import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
)
from eos.converters import make_converter
from eos.errors import ConfigError, SchemaRegistryError, SchemaRegistryUnavailable
from services.dev_kafka import free_ports
from services.dev_registry import RegistryState
from tests.conftest import made_converters
from tests.integration.registry_readers import read_avro, read_json, read_protobuf, schema_id

pytestmark = pytest.mark.integration

AVRO = "io.confluent.connect.avro.AvroConverter"
PROTOBUF = "io.confluent.connect.protobuf.ProtobufConverter"
JSON_SCHEMA = "io.confluent.connect.json.JsonSchemaConverter"
UTC = datetime.UTC

INNER = (
    SchemaBuilder.struct().name("com.example.Inner")
    .field("a", INT32_SCHEMA).field("o", OPTIONAL_STRING_SCHEMA).build()
)  # fmt: skip
ALL = (
    SchemaBuilder.struct().name("com.example.AllTypes").version(1).doc("every type")
    .field("i8", INT8_SCHEMA).field("i16", INT16_SCHEMA).field("i32", INT32_SCHEMA)
    .field("i64", INT64_SCHEMA).field("f32", FLOAT32_SCHEMA).field("f64", FLOAT64_SCHEMA)
    .field("b", BOOLEAN_SCHEMA).field("s", STRING_SCHEMA).field("by", BYTES_SCHEMA)
    .field("arr", SchemaBuilder.array(STRING_SCHEMA).build())
    .field("m", SchemaBuilder.map(STRING_SCHEMA, INT32_SCHEMA).build())
    .field("mi", SchemaBuilder.map(INT64_SCHEMA, STRING_SCHEMA).build())
    .field("st", INNER)
    .field("dec", Decimal.schema(2)).field("d", Date.SCHEMA).field("t", Time.SCHEMA)
    .field("ts", Timestamp.SCHEMA)
    .field("opt", OPTIONAL_INT32_SCHEMA).field("opt_s", OPTIONAL_STRING_SCHEMA)
    .build()
)  # fmt: skip
VALUES: dict[str, Any] = {
    "i8": -128, "i16": 32767, "i32": -(2**31), "i64": 2**63 - 1, "f32": 1.5, "f64": -2.25e300,
    "b": True, "s": "héllo ✓", "by": b"\x00\xff", "arr": ["x", "y"], "m": {"a": 1, "b": -2},
    "mi": {7: "seven"}, "st": Struct(INNER, {"a": 5, "o": "inner"}),
    "dec": decimal.Decimal("-12345.67"), "d": datetime.date(2024, 2, 29),
    "t": datetime.time(23, 59, 58, 999000),
    "ts": datetime.datetime(2024, 2, 29, 12, 1, 2, 345000, UTC),
    "opt": None, "opt_s": "set",
}  # fmt: skip
ROW = Struct(ALL, VALUES)


def topic() -> str:
    return f"formats-{uuid.uuid4().hex[:8]}"


def converter(
    name: str, url: str, settings: Mapping[str, str] | None = None, *, key: bool = False
) -> Any:
    made = make_converter(name, {"schema.registry.url": url, **(settings or {})}, key)
    made_converters.append(made)
    return made


def test_avro_every_type_reads_back_with_confluents_deserializer(
    dev_registry: RegistryState,
) -> None:
    t = topic()
    data = converter(AVRO, dev_registry.url).from_connect_data(t, ALL, ROW)
    assert read_avro(dev_registry.url, t, data) == {
        **VALUES, "st": {"a": 5, "o": "inner"}, "mi": [{"key": 7, "value": "seven"}],
    }  # fmt: skip
    key = converter(AVRO, dev_registry.url, key=True).from_connect_data(t, INT64_SCHEMA, 42)
    assert read_avro(dev_registry.url, t, key, key=True) == 42
    subjects = httpx.get(f"{dev_registry.url}/subjects").json()
    assert {f"{t}-value", f"{t}-key"} <= set(subjects)


def test_json_schema_every_type_reads_back_with_confluents_deserializer(
    dev_registry: RegistryState,
) -> None:
    t = topic()
    data = converter(JSON_SCHEMA, dev_registry.url).from_connect_data(t, ALL, ROW)
    assert read_json(dev_registry.url, t, data) == {
        **VALUES, "by": "AP8=", "st": {"a": 5, "o": "inner"},
        "mi": [{"key": 7, "value": "seven"}], "dec": "7Sl5", "d": 19782, "t": 86398999,
        "ts": 1709208062345,
    }  # fmt: skip


def test_protobuf_every_type_reads_back_with_protoc_and_confluents_deserializer(
    dev_registry: RegistryState, tmp_path: Path
) -> None:
    t = topic()
    proto = converter(PROTOBUF, dev_registry.url, {"optional.for.nullables": "true"})
    data = proto.from_connect_data(t, ALL, ROW)
    assert data[5] == 0, "message index [0]"
    msg = read_protobuf(dev_registry.url, t, data, "AllTypes", tmp_path)
    plain = {f: getattr(msg, f) for f in ("i8", "i16", "i32", "i64", "f32", "f64", "b", "s", "by")}
    assert plain == {k: VALUES[k] for k in plain}
    assert (list(msg.arr), dict(msg.m), dict(msg.mi)) == (
        ["x", "y"],
        {"a": 1, "b": -2},
        {7: "seven"},
    )
    assert (msg.st.a, msg.st.o) == (5, "inner")
    unscaled = int.from_bytes(msg.dec.value, "big", signed=True)
    assert decimal.Decimal(unscaled).scaleb(-msg.dec.scale) == VALUES["dec"]
    assert (msg.d.year, msg.d.month, msg.d.day) == (2024, 2, 29)
    assert (msg.t.hours, msg.t.minutes, msg.t.seconds, msg.t.nanos) == (23, 59, 58, 999_000_000)
    assert msg.ts.ToDatetime(tzinfo=UTC) == VALUES["ts"]
    assert not msg.HasField("opt")
    assert msg.opt_s == "set"


def avro_v(version: int, *fields: tuple[str, Schema]) -> Schema:
    builder = SchemaBuilder.struct().name("com.example.Evolving").field("id", INT64_SCHEMA)
    for name, schema in fields:
        builder.field(name, schema)
    return builder.build()


def test_an_added_optional_field_is_a_new_version_and_both_decode(
    dev_registry: RegistryState,
) -> None:
    t, url = topic(), dev_registry.url
    v1, v2 = avro_v(1), avro_v(2, ("note", OPTIONAL_STRING_SCHEMA))
    avro = converter(AVRO, url)
    old = avro.from_connect_data(t, v1, Struct(v1, {"id": 1}))
    new = avro.from_connect_data(t, v2, Struct(v2, {"id": 2, "note": "added"}))
    assert schema_id(old) != schema_id(new)
    versions = httpx.get(f"{url}/subjects/{t}-value/versions").json()
    assert len(versions) == 2
    assert [read_avro(url, t, old), read_avro(url, t, new)] == [
        {"id": 1}, {"id": 2, "note": "added"}
    ]  # fmt: skip


def test_an_incompatible_schema_is_refused_in_one_line(dev_registry: RegistryState) -> None:
    t, url = topic(), dev_registry.url
    v1, changed = avro_v(1), avro_v(2, ("required", STRING_SCHEMA))
    avro = converter(AVRO, url)
    avro.from_connect_data(t, v1, Struct(v1, {"id": 1}))
    with pytest.raises(SchemaRegistryError) as refused:
        avro.from_connect_data(t, changed, Struct(changed, {"id": 2, "required": "x"}))
    message = str(refused.value)
    assert "\n" not in message
    assert f"subject '{t}-value'" in message
    assert "compatibility BACKWARD" in message
    assert "required" in message, message  # the change: a field without default


@pytest.mark.parametrize(
    ("strategy", "subject"),
    [
        ("io.confluent.kafka.serializers.subject.RecordNameStrategy", "com.example.Evolving"),
        ("TopicRecordNameStrategy", "{topic}-com.example.Evolving"),
    ],
)
def test_subject_name_strategies(dev_registry: RegistryState, strategy: str, subject: str) -> None:
    t, url = topic(), dev_registry.url
    v1 = avro_v(1)
    avro = converter(AVRO, url, {"value.subject.name.strategy": strategy})
    avro.from_connect_data(t, v1, Struct(v1, {"id": 1}))
    assert subject.format(topic=t) in httpx.get(f"{url}/subjects").json()


def test_without_auto_register_a_missing_schema_is_named_and_latest_is_used(
    dev_registry: RegistryState,
) -> None:
    t, url = topic(), dev_registry.url
    v1 = avro_v(1)
    strict = converter(AVRO, url, {"auto.register.schemas": "false"})
    with pytest.raises(SchemaRegistryError, match="not registered under subject"):
        strict.from_connect_data(t, v1, Struct(v1, {"id": 1}))
    first = converter(AVRO, url).from_connect_data(t, v1, Struct(v1, {"id": 1}))
    assert strict.from_connect_data(t, v1, Struct(v1, {"id": 3}))[:5] == first[:5]
    latest = converter(AVRO, url, {"auto.register.schemas": "false", "use.latest.version": "true"})
    assert read_avro(url, t, latest.from_connect_data(t, v1, Struct(v1, {"id": 4}))) == {"id": 4}


def test_a_registry_that_is_down_is_named_with_its_url() -> None:
    port = free_ports(1)[0]
    url = f"http://user:secret@127.0.0.1:{port}/apis/ccompat/v7"
    avro = converter(AVRO, url, {"schema.registry.request.timeout.ms": "2000"})
    with pytest.raises(SchemaRegistryUnavailable) as down:
        avro.from_connect_data("t", INT64_SCHEMA, 1)
    assert f"http://127.0.0.1:{port}/apis/ccompat/v7 cannot be reached" in str(down.value)
    assert "secret" not in str(down.value)
    assert down.value.retriable


def test_tls_to_the_registry(dev_registry: RegistryState) -> None:
    assert dev_registry.https_url is not None
    cert = Path(dev_registry.data_dir).parent / "tls" / "cert.pem"
    t = topic()
    trusted = converter(
        AVRO, dev_registry.https_url, {"schema.registry.ssl.ca.location": str(cert)}
    )
    data = trusted.from_connect_data(t, STRING_SCHEMA, "over TLS")
    assert read_avro(dev_registry.url, t, data) == "over TLS"
    untrusted = converter(AVRO, dev_registry.https_url)
    with pytest.raises(SchemaRegistryError, match=r"CERTIFICATE_VERIFY_FAILED.*ssl\.ca\.location"):
        untrusted.from_connect_data(topic(), STRING_SCHEMA, "refused")
    with pytest.raises(ConfigError, match="PEM"):
        converter(AVRO, dev_registry.https_url,
                  {"schema.registry.ssl.truststore.location": str(cert)})  # fmt: skip


def test_schema_ids_are_cached(dev_registry: RegistryState) -> None:
    t = topic()
    avro = converter(AVRO, dev_registry.url)
    first = avro.from_connect_data(t, STRING_SCHEMA, "a")
    client = avro.client
    client.urls = ["http://127.0.0.1:1"]  # any request now would fail
    assert avro.from_connect_data(t, STRING_SCHEMA, "a") == first


BLOCK = (
    SchemaBuilder.struct().name("com.example.Block").field("id", INT64_SCHEMA)
    .field("s", STRING_SCHEMA).field("ok", BOOLEAN_SCHEMA).build()
)  # fmt: skip
RICH = (
    SchemaBuilder.struct().name("com.example.Rich").field("id", OPTIONAL_INT32_SCHEMA)
    .field("m", SchemaBuilder.map(STRING_SCHEMA, OPTIONAL_INT32_SCHEMA).build())
    .field("tags", SchemaBuilder.array(OPTIONAL_STRING_SCHEMA).build())
    .field("st", INNER).field("dec", Decimal.schema(2)).field("ts", Timestamp.SCHEMA)
    .build()
)  # fmt: skip


def test_a_blocks_arrow_column_is_written_in_its_rows_bytes(
    dev_registry: RegistryState, tmp_path: Path
) -> None:
    import pyarrow as pa

    from eos.api.schema import column_values

    flat = pa.array(
        [{"id": -1, "s": "é", "ok": True}, {"id": 0, "s": "", "ok": False}, None],
        pa.struct([("id", pa.int64()), ("s", pa.string()), ("ok", pa.bool_())]),
    )
    for name in (AVRO, PROTOBUF, JSON_SCHEMA):
        t, made = topic(), converter(name, dev_registry.url)
        rows = [made.from_connect_data(t, BLOCK, v) for v in column_values(BLOCK, flat)]
        assert made.from_connect_block(t, BLOCK, flat) == rows, name
    rich = pa.array(
        [{"id": 0, "m": [("b", 2), ("a", None), ("c", 0)], "tags": ["x", None],
          "st": {"a": 5, "o": None}, "dec": decimal.Decimal("-1.05"),
          "ts": datetime.datetime(2024, 2, 29, 12, 1, 2, 345678, UTC)}],
        pa.struct([("id", pa.int32()), ("m", pa.map_(pa.string(), pa.int32())),
                   ("tags", pa.list_(pa.string())),
                   ("st", pa.struct([("a", pa.int32()), ("o", pa.string())])),
                   ("dec", pa.decimal128(10, 2)), ("ts", pa.timestamp("us", "UTC"))]),
    )  # fmt: skip
    t = topic()
    proto = converter(PROTOBUF, dev_registry.url, {"optional.for.nullables": "true"})
    block = proto.from_connect_block(t, RICH, rich)
    assert block == [proto.from_connect_data(t, RICH, v) for v in column_values(RICH, rich)]
    msg = read_protobuf(dev_registry.url, t, block[0], "Rich", tmp_path)
    assert (msg.HasField("id"), dict(msg.m), list(msg.tags)) == (True, {"b": 2, "c": 0}, ["x"])
    assert (msg.st.a, msg.st.HasField("o"), msg.dec.scale) == (5, False, 2)
    assert msg.ts.ToDatetime(tzinfo=UTC) == datetime.datetime(2024, 2, 29, 12, 1, 2, 345000, UTC)


@pytest.mark.parametrize("api", ["/apis/registry/v3", "/apis/registry/v2", ""])
def test_a_url_that_is_not_the_confluent_compatible_api_is_named_so(
    dev_registry: RegistryState, api: str
) -> None:
    """Apicurio's own API (or its root) where a user might point schema.registry.url."""
    url = dev_registry.url.replace("/apis/ccompat/v7", api)
    with pytest.raises(SchemaRegistryError) as wrong:
        converter(AVRO, url).from_connect_data(topic(), STRING_SCHEMA, "x")
    assert "has no Confluent-compatible API at this URL" in str(wrong.value)
    assert "/apis/ccompat/v7" in str(wrong.value)
