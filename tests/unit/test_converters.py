"""Converters without I/O: names and settings, Connect's JSON details, the wire format,
subject names, the Avro schema mapping, and whole Arrow columns against fastavro."""

from __future__ import annotations

import datetime
import decimal
import io
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from eos.api import Date, Decimal, RecordBlock, SchemaBuilder, Struct, Timestamp
from eos.api.schema import (
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_FLOAT64_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    column_values,
)
from eos.columns.arrow_bytes import varints
from eos.config.connector import ConnectorConfig
from eos.config.worker import WorkerConfig
from eos.converters import encode_block, make_converter
from eos.converters.avro import avro_schema, to_avro
from eos.converters.avro_arrow import encode_column
from eos.converters.json import JsonConverter
from eos.converters.json_values import java_double, java_float
from eos.converters.schema_registry import RegistryClient
from eos.converters.simple import BytesConverter, StringConverter
from eos.converters.wire_format import subject_strategy, wire_header, zigzag_varint
from eos.errors import ConfigError, DataError, PluginError

ROW = SchemaBuilder.struct().name("Row").field("id", INT64_SCHEMA).field(
    "note", OPTIONAL_STRING_SCHEMA).build()  # fmt: skip


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("json", "JsonConverter"), ("JSON", "JsonConverter"), ("string", "StringConverter"),
        ("bytes", "BytesConverter"),
        ("org.apache.kafka.connect.json.JsonConverter", "ConnectJsonConverter"),
        ("org.apache.kafka.connect.storage.StringConverter", "StringConverter"),
        ("org.apache.kafka.connect.converters.ByteArrayConverter", "BytesConverter"),
        ("eos.converters:JsonConverter", "JsonConverter"),
    ],
)  # fmt: skip
def test_converter_names_short_connects_and_class_paths(name: str, cls: str) -> None:
    assert type(make_converter(name)).__name__ == cls


def test_an_unknown_converter_class_is_named() -> None:
    with pytest.raises(PluginError, match=r"unknown converter 'io.acme.XmlConverter'"):
        make_converter("io.acme.XmlConverter")


def test_connector_settings_reach_the_converter_without_their_prefix() -> None:
    worker = WorkerConfig.from_properties({
        "bootstrap.servers": "b:9092", "group.id": "g", "config.storage.topic": "c",
        "offset.storage.topic": "o", "status.storage.topic": "s",
    })  # fmt: skip
    config = ConnectorConfig.from_properties(
        {"name": "c", "connector.class": "X", "value.converter": "json",
         "value.converter.schemas.enable": "true", "key.converter.schemas.enable": "false"},
        worker,
    )  # fmt: skip
    assert config.value_converter == "json"
    assert (config.value_converter.props, config.value_converter.is_key) == (
        {"schemas.enable": "true"}, False)  # fmt: skip
    converter = make_converter(config.value_converter)
    assert isinstance(converter, JsonConverter)
    assert converter.schemas_enable


def test_a_bad_converter_setting_is_named() -> None:
    with pytest.raises(ConfigError, match=r"'schemas.enable'"):
        make_converter("json", {"schemas.enable": "yes"})
    with pytest.raises(ConfigError, match=r"'decimal.format'"):
        make_converter("json", {"decimal.format": "HEX"})
    with pytest.raises(ConfigError, match=r"schema.registry.url"):
        make_converter("io.confluent.connect.avro.AvroConverter", {})


def test_json_without_a_schema_is_what_eos_always_wrote() -> None:
    json = make_converter("json")
    value = {"a": 1, "b": b"\x00", "d": decimal.Decimal("1.10"), "t": (1, 2), 3: "int key",
             "dt": datetime.datetime(2024, 1, 2, 3, 4, 5, 6)}  # fmt: skip
    assert json.convert("t", value) == (
        b'{"a":1,"b":"AA==","d":"1.10","t":[1,2],"3":"int key","dt":"2024-01-02T03:04:05.000006"}'
    )
    assert json.convert("t", 2**70) == b"1180591620717411303424"
    assert json.convert("t", None) is None


def test_json_envelopes_and_connect_numbers() -> None:
    enabled = make_converter("org.apache.kafka.connect.json.JsonConverter")
    assert enabled.convert("t", Struct(ROW, {"id": 1})) == (
        b'{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"},'
        b'{"type":"string","optional":true,"field":"note"}],"optional":false,"name":"Row"},'
        b'"payload":{"id":1,"note":null}}'
    )
    assert enabled.convert("t", [1]) == b'{"schema":null,"payload":[1]}'
    assert enabled.from_connect_data("t", None, None) is None  # type: ignore[attr-defined]
    floats = make_converter("json")
    doubles = [float("nan"), float("inf"), -0.0, 1e7, 0.001, 1e-4]
    schema = SchemaBuilder.array(FLOAT64_SCHEMA).build()
    assert floats.from_connect_data("t", schema, doubles) == (  # type: ignore[attr-defined]
        b'["NaN","Infinity",-0.0,1.0E7,0.001,1.0E-4]'
    )
    assert [java_float(0.1), java_double(0.1), java_float(16777217.0)] == [
        "0.1",
        "0.1",
        "1.6777216E7",
    ]


