"""Rows → :class:`~eos.api.SourceRecord`: topic, key, JSON-able value, timestamp, lineage.

A row's value is a dict with one entry per column, in types JSON can carry
faithfully (the converters are chosen once per column from the Spark schema):

============================  ===============================================
Spark type                    value
============================  ===============================================
string, integral, boolean     as is
float, double                 as is; NaN and ±infinity as "NaN", "Infinity", "-Infinity"
decimal(p, s)                 string with exactly ``s`` decimals ("12.30"), never rounded
date                          ISO-8601 date ("2024-02-29")
timestamp                     ISO-8601 with zone offset ("2024-02-29T12:00:00.123456+00:00")
timestamp_ntz                 ISO-8601 without zone ("2024-02-29T12:00:00.000000")
binary                        base64 string
day-time interval             ISO-8601 duration ("P1DT2H3M4.5S")
array                         list (elements mapped)
struct                        object (fields mapped)
map                           object; non-string keys become their JSON text ("1", "true")
null                          null
============================  ===============================================

Top-level decimal, date, timestamp and binary columns are converted by Spark itself
(:func:`json_projection`), which saves Python most of its work; a top-level
timestamp is then written with the offset of the Spark session's time zone
(``spark.sql.session.timeZone``; +00:00 on a UTC machine), a nested one in UTC.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import types as T

from eos.api import SourceOffset, SourcePartition, SourceRecord

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

Convert = Callable[[Any], Any]
TIMESTAMP_COLUMN = "__eos_timestamp_ms"
"""Hidden column :func:`json_projection` adds with ``timestamp.column`` in epoch ms."""
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _float(value: float) -> Any:
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def _decimal(value: decimal.Decimal) -> str:
    return format(value, "f")


def _date(value: datetime.date) -> str:
    return value.isoformat()


def _timestamp(value: datetime.datetime) -> str:
    # Arrow hands over aware UTC values; pickled rows naive local time (PySpark's choice).
    return value.astimezone(datetime.UTC).isoformat(timespec="microseconds")


def _timestamp_ntz(value: datetime.datetime) -> str:
    return value.replace(tzinfo=None).isoformat(timespec="microseconds")


def _binary(value: bytes) -> str:
    return base64.b64encode(bytes(value)).decode("ascii")


def _interval(value: datetime.timedelta) -> str:
    sign = "-" if value < datetime.timedelta(0) else ""
    value = abs(value)
    hours, rest = divmod(value.seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    secs = decimal.Decimal(seconds) + decimal.Decimal(value.microseconds) / 1_000_000
    return f"{sign}P{value.days}DT{hours}H{minutes}M{format(secs.normalize(), 'f')}S"


def _map_key(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _array(convert: Convert) -> Convert:
    return lambda values: [None if v is None else convert(v) for v in values]


def _map(key: Convert | None, value: Convert | None) -> Convert:
    def convert(entries: Any) -> dict[str, Any]:
        pairs = entries.items() if isinstance(entries, Mapping) else entries
        out: dict[str, Any] = {}
        for k, v in pairs:
            ck = k if key is None else key(k)
            out[_map_key(ck)] = v if v is None or value is None else value(v)
        return out

    return convert


def _struct(schema: T.StructType) -> Convert:
    fields = [(f.name, converter(f.dataType)) for f in schema.fields]

    def convert(row: Any) -> dict[str, Any]:
        data = row.asDict() if isinstance(row, T.Row) else row
        return {
            name: data[name] if fn is None or data[name] is None else fn(data[name])
            for name, fn in fields
        }

    return convert


def converter(data_type: T.DataType) -> Convert | None:
    """The function that maps a non-null value of ``data_type``; None means "as is"."""
    if isinstance(data_type, T.FloatType | T.DoubleType):
        return _float
    if isinstance(data_type, T.DecimalType):
        return _decimal
    if isinstance(data_type, T.TimestampNTZType):
        return _timestamp_ntz
    if isinstance(data_type, T.TimestampType):
        return _timestamp
    if isinstance(data_type, T.DateType):
        return _date
    if isinstance(data_type, T.BinaryType):
        return _binary
    if isinstance(data_type, T.DayTimeIntervalType):
        return _interval
    if isinstance(data_type, T.ArrayType):
        element = converter(data_type.elementType)
        return None if element is None else _array(element)
    if isinstance(data_type, T.MapType):
        return _map(converter(data_type.keyType), converter(data_type.valueType))
    if isinstance(data_type, T.StructType):
        return _struct(data_type)
    if isinstance(
        data_type,
        T.StringType | T.BooleanType | T.ByteType | T.ShortType | T.IntegerType | T.LongType,
    ):
        return None
    if isinstance(data_type, T.NullType):
        return None
    return str  # anything else (variant, year-month interval, user types): its text


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _in_spark(column: Column, data_type: T.DataType) -> Column | None:
    """``column`` converted to its JSON form by Spark, or None to leave it to Python."""
    from pyspark.sql import functions as F

    if isinstance(data_type, T.DecimalType | T.DateType):
        return column.cast("string")
    if isinstance(data_type, T.TimestampNTZType):
        return F.date_format(column, "yyyy-MM-dd'T'HH:mm:ss.SSSSSS")
    if isinstance(data_type, T.TimestampType):
        return F.date_format(column, "yyyy-MM-dd'T'HH:mm:ss.SSSSSSxxx")
    if isinstance(data_type, T.BinaryType):
        return F.base64(column)
    return None


def _epoch_millis_in_spark(column: Column, data_type: T.DataType) -> Column | None:
    from pyspark.sql import functions as F

    if isinstance(data_type, T.TimestampType | T.TimestampNTZType):
        return F.unix_millis(column.cast("timestamp"))
    if isinstance(data_type, T.DateType):
        return F.unix_date(column).cast("long") * 86_400_000
    return None


def json_projection(df: DataFrame, timestamp_column: str = "") -> tuple[DataFrame, str]:
    """``df`` with its top-level decimal, date, timestamp and binary columns converted
    to their JSON form by Spark, and the column the record timestamp is to be read
    from (:data:`TIMESTAMP_COLUMN`, in epoch ms, when Spark computes it)."""
    from pyspark.sql import functions as F

    fields = {f.name: f.dataType for f in df.schema.fields}
    if timestamp_column and timestamp_column not in fields:
        raise ValueError(
            f"setting 'timestamp.column' names column {timestamp_column!r}, which the data "
            f"does not have (columns: {', '.join(fields)})"
        )
    columns = []
    for name, data_type in fields.items():
        column = F.col(_quoted(name))
        converted = _in_spark(column, data_type)
        columns.append(column if converted is None else converted.alias(name))
    source = timestamp_column
    if timestamp_column:
        millis = _epoch_millis_in_spark(F.col(_quoted(timestamp_column)), fields[timestamp_column])
        if millis is not None:
            columns.append(millis.alias(TIMESTAMP_COLUMN))
            source = TIMESTAMP_COLUMN
    return df.select(*columns), source


def epoch_millis(value: Any) -> int | None:
    """Record timestamp from a timestamp, date or epoch-milliseconds value."""
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        aware = value if value.tzinfo else value.astimezone()
        return (aware - _EPOCH) // datetime.timedelta(milliseconds=1)
    if isinstance(value, datetime.date):
        midnight = datetime.datetime(value.year, value.month, value.day, tzinfo=datetime.UTC)
        return (midnight - _EPOCH) // datetime.timedelta(milliseconds=1)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    raise ValueError(f"cannot use {type(value).__name__} value {value!r} as a record timestamp")


class RecordMapper:
    """Maps rows of one schema to records. ``hidden`` columns (e.g. the row index)
    are dropped from the value. Columns named in the settings must exist."""

    def __init__(
        self,
        schema: T.StructType,
        *,
        topic: str,
        topic_column: str = "",
        key_columns: Sequence[str] = (),
        timestamp_column: str = "",
        hidden: Sequence[str] = (),
    ) -> None:
        names = set(schema.names)
        for setting, column in (
            ("topic.column", topic_column),
            ("timestamp.column", timestamp_column),
            *(("key.columns", c) for c in key_columns),
        ):
            if column and column not in names:
                known = ", ".join(n for n in schema.names if n not in hidden)
                raise ValueError(
                    f"setting {setting!r} names column {column!r}, which the data does not "
                    f"have (columns: {known})"
                )
        self._topic = topic
        self._topic_column = topic_column
        self._key_columns = tuple(key_columns)
        self._timestamp_column = timestamp_column
        self._hidden = tuple(hidden)
        self._converters = [
            (f.name, fn)
            for f in schema.fields
            if f.name not in hidden and (fn := converter(f.dataType)) is not None
        ]

    def value(self, row: dict[str, Any]) -> dict[str, Any]:
        """``row`` mapped in place (hidden columns removed) and returned."""
        for name in self._hidden:
            row.pop(name, None)
        for name, fn in self._converters:
            v = row[name]
            if v is not None:
                row[name] = fn(v)
        return row

    def record(
        self,
        row: dict[str, Any],
        partition: SourcePartition,
        offset: SourceOffset | None,
        headers: Sequence[tuple[str, bytes]] = (),
    ) -> SourceRecord:
        timestamp = epoch_millis(row[self._timestamp_column]) if self._timestamp_column else None
        value = self.value(row)
        if self._topic_column:
            topic_value = value[self._topic_column]
            if topic_value is None or topic_value == "":
                raise ValueError(f"a row has no topic: column {self._topic_column!r} is empty")
            topic = str(topic_value)
        else:
            topic = self._topic
        key: Any = None
        if len(self._key_columns) == 1:
            key = value[self._key_columns[0]]
        elif self._key_columns:
            key = {c: value[c] for c in self._key_columns}
        return SourceRecord(
            source_partition=partition,
            source_offset=offset,
            topic=topic,
            value=value,
            key=key,
            timestamp=timestamp,
            headers=tuple(headers),
        )
