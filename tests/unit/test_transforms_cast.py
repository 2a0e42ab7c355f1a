"""Cast, without and with schemas: the docs' examples, then Java's conversions as
Connect's Cast does them (narrowing wraps, floats truncate, strings parse strictly,
``string`` is Java's text of the value)."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest

from eos.api.logical import Date, Decimal, Time, Timestamp
from eos.api.schema import (
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    STRING_SCHEMA,
    SchemaBuilder,
    SchemaType,
)
from eos.errors import TransformError
from tests.unit.transform_cases import (
    CONNECT,
    apply,
    as_dict,
    chain,
    one,
    record,
    struct,
    struct_schema,
)


def cast(spec: str, value: Any, **fields: Any) -> Any:
    return apply(one("Cast$Value", spec=spec), record(value, **fields)).value


def test_cast_docs_examples() -> None:
    whole = chain(
        {
            "transforms": "Cast",
            "transforms.Cast.type": CONNECT + "Cast$Value",
            "transforms.Cast.spec": "string",
        }
    )
    # The docs show "63521704.02"; Connect writes Double.toString of the double, which for
    # 10^7 and above is scientific. A Decimal (Connect's BigDecimal) gives the docs' text.
    assert apply(whole, record(63521704.02)).value == "6.352170402E7"
    schema = Decimal.schema(2)
    out = apply(whole, record(decimal.Decimal("63521704.02"), value_schema=schema))
    assert (out.value, out.value_schema) == ("63521704.02", STRING_SCHEMA)
    fields = chain(
        {
            "transforms": "Cast",
            "transforms.Cast.type": CONNECT + "Cast$Value",
            "transforms.Cast.spec": "ID:string,score:float64",
        }
    )
    # (The docs' "After" has the ID's digits swapped, 46290, a typo.)
    assert apply(fields, record({"ID": 46920, "score": 4761})).value == {
        "ID": "46920",
        "score": 4761.0,
    }


@pytest.mark.parametrize(
    ("spec", "value", "expected"),
    [
        ("int8", 300, 44),
        ("int8", -129, 127),
        ("int16", 70000, 4464),
        ("int32", 2**40 + 5, 5),
        ("int64", 2**64 + 3, 3),
        ("int32", 1.9, 1),
        ("int32", -1.9, -1),
        ("int32", 1e12, 2**31 - 1),
        ("int64", float("nan"), 0),
        ("int8", 1e12, -1),
        ("int8", "42", 42),
        ("int16", "-7", -7),
        ("int32", True, 1),
        ("boolean", 0.5, False),
        ("boolean", 2, True),
        ("boolean", "TRUE", True),
        ("boolean", "yes", False),
        ("float64", "1.5", 1.5),
        ("float64", 3, 3.0),
        ("float32", 1.23456789, 1.2345679),
        ("float32", True, 1.0),
        ("string", 4761.0, "4761.0"),
        ("string", 1e-4, "1.0E-4"),
        ("string", 12, "12"),
        ("string", False, "false"),
        ("string", b"\x00\x01", "AAE="),
    ],
)
def test_cast_schemaless_whole_value(spec: str, value: Any, expected: Any) -> None:
    got = cast(spec, value)
    assert got == expected
    assert type(got) is type(expected)


@pytest.mark.parametrize(
    ("spec", "value", "says"),
    [
        ("int8", "300", r"Value \(300\) was out of range for requested data type"),
        ("int32", "4.5", r"Value \(4.5\) was out of range"),
        ("int32", b"x", "Unexpected type in Cast transformation: bytes"),
        ("int32", [1], "does not support casting from ARRAY"),
        ("string", {"a": 1}, "does not support casting from MAP"),
        ("int64", datetime.datetime(2020, 1, 1), "not supported by Connect's data API"),
    ],
)
def test_cast_failures(spec: str, value: Any, says: str) -> None:
    with pytest.raises(TransformError, match=says):
        cast(spec, value)


def test_cast_schemaless_fields_put_absent_ones_as_null() -> None:
    assert cast("a:int8,missing:string", {"a": 300, "b": "x"}) == {
        "a": 44,
        "b": "x",
        "missing": None,
    }
    assert one("Cast$Value", spec="int8").apply(record(None)) == record(None)


def test_cast_fields_with_schema() -> None:
    optional_default = SchemaBuilder.int32().optional().default(42).build()
    schema = struct_schema(
        ("int8", INT8_SCHEMA),
        ("int32", optional_default),
        ("float", FLOAT64_SCHEMA),
        ("bool", SchemaBuilder.bool().build()),
        ("string", STRING_SCHEMA),
        ("untouched", INT64_SCHEMA),
        name="row",
    )
    value = struct(schema, int8=8, int32=None, float=3.5, bool=True, string="17", untouched=9)
    c = one("Cast$Value", spec="int8:int16,int32:string,float:int32,bool:float64,string:int64")
    out = apply(c, record(value, value_schema=schema))
    new = out.value_schema
    assert new is not None
    assert new.name == "row"
    types = [(f.name, f.schema.type, f.schema.optional, f.schema.default) for f in new.fields]
    assert types == [
        ("int8", SchemaType.INT16, False, None),
        ("int32", SchemaType.STRING, True, "42"),
        ("float", SchemaType.INT32, False, None),
        ("bool", SchemaType.FLOAT64, False, None),
        ("string", SchemaType.INT64, False, None),
        ("untouched", SchemaType.INT64, False, None),
    ]
    assert as_dict(out.value) == {
        "int8": 8,
        "int32": "42",
        "float": 3,
        "bool": 1.0,
        "string": 17,
        "untouched": 9,
    }
    out.value.validate()
    plain = one("Cast$Value", spec="int32:string", replace_null_with_default="false")
    assert as_dict(apply(plain, record(value, value_schema=schema)).value)["int32"] is None


def test_cast_whole_value_with_schema() -> None:
    out = apply(
        one("Cast$Key", spec="int32"), record("v", key=42, key_schema=OPTIONAL_INT64_SCHEMA)
    )
    assert (out.key, out.key_schema) == (42, SchemaBuilder.int32().optional().build())
    out = apply(one("Cast$Value", spec="float64"), record(2.5, value_schema=FLOAT32_SCHEMA))
    assert (out.value, out.value_schema) == (2.5, FLOAT64_SCHEMA)
    out = apply(one("Cast$Value", spec="string"), record(0.1, value_schema=FLOAT32_SCHEMA))
    assert out.value == "0.1"  # Float.toString of a FLOAT32
    with pytest.raises(TransformError, match="Unexpected type in Cast transformation: bytes"):
        one("Cast$Value", spec="int8").apply(record(b"1", value_schema=BYTES_SCHEMA))


def test_cast_logical_values() -> None:
    moment = datetime.datetime(2019, 4, 25, 14, 2, 16, 123000, tzinfo=datetime.UTC)
    millis = 1556200936123
    assert cast("int64", moment, value_schema=Timestamp.SCHEMA) == millis
    assert cast("string", moment, value_schema=Timestamp.SCHEMA) == "2019-04-25T14:02:16.123Z"
    day = datetime.date(2019, 4, 25)
    assert cast("int32", day, value_schema=Date.SCHEMA) == 18011
    assert cast("string", day, value_schema=Date.SCHEMA) == "2019-04-25"
    time = datetime.time(14, 2, 16, 123000)
    assert cast("int32", time, value_schema=Time.SCHEMA) == 50536123
    assert cast("string", time, value_schema=Time.SCHEMA) == "14:02:16.123Z"
    assert cast("int16", 5, value_schema=INT32_SCHEMA) == 5
    assert INT16_SCHEMA.type is SchemaType.INT16
