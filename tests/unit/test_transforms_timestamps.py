"""TimestampConverter, without and with schemas (docs' examples first, then Connect's
behaviour: UTC, SimpleDateFormat patterns, precision of Unix times)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from eos.api.logical import Date, Time, Timestamp
from eos.api.schema import (
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
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

UTC = datetime.UTC
MOMENT = datetime.datetime(2019, 4, 25, 14, 2, 16, 123000, tzinfo=UTC)
MILLIS = 1556200936123


def convert(value: Any, **settings: str) -> Any:
    return apply(one("TimestampConverter$Value", **settings), record(value)).value


def test_timestamp_converter_docs_examples() -> None:
    c = chain(
        {
            "transforms": "TimestampConverter",
            "transforms.TimestampConverter.type": CONNECT + "TimestampConverter$Value",
            "transforms.TimestampConverter.format": "yyyy-MM-dd",
            "transforms.TimestampConverter.target.type": "string",
        }
    )
    # The older docs show "2014-04-25" for 1556204536000 (a typo: it is 2019-04-25); the
    # newer show "2023-10-05" for 1696521093, which are seconds: milliseconds by default.
    assert apply(c, record(1556204536000)).value == "2019-04-25"
    assert apply(c, record(1696521093)).value == "1970-01-20"
    assert (
        convert(1696521093, format="yyyy-MM-dd", target_type="string", unix_precision="seconds")
        == "2023-10-05"
    )


def test_timestamp_converter_docs_microseconds_example() -> None:
    c = chain(
        {
            "transforms": "TimestampConverter",
            "transforms.TimestampConverter.type": CONNECT + "TimestampConverter$Value",
            "transforms.TimestampConverter.field": "event_date_long",
            "transforms.TimestampConverter.unix.precision": "microseconds",
            "transforms.TimestampConverter.target.type": "Timestamp",
        }
    )
    out = apply(c, record({"event_date_long": 1556200936123456, "id": 1})).value
    assert out == {"event_date_long": MOMENT, "id": 1}  # the 456 µs are lost


@pytest.mark.parametrize(
    ("value", "target", "expected"),
    [
        (MILLIS, "Timestamp", MOMENT),
        (MILLIS, "Date", datetime.date(2019, 4, 25)),
        (MILLIS, "Time", datetime.time(14, 2, 16, 123000)),
        (MILLIS, "unix", MILLIS),
        (MOMENT, "unix", MILLIS),
        (MOMENT.replace(tzinfo=None), "unix", MILLIS),  # naive is UTC
        (datetime.date(2019, 4, 25), "unix", 1556150400000),
        (datetime.time(14, 2, 16, 123000), "unix", 50536123),
        ("2019-04-25 14:02:16.123", "Timestamp", MOMENT),
        ("2019-04-25 14:02:16.123", "unix", MILLIS),
    ],
)
def test_timestamp_converter_schemaless_whole_value(value: Any, target: str, expected: Any) -> None:
    got = convert(value, target_type=target, format="yyyy-MM-dd HH:mm:ss.SSS")
    assert got == expected
    assert type(got) is type(expected)


@pytest.mark.parametrize(
    ("precision", "value", "millis", "back"),
    [
        ("seconds", 1556200936, 1556200936000, 1556200936),
        ("milliseconds", MILLIS, MILLIS, MILLIS),
        ("microseconds", MILLIS * 1000 + 999, MILLIS, MILLIS * 1000),
        ("nanoseconds", MILLIS * 10**6 + 1, MILLIS, MILLIS * 10**6),
        ("microseconds", -1999, -1, -1000),  # toward zero, as Java's TimeUnit
    ],
)
def test_unix_precision_both_ways(precision: str, value: int, millis: int, back: int) -> None:
    to_moment = one("TimestampConverter$Value", target_type="Timestamp", unix_precision=precision)
    moment = apply(to_moment, record(value)).value
    assert moment == datetime.datetime(1970, 1, 1, tzinfo=UTC) + datetime.timedelta(
        milliseconds=millis
    )
    to_unix = one("TimestampConverter$Value", target_type="unix", unix_precision=precision)
    assert apply(to_unix, record(moment)).value == back


def test_timestamp_converter_field_schemaless_and_to_string() -> None:
    out = convert(
        {"ts": MILLIS, "other": "x"},
        field="ts",
        target_type="string",
        format="yyyy-MM-dd'T'HH:mm:ss.SSSZ",
    )
    assert out == {"ts": "2019-04-25T14:02:16.123+0000", "other": "x"}
    assert convert({"other": 1}, field="ts", target_type="unix") == {"other": 1, "ts": None}
    assert convert(None, field="ts", target_type="unix") is None


def test_timestamp_converter_with_schema_whole_value() -> None:
    c = one("TimestampConverter$Value", target_type="Timestamp")
    out = apply(c, record(MILLIS, value_schema=INT64_SCHEMA))
    assert (out.value, out.value_schema) == (MOMENT, Timestamp.SCHEMA)
    out = apply(c, record(None, value_schema=OPTIONAL_INT64_SCHEMA))
    assert (out.value, out.value_schema) == (None, Timestamp.builder().optional().build())
    to_string = one("TimestampConverter$Value", target_type="string", format="yyyyMMdd")
    out = apply(to_string, record(datetime.date(2019, 4, 25), value_schema=Date.SCHEMA))
    assert (out.value, out.value_schema) == ("20190425", STRING_SCHEMA)
    out = apply(
        one("TimestampConverter$Value", target_type="unix"),
        record(datetime.time(0, 0, 1), value_schema=Time.SCHEMA),
    )
    assert (out.value, out.value_schema) == (1000, INT64_SCHEMA)


def test_timestamp_converter_with_schema_field() -> None:
    schema = struct_schema(("ts", OPTIONAL_STRING_SCHEMA), ("id", INT32_SCHEMA), name="row")
    c = one("TimestampConverter$Value", field="ts", target_type="Date", format="yyyy-MM-dd")
    out = apply(c, record(struct(schema, ts="2019-04-25", id=1), value_schema=schema))
    new = out.value_schema
    assert new is not None
    assert new.name == "row"
    assert [(f.name, f.schema) for f in new.fields] == [
        ("ts", Date.builder().optional().build()),
        ("id", INT32_SCHEMA),
    ]
    assert as_dict(out.value) == {"ts": datetime.date(2019, 4, 25), "id": 1}
    out.value.validate()
    assert as_dict(apply(c, record(struct(schema, id=2), value_schema=schema)).value) == {
        "ts": None,
        "id": 2,
    }
    assert apply(c, record(None, value_schema=schema)).value is None


def test_timestamp_converter_failures() -> None:
    with pytest.raises(TransformError, match=r"does not match pattern \(yyyy-MM-dd\)"):
        convert("25/04/2019", target_type="unix", format="yyyy-MM-dd")
    with pytest.raises(TransformError, match="does not support bool objects as timestamps"):
        convert(True, target_type="unix")
    with pytest.raises(TransformError, match="Expected Unix timestamp to be a Long, but found str"):
        apply(
            one("TimestampConverter$Value", target_type="Date"),
            record("1", value_schema=INT64_SCHEMA),
        )
    with pytest.raises(TransformError, match="does not correspond to a known timestamp type"):
        apply(
            one("TimestampConverter$Value", target_type="Date"),
            record(1, value_schema=INT32_SCHEMA),
        )
