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

Two ways to the same JSON:

- **In Spark** (:func:`encode_in_spark`, used when the connector's key and value
  converters are both ``json``, the default): Spark converts every column as the
  table says and writes the key and value JSON itself (``to_json``, nulls kept);
  Python only passes the bytes on (``SourceRecord(encoded=True)``). Timestamps,
  nested ones too, carry the offset of the Spark session's time zone
  (``spark.sql.session.timeZone``; +00:00 on a UTC machine); a float is written
  as its shortest decimal text (0.1, not 0.10000000149011612); non-ASCII text as
  UTF-8. A column type Spark cannot write as the table says (intervals, variant,
  maps with complex keys) switches the file or batch to the Python way.
- **In Python** (:class:`RecordMapper`, any other converter): top-level decimal,
  date, timestamp and binary columns are still converted by Spark
  (:func:`json_projection`); the rest by the converters below, nested timestamps
  in UTC.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import types as T

from eos.api import RecordBlock, SourceOffset, SourcePartition, SourceRecord
from services.connectors.spark.arrow_stream import Columns, RowStream, next_batch
from services.connectors.spark.typed import TypedRows

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from services.connectors.spark.config import SparkSourceSettings

log = logging.getLogger(__name__)

Convert = Callable[[Any], Any]
TIMESTAMP_COLUMN = "__eos_timestamp_ms"
"""Hidden column :func:`json_projection` adds with ``timestamp.column`` in epoch ms."""
KEY_COLUMN = "__eos_key"
VALUE_COLUMN = "__eos_value"
TOPIC_COLUMN = "__eos_topic"
"""Columns of :func:`encode_in_spark`: key and value JSON (binary), topic (string)."""
_TO_JSON = {
    "ignoreNullFields": "false",
    "dateFormat": "yyyy-MM-dd",
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSxxx",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
}
"""``to_json`` options: nulls kept; dates, timestamps (in the session time zone) and
timestamps without zone written as :func:`_in_spark` writes them (cheaper than
formatting each column first)."""
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


class NotInSpark(Exception):
    """A column type Spark cannot write as the mapping table says."""


def json_ready(column: Column, data_type: T.DataType, *, text: bool = False) -> Column:
    """``column`` with every value in the form ``to_json`` must write (recursively);
    :class:`NotInSpark` for a type that has none. Decimals become exact strings;
    dates, timestamps and binary are left to ``to_json`` (its options write them as
    the table says) unless ``text``: then they become their JSON text too (map keys,
    which ``to_json`` writes raw, and values read back in Python)."""
    from pyspark.sql import functions as F

    if isinstance(data_type, T.DecimalType):
        return column.cast("string")
    if text:
        converted = _in_spark(column, data_type)
        if converted is not None:
            return converted
    if isinstance(data_type, T.ArrayType):
        element = data_type.elementType
        if _plain(element):
            return column
        return F.transform(column, lambda x: json_ready(x, element))
    if isinstance(data_type, T.StructType):
        if all(_plain(f.dataType) for f in data_type.fields):
            return column
        fields = [
            json_ready(column.getField(f.name), f.dataType).alias(f.name) for f in data_type.fields
        ]
        return F.when(column.isNotNull(), F.struct(*fields))
    if isinstance(data_type, T.MapType):
        key_type, value_type = data_type.keyType, data_type.valueType
        if not isinstance(key_type, (*_SCALAR, *_CONVERTED)):
            raise NotInSpark(f"map key type {key_type.simpleString()}")
        if not isinstance(key_type, _SCALAR):
            column = F.transform_keys(column, lambda k, _: json_ready(k, key_type, text=True))
        if not _plain(value_type):
            column = F.transform_values(column, lambda _, v: json_ready(v, value_type))
        return column
    if _plain(data_type):
        return column
    raise NotInSpark(f"type {data_type.simpleString()}")


_SCALAR = (
    T.StringType,
    T.BooleanType,
    T.ByteType,
    T.ShortType,
    T.IntegerType,
    T.LongType,
    T.FloatType,
    T.DoubleType,
    T.NullType,
)


_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.BooleanType)
_CONVERTED = (T.DecimalType, T.DateType, T.TimestampType, T.TimestampNTZType)
_NATIVE = (T.BinaryType, T.DateType, T.TimestampType, T.TimestampNTZType)
"""Types ``to_json`` writes as the mapping table says, given :data:`_TO_JSON`."""


def _plain(data_type: T.DataType) -> bool:
    """Written by ``to_json`` as the mapping table says without conversion."""
    if isinstance(data_type, (*_SCALAR, *_NATIVE)):
        return True
    if isinstance(data_type, T.ArrayType):
        return _plain(data_type.elementType)
    if isinstance(data_type, T.StructType):
        return all(_plain(f.dataType) for f in data_type.fields)
    if isinstance(data_type, T.MapType):
        return isinstance(data_type.keyType, _SCALAR) and _plain(data_type.valueType)
    return False