def test_json_refuses_a_null_for_a_required_field_and_uses_defaults() -> None:
    json = make_converter("json")
    with pytest.raises(DataError, match="null value for field that is required"):
        json.from_connect_data("t", INT64_SCHEMA, None)  # type: ignore[attr-defined]
    defaulted = SchemaBuilder.int64().optional().default(5).build()
    assert json.from_connect_data("t", defaulted, None) == b"5"  # type: ignore[attr-defined]
    kept = make_converter("json", {"replace.null.with.default": "false"})
    assert kept.from_connect_data("t", defaulted, None) == b"null"  # type: ignore[attr-defined]


def test_string_and_bytes() -> None:
    assert StringConverter().convert("t", 12) == b"12"
    assert (
        make_converter("string", {"converter.encoding": "UTF-16-LE"}).convert("t", "a") == b"a\x00"
    )
    assert BytesConverter().convert("t", bytearray(b"x")) == b"x"
    with pytest.raises(DataError, match="needs bytes"):
        BytesConverter().convert("t", "x")


def test_the_wire_header_and_varints() -> None:
    assert wire_header(258) == b"\x00\x00\x00\x01\x02"
    assert wire_header(1, [0]) == b"\x00\x00\x00\x00\x01\x00"
    assert wire_header(1, [1, 2]) == b"\x00\x00\x00\x00\x01\x04\x02\x04"
    numbers = [0, -1, 1, 63, -64, 64, 2**31, -(2**63), 2**63 - 1]
    assert [zigzag_varint(n) for n in numbers] == varints(pa.array(numbers).to_numpy()).to_pylist()


@pytest.mark.parametrize(
    ("strategy", "subject"),
    [
        ({}, "orders-value"),
        ({"value.subject.name.strategy": "RecordNameStrategy"}, "com.x.Order"),
        ({"value.subject.name.strategy":
          "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"}, "orders-com.x.Order"),
    ],
)  # fmt: skip
def test_subject_names(strategy: dict[str, str], subject: str) -> None:
    assert subject_strategy(strategy, False)("orders", False, "com.x.Order") == subject
    assert subject_strategy({}, True)("orders", True, None) == "orders-key"
    with pytest.raises(ConfigError, match=r"value.subject.name.strategy"):
        subject_strategy({"value.subject.name.strategy": "Mine"}, False)


def test_registry_credentials_and_tls_settings() -> None:
    url = {"schema.registry.url": "https://a:8081,https://b:8081"}
    client = RegistryClient.from_settings(
        {**url, "basic.auth.credentials.source": "USER_INFO", "basic.auth.user.info": "u:p:w"}
    )
    assert (client.urls, client.auth) == (["https://a:8081", "https://b:8081"], ("u", "p:w"))
    in_url = RegistryClient.from_settings(
        {"schema.registry.url": "http://me:pw@r:8081", "basic.auth.credentials.source": "URL"}
    )
    assert in_url.auth == ("me", "pw")
    with pytest.raises(ConfigError, match=r"basic.auth.user.info") as bad:
        RegistryClient.from_settings({**url, "basic.auth.user.info": "no-colon-secret"})
    assert "no-colon-secret" not in str(bad.value)
    with pytest.raises(ConfigError, match="must be an http"):
        RegistryClient.from_settings({"schema.registry.url": "ftp://r"})


def test_the_avro_schema_is_avrodatas() -> None:
    inner = SchemaBuilder.struct().field("x", INT8_SCHEMA).build()
    schema = (
        SchemaBuilder.struct().name("com.x.Row").field("n", INT8_SCHEMA)
        .field("o", OPTIONAL_STRING_SCHEMA).field("dec", Decimal.schema(2))
        .field("m", SchemaBuilder.map(INT32_SCHEMA, STRING_SCHEMA).build())
        .field("a", inner).field("b", inner).build()
    )  # fmt: skip
    avro = avro_schema(schema)
    assert (avro["name"], avro["namespace"], avro["connect.name"]) == ("Row", "com.x", "com.x.Row")
    fields = {f["name"]: f for f in avro["fields"]}
    assert fields["n"]["type"] == {"type": "int", "connect.type": "int8"}
    assert fields["o"] == {"name": "o", "type": ["null", "string"], "default": None}
    assert fields["dec"]["type"]["logicalType"] == "decimal"
    assert (fields["dec"]["type"]["precision"], fields["dec"]["type"]["scale"]) == (64, 2)
    assert fields["m"]["type"]["items"]["name"] == "MapEntry"
    assert fields["a"]["type"]["name"] == "ConnectDefault"
    assert fields["b"]["type"] == "io.confluent.connect.avro.ConnectDefault"  # defined once


