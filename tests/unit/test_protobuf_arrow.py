"""The Protobuf converter's column path (eos/converters/protobuf_arrow.py) against
its row path, byte for byte: every type a Spark row brings, nulls and edge values, both
settings of ``optional.for.nullables``, hypothesis' rows; and what goes back to rows."""

from __future__ import annotations

import datetime
import decimal
from types import SimpleNamespace
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
from eos.converters.protobuf import ProtobufConverter
from eos.converters.protobuf_arrow import _map_order_known, encode_column
from tests.unit.arrow_cases import opt, spark_rows, struct

UTC = datetime.UTC
HEADER = b"\x00\x00\x00\x00\x2a\x00"
ROW = ProtobufConverter().row_bytes  # the row path, against which the column path checks


def rows_path(schema: Schema, column: Any, nullables: bool) -> list[bytes | None]:
    converter = ProtobufConverter()
    converter.optional_for_nullables = nullables
    encode = converter.encoder(converter.translate(schema), None)
    return [None if v is None else HEADER + encode(v) for v in column_values(schema, column)]


def assert_same(schema: Schema, column: Any) -> None:
    for nullables in (False, True):
        expected = rows_path(schema, column, nullables)
        got = encode_column(column, schema, HEADER, nullables, ROW)
        assert got is not None, "the column path went back to rows"
        for i, (a, b) in enumerate(zip(got, expected, strict=True)):
            assert a == b, f"row {i} optional.for.nullables={nullables}: {a!r} != {b!r}"


