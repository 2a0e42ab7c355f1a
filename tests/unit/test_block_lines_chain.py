"""A FileSource block of lines through HoistField and InsertField stays a block: the
lines become the one child of a struct column (a :class:`TextStruct` while it is lines
and static fields, the ``pyarrow`` struct array it stands for where anything else reads
it), the static field another, and the JSON converter writes the struct column at once.
Topics, keys, values, schemas and bytes are what the row path gives for the same
records; whatever the column path cannot do exactly goes row by row."""

from __future__ import annotations

import dataclasses
import datetime
import io
from typing import Any

import fastavro
import orjson
import pyarrow as pa
import pytest

from eos.api import RecordBlock, SourceRecord
from eos.api.logical import Date
from eos.api.schema import (
    BOOLEAN_SCHEMA,
    FLOAT64_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaBuilder,
)
from eos.columns.text_struct import TextStruct, arrow_of
from eos.converters import encode_block
from eos.converters.avro import avro_schema, to_avro
from eos.converters.avro_arrow import encode_column
from eos.converters.json import ConnectJsonConverter, JsonConverter, column_rows
from eos.errors import DataError
from eos.transforms import TransformChain
from services.connectors.file import lines_block
from tests.unit.transform_cases import chain, one

LINES = ["a1", "second line", 'quote " and \\ back', "é and \U0001f600", "tab\there\x01"]
THREE = {
    # Kafka's file-source example (HoistField, then a static field), then a RegexRouter
    "transforms": "MakeMap,InsertSource,Route",
    "transforms.MakeMap.type": "org.apache.kafka.connect.transforms.HoistField$Value",
    "transforms.MakeMap.field": "line",
    "transforms.InsertSource.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.InsertSource.static.field": "data_source",
    "transforms.InsertSource.static.value": "test-file-source",
    "transforms.Route.type": "org.apache.kafka.connect.transforms.RegexRouter",
    "transforms.Route.regex": "(.*)",
    "transforms.Route.replacement": "$1-lines",
}


def lines(texts: list[Any] = LINES) -> RecordBlock:
    return lines_block("/data/a.log", texts, 99, "files")


def by_rows(c: TransformChain, block: RecordBlock) -> list[SourceRecord]:
    out = [c.apply(r) for r in block.records()]
    return [r for r in out if r is not None]


def struct_rows(schema: Schema, values: Any) -> list[bytes] | None:
    """The rows the JSON converter writes at once for a struct column (None: row by row)."""
    return column_rows(schema, values, json_converter()._compiler)[0]


def json_converter(**props: str) -> JsonConverter:
    converter = JsonConverter()
    converter.configure(props, False)
    return converter


def rows_bytes(converter: JsonConverter, records: list[SourceRecord]) -> list[bytes | None]:
    return [converter.from_connect_data(r.topic, r.value_schema, r.value) for r in records]


def test_the_file_source_example_chain_keeps_the_block() -> None:
    c = chain(THREE)
    block = lines()
    out = c.apply_block(block)
    assert isinstance(out, RecordBlock)
    assert isinstance(out.values, TextStruct)
    assert isinstance(out.values.to_arrow(), pa.StructArray)
    assert (out.topic, out.topics, out.source_offset) == ("files-lines", None, {"position": 99})
    assert out.records() == by_rows(c, block)
    assert out.value_schema is not None
    assert [(f.name, f.schema) for f in out.value_schema.fields] == [
        ("line", STRING_SCHEMA),
        ("data_source", OPTIONAL_STRING_SCHEMA),
    ]
    for converter in (json_converter(), json_converter(**{"schemas.enable": "true"})):
        encoded = encode_block(out, converter, converter)
        assert list(encoded.values) == rows_bytes(converter, by_rows(c, block))
    first = encode_block(out, json_converter(), json_converter()).values[0]
    assert first == b'{"line":"a1","data_source":"test-file-source"}'