def _decode(schema: Any, data: bytes) -> Any:
    return fastavro.schemaless_reader(io.BytesIO(data), fastavro.parse_schema(schema), None)


def test_an_arrow_column_encodes_as_fastavro_decodes() -> None:
    schema = (
        SchemaBuilder.struct().name("R").field("id", INT64_SCHEMA)
        .field("x", OPTIONAL_FLOAT64_SCHEMA).field("f", FLOAT32_SCHEMA)
        .field("s", OPTIONAL_STRING_SCHEMA).field("dec", Decimal.builder(2).optional().build())
        .field("d", Date.SCHEMA).field("ts", Timestamp.builder().optional().build())
        .field("tags", SchemaBuilder.array(OPTIONAL_STRING_SCHEMA).optional().build())
        .field("m", SchemaBuilder.map(STRING_SCHEMA, OPTIONAL_INT64_SCHEMA).build())
        .field("dflt", SchemaBuilder.int64().default(9).build())
        .build()
    )  # fmt: skip
    rows = [
        {"id": 1, "x": 0.5, "f": 1.5, "s": "é", "dec": decimal.Decimal("-1.28"),
         "d": datetime.date(2024, 2, 29), "ts": datetime.datetime(1969, 12, 31, 23, 59, 59, 999500,
         datetime.UTC), "tags": ["a", None], "m": [("k", 1), ("n", None)], "dflt": None},
        {"id": -(2**63), "x": None, "f": -0.0, "s": None, "dec": None,
         "d": datetime.date(1, 1, 1), "ts": None, "tags": None, "m": [], "dflt": 3},
        {"id": 2**63 - 1, "x": 1e300, "f": 3.0, "s": "", "dec": decimal.Decimal("99999999.99"),
         "d": datetime.date(9999, 12, 31), "ts": datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),
         "tags": [], "m": [("z", -5)], "dflt": 1},
    ]  # fmt: skip
    arrow = pa.array([*rows, None], pa.struct([
        ("id", pa.int64()), ("x", pa.float64()), ("f", pa.float32()), ("s", pa.string()),
        ("dec", pa.decimal128(10, 2)), ("d", pa.date32()), ("ts", pa.timestamp("us", "UTC")),
        ("tags", pa.list_(pa.string())), ("m", pa.map_(pa.string(), pa.int64())),
        ("dflt", pa.int64()),
    ]))  # fmt: skip
    encoded = encode_column(arrow.slice(0), schema, b"\x00\x00\x00\x00\x07")
    assert encoded[3] is None
    avro, convert = avro_schema(schema), to_avro(schema)
    for data, value in zip(encoded[:3], column_values(schema, arrow), strict=False):
        assert data is not None
        assert data[:5] == b"\x00\x00\x00\x00\x07"
        out = io.BytesIO()
        fastavro.schemaless_writer(out, fastavro.parse_schema(avro), convert(value))
        assert _decode(avro, data[5:]) == _decode(avro, out.getvalue())


def test_a_required_null_in_an_arrow_column_is_refused() -> None:
    schema = SchemaBuilder.struct().field("id", INT64_SCHEMA).build()
    with pytest.raises(DataError, match="null value for a required field of type INT64"):
        encode_column(pa.array([{"id": None}], pa.struct([("id", pa.int64())])), schema, b"")


def test_an_unencoded_block_is_encoded_by_the_converters() -> None:
    block = RecordBlock({"p": 0}, {"o": 1}, "t", [{"id": 1, "note": None}], keys=["k"],
                        key_schema=STRING_SCHEMA, value_schema=ROW, encoded=False)  # fmt: skip
    json = make_converter("json")
    encoded = encode_block(block, make_converter("string"), json)
    assert (encoded.encoded, list(encoded.values), list(encoded.keys or [])) == (
        True, [b'{"id":1,"note":null}'], [b"k"])  # fmt: skip
    assert encode_block(encoded, json, json) is encoded
    assert FLOAT32_SCHEMA.type.value == "float32"