DEEP = struct(("x", OPTIONAL_INT64_SCHEMA), optional=True)
INNER = struct(("a", opt(INT8_SCHEMA)), ("s", OPTIONAL_STRING_SCHEMA), ("deep", DEEP),
               optional=True)  # fmt: skip
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
    ("flags", SchemaBuilder.array(BOOLEAN_SCHEMA).optional().build()),
    ("blobs", SchemaBuilder.array(BYTES_SCHEMA).optional().build()),
    ("structs", SchemaBuilder.array(INNER).optional().build()),
    ("days", SchemaBuilder.array(Date.builder().optional().build()).optional().build()),
    ("m", SchemaBuilder.map(STRING_SCHEMA, OPTIONAL_INT64_SCHEMA).optional().build()),
    ("mi", SchemaBuilder.map(INT32_SCHEMA, OPTIONAL_STRING_SCHEMA).optional().build()),
    ("ml", SchemaBuilder.map(INT64_SCHEMA, INT32_SCHEMA).optional().build()),
    ("mb", SchemaBuilder.map(BOOLEAN_SCHEMA, FLOAT32_SCHEMA).optional().build()),
    ("ms", SchemaBuilder.map(STRING_SCHEMA, INNER).optional().build()),
    ("mts", SchemaBuilder.map(STRING_SCHEMA, Timestamp.builder().optional().build())
     .optional().build()),
)  # fmt: skip
ARROW = pa.struct([
    ("i8", pa.int8()), ("i16", pa.int16()), ("i32", pa.int32()), ("i64", pa.int64()),
    ("f32", pa.float32()), ("f64", pa.float64()), ("b", pa.bool_()), ("s", pa.string()),
    ("by", pa.binary()), ("dec", pa.decimal128(38, 2)), ("d", pa.date32()),
    ("ts", pa.timestamp("us", "UTC")), ("t", pa.time64("us")),
    ("inner", pa.struct([("a", pa.int8()), ("s", pa.string()),
                         ("deep", pa.struct([("x", pa.int64())]))])),
    ("tags", pa.list_(pa.string())), ("nums", pa.list_(pa.int32())),
    ("floats", pa.list_(pa.float64())), ("flags", pa.list_(pa.bool_())),
    ("blobs", pa.list_(pa.binary())),
    ("structs", pa.list_(pa.struct([("a", pa.int8()), ("s", pa.string()),
                                    ("deep", pa.struct([("x", pa.int64())]))]))),
    ("days", pa.list_(pa.date32())),
    ("m", pa.map_(pa.string(), pa.int64())), ("mi", pa.map_(pa.int32(), pa.string())),
    ("ml", pa.map_(pa.int64(), pa.int32())), ("mb", pa.map_(pa.bool_(), pa.float32())),
    ("ms", pa.map_(pa.string(), pa.struct([("a", pa.int8()), ("s", pa.string()),
                                           ("deep", pa.struct([("x", pa.int64())]))]))),
    ("mts", pa.map_(pa.string(), pa.timestamp("ms"))),
])  # fmt: skip
D = decimal.Decimal
EDGES: list[dict[str, Any]] = [
    {"i8": -128, "i16": 32767, "i32": -(2**31), "i64": 2**63 - 1, "f32": -0.0, "f64": 0.0,
     "b": False, "s": "", "by": b"", "dec": D("0.00"), "d": datetime.date(1970, 1, 1),
     "ts": datetime.datetime(1970, 1, 1, tzinfo=UTC), "t": datetime.time(0),
     "inner": {"a": None, "s": None, "deep": None}, "tags": [], "nums": [None], "floats": [],
     "flags": [False], "blobs": [b""], "structs": [None], "days": [None],
     "m": [("x", None)], "mi": [], "ml": [(0, 0)], "mb": [(False, 0.0)],
     "ms": [("", {"a": None, "s": None, "deep": None})], "mts": [("z", None)]},
    {"i8": 127, "i16": -32768, "i32": 2**31 - 1, "i64": -(2**63), "f32": float("inf"),
     "f64": float("nan"), "b": True, "s": "héllo ✓ 😀", "by": b"\x00\xff",
     "dec": D("-" + "9" * 36 + ".99"), "d": datetime.date(1, 1, 1),
     "ts": datetime.datetime(1969, 12, 31, 23, 59, 59, 999_500, UTC),
     "t": datetime.time(23, 59, 59, 999_999),
     "inner": {"a": 0, "s": None, "deep": {"x": None}},
     "tags": ["a", None, "", "ü"], "nums": [1, -1, 0, None, 2**31 - 1],
     "floats": [-0.0, 1e300, float("-inf")], "flags": [True, False, True],
     "blobs": [b"\x01", b""], "structs": [{"a": 1, "s": "x", "deep": None}, None,
                                           {"a": None, "s": None, "deep": None}],
     "days": [datetime.date(9999, 12, 31), datetime.date(1969, 12, 31)],
     "m": [("b", 1), ("a", -1), ("aa", None), ("", 0), ("é", 2**62), ("ab", 3)],
     "mi": [(5, "five"), (-3, None), (0, ""), (-(2**31), "min"), (7, "seven")],
     "ml": [(1 << 40, 1), (-1, -1), (3, 0)], "mb": [(True, 1.5), (False, -2.5)],
     "ms": [("k", {"a": 3, "s": "v", "deep": {"x": -7}}), ("j", {"a": None, "s": "",
                                                               "deep": None})],
     "mts": [("a", datetime.datetime(2024, 2, 29, 12, 0, 0, 123_456)), ("b", None)]},
    {"i8": 0, "i16": 0, "i32": 0, "i64": 0, "f32": 1.17549435e-38, "f64": 5e-324,
     "b": None, "s": None, "by": None, "dec": None, "d": None, "ts": None, "t": None,
     "inner": None, "tags": None, "nums": None, "floats": None, "flags": None, "blobs": None,
     "structs": None, "days": None, "m": None, "mi": None, "ml": None, "mb": None,
     "ms": None, "mts": None},
    {"i8": None, "i16": None, "i32": None, "i64": 1, "f32": 3.4028235e38, "f64": -1.5,
     "b": True, "s": "x" * 300, "by": bytes(range(256)) * 3, "dec": D("0.01"),
     "d": datetime.date(2024, 2, 29), "ts": datetime.datetime(9999, 12, 31, 23, 59, 59, 999999,
                                                              UTC),
     "t": datetime.time(12, 0, 0, 1000), "inner": {"a": -128, "s": "in", "deep": {"x": 0}},
     "tags": ["only"], "nums": [], "floats": [0.0], "flags": [], "blobs": [],
     "structs": [], "days": [], "m": [], "mi": [(1, "one")], "ml": [], "mb": [],
     "ms": [], "mts": []},
]  # fmt: skip


