"""Rows → records for SparkSource: the type table of services.connectors.spark.mapping."""

from __future__ import annotations

import datetime
import decimal
import json
from typing import Any

import pytest
from pyspark.sql import types as T

from services.connectors.spark.mapping import RecordMapper, converter, epoch_millis

UTC = datetime.UTC
CET = datetime.timezone(datetime.timedelta(hours=1))


@pytest.mark.parametrize(
    ("data_type", "value", "expected"),
    [
        (T.StringType(), "zoë", "zoë"),
        (T.LongType(), 2**62, 2**62),
        (T.BooleanType(), False, False),
        (T.DoubleType(), 1.25, 1.25),
        (T.DoubleType(), float("nan"), "NaN"),
        (T.FloatType(), float("-inf"), "-Infinity"),
        (T.DecimalType(12, 3), decimal.Decimal("12.300"), "12.300"),
        (T.DecimalType(38, 18), decimal.Decimal("0E-18"), "0.000000000000000000"),
        (
            T.DecimalType(38, 0),
            decimal.Decimal("12345678901234567890123456789"),
            "12345678901234567890123456789",
        ),
        (T.DateType(), datetime.date(2024, 2, 29), "2024-02-29"),
        (
            T.TimestampType(),
            datetime.datetime(2024, 1, 1, 1, 0, tzinfo=CET),
            "2024-01-01T00:00:00.000000+00:00",
        ),
        (
            T.TimestampType(),
            datetime.datetime(2024, 1, 1, 0, 0, 0, 5, tzinfo=UTC),
            "2024-01-01T00:00:00.000005+00:00",
        ),
        (T.TimestampNTZType(), datetime.datetime(2024, 1, 1, 8, 30), "2024-01-01T08:30:00.000000"),
        (T.BinaryType(), b"\x00\xff", "AP8="),
        (T.DayTimeIntervalType(), datetime.timedelta(days=1, hours=2, seconds=3.5), "P1DT2H0M3.5S"),
        (T.DayTimeIntervalType(), -datetime.timedelta(seconds=90), "-P0DT0H1M30S"),
        (T.ArrayType(T.DecimalType(4, 1)), [decimal.Decimal("1.0"), None], ["1.0", None]),
        (
            T.MapType(T.IntegerType(), T.DateType()),
            [(1, datetime.date(2000, 1, 1))],
            {"1": "2000-01-01"},
        ),
        (T.MapType(T.StringType(), T.LongType()), {"a": 1}, {"a": 1}),
        (T.MapType(T.BooleanType(), T.StringType()), [(True, "y")], {"true": "y"}),
        (
            T.StructType([T.StructField("at", T.DateType()), T.StructField("n", T.IntegerType())]),
            {"at": datetime.date(1999, 12, 31), "n": None},
            {"at": "1999-12-31", "n": None},
        ),
        (
            T.StructType([T.StructField("x", T.BinaryType())]),
            T.Row(x=b"a"),
            {"x": "YQ=="},
        ),
    ],
)
def test_value_mapping(data_type: T.DataType, value: Any, expected: Any) -> None:
    convert = converter(data_type)
    mapped = value if convert is None else convert(value)
    assert mapped == expected
    json.dumps(mapped, allow_nan=False)  # always valid JSON


def test_plain_types_are_passed_as_is() -> None:
    for data_type in (
        T.StringType(),
        T.IntegerType(),
        T.LongType(),
        T.BooleanType(),
        T.NullType(),
        T.ArrayType(T.StringType()),
    ):
        assert converter(data_type) is None


SCHEMA = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("region", T.StringType()),
        T.StructField("at", T.TimestampType()),
        T.StructField("price", T.DecimalType(5, 2)),
        T.StructField("__row", T.LongType()),
    ]
)


def _row() -> dict[str, Any]:
    return {
        "id": 7,
        "region": "eu",
        "at": datetime.datetime(2024, 1, 1, tzinfo=UTC),
        "price": decimal.Decimal("1.50"),
        "__row": 41,
    }


def test_record_fields() -> None:
    mapper = RecordMapper(
        SCHEMA, topic="orders", key_columns=["id"], timestamp_column="at", hidden=["__row"]
    )
    record = mapper.record(_row(), {"file": "f"}, {"row": 42}, [("h", b"v")])
    assert record.topic == "orders"
    assert record.key == 7
    assert record.value == {
        "id": 7,
        "region": "eu",
        "at": "2024-01-01T00:00:00.000000+00:00",
        "price": "1.50",
    }
    assert record.timestamp == 1704067200000
    assert record.headers == (("h", b"v"),)
    assert record.source_partition == {"file": "f"}
    assert record.source_offset == {"row": 42}


def test_topic_column_and_composite_key() -> None:
    mapper = RecordMapper(SCHEMA, topic="", topic_column="region", key_columns=["id", "price"])
    record = mapper.record(_row(), {}, None)
    assert record.topic == "eu"
    assert record.key == {"id": 7, "price": "1.50"}
    row = _row() | {"region": None}
    with pytest.raises(ValueError, match="column 'region' is empty"):
        mapper.record(row, {}, None)


@pytest.mark.parametrize("setting", ["topic.column", "timestamp.column", "key.columns"])
def test_unknown_columns_name_the_setting(setting: str) -> None:
    by_setting: dict[str, dict[str, Any]] = {
        "topic.column": {"topic_column": "nope"},
        "timestamp.column": {"timestamp_column": "nope"},
        "key.columns": {"key_columns": ["id", "nope"]},
    }
    kwargs = by_setting[setting]
    with pytest.raises(ValueError, match=rf"setting '{setting}' names column 'nope'.*id, region"):
        RecordMapper(SCHEMA, topic="t", hidden=["__row"], **kwargs)


def test_epoch_millis() -> None:
    assert epoch_millis(None) is None
    assert epoch_millis(datetime.date(1970, 1, 2)) == 86_400_000
    assert epoch_millis(datetime.datetime(1970, 1, 1, 1, tzinfo=CET)) == 0
    assert epoch_millis(1234) == 1234
    with pytest.raises(ValueError, match="record timestamp"):
        epoch_millis("yesterday")