def check_columns(
    names: Sequence[str],
    *,
    topic_column: str = "",
    key_columns: Sequence[str] = (),
    timestamp_column: str = "",
    hidden: Sequence[str] = (),
) -> None:
    """ValueError naming the setting if a column it names is not in ``names``."""
    for setting, column in (
        ("topic.column", topic_column),
        ("timestamp.column", timestamp_column),
        *(("key.columns", c) for c in key_columns),
    ):
        if column and column not in names:
            known = ", ".join(n for n in names if n not in hidden)
            raise ValueError(
                f"setting {setting!r} names column {column!r}, which the data does not "
                f"have (columns: {known})"
            )


def encode_in_spark(
    df: DataFrame,
    *,
    key_columns: Sequence[str] = (),
    topic_column: str = "",
    timestamp_column: str = "",
    keep: Sequence[str] = (),
) -> DataFrame:
    """``df`` as encoded records: :data:`VALUE_COLUMN` (the row without the ``keep``
    columns as JSON bytes), :data:`KEY_COLUMN` (``key.columns`` as JSON bytes, or
    null), :data:`TOPIC_COLUMN` (with ``topic.column``), :data:`TIMESTAMP_COLUMN`
    (with ``timestamp.column``, epoch ms) and the ``keep`` columns as they are.
    :class:`NotInSpark` if a column's type needs the Python mapping."""
    from pyspark.sql import functions as F

    fields = {f.name: f.dataType for f in df.schema.fields}
    check_columns(
        list(fields),
        topic_column=topic_column,
        key_columns=key_columns,
        timestamp_column=timestamp_column,
        hidden=keep,
    )
    ready = {
        name: json_ready(F.col(_quoted(name)), t) for name, t in fields.items() if name not in keep
    }

    def as_json(names: Sequence[str]) -> Column:
        return F.to_json(F.struct(*(ready[n].alias(n) for n in names)), _TO_JSON)

    columns = [as_json(list(ready)).cast("binary").alias(VALUE_COLUMN)]
    if len(key_columns) == 1:
        (name,) = key_columns
        if isinstance(fields[name], _INTEGRAL):  # its JSON is its text
            key = F.col(_quoted(name)).cast("string")
        else:
            text = F.to_json(F.array(ready[name]), _TO_JSON)  # '[<json>]': JSON of a scalar
            key = F.when(
                F.col(_quoted(name)).isNotNull(), text.substr(F.lit(2), F.length(text) - 2)
            )
        columns.append(key.cast("binary").alias(KEY_COLUMN))
    elif key_columns:
        key = as_json(key_columns)
        columns.append(key.cast("binary").alias(KEY_COLUMN))
    else:
        columns.append(F.lit(None).cast("binary").alias(KEY_COLUMN))
    if topic_column:
        columns.append(ready[topic_column].cast("string").alias(TOPIC_COLUMN))
    if timestamp_column:
        columns.append(_record_millis(timestamp_column, fields[timestamp_column]))
    columns += [F.col(_quoted(name)) for name in keep]
    return df.select(*columns)


RowHeader = tuple[str, Sequence[bytes]]
"""A header that differs per row: its name and one value per row."""


def encoded_block(
    columns: Mapping[str, list[Any]],
    *,
    topic: str,
    partition: SourcePartition,
    offset: SourceOffset | None,
    headers: Sequence[tuple[str, bytes]],
    row_header: RowHeader | None = None,
    row_headers: Sequence[RowHeader] = (),
) -> RecordBlock:
    """The rows of a chunk of :func:`encode_in_spark` rows as one block (``offset``
    after its last row)."""
    values = columns[VALUE_COLUMN]
    topics = columns.get(TOPIC_COLUMN)
    if topics is not None and not all(topics):
        raise ValueError("a row has no topic: its topic.column is empty")
    return RecordBlock(
        source_partition=partition,
        source_offset=offset,
        topic=topic,
        values=values,
        keys=columns[KEY_COLUMN],
        timestamps=columns.get(TIMESTAMP_COLUMN),
        headers=headers,
        header_columns=dict([row_header, *row_headers] if row_header else row_headers),
        topics=topics,
    )


def typed_projection(df: DataFrame, settings: SparkSourceSettings) -> DataFrame:
    """``df`` as it is, plus :data:`TIMESTAMP_COLUMN` (epoch ms, by Spark) with
    ``timestamp.column``; the columns the settings name are checked."""

    fields = {f.name: f.dataType for f in df.schema.fields}
    check_columns(
        list(fields), topic_column=settings.topic_column, key_columns=settings.key_columns,
        timestamp_column=settings.timestamp_column,
    )  # fmt: skip
    if not settings.timestamp_column:
        return df
    column = settings.timestamp_column
    return df.select("*", _record_millis(column, fields[column]))