def test_every_spark_type_with_nulls_and_edges_is_the_row_paths_bytes() -> None:
    assert _map_order_known(ROW), "upb sorts maps as the column path expects"
    column = pa.array([*EDGES, None, *EDGES], ARROW)
    assert_same(SPARK, column)
    assert_same(SPARK, column.slice(3, 5))  # an offset into every buffer
    assert_same(SPARK, pa.chunked_array([column.slice(0, 2), column.slice(2)]))


def test_the_wire_format_and_a_null_row() -> None:
    schema = struct(("id", INT64_SCHEMA), ("name", STRING_SCHEMA))
    column = pa.array([{"id": -1, "name": "a"}, None, {"id": 0, "name": ""}],
                      pa.struct([("id", pa.int64()), ("name", pa.string())]))  # fmt: skip
    assert encode_column(column, schema, HEADER, False, ROW) == [
        HEADER + b"\x08" + b"\xff" * 9 + b"\x01" + b"\x12\x01a", None, HEADER,
    ]  # fmt: skip
    assert encode_column(column.slice(0, 0), schema, HEADER, False, ROW) == []


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


@given(st.lists(st.tuples(
    st.none() | st.integers(-(2**63), 2**63 - 1), st.none() | st.integers(-(2**31), 2**31 - 1),
    st.none() | st.floats(width=32), st.none() | st.floats(), st.none() | st.text(max_size=5),
    st.none() | st.decimals(min_value=-(10**16), max_value=10**16, places=3, allow_nan=False),
    st.none() | st.lists(st.none() | st.integers(-(2**63), 2**63 - 1), max_size=4),
    st.none() | st.dictionaries(st.text(max_size=3), st.none() | st.booleans(), max_size=4),
    st.none() | st.dictionaries(st.integers(-(2**31), 2**31 - 1), st.text(max_size=2),
                                max_size=4),
    st.none() | st.tuples(st.none() | st.integers(-128, 127), st.none() | st.binary(max_size=3)),
), min_size=1, max_size=30))  # fmt: skip
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_hypothesis_rows_are_the_row_paths_bytes(rows: list[tuple[Any, ...]]) -> None:
    schema = struct(
        ("l", OPTIONAL_INT64_SCHEMA), ("i", OPTIONAL_INT32_SCHEMA), ("f", opt(FLOAT32_SCHEMA)),
        ("d", opt(FLOAT64_SCHEMA)), ("s", OPTIONAL_STRING_SCHEMA),
        ("dec", Decimal.builder(3).optional().build()),
        ("a", SchemaBuilder.array(OPTIONAL_INT64_SCHEMA).optional().build()),
        ("m", SchemaBuilder.map(STRING_SCHEMA, opt(BOOLEAN_SCHEMA)).optional().build()),
        ("mi", SchemaBuilder.map(INT32_SCHEMA, STRING_SCHEMA).optional().build()),
        ("st", struct(("x", opt(INT8_SCHEMA)), ("y", opt(BYTES_SCHEMA)), optional=True)),
    )  # fmt: skip
    arrow = pa.struct([
        ("l", pa.int64()), ("i", pa.int32()), ("f", pa.float32()), ("d", pa.float64()),
        ("s", pa.string()), ("dec", pa.decimal128(20, 3)), ("a", pa.list_(pa.int64())),
        ("m", pa.map_(pa.string(), pa.bool_())), ("mi", pa.map_(pa.int32(), pa.string())),
        ("st", pa.struct([("x", pa.int8()), ("y", pa.binary())])),
    ])  # fmt: skip
    names = [arrow.field(i).name for i in range(arrow.num_fields)]
    values = [dict(zip(names, row, strict=True)) for row in rows]
    for v in values:
        for key in ("m", "mi"):
            v[key] = None if v[key] is None else list(v[key].items())
        if v["st"] is not None:
            v["st"] = dict(zip(("x", "y"), v["st"], strict=True))
        if v["dec"] is not None:
            v["dec"] = v["dec"].quantize(D("0.001"))
    assert_same(schema, pa.array(values, arrow))