@pytest.mark.parametrize(
    "texts",
    [
        pytest.param([f"line {i}" for i in range(5)], id="plain lines"),
        pytest.param(["", "é", "ascii", "\U0001f600 astral", ""], id="empty and non-ASCII"),
        pytest.param(["one line"], id="one line"),
        pytest.param(["a", "b\x7f", "c"], id="DEL"),
    ],
)
def test_lines_that_need_no_escape_are_joined_by_arrow(texts: list[str]) -> None:
    c = chain(THREE)
    out = c.apply_block(lines(texts))
    assert isinstance(out, RecordBlock)
    sliced = dataclasses.replace(out, values=out.values[1:])
    for converter in (json_converter(), json_converter(**{"schemas.enable": "true"})):
        for block in (out, sliced):
            encoded = encode_block(block, converter, converter)
            assert list(encoded.values) == rows_bytes(converter, block.records())
    got = encode_block(out, json_converter(), json_converter()).values
    assert got[0] == b'{"line":' + orjson.dumps(texts[0]) + b',"data_source":"test-file-source"}'


def test_the_hoisted_lines_encode_as_their_rows_in_avro() -> None:
    c = chain(THREE)
    out = c.apply_block(lines())
    assert isinstance(out, RecordBlock)
    assert out.value_schema is not None
    avro = fastavro.parse_schema(avro_schema(out.value_schema))
    convert = to_avro(out.value_schema)
    encoded = encode_column(arrow_of(out.values), out.value_schema, b"")
    for data, row in zip(encoded, by_rows(c, lines()), strict=True):
        written = io.BytesIO()
        fastavro.schemaless_writer(written, avro, convert(row.value))
        assert data == written.getvalue()


def test_hoist_field_alone_on_values_and_on_keys() -> None:
    hoist = one("HoistField$Value", field="line")
    out = hoist.apply_block(lines())
    assert isinstance(out, RecordBlock)
    assert out.records() == by_rows(hoist, lines())
    on_key = one("HoistField$Key", field="id")
    keyed = RecordBlock(
        {"t": 1}, None, "t", ["v1", "v2"], keys=["k1", "k2"], key_schema=STRING_SCHEMA,
        value_schema=STRING_SCHEMA, encoded=False,
    )  # fmt: skip
    out = on_key.apply_block(keyed)
    assert isinstance(out, RecordBlock)
    assert isinstance(out.keys, TextStruct)
    assert out.records() == by_rows(on_key, keyed)


def test_hoist_field_wraps_a_typed_struct_column() -> None:
    inner = SchemaBuilder.struct().field("id", INT64_SCHEMA).field("ok", BOOLEAN_SCHEMA).build()
    values = pa.array([{"id": 1, "ok": True}, {"id": 2, "ok": False}],
                      pa.struct([("id", pa.int64()), ("ok", pa.bool_())]))  # fmt: skip
    block = RecordBlock({"t": 1}, None, "t", values, value_schema=inner, encoded=False)
    hoist = one("HoistField$Value", field="row")
    out = hoist.apply_block(block)
    assert isinstance(out, RecordBlock)
    assert isinstance(out.values, pa.StructArray)
    assert out.records() == by_rows(hoist, block)


@pytest.mark.parametrize(
    "texts",
    [
        pytest.param(["a", None, "c"], id="a null line"),
        pytest.param(["a", 2, "c"], id="a value of another type"),
    ],
)
def test_what_a_column_cannot_hold_goes_row_by_row(texts: list[Any]) -> None:
    c = chain(THREE)
    block = RecordBlock({"t": 1}, None, "t", texts, value_schema=OPTIONAL_STRING_SCHEMA,
                        encoded=False)  # fmt: skip
    out = c.apply_block(block)
    assert isinstance(out, list)  # the rows, as the row path makes them (the converter
    assert out == by_rows(c, block)  # then refuses a 2 for a string, as for a record)


def test_schemaless_lines_go_row_by_row_into_maps() -> None:
    c = chain(THREE)
    block = RecordBlock({"t": 1}, None, "t", ["a", "b"], encoded=False)
    out = c.apply_block(block)
    assert isinstance(out, list)
    assert out == by_rows(c, block)
    assert out[0].value == {"line": "a", "data_source": "test-file-source"}


def struct_block(schema: Schema, values: Any) -> RecordBlock:
    return RecordBlock({"t": 1}, None, "t", values, value_schema=schema, encoded=False)


def check_bytes(schema: Schema, values: Any) -> list[bytes | None]:
    """The block's JSON, checked against the row path's bytes for its records."""
    block = struct_block(schema, values)
    for converter in (json_converter(), json_converter(**{"schemas.enable": "true"})):
        got = encode_block(block, converter, converter).values
        assert list(got) == rows_bytes(converter, block.records())
    return list(encode_block(block, json_converter(), json_converter()).values)


