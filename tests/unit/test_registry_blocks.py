"""The registry converters' block paths against their rows, byte for byte: JSON Schema's
columns written at once (plain strings, FileSource's lines, flat struct columns), the rest
row by row with the writer looked up once. The registry's part (ids, the header) is tested
against a real registry in tests/integration/test_converters_registry.py; here each
converter's writer is its own encoder behind a fixed header."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pyarrow as pa
import pytest

from eos.api import Decimal, Schema, SchemaBuilder, Struct, Timestamp
from eos.api.schema import (
    BOOLEAN_SCHEMA,
    INT8_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
)
from eos.columns.text_struct import TextStruct
from eos.converters import make_converter
from eos.converters.json import column_rows
from eos.converters.wire_format import RegistryConverter, Writer

HEADER = b"\x00\x00\x00\x00\x07"
JSON_SCHEMA = "io.confluent.connect.json.JsonSchemaConverter"
PROTOBUF = "io.confluent.connect.protobuf.ProtobufConverter"
AVRO = "io.confluent.connect.avro.AvroConverter"


def converter(name: str, **props: str) -> Any:
    made = make_converter(name, {"schema.registry.url": "http://127.0.0.1:1", **props})
    assert isinstance(made, RegistryConverter)
    lookups: list[Schema] = []

    def writer(topic: str, schema: Schema) -> Writer:
        lookups.append(schema)
        translated = made.translate(schema)
        return Writer(HEADER, made.encoder(translated, None), translated)

    made.writer = writer  # type: ignore[method-assign]
    made.lookups = lookups  # type: ignore[attr-defined]
    return made


def by_rows(conv: Any, schema: Schema, values: list[Any]) -> list[bytes | None]:
    return [conv.from_connect_data("t", schema, v) for v in values]


FLAT = (
    SchemaBuilder.struct().field("id", INT64_SCHEMA).field("tiny", INT8_SCHEMA)
    .field("ok", BOOLEAN_SCHEMA).field("s", STRING_SCHEMA).build()
)  # fmt: skip
FLAT_ARROW = pa.struct([("id", pa.int64()), ("tiny", pa.int8()), ("ok", pa.bool_()),
                        ("s", pa.string())])  # fmt: skip


@pytest.mark.parametrize("strings", [["a", 'q"uote', "é\u2028\x01😀", ""], ["plain", "x"]])
def test_json_schema_strings_and_flat_structs_at_once(strings: list[str]) -> None:
    conv = converter(JSON_SCHEMA)
    assert conv.from_connect_block("t", STRING_SCHEMA, strings) == by_rows(
        conv, STRING_SCHEMA, strings
    )
    rows = [{"id": i - 2**62, "tiny": -i, "ok": i % 2 == 0, "s": s}
            for i, s in enumerate(strings)]  # fmt: skip
    column = pa.array(rows, FLAT_ARROW)
    assert column_rows(FLAT, column, conv._compiler)[0] is not None, "written at once"
    expected = by_rows(conv, FLAT, [Struct(FLAT, r) for r in rows])
    assert conv.from_connect_block("t", FLAT, column) == expected
    lines = SchemaBuilder.struct().field("line", STRING_SCHEMA).field("src", STRING_SCHEMA).build()
    text = TextStruct.hoisted("line", strings)
    assert text is not None
    text = text.with_constant("src", "db")
    assert conv.from_connect_block("t", lines, text) == by_rows(conv, lines, text.to_pylist())
    assert conv.from_connect_block("t", lines, text.to_arrow()) == by_rows(
        conv, lines, text.to_pylist()
    )


def test_json_schema_writes_other_columns_row_by_row_looking_the_writer_up_once() -> None:
    # maps of other than string keys are written as {"key","value"} objects by JSON Schema
    # (not as the JSON converter's pairs); a block with a null row is left to rows
    schema = (
        SchemaBuilder.struct().field("m", SchemaBuilder.map(INT64_SCHEMA, STRING_SCHEMA).build())
        .field("dec", Decimal.builder(2).optional().build())
        .field("ts", Timestamp.builder().optional().build())
        .field("s", OPTIONAL_STRING_SCHEMA).build()
    )  # fmt: skip
    arrow = pa.struct([("m", pa.map_(pa.int64(), pa.string())), ("dec", pa.decimal128(5, 2)),
                       ("ts", pa.timestamp("ms")), ("s", pa.string())])  # fmt: skip
    rows: list[dict[str, Any]] = [{"m": [(1, "a"), (-2, "b")], "dec": decimal.Decimal("1.50"),
             "ts": datetime.datetime(2024, 1, 1), "s": None},
            {"m": [], "dec": None, "ts": None, "s": "x"}]  # fmt: skip
    conv = converter(JSON_SCHEMA)
    column = pa.array([*rows, None], arrow)
    expected = by_rows(conv, schema, [*(Struct(schema, {**r, "m": dict(r["m"])}) for r in rows),
                                      None])  # fmt: skip
    conv.lookups.clear()
    assert conv.from_connect_block("t", schema, column) == expected
    assert b'"m":[{"key":1,"value":"a"}' in (expected[0] or b"")
    assert len(conv.lookups) == 1
    assert conv.from_connect_block("t", schema, pa.array([None], arrow)) == [None]
    assert len(conv.lookups) == 1, "no writer for a block of nulls"


@pytest.mark.parametrize("name", [AVRO, PROTOBUF])
def test_registry_rows_of_a_block_are_each_rows_bytes(name: str) -> None:
    conv = converter(name, **{"use.latest.version": "true"})
    rows = [{"id": 1, "tiny": 2, "ok": True, "s": "a"}, None]
    column = pa.array(rows, FLAT_ARROW)
    expected = by_rows(conv, FLAT, [Struct(FLAT, rows[0]), None])
    conv.lookups.clear()
    assert conv.from_connect_block("t", FLAT, column) == expected
    assert len(conv.lookups) == 1