def test_maps_of_other_keys_with_one_entry_are_entries() -> None:
    schema = struct(
        ("mf", SchemaBuilder.map(FLOAT64_SCHEMA, OPTIONAL_INT32_SCHEMA).build()),
        ("mb", SchemaBuilder.map(BYTES_SCHEMA, STRING_SCHEMA).optional().build()),
    )
    arrow = pa.struct([("mf", pa.map_(pa.float64(), pa.int32())),
                       ("mb", pa.map_(pa.binary(), pa.string()))])  # fmt: skip
    rows = [{"mf": [(0.0, None)], "mb": [(b"", "")]}, {"mf": [(1.5, 2)], "mb": None},
            {"mf": [], "mb": [(b"k", "v")]}]  # fmt: skip
    assert_same(schema, pa.array(rows, arrow))


def _fallback(schema: Schema, rows: list[Any], arrow: pa.DataType) -> None:
    assert encode_column(pa.array(rows, arrow), schema, HEADER, False, ROW) is None


def test_what_the_column_path_leaves_to_the_rows() -> None:
    one = pa.struct([("x", pa.int64())])
    # a value beyond int32 for an INT32 field (the row path refuses it)
    _fallback(struct(("x", INT32_SCHEMA)), [{"x": 2**31}], one)
    # a null where the field has a default (the row path writes the default)
    _fallback(struct(("x", SchemaBuilder.int64().default(5).build())), [{"x": None}], one)
    # an Arrow type the row path might take otherwise
    _fallback(struct(("x", FLOAT32_SCHEMA)), [{"x": 1.5}], pa.struct([("x", pa.float64())]))
    _fallback(struct(("x", STRING_SCHEMA)), [{"x": b"a"}], pa.struct([("x", pa.binary())]))
    _fallback(struct(("x", opt(Date.SCHEMA))), [{"x": 5}], pa.struct([("x", pa.int32())]))
    _fallback(struct(("x", Decimal.schema(3))), [{"x": D("1.50")}],
              pa.struct([("x", pa.decimal128(5, 2))]))  # fmt: skip
    # a duplicate key (the row path's dict keeps one), maps of other keys with several
    m = SchemaBuilder.map(STRING_SCHEMA, INT32_SCHEMA).build()
    _fallback(struct(("m", m)), [{"m": [("a", 1), ("a", 2)]}],
              pa.struct([("m", pa.map_(pa.string(), pa.int32()))]))  # fmt: skip
    mf = SchemaBuilder.map(FLOAT64_SCHEMA, INT32_SCHEMA).build()
    _fallback(struct(("m", mf)), [{"m": [(1.0, 1), (2.0, 2)]}],
              pa.struct([("m", pa.map_(pa.float64(), pa.int32()))]))  # fmt: skip
    # a field the Arrow struct lacks; a column that is no struct
    _fallback(struct(("x", INT64_SCHEMA), ("y", INT64_SCHEMA)), [{"x": 1}], one)
    assert encode_column(pa.array([1]), INT64_SCHEMA, HEADER, False, ROW) is None


def test_the_converter_takes_blocks_by_column_and_falls_back_to_rows() -> None:
    converter = ProtobufConverter()
    converter.configure({"schema.registry.url": "http://127.0.0.1:1"}, False)
    schema = struct(("x", INT32_SCHEMA))
    # the registry's part (ids, the header) is tested against a real one in
    # tests/integration/test_converters_registry.py; here the writer is a stand-in
    by_row = SimpleNamespace(header=HEADER, encode=lambda value: b"<row>")
    converter.writer = lambda topic, s: by_row  # type: ignore[method-assign,assignment,return-value]
    column = pa.array([{"x": 1}, None], pa.struct([("x", pa.int64())]))
    assert converter.from_connect_block("t", schema, column) == [HEADER + b"\x08\x01", None]
    too_big = pa.array([{"x": 2**40}], pa.struct([("x", pa.int64())]))
    assert converter.from_connect_block("t", schema, too_big) == [HEADER + b"<row>"]
    converter.use_latest = True
    assert converter.from_connect_block("t", schema, column) == [HEADER + b"<row>", None]
    assert converter.from_connect_block("t", schema, [None]) == [None]
    converter.close()


def test_the_rows_spark_brings_in_the_schema_sparksource_declares() -> None:
    schema, column = spark_rows()
    assert_same(schema, column)