NUMBERS = (
    SchemaBuilder.struct().field("n", INT32_SCHEMA).field("big", INT64_SCHEMA)
    .field("ok", BOOLEAN_SCHEMA).field("s", STRING_SCHEMA).build()
)  # fmt: skip
NUMBERS_ARROW = pa.struct(
    [("n", pa.int32()), ("big", pa.int64()), ("ok", pa.bool_()), ("s", pa.string())]
)


def test_integers_booleans_and_strings_a_child_at_a_time() -> None:
    rows = [{"n": i, "big": 2**62 + i, "ok": i % 2 == 0, "s": f"é{i}"} for i in range(3)]
    values = pa.array(rows, NUMBERS_ARROW)
    assert struct_rows(NUMBERS, values) is not None
    got = check_bytes(NUMBERS, values)
    assert got[1] == b'{"n":1,"big":4611686018427387905,"ok":false,"s":"\xc3\xa91"}'
    same = pa.array([{"n": 7, "big": 8, "ok": True, "s": "x"}] * 3, NUMBERS_ARROW)
    assert check_bytes(NUMBERS, same) == [b'{"n":7,"big":8,"ok":true,"s":"x"}'] * 3
    sliced: Any = values[1:]
    assert check_bytes(NUMBERS, sliced) == got[1:]


def test_connect_json_converter_writes_the_envelope_from_the_columns() -> None:
    converter = ConnectJsonConverter()
    converter.configure({}, False)
    values = pa.array([{"n": 1, "big": 2, "ok": True, "s": "x"}], NUMBERS_ARROW)
    (got,) = converter.from_connect_block("t", NUMBERS, values)
    assert got is not None
    assert got.startswith(b'{"schema":{"type":"struct","fields":[{"type":"int32"')
    assert got.endswith(b',"payload":{"n":1,"big":2,"ok":true,"s":"x"}}')


DAY = datetime.date(2026, 11, 28)


def one_field(schema: Schema, kind: Any, values: list[Any]) -> tuple[Schema, Any]:
    struct = SchemaBuilder.struct().field("f", schema).build()
    return struct, pa.array([{"f": v} for v in values], pa.struct([("f", kind)]))


@pytest.mark.parametrize(
    ("schema", "values"),
    [
        pytest.param(*one_field(OPTIONAL_STRING_SCHEMA, pa.string(), ["a", None]), id="a null"),
        pytest.param(*one_field(FLOAT64_SCHEMA, pa.float64(), [1e7, 0.5]), id="a double"),
        pytest.param(*one_field(Date.SCHEMA, pa.date32(), [DAY, DAY]), id="a logical type"),
        pytest.param(*one_field(STRING_SCHEMA, pa.binary(), [b"a", b"b"]), id="bytes for a string"),
        pytest.param(*one_field(INT32_SCHEMA, pa.string(), ["1", "2"]), id="a string for an int"),
        pytest.param(
            SchemaBuilder.struct().field("g", STRING_SCHEMA).build(),
            pa.array([{"f": "a"}], pa.struct([("f", pa.string())])),
            id="another field name",
        ),
        pytest.param(
            SchemaBuilder.struct().field("s", NUMBERS).build(),
            pa.array(
                [{"s": {"n": 1, "big": 2, "ok": True, "s": "x"}}], pa.struct([("s", NUMBERS_ARROW)])
            ),
            id="a nested struct",
        ),
    ],
)
def test_other_columns_are_the_rows_bytes_at_once_or_row_by_row(
    schema: Schema, values: Any
) -> None:
    block = struct_block(schema, values)
    converter = json_converter()
    try:
        expected = rows_bytes(converter, block.records())
    except DataError:  # a value of another type: the block fails as the rows do
        with pytest.raises(DataError):
            encode_block(block, converter, converter)
        return
    assert list(encode_block(block, converter, converter).values) == expected


def test_a_null_row_or_an_empty_column_goes_row_by_row() -> None:
    values = pa.array([{"n": 1, "big": 2, "ok": True, "s": "x"}, None], NUMBERS_ARROW)
    assert struct_rows(NUMBERS, values) is None
    assert struct_rows(NUMBERS, pa.array([], NUMBERS_ARROW)) == []
    assert struct_rows(NUMBERS, [{"n": 1}]) is None
