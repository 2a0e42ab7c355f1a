"""The JSON converter writes what Kafka Connect's own JsonConverter writes, byte for byte:
Connect's converter (4.3.1, from Maven Central) reads eos's envelope back and writes the
same schema and value again, with and without schemas, and the bytes must be eos's."""

from __future__ import annotations

import base64
import datetime
import decimal
from collections.abc import Sequence
from typing import Any

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
    OPTIONAL_FLOAT64_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
)
from eos.converters import make_converter
from tests.connect_java import connect_classpath, run_java

pytestmark = pytest.mark.integration


INNER = SchemaBuilder.struct().name("com.example.Inner").field("a", INT32_SCHEMA).build()
EVERY = (
    SchemaBuilder.struct().name("com.example.Every").version(3).doc("all of them")
    .parameter("origin", "test")
    .field("i8", INT8_SCHEMA).field("i16", INT16_SCHEMA).field("i32", INT32_SCHEMA)
    .field("i64", INT64_SCHEMA).field("f32", FLOAT32_SCHEMA).field("f64", FLOAT64_SCHEMA)
    .field("b", BOOLEAN_SCHEMA).field("s", STRING_SCHEMA).field("by", BYTES_SCHEMA)
    .field("arr", SchemaBuilder.array(OPTIONAL_STRING_SCHEMA).build())
    .field("m", SchemaBuilder.map(STRING_SCHEMA, INT64_SCHEMA).build())
    .field("mi", SchemaBuilder.map(INT32_SCHEMA, INNER).build())
    .field("inner", INNER).field("dec", Decimal.schema(3)).field("d", Date.SCHEMA)
    .field("t", Time.SCHEMA).field("ts", Timestamp.SCHEMA)
    .field("opt", OPTIONAL_INT32_SCHEMA)
    .field("dflt", SchemaBuilder.string().optional().default("fallback").build())
    .field("n", SchemaBuilder.int64().default(7).build())
    .build()
)  # fmt: skip


def every(**changes: Any) -> Struct:
    values: dict[str, Any] = {
        "i8": -7, "i16": 300, "i32": 70000, "i64": -(2**40), "f32": 0.1, "f64": 12345.678,
        "b": False, "s": 'quote " backslash \\ tab \t nl \n ctrl \x01\x1f del \x7f é ✓ 😀 </',
        "by": b"\x00\x01\xfe\xff", "arr": ["a", None, ""], "m": {"z": 1},
        "mi": {-3: Struct(INNER, {"a": 1})},
        "inner": Struct(INNER, {"a": 9}), "dec": decimal.Decimal("-1234.567"),
        "d": datetime.date(1969, 7, 20), "t": datetime.time(20, 17, 40, 123000),
        "ts": datetime.datetime(1969, 7, 20, 20, 17, 40, 123000, tzinfo=datetime.UTC),
        "opt": None, "dflt": None, "n": None,
    }  # fmt: skip
    values.update(changes)
    struct = Struct(EVERY)
    for name, value in values.items():
        struct._values[EVERY.field(name).index] = value  # type: ignore[union-attr]
    return struct


FLOATS = SchemaBuilder.struct().field("f", FLOAT64_SCHEMA).field("g", FLOAT32_SCHEMA).build()
CASES: list[tuple[Schema, Any]] = [
    (EVERY, every()),
    (EVERY, every(opt=5, dflt="given", n=8, arr=[], m={}, mi={})),
    *[
        (FLOATS, Struct(FLOATS, {"f": f, "g": g}))
        for f, g in (
            (0.0, 0.0),
            (1.0, 1.0),
            (0.001, 0.001),
            (0.0009999, 0.0009999),
            (1e7, 1e7),
            (9999999.0, 9999999.0),
            (1e-5, 1e-5),
            (123456789.0, 123456789.0),
            (1.5e300, 3.4e38),
            (-2.5e-300, -1e-45),
            (5e-324, 1.17e-38),
            (0.30000000000000004, 0.3),
            (100.0, 100.0),
            (1234567.125, 1234567.125),
            (2.0 / 3, 2.0 / 3),
            (-1e22, 16777217.0),
        )
    ],
    (INT64_SCHEMA, 5),
    (OPTIONAL_FLOAT64_SCHEMA, None),
    (STRING_SCHEMA, "just a string"),
    (
        SchemaBuilder.array(Decimal.schema(0)).build(),
        [decimal.Decimal("1E+0"), decimal.Decimal("-5")],
    ),
    (SchemaBuilder.map(BOOLEAN_SCHEMA, BYTES_SCHEMA).build(), {True: b""}),
    (SchemaBuilder.map(STRING_SCHEMA, OPTIONAL_FLOAT64_SCHEMA).build(), {"k": None}),
]


@pytest.fixture(scope="session")
def connect_json_classpath() -> str:
    return connect_classpath()


def connect_writes(
    classpath: str, envelopes: Sequence[bytes], decimal_format: str
) -> list[tuple[bytes, bytes]]:
    lines = "".join(base64.b64encode(e).decode() + "\n" for e in envelopes)
    out = run_java(classpath, "ConnectJson.java", lines, decimal_format)
    pairs = [line.split(" ") for line in out.splitlines()]
    return [(base64.b64decode(a), base64.b64decode(b)) for a, b in pairs]


@pytest.mark.parametrize("decimal_format", ["BASE64", "NUMERIC"])
def test_eos_writes_what_connects_json_converter_writes(
    connect_json_classpath: str, decimal_format: str
) -> None:
    settings = {"decimal.format": decimal_format}
    with_schemas = make_converter("org.apache.kafka.connect.json.JsonConverter", settings, False)
    plain = make_converter("json", settings, False)
    ours = [
        (with_schemas.from_connect_data("t", s, v), plain.from_connect_data("t", s, v))  # type: ignore[attr-defined]
        for s, v in CASES
    ]
    theirs = connect_writes(
        connect_json_classpath, [envelope for envelope, _ in ours], decimal_format
    )
    for (schema, _), mine, connect in zip(CASES, ours, theirs, strict=True):
        assert mine[0].decode() == connect[0].decode(), schema
        assert mine[1].decode() == connect[1].decode(), schema