def test_sources_declare_schemas_their_values_fit() -> None:
    from services.connectors.verifiable import PADDED_SCHEMA, VALUE_SCHEMA, record_value

    json = make_converter("json")
    for size, schema in ((0, VALUE_SCHEMA), (120, PADDED_SCHEMA)):
        value = record_value("p-1", 41, 0, size)
        assert json.from_connect_data("t", schema, value) == json.convert("t", value)  # type: ignore[attr-defined]


@pytest.mark.parametrize("props", [{}, {"schemas.enable": "true"}])
def test_a_json_string_column_is_each_rows_bytes(props: dict[str, str]) -> None:
    texts = ["plain", "", 'q " \\ /', "ctrl \x00\x01\x1f\x7f", "é", "😀 astral", "tab\t\n"]
    json = make_converter("json", props)
    rows = [json.from_connect_data("t", STRING_SCHEMA, t) for t in texts]  # type: ignore[attr-defined]
    assert json.from_connect_block("t", STRING_SCHEMA, texts) == rows  # type: ignore[attr-defined]
    assert json.from_connect_block("t", STRING_SCHEMA, texts[:2]) == rows[:2]  # type: ignore[attr-defined]
    with pytest.raises(DataError):  # not all strings: row by row, as before
        json.from_connect_block("t", STRING_SCHEMA, ["a", 1])  # type: ignore[attr-defined]


JACKSON_STRINGS = {
    "plain": b'"plain"',
    "ctrl \x00\x01\x1f\x7f": b'"ctrl \\u0000\\u0001\\u001F\x7f"',
    "short \b\t\n\f\r": b'"short \\b\\t\\n\\f\\r"',
    'q " \\ /': b'"q \\" \\\\ /"',
    "text \\u00ab": b'"text \\\\u00ab"',  # an escaped backslash before "u00": left as it is
    "é 😀": '"é '.encode() + b'\\uD83D\\uDE00"',
}
"""A STRING value → the JSON bytes Connect's JsonConverter writes (Jackson: control
characters as ``\\u00XX`` in upper case but the five with short escapes, a character
beyond the BMP as an escaped surrogate pair, the rest of non-ASCII as UTF-8)."""


@pytest.mark.parametrize(("text", "expected"), list(JACKSON_STRINGS.items()))
def test_json_strings_are_the_bytes_jackson_writes(text: str, expected: bytes) -> None:
    json = make_converter("json")
    assert json.from_connect_data("t", STRING_SCHEMA, text) == expected  # type: ignore[attr-defined]
    words = SchemaBuilder.array(STRING_SCHEMA).build()  # the other typed path
    assert json.from_connect_data("t", words, [text]) == b"[" + expected + b"]"  # type: ignore[attr-defined]
    assert json.from_connect_block("t", STRING_SCHEMA, [text, "x"]) == [expected, b'"x"']  # type: ignore[attr-defined]


def test_plain_values_are_written_as_they_are_and_the_rest_through_the_checks() -> None:
    # An integer, boolean or string of exactly its type is written as it is (one call a
    # field); a null, a subclass or a wrong type goes through the checks: the same bytes,
    # the same errors as field by field.
    flat = (
        SchemaBuilder.struct().name("Flat").field("id", INT64_SCHEMA)
        .field("ok", SchemaBuilder.bool().build())
        .field("s", STRING_SCHEMA).field("note", OPTIONAL_STRING_SCHEMA).build()
    )  # fmt: skip
    json = make_converter("json")
    for text, expected in JACKSON_STRINGS.items():
        full = Struct(flat, {"id": 7, "ok": True, "s": text, "note": text})
        assert json.convert("t", full) == (
            b'{"id":7,"ok":true,"s":' + expected + b',"note":' + expected + b"}"
        )
        assert json.convert("t", Struct(flat, {"id": 7, "ok": True, "s": text})) == (
            b'{"id":7,"ok":true,"s":' + expected + b',"note":null}'
        )

    class Word(str):
        pass

    subclassed = Struct(flat, {"id": 1, "ok": False, "s": Word("w"), "note": "n"})
    assert json.convert("t", subclassed) == b'{"id":1,"ok":false,"s":"w","note":"n"}'
    wrong = Struct(flat, {"id": 1, "ok": False, "s": "s"})
    wrong._values[0] = True  # a bool is an int to Python, not to Connect's INT64
    with pytest.raises(DataError, match="Invalid type for INT64: bool"):
        json.convert("t", wrong)
    with pytest.raises(DataError, match="null value for field that is required"):
        json.convert("t", Struct(flat, {"ok": False, "s": "s"}))
    defaulted = SchemaBuilder.struct().field("n", SchemaBuilder.int64().default(5).build()).build()
    assert json.convert("t", Struct(defaulted, {})) == b'{"n":5}'
    assert json.convert("t", Struct(defaulted, {"n": 6})) == b'{"n":6}'
