"""Connect's schema model: building schemas, validating values, Structs, logical types."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest

import eos.api
from eos.api import (
    DataError,
    Date,
    Decimal,
    Field,
    RecordBlock,
    Schema,
    SchemaBuilder,
    SchemaBuilderError,
    SchemaType,
    SourceRecord,
    Struct,
    Time,
    Timestamp,
)
from eos.api.schema import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    column_values,
    copy_schema_basics,
    struct_schema,
    to_connect,
    validate_value,
)

ROW = (
    SchemaBuilder.struct()
    .name("com.example.Row")
    .version(2)
    .doc("one row")
    .field("id", INT64_SCHEMA)
    .field("name", OPTIONAL_STRING_SCHEMA)
    .field("n", SchemaBuilder.int32().default(7).build())
    .build()
)


def test_the_api_re_exports_the_model_as_x_as_x() -> None:
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(eos.api))
    names = {a.name: a.asname for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
             for a in n.names}  # fmt: skip
    assert all(name == asname for name, asname in names.items())
    for name in ("Schema", "SchemaBuilder", "SchemaType", "Struct", "Field", "Decimal", "Date",
                 "Time", "Timestamp", "DataError", "SchemaBuilderError"):  # fmt: skip
        assert name in names


def test_type_names_are_connects() -> None:
    assert [t.value for t in SchemaType] == [
        "int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string",
        "bytes", "array", "map", "struct",
    ]  # fmt: skip
    assert SchemaType.STRING.is_primitive
    assert not SchemaType.MAP.is_primitive


def test_the_builder_sets_every_attribute() -> None:
    assert ROW.type is SchemaType.STRUCT
    assert (ROW.name, ROW.version, ROW.doc, ROW.optional) == (
        "com.example.Row",
        2,
        "one row",
        False,
    )
    assert [f.name for f in ROW.fields] == ["id", "name", "n"]
    assert ROW.field("n") == Field("n", 2, Schema(SchemaType.INT32, default=7))
    assert ROW.field("missing") is None
    m = SchemaBuilder.map(STRING_SCHEMA, INT32_SCHEMA).optional().parameter("a", "1").build()
    assert (m.key_schema, m.value_schema, m.optional, m.parameters) == (
        STRING_SCHEMA, INT32_SCHEMA, True, {"a": "1"}
    )  # fmt: skip
    assert SchemaBuilder.array(STRING_SCHEMA).build().value_schema == STRING_SCHEMA


def test_equal_schemas_hash_alike_and_every_attribute_counts() -> None:
    again = struct_schema(
        [("id", INT64_SCHEMA), ("name", OPTIONAL_STRING_SCHEMA),
         ("n", SchemaBuilder.int32().default(7).build())],
    )  # fmt: skip
    assert again != ROW  # no name, version, doc
    named = copy_schema_basics(ROW, SchemaBuilder.struct())
    for f in again.fields:
        named.field(f.name, f.schema)
    assert named.build() == ROW
    assert hash(named.build()) == hash(ROW)
    assert Schema(SchemaType.INT32, default=1) != Schema(SchemaType.INT32, default=2)
    assert {ROW: 1}[named.build()] == 1


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: SchemaBuilder.int8().name("a").name("b"), "name has already been set"),
        (lambda: SchemaBuilder.int8().optional().required(), "optional has already been set"),
        (lambda: SchemaBuilder.int8().field("a", INT8_SCHEMA), "Cannot create fields on type INT8"),
        (lambda: SchemaBuilder.struct().field("a", INT8_SCHEMA).field("a", INT8_SCHEMA),
         "field name duplication a"),
        (lambda: SchemaBuilder.int8().default(1000), "Invalid default value"),
        (lambda: SchemaBuilder.string().default(b"x"), "Invalid default value"),
    ],
)  # fmt: skip
def test_the_builder_refuses(call: Any, message: str) -> None:
    with pytest.raises(SchemaBuilderError, match=message):
        call()


def test_setting_an_attribute_again_to_the_same_value_is_allowed() -> None:
    assert SchemaBuilder.int8().name("a").name("a").optional().optional().build().name == "a"


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        (INT8_SCHEMA, 127), (INT8_SCHEMA, -128), (INT16_SCHEMA, 32767), (INT32_SCHEMA, -(2**31)),
        (INT64_SCHEMA, 2**63 - 1), (FLOAT32_SCHEMA, 1.5), (FLOAT32_SCHEMA, 2),
        (BOOLEAN_SCHEMA, True), (STRING_SCHEMA, "x"), (BYTES_SCHEMA, b"x"),
        (BYTES_SCHEMA, bytearray(b"x")), (BYTES_SCHEMA, memoryview(b"x")),
        (SchemaBuilder.array(INT32_SCHEMA).build(), [1, 2]),
        (SchemaBuilder.array(INT32_SCHEMA).build(), (1, 2)),
        (SchemaBuilder.map(STRING_SCHEMA, OPTIONAL_INT32_SCHEMA).build(), {"a": None}),
        (OPTIONAL_STRING_SCHEMA, None),
        (Decimal.schema(2), decimal.Decimal("1.00")),
        (Date.SCHEMA, datetime.date(2024, 2, 29)),
        (Time.SCHEMA, datetime.time(12, 30)),
        (Timestamp.SCHEMA, datetime.datetime(2024, 2, 29, 12)),
    ],
)  # fmt: skip
def test_valid_values(schema: Schema, value: Any) -> None:
    validate_value(schema, value)


@pytest.mark.parametrize(
    ("schema", "value", "message"),
    [
        (INT8_SCHEMA, 128, "out of range for INT8"),
        (INT64_SCHEMA, 2**63, "out of range for INT64"),
        (INT32_SCHEMA, True, "with type INT32: bool"),
        (INT32_SCHEMA, 1.0, "with type INT32: float"),
        (STRING_SCHEMA, None, 'null used for required value, schema type: STRING'),
        (STRING_SCHEMA, b"x", "with type STRING: bytes"),
        (SchemaBuilder.array(INT32_SCHEMA).build(), [1, "2"], "element of array value"),
        (SchemaBuilder.map(STRING_SCHEMA, INT32_SCHEMA).build(), {1: 1}, "key of map value"),
        (Decimal.schema(2), 1.5, '"org.apache.kafka.connect.data.Decimal" with type BYTES'),
        (Date.SCHEMA, datetime.datetime(2024, 1, 1, 1), "Date"),
        (Timestamp.SCHEMA, datetime.date(2024, 1, 1), "Timestamp"),
        (ROW, {"id": 1}, "with type STRUCT: dict"),
    ],
)  # fmt: skip
def test_invalid_values_are_named(schema: Schema, value: Any, message: str) -> None:
    with pytest.raises(DataError, match=message):
        validate_value(schema, value)


def test_a_struct_checks_each_put_and_validates_required_fields() -> None:
    row = Struct(ROW).put("id", 1)
    assert row.get("n") == 7  # the default
    assert row.get_without_default("n") is None
    assert row["name"] is None
    row.validate()
    with pytest.raises(DataError, match='field: "id"'):
        row.put("id", "one")
    with pytest.raises(DataError, match="nope is not a valid field name"):
        row.put("nope", 1)
    with pytest.raises(DataError, match='required field: "id", schema type: INT64'):
        Struct(ROW).validate()
    with pytest.raises(DataError, match="needs a STRUCT schema"):
        Struct(INT32_SCHEMA)


def test_structs_compare_by_schema_and_values() -> None:
    a = Struct(ROW, {"id": 1, "name": "x"})
    assert a == Struct(ROW).put("id", 1).put("name", "x")
    assert hash(a) == hash(Struct(ROW, {"id": 1, "name": "x"}))
    assert a != Struct(ROW, {"id": 2, "name": "x"})
    assert repr(a) == "Struct{id=1,name='x'}"


def test_a_nested_struct_must_have_the_fields_schema() -> None:
    outer = struct_schema([("row", ROW)])
    Struct(outer).put("row", Struct(ROW, {"id": 1}))
    other = struct_schema([("id", INT64_SCHEMA)])
    with pytest.raises(DataError, match="Struct schemas do not match"):
        Struct(outer).put("row", Struct(other, {"id": 1}))


def test_a_struct_default_is_a_struct_of_the_schema() -> None:
    inner = struct_schema([("a", INT32_SCHEMA)])
    default = Struct(inner, {"a": 1})
    with_default = SchemaBuilder.struct().field("a", INT32_SCHEMA).default(default).build()
    assert Struct(struct_schema([("x", with_default)])).get("x") == default


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        (decimal.Decimal("0.00"), b"\x00"),
        (decimal.Decimal("1.27"), b"\x7f"),
        (decimal.Decimal("1.28"), b"\x00\x80"),
        (decimal.Decimal("-1.28"), b"\x80"),
        (decimal.Decimal("-1.29"), b"\xff\x7f"),
        (decimal.Decimal("12345678901234567890.12"), (1234567890123456789012).to_bytes(9, "big")),
    ],
)
def test_decimals_are_javas_two_complement_bytes(value: decimal.Decimal, stored: bytes) -> None:
    schema = Decimal.schema(2)
    assert Decimal.from_logical(schema, value) == stored
    assert Decimal.to_logical(schema, stored) == value
    assert schema.parameters == {"scale": "2"}
    assert (schema.name, schema.version) == ("org.apache.kafka.connect.data.Decimal", 1)


def test_a_decimal_of_another_scale_is_refused() -> None:
    with pytest.raises(DataError, match="Schema has scale 2, value has scale 1"):
        Decimal.from_logical(Decimal.schema(2), decimal.Decimal("1.5"))


def test_dates_times_and_timestamps() -> None:
    assert Date.from_logical(Date.SCHEMA, datetime.date(1970, 1, 2)) == 1
    assert Date.from_logical(Date.SCHEMA, datetime.date(1969, 12, 31)) == -1
    assert Date.to_logical(Date.SCHEMA, 19782) == datetime.date(2024, 2, 29)
    assert Time.from_logical(Time.SCHEMA, datetime.time(0, 0, 1, 2500)) == 1002
    assert Time.to_logical(Time.SCHEMA, 1002) == datetime.time(0, 0, 1, 2000)
    utc = datetime.UTC
    naive = datetime.datetime(1969, 12, 31, 23, 59, 59, 999500)
    assert Timestamp.from_logical(Timestamp.SCHEMA, naive) == -1
    aware = datetime.datetime(2024, 1, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=1)))
    assert Timestamp.from_logical(Timestamp.SCHEMA, aware) == 1704067200000
    assert Timestamp.to_logical(Timestamp.SCHEMA, 1704067200000) == datetime.datetime(
        2024, 1, 1, tzinfo=utc
    )
    with pytest.raises(DataError, match="time fields set to non-zero"):
        Date.from_logical(Date.SCHEMA, datetime.datetime(2024, 1, 1, 0, 0, 1))
    with pytest.raises(DataError, match="schema does not match"):
        Date.from_logical(INT32_SCHEMA, datetime.date(2024, 1, 1))


def test_plain_values_become_connect_values() -> None:
    nested = struct_schema(
        [("row", ROW), ("rows", SchemaBuilder.array(ROW).build()),
         ("m", SchemaBuilder.map(INT32_SCHEMA, ROW).optional().build())]
    )  # fmt: skip
    plain = {"row": {"id": 1, "name": None, "n": 3}, "rows": [{"id": 2}], "m": [(5, {"id": 3})]}
    value = to_connect(nested, plain)
    value.validate()
    assert value.get("row") == Struct(ROW, {"id": 1, "n": 3})
    assert value.get("rows") == [Struct(ROW, {"id": 2})]
    assert value.get("m") == {5: Struct(ROW, {"id": 3})}
    assert column_values(INT32_SCHEMA, (1, 2)) == [1, 2]


def test_records_carry_schemas_and_unencoded_blocks_give_connect_rows() -> None:
    record = SourceRecord({"p": 0}, None, "t", Struct(ROW, {"id": 1}), 1,
                          key_schema=INT64_SCHEMA, value_schema=ROW)  # fmt: skip
    assert (record.key_schema, record.value_schema) == (INT64_SCHEMA, ROW)
    block = RecordBlock(
        {"p": 0}, {"o": 2}, "t", [{"id": 1}, {"id": 2, "name": "b"}], keys=[1, 2],
        key_schema=INT64_SCHEMA, value_schema=ROW, encoded=False,
    )  # fmt: skip
    rows = block.records()
    assert [r.value for r in rows] == [Struct(ROW, {"id": 1}), Struct(ROW, {"id": 2, "name": "b"})]
    assert [(r.key, r.encoded, r.value_schema, r.source_offset) for r in rows] == [
        (1, False, ROW, None), (2, False, ROW, {"o": 2})
    ]  # fmt: skip