def _record_millis(name: str, data_type: T.DataType) -> Column:
    """:data:`TIMESTAMP_COLUMN`: ``timestamp.column`` ``name`` in epoch ms, by Spark."""
    from pyspark.sql import functions as F

    source = F.col(_quoted(name))
    millis = _epoch_millis_in_spark(source, data_type)
    if millis is None and isinstance(data_type, T.NumericType):
        millis = source.cast("long")
    if millis is None:
        raise ValueError(
            f"setting 'timestamp.column' names column {name!r} of type "
            f"{data_type.simpleString()}: use a timestamp, date or epoch-milliseconds column"
        )
    return millis.alias(TIMESTAMP_COLUMN)


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
        check_columns(
            schema.names,
            topic_column=topic_column,
            key_columns=key_columns,
            timestamp_column=timestamp_column,
            hidden=hidden,
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


class Chunk:
    """Rows read from a stream: as columns (Spark encoded them), as dicts (for the
    :class:`RecordMapper`) or as an Arrow batch (rows with schemas, :mod:`.typed`)."""

    def __init__(
        self,
        columns: Columns | None = None,
        rows: list[dict[str, Any]] | None = None,
        batch: Any = None,
        typed: bool = False,
    ) -> None:
        self.columns = columns
        self.rows = rows
        self.batch = batch
        self.typed = typed

    def column(self, name: str) -> list[Any]:
        if self.typed:
            return [] if self.batch is None else list(self.batch.column(name).to_pylist())
        if self.rows is not None:
            return [row[name] for row in self.rows]
        assert self.columns is not None
        return self.columns[name]


class Encoder:
    """How the rows of one DataFrame become records: Spark writes the JSON
    (:func:`encode_in_spark`) when both converters are ``json`` and it can write every
    column, else the :class:`RecordMapper` maps them in Python. ``keep`` columns are
    left out of the value and read as they are (row index, offsets)."""

    typed: TypedRows | None = None
    """Rows with schemas for the typed converters (:mod:`.typed`), else None."""

    def __init__(
        self, df: DataFrame, settings: SparkSourceSettings, keep: Sequence[str], where: str
    ) -> None:
        self.mapper: RecordMapper | None = None
        self.lineage = settings.lineage_headers
        """The records get lineage headers (``lineage.headers``)."""
        if settings.typed_converters:
            self.frame = typed_projection(df, settings)
            self.typed = TypedRows(self.frame, settings, hidden=(*keep, TIMESTAMP_COLUMN))
            return
        if settings.json_converters:
            try:
                self.frame = encode_in_spark(
                    df,
                    key_columns=settings.key_columns,
                    topic_column=settings.topic_column,
                    timestamp_column=settings.timestamp_column,
                    keep=keep,
                )
                return
            except NotInSpark as exc:
                log.info(
                    "%s: rows are mapped to JSON in Python (Spark cannot write %s)", where, exc
                )
        self.frame, timestamp_source = json_projection(df, settings.timestamp_column)
        self.mapper = RecordMapper(
            self.frame.schema,
            topic=settings.topic,
            topic_column=settings.topic_column,
            key_columns=settings.key_columns,
            timestamp_column=timestamp_source,
            hidden=(*keep, TIMESTAMP_COLUMN),
        )

    def read(self, stream: RowStream, limit: int) -> Chunk:
        """Up to ``limit`` rows of ``stream`` (which streams :attr:`frame`)."""
        if self.typed is not None:
            return Chunk(batch=next_batch(stream, limit), typed=True)
        if self.mapper is None:
            return Chunk(columns=stream.next_columns(limit))
        return Chunk(rows=stream.next_rows(limit))

    def records(
        self,
        chunk: Chunk,
        *,
        topic: str,
        partition: SourcePartition,
        offset: SourceOffset | None,
        headers: Sequence[tuple[str, bytes]],
        row_header: RowHeader | None = None,
        row_headers: Sequence[RowHeader] = (),
    ) -> list[SourceRecord | RecordBlock]:
        """The rows of ``chunk`` as records (``offset`` on the last): one block when
        Spark encoded them."""
        if self.typed is not None:
            batch = chunk.batch
            names = set(batch.schema.names)
            varying = [row_header, *row_headers] if row_header else list(row_headers)
            return self.typed.block(
                batch, topic=topic, partition=partition, offset=offset, headers=headers,
                header_columns=dict(varying),
                timestamps=chunk.column(TIMESTAMP_COLUMN) if TIMESTAMP_COLUMN in names else None,
            )  # fmt: skip
        if self.mapper is None:
            assert chunk.columns is not None
            block = encoded_block(
                chunk.columns,
                topic=topic,
                partition=partition,
                offset=offset,
                headers=headers,
                row_header=row_header,
                row_headers=row_headers,
            )
            return [block]
        assert chunk.rows is not None
        mapper, rows = self.mapper, chunk.rows
        common = tuple(headers)
        varying = [row_header, *row_headers] if row_header else list(row_headers)
        per_row = [
            tuple((name, v) for name, values in varying if (v := values[n]) is not None)
            for n in range(len(rows))
        ]
        last = len(rows) - 1
        return [
            mapper.record(row, partition, offset if n == last else None, common + extra)
            for n, (row, extra) in enumerate(zip(rows, per_row, strict=True))
        ]
