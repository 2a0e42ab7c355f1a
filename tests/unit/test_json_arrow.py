"""The JSON converters' column path (eos/converters/json_arrow.py) against their
row path, byte for byte: ``json`` with and without the schema envelope, Connect's
JsonConverter, JSON Schema (maps as ``{"key","value"}`` objects), both settings of
``decimal.format``; every type a Spark row brings, nulls at every level, defaults,
escapes and characters beyond the BMP, floats of every kind, hypothesis' rows; and what
goes back to rows."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eos.api import Date, Decimal, Schema, SchemaBuilder, Time, Timestamp
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
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    column_values,
)
from eos.converters import make_converter
from eos.converters.json import column_rows
from eos.converters.json_arrow import encode_column
from eos.converters.wire_format import RegistryConverter, Writer
from tests.unit.arrow_cases import opt, spark_rows, struct

UTC = datetime.UTC
D = decimal.Decimal
HEADER = b"\x00\x00\x00\x00\x07"
JSON_SCHEMA = "io.confluent.connect.json.JsonSchemaConverter"
CONNECT_JSON = "org.apache.kafka.connect.json.JsonConverter"


def registry(**props: str) -> Any:
    """The JSON Schema converter, its writer its own encoder behind a fixed header (the
    registry's part is tested against a real one in the integration tests)."""
    made = make_converter(JSON_SCHEMA, {"schema.registry.url": "http://127.0.0.1:1", **props})
    assert isinstance(made, RegistryConverter)

    def writer(topic: str, schema: Schema) -> Writer:
        translated = made.translate(schema)
        return Writer(HEADER, made.encoder(translated, None), translated)

    made.writer = writer  # type: ignore[method-assign]
    return made


def converters() -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for fmt in ("BASE64", "NUMERIC"):
        for schemas in ("false", "true"):
            props = {"schemas.enable": schemas, "decimal.format": fmt}
            out.append((f"json {props}", make_converter("json", props)))
        out.append((f"JsonSchema {fmt}", registry(**{"decimal.format": fmt})))
    out.append(("Connect's JsonConverter", make_converter(CONNECT_JSON)))
    out.append(("json, nulls not replaced",
                make_converter("json", {"replace.null.with.default": "false"})))  # fmt: skip
    return out


def assert_same(schema: Schema, column: Any) -> None:
    """Every converter writes ``column`` at once, in the bytes of its rows one by one."""
    values = column_values(schema, column)
    for name, conv in converters():
        assert column_rows(schema, column, conv._compiler)[0] is not None, f"{name}: by rows"
        expected = [conv.from_connect_data("t", schema, v) for v in values]
        got = conv.from_connect_block("t", schema, column)
        assert len(got) == len(expected)
        for i, (a, b) in enumerate(zip(got, expected, strict=True)):
            assert a == b, f"{name}, row {i}: {a!r} != {b!r}"


DEEP = struct(("x", OPTIONAL_INT64_SCHEMA), optional=True)
INNER = struct(("a", opt(INT8_SCHEMA)), ("s", OPTIONAL_STRING_SCHEMA), ("deep", DEEP),
               optional=True)  # fmt: skip
INNER_ARROW = pa.struct([("a", pa.int8()), ("s", pa.string()),
                         ("deep", pa.struct([("x", pa.int64())]))])  # fmt: skip
SPARK = struct(
    ("i8", opt(INT8_SCHEMA)), ("i16", opt(INT16_SCHEMA)), ("i32", OPTIONAL_INT32_SCHEMA),
    ("i64", INT64_SCHEMA), ("f32", opt(FLOAT32_SCHEMA)), ("f64", opt(FLOAT64_SCHEMA)),
    ("b", opt(BOOLEAN_SCHEMA)), ("s", OPTIONAL_STRING_SCHEMA), ("by", opt(BYTES_SCHEMA)),
    ("dec", Decimal.builder(2).parameter("connect.decimal.precision", "38").optional().build()),
    ("d", Date.builder().optional().build()), ("ts", Timestamp.builder().optional().build()),
    ("t", Time.builder().optional().build()), ("inner", INNER),
    ("tags", SchemaBuilder.array(OPTIONAL_STRING_SCHEMA).optional().build()),
    ("nums", SchemaBuilder.array(OPTIONAL_INT32_SCHEMA).optional().build()),
    ("floats", SchemaBuilder.array(FLOAT64_SCHEMA).optional().build()),
    ("halves", SchemaBuilder.array(opt(FLOAT32_SCHEMA)).optional().build()),
    ("flags", SchemaBuilder.array(BOOLEAN_SCHEMA).optional().build()),
    ("blobs", SchemaBuilder.array(BYTES_SCHEMA).optional().build()),
    ("structs", SchemaBuilder.array(INNER).optional().build()),
    ("days", SchemaBuilder.array(Date.builder().optional().build()).optional().build()),
    ("decs", SchemaBuilder.array(Decimal.builder(5).optional().build()).optional().build()),
    ("m", SchemaBuilder.map(STRING_SCHEMA, OPTIONAL_INT64_SCHEMA).optional().build()),
    ("mi", SchemaBuilder.map(INT32_SCHEMA, OPTIONAL_STRING_SCHEMA).optional().build()),
    ("ml", SchemaBuilder.map(INT64_SCHEMA, INT32_SCHEMA).optional().build()),
    ("mb", SchemaBuilder.map(BOOLEAN_SCHEMA, FLOAT32_SCHEMA).optional().build()),
    ("ms", SchemaBuilder.map(STRING_SCHEMA, INNER).optional().build()),
    ("mts", SchemaBuilder.map(STRING_SCHEMA, Timestamp.builder().optional().build())
     .optional().build()),
    ("md", SchemaBuilder.map(Date.SCHEMA, opt(FLOAT64_SCHEMA)).optional().build()),
    ("mf", SchemaBuilder.map(FLOAT64_SCHEMA, BYTES_SCHEMA).optional().build()),
    ("mos", SchemaBuilder.map(OPTIONAL_STRING_SCHEMA, INT32_SCHEMA).optional().build()),
    ("mm", SchemaBuilder.map(STRING_SCHEMA, SchemaBuilder.map(INT8_SCHEMA, STRING_SCHEMA)
                             .optional().build()).optional().build()),
    ("nested", SchemaBuilder.array(SchemaBuilder.array(OPTIONAL_STRING_SCHEMA).optional()
                                   .build()).optional().build()),
    ("void", OPTIONAL_STRING_SCHEMA),
)  # fmt: skip
ARROW = pa.struct([
    ("i8", pa.int8()), ("i16", pa.int16()), ("i32", pa.int32()), ("i64", pa.int64()),
    ("f32", pa.float32()), ("f64", pa.float64()), ("b", pa.bool_()), ("s", pa.string()),
    ("by", pa.binary()), ("dec", pa.decimal128(38, 2)), ("d", pa.date32()),
    ("ts", pa.timestamp("us", "UTC")), ("t", pa.time64("us")), ("inner", INNER_ARROW),
    ("tags", pa.list_(pa.string())), ("nums", pa.list_(pa.int32())),
    ("floats", pa.list_(pa.float64())), ("halves", pa.list_(pa.float32())),
    ("flags", pa.list_(pa.bool_())), ("blobs", pa.list_(pa.binary())),
    ("structs", pa.list_(INNER_ARROW)), ("days", pa.list_(pa.date32())),
    ("decs", pa.list_(pa.decimal128(20, 5))),
    ("m", pa.map_(pa.string(), pa.int64())), ("mi", pa.map_(pa.int32(), pa.string())),
    ("ml", pa.map_(pa.int64(), pa.int32())), ("mb", pa.map_(pa.bool_(), pa.float32())),
    ("ms", pa.map_(pa.string(), INNER_ARROW)), ("mts", pa.map_(pa.string(), pa.timestamp("ms"))),
    ("md", pa.map_(pa.date32(), pa.float64())), ("mf", pa.map_(pa.float64(), pa.binary())),
    ("mos", pa.map_(pa.string(), pa.int32())),
    ("mm", pa.map_(pa.string(), pa.map_(pa.int8(), pa.string()))),
    ("nested", pa.list_(pa.list_(pa.string()))), ("void", pa.null()),
])  # fmt: skip
NAN, INF = float("nan"), float("inf")
EDGES: list[dict[str, Any]] = [
    {"i8": -128, "i16": 32767, "i32": -(2**31), "i64": 2**63 - 1, "f32": -0.0, "f64": 0.0,
     "b": False, "s": "", "by": b"", "dec": D("0.00"), "d": datetime.date(1970, 1, 1),
     "ts": datetime.datetime(1970, 1, 1, tzinfo=UTC), "t": datetime.time(0),
     "inner": {"a": None, "s": None, "deep": None}, "tags": [], "nums": [None], "floats": [],
     "halves": [None, 0.0, -0.0], "flags": [False], "blobs": [b""], "structs": [None],
     "days": [None], "decs": [D("0.00001"), None, D("-1.23456")],
     "m": [("x", None)], "mi": [], "ml": [(0, 0)], "mb": [(False, 0.0)],
     "ms": [("", {"a": None, "s": None, "deep": None})], "mts": [("z", None)],
     "md": [(datetime.date(2024, 2, 29), None)], "mf": [(-0.0, b"\xff")],
     "mos": [("a\"b", 1)], "mm": [("k", None)], "nested": [[], None, ["a", None]]},
    {"i8": 127, "i16": -32768, "i32": 2**31 - 1, "i64": -(2**63), "f32": INF,
     "f64": NAN, "b": True, "s": 'héllo ✓ 😀 "q" \\ \x00\x01\x08\t\n\x0b\x0c\r\x1f\x7f\u2028',
     "by": b"\x00\xff\xfe", "dec": D("-" + "9" * 36 + ".99"), "d": datetime.date(1, 1, 1),
     "ts": datetime.datetime(1969, 12, 31, 23, 59, 59, 999_500, UTC),
     "t": datetime.time(23, 59, 59, 999_999),
     "inner": {"a": 0, "s": "\U0001f600\U0010ffff", "deep": {"x": None}},
     "tags": ["a", None, "", "ü", "\\u00e9", '"'], "nums": [1, -1, 0, None, 2**31 - 1],
     "floats": [-0.0, 1e300, -INF, 1e7, 9999999.999, 1e-3, 0.00099, 5e-324, 0.1, -2.5],
     "halves": [0.1, 1e7, 3.4028235e38, 1.4e-45, NAN, 16777216.0, -1.5, 2097152.25],
     "flags": [True, False, True], "blobs": [b"\x01", b"", b"ab", b"abc", b"abcd"],
     "structs": [{"a": 1, "s": "x", "deep": None}, None, {"a": None, "s": None, "deep": None}],
     "days": [datetime.date(9999, 12, 31), datetime.date(1969, 12, 31)],
     "decs": [D("12345678901234.56789")],
     "m": [("b", 1), ("a", -1), ("aa", None), ("", 0), ("é", 2**62), ("ab", 3)],
     "mi": [(5, "five"), (-3, None), (0, ""), (-(2**31), "min"), (7, "seven")],
     "ml": [(1 << 40, 1), (-1, -1), (3, 0)], "mb": [(True, 1.5), (False, -2.5)],
     "ms": [("k", {"a": 3, "s": "v", "deep": {"x": -7}}), ("j", {"a": None, "s": "",
                                                               "deep": None})],
     "mts": [("a", datetime.datetime(2024, 2, 29, 12, 0, 0, 123_456)), ("b", None)],
     "md": [(datetime.date(1, 1, 1), 1e-7), (datetime.date(1970, 1, 2), NAN)],
     "mf": [(NAN, b"")], "mos": [("", 0), ("x\n", 2)], "mm": [("k", [(1, "a"), (-1, "")])],
     "nested": [["x", "y"], [], [None]]},
    {"i8": 0, "i16": 0, "i32": 0, "i64": 0, "f32": 1.17549435e-38, "f64": 5e-324,
     **{k: None for k in ("b", "s", "by", "dec", "d", "ts", "t", "inner", "tags", "nums",
                          "floats", "halves", "flags", "blobs", "structs", "days", "decs",
                          "m", "mi", "ml", "mb", "ms", "mts", "md", "mf", "mos", "mm",
                          "nested")}},
    {"i8": None, "i16": None, "i32": None, "i64": 1, "f32": 3.4028235e38, "f64": -1.5,
     "b": True, "s": "x" * 300, "by": bytes(range(256)) * 3, "dec": D("0.01"),
     "d": datetime.date(2024, 2, 29), "ts": datetime.datetime(9998, 12, 31, 23, 59, 59, 999999,
                                                              UTC),
     "t": datetime.time(12, 0, 0, 1000), "inner": {"a": -128, "s": "in", "deep": {"x": 0}},
     "tags": ["only"], "nums": [], "floats": [0.0], "halves": [], "flags": [], "blobs": [],
     "structs": [], "days": [], "decs": [], "m": [], "mi": [(1, "one")], "ml": [], "mb": [],
     "ms": [], "mts": [], "md": [], "mf": [], "mos": [], "mm": [], "nested": []},
]  # fmt: skip


def test_every_spark_type_with_nulls_escapes_and_edges_is_the_row_paths_bytes() -> None:
    column = pa.array(EDGES * 2, ARROW)
    assert_same(SPARK, column)
    assert_same(SPARK, column.slice(3, 4))  # an offset into every buffer
    assert_same(SPARK, pa.chunked_array([column.slice(0, 2), column.slice(2)]))
    for field, child in zip(SPARK.fields, column.flatten(), strict=True):
        # each column alone, and its values as a top-level column (a key's, say)
        alone = pa.StructArray.from_arrays([child.slice(1)], names=[field.name])
        assert_same(struct((field.name, field.schema)), alone)
        if child.drop_null():
            assert_same(field.schema, child.drop_null())


def test_defaults_of_null_fields_and_what_they_write() -> None:
    schema = struct(
        ("n", SchemaBuilder.int64().default(5).build()),
        ("s", SchemaBuilder.string().optional().default("dflt").build()),
        ("d", Date.builder().default(datetime.date(1970, 1, 3)).build()),
        ("missing", OPTIONAL_INT64_SCHEMA),
    )  # fmt: skip
    arrow = pa.struct([("n", pa.int64()), ("s", pa.string()), ("d", pa.date32())])
    column = pa.array([{"n": None, "s": None, "d": None},
                       {"n": 1, "s": "x", "d": datetime.date(1970, 1, 1)}], arrow)  # fmt: skip
    for name, conv in converters():
        if "not replaced" in name:  # a required field's null is refused by the row path
            assert column_rows(schema, column, conv._compiler)[0] is None
            continue
        assert column_rows(schema, column, conv._compiler)[0] is not None
        expected = [conv.from_connect_data("t", schema, v)
                    for v in column_values(schema, column)]  # fmt: skip
        assert conv.from_connect_block("t", schema, column) == expected
    assert make_converter("json").from_connect_block("t", schema, column) == [  # type: ignore[attr-defined]
        b'{"n":5,"s":"dflt","d":2,"missing":null}',
        b'{"n":1,"s":"x","d":0,"missing":null}',
    ]


@pytest.mark.parametrize(
    ("unit", "tz"), [("s", None), ("ms", "UTC"), ("us", "Europe/Paris"), ("ns", None)]
)
def test_timestamps_and_times_of_every_unit(unit: str, tz: str | None) -> None:
    schema = struct(("ts", opt(Timestamp.SCHEMA)), ("t", opt(Time.SCHEMA)),
                    ("d", opt(Date.SCHEMA)))  # fmt: skip
    per_ms = {"s": 0.001, "ms": 1, "us": 1000, "ns": 1_000_000}[unit]
    extra = 7 if per_ms > 1 else 0  # below a millisecond: dropped (floor)
    millis = [-86_400_001, -1, 0, 1, 999, 1000, 1_709_208_062_345, 59_999, 86_399_999]
    ticks = [int(v * per_ms) + extra for v in millis]
    of_day = [t % int(86_400_000 * per_ms) for t in ticks]
    narrow = unit in ("s", "ms")
    times = pa.array(of_day, pa.int32() if narrow else pa.int64())
    column = pa.StructArray.from_arrays(
        [pa.array(ticks, pa.int64()).cast(pa.timestamp(unit, tz)),
         times.cast(pa.time32(unit) if narrow else pa.time64(unit)),
         pa.array([v // 10_000_000 for v in millis], pa.int32()).cast(pa.date32())],
        names=["ts", "t", "d"],
    )  # fmt: skip
    assert_same(schema, column)


ROW_SCHEMA = struct(
    ("l", OPTIONAL_INT64_SCHEMA), ("i", OPTIONAL_INT32_SCHEMA), ("f", opt(FLOAT32_SCHEMA)),
    ("d", opt(FLOAT64_SCHEMA)), ("s", OPTIONAL_STRING_SCHEMA), ("by", opt(BYTES_SCHEMA)),
    ("dec", Decimal.builder(3).optional().build()),
    ("a", SchemaBuilder.array(OPTIONAL_INT64_SCHEMA).optional().build()),
    ("m", SchemaBuilder.map(STRING_SCHEMA, opt(BOOLEAN_SCHEMA)).optional().build()),
    ("mi", SchemaBuilder.map(INT32_SCHEMA, STRING_SCHEMA).optional().build()),
    ("st", struct(("x", opt(INT8_SCHEMA)), ("y", opt(BYTES_SCHEMA)),
                  ("z", SchemaBuilder.array(opt(FLOAT64_SCHEMA)).optional().build()),
                  optional=True)),
)  # fmt: skip
ROW_ARROW = pa.struct([
    ("l", pa.int64()), ("i", pa.int32()), ("f", pa.float32()), ("d", pa.float64()),
    ("s", pa.string()), ("by", pa.binary()), ("dec", pa.decimal128(20, 3)),
    ("a", pa.list_(pa.int64())), ("m", pa.map_(pa.string(), pa.bool_())),
    ("mi", pa.map_(pa.int32(), pa.string())),
    ("st", pa.struct([("x", pa.int8()), ("y", pa.binary()), ("z", pa.list_(pa.float64()))])),
])  # fmt: skip


@given(st.lists(st.tuples(
    st.none() | st.integers(-(2**63), 2**63 - 1), st.none() | st.integers(-(2**31), 2**31 - 1),
    st.none() | st.floats(width=32), st.none() | st.floats(), st.none() | st.text(max_size=8),
    st.none() | st.binary(max_size=7),
    st.none() | st.decimals(min_value=-(10**16), max_value=10**16, places=3, allow_nan=False),
    st.none() | st.lists(st.none() | st.integers(-(2**63), 2**63 - 1), max_size=4),
    st.none() | st.dictionaries(st.text(max_size=3), st.none() | st.booleans(), max_size=4),
    st.none() | st.dictionaries(st.integers(-(2**31), 2**31 - 1), st.text(max_size=2),
                                max_size=4),
    st.none() | st.tuples(st.none() | st.integers(-128, 127), st.none() | st.binary(max_size=3),
                          st.none() | st.lists(st.none() | st.floats(), max_size=3)),
), min_size=1, max_size=30))  # fmt: skip
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_hypothesis_rows_are_the_row_paths_bytes(rows: list[tuple[Any, ...]]) -> None:
    names = [ROW_ARROW.field(i).name for i in range(ROW_ARROW.num_fields)]
    values = [dict(zip(names, row, strict=True)) for row in rows]
    for v in values:
        for key in ("m", "mi"):
            v[key] = None if v[key] is None else list(v[key].items())
        if v["st"] is not None:
            v["st"] = dict(zip(("x", "y", "z"), v["st"], strict=True))
        if v["dec"] is not None:
            v["dec"] = v["dec"].quantize(D("0.001"))
    assert_same(ROW_SCHEMA, pa.array(values, ROW_ARROW))


@given(st.lists(st.floats(width=32), min_size=1, max_size=50),
       st.lists(st.floats(), min_size=1, max_size=50))  # fmt: skip
@settings(max_examples=200, deadline=None)
def test_floats_and_doubles_of_every_kind(floats: list[float], doubles: list[float]) -> None:
    assert_same(opt(FLOAT32_SCHEMA), pa.array(floats, pa.float32()))
    assert_same(FLOAT64_SCHEMA, pa.array(doubles, pa.float64()))
    assert_same(FLOAT64_SCHEMA, pa.array(floats, pa.float32()))  # a float32 read as a double


@given(st.lists(st.text(), min_size=1, max_size=20))
@settings(max_examples=150, deadline=None)
def test_strings_of_any_characters(strings: list[str]) -> None:
    assert_same(STRING_SCHEMA, pa.array(strings, pa.string()))
    assert_same(STRING_SCHEMA, pa.array(strings, pa.large_string()))
    schema = SchemaBuilder.map(STRING_SCHEMA, STRING_SCHEMA).build()
    assert_same(schema, pa.array([list(zip(strings, strings, strict=True))[:1]],
                                 pa.map_(pa.string(), pa.string())))  # fmt: skip


def _to_rows(schema: Schema, rows: list[Any], arrow: pa.DataType, base64: bool = False) -> None:
    """The rows go row by row (``base64``: only where Decimals are written as base64)."""
    for name, conv in converters():
        if not base64 or "NUMERIC" not in name:
            assert column_rows(schema, pa.array(rows, arrow), conv._compiler)[0] is None, name


def test_what_the_column_path_leaves_to_the_rows() -> None:
    one = pa.struct([("x", pa.int64())])
    # a null row; a null where the field is required and has no default
    _to_rows(struct(("x", INT64_SCHEMA)), [{"x": 1}, None], one)
    _to_rows(struct(("x", INT64_SCHEMA)), [{"x": None}], one)
    # an Arrow type the row path takes another way, or refuses
    _to_rows(struct(("x", FLOAT32_SCHEMA)), [{"x": 1.5}], pa.struct([("x", pa.float64())]))
    _to_rows(struct(("x", STRING_SCHEMA)), [{"x": b"a"}], pa.struct([("x", pa.binary())]))
    _to_rows(struct(("x", opt(Date.SCHEMA))), [{"x": 5}], pa.struct([("x", pa.int32())]))
    # a Decimal of another scale (refused in base64; as a number, its text as it is)
    _to_rows(struct(("x", Decimal.schema(3))), [{"x": D("1.50")}],
             pa.struct([("x", pa.decimal128(5, 2))]), base64=True)  # fmt: skip
    numeric = make_converter("json", {"decimal.format": "NUMERIC"})
    column = pa.array([D("1.50")], pa.decimal128(5, 2))
    assert numeric.from_connect_block("t", Decimal.schema(3), column) == [b"1.50"]  # type: ignore[attr-defined]
    # a repeated key (the row path's dict keeps one); float keys with several entries
    m = SchemaBuilder.map(STRING_SCHEMA, INT32_SCHEMA).build()
    _to_rows(struct(("m", m)), [{"m": [("a", 1), ("a", 2)]}],
             pa.struct([("m", pa.map_(pa.string(), pa.int32()))]))  # fmt: skip
    mf = SchemaBuilder.map(FLOAT64_SCHEMA, INT32_SCHEMA).build()
    _to_rows(struct(("m", mf)), [{"m": [(0.0, 1), (-0.0, 2)]}],
             pa.struct([("m", pa.map_(pa.float64(), pa.int32()))]))  # fmt: skip
    # a date beyond Python's; a list that is no Arrow array
    _to_rows(opt(Date.SCHEMA), [3_000_000], pa.int32())
    assert column_rows(INT64_SCHEMA, [1, 2], make_converter("json")._compiler)[0] is None  # type: ignore[attr-defined]
    days = pa.array([3_000_000], pa.int32()).cast(pa.date32())
    assert encode_column(days, Date.SCHEMA, make_converter("json")._compiler) is None  # type: ignore[attr-defined]


def test_maps_as_each_converter_writes_them() -> None:
    schema = struct(
        ("mi", SchemaBuilder.map(INT32_SCHEMA, STRING_SCHEMA).build()),
        ("mos", SchemaBuilder.map(OPTIONAL_STRING_SCHEMA, INT32_SCHEMA).build()),
    )
    arrow = pa.struct([("mi", pa.map_(pa.int32(), pa.string())),
                       ("mos", pa.map_(pa.string(), pa.int32()))])  # fmt: skip
    column = pa.array([{"mi": [(1, "a"), (2, "b")], "mos": [("k", 1)]}], arrow)
    json = make_converter("json")
    assert json.from_connect_block("t", schema, column) == [  # type: ignore[attr-defined]
        b'{"mi":[[1,"a"],[2,"b"]],"mos":{"k":1}}'
    ]
    assert registry().from_connect_block("t", schema, column) == [
        HEADER + b'{"mi":[{"key":1,"value":"a"},{"key":2,"value":"b"}],'
        b'"mos":[{"key":"k","value":1}]}'
    ]


def test_the_rows_spark_brings_take_the_column_path() -> None:
    schema, column = spark_rows(ratio_scale=1e5, note_suffix=" \U0001f600")
    assert_same(schema, column)


def test_null_lists_and_structs_over_values_of_their_own() -> None:
    # Arrow lets a null list cover items, and a null struct hold child values
    items = pa.array(["a", "b", None, "c"])
    lists = pa.ListArray.from_arrays(pa.array([0, 2, 3, 4], pa.int32()), items,
                                     mask=pa.array([False, True, False]))  # fmt: skip
    structs = pa.StructArray.from_arrays([pa.array([1, 2, 3])], names=["x"],
                                         mask=pa.array([False, True, False]))  # fmt: skip
    column = pa.StructArray.from_arrays([lists, structs], names=["l", "s"])
    schema = struct(("l", SchemaBuilder.array(OPTIONAL_STRING_SCHEMA).optional().build()),
                    ("s", struct(("x", INT64_SCHEMA), optional=True)))  # fmt: skip
    assert_same(schema, column)
    assert make_converter("json").from_connect_block("t", schema, column) == [  # type: ignore[attr-defined]
        b'{"l":["a","b"],"s":{"x":1}}',
        b'{"l":null,"s":null}',
        b'{"l":["c"],"s":{"x":3}}',
    ]


@given(st.lists(st.integers(-(10**30), 10**30) | st.integers(-100, 100), min_size=1, max_size=20),
       st.sampled_from([0, 1, 5, 9, 20, 37]))  # fmt: skip
@settings(max_examples=100, deadline=None)
def test_decimals_of_any_scale_as_base64_and_as_numbers(unscaled: list[int], scale: int) -> None:
    # as numbers, Python's str of a Decimal (an exponent where it is small: 1E-7)
    values = [D(v).scaleb(-scale) for v in unscaled if abs(v) < 10**38]
    assert_same(Decimal.schema(scale), pa.array(values, pa.decimal128(38, scale)))


def test_timestamps_beyond_pythons_go_to_the_rows() -> None:
    schema = opt(Timestamp.SCHEMA)
    for unit, tick in (("s", 2**62), ("ms", -(2**62)), ("us", 2**63 - 1)):
        column = pa.array([0, tick], pa.int64()).cast(pa.timestamp(unit))
        assert encode_column(column, schema, make_converter("json")._compiler) is None  # type: ignore[attr-defined]
    time = pa.array([86_400_000], pa.int32()).cast(pa.time32("ms"))
    assert encode_column(time, Time.SCHEMA, make_converter("json")._compiler) is None  # type: ignore[attr-defined]
