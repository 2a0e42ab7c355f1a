"""Connect's logical types: a primitive schema with a well-known ``name`` (version 1)
whose Python value is richer than the primitive.

==========  ========  ==========================  =========================================
type        base      Python value                stored as
==========  ========  ==========================  =========================================
Decimal     BYTES     ``decimal.Decimal``         the unscaled value, big-endian two's
                                                  complement; the ``scale`` parameter
Date        INT32     ``datetime.date``           days since 1970-01-01
Time        INT32     ``datetime.time``           milliseconds since midnight
Timestamp   INT64     ``datetime.datetime``       milliseconds since the epoch (naive = UTC)
==========  ========  ==========================  =========================================

``from_logical`` turns the Python value into the stored one, ``to_logical`` back
(Timestamps come back timezone-aware, in UTC).
"""

from __future__ import annotations

import datetime
import decimal
from typing import ClassVar

from eos.api.schema import (
    DATE_NAME,
    DECIMAL_NAME,
    TIME_NAME,
    TIMESTAMP_NAME,
    Schema,
    SchemaBuilder,
)
from eos.errors import DataError

_EPOCH_DATE = datetime.date(1970, 1, 1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MILLIS_PER_DAY = 86_400_000
_ONE_MS = datetime.timedelta(milliseconds=1)


def _check_name(schema: Schema, name: str, what: str) -> None:
    if schema.name != name:
        raise DataError(f"Requested conversion of {what} object but the schema does not match.")


class Decimal:
    """Arbitrary-precision decimals of a fixed ``scale`` (digits after the point)."""

    LOGICAL_NAME: ClassVar[str] = DECIMAL_NAME
    SCALE_FIELD: ClassVar[str] = "scale"

    @staticmethod
    def builder(scale: int) -> SchemaBuilder:
        return SchemaBuilder.bytes().name(DECIMAL_NAME).parameter("scale", str(scale)).version(1)

    @staticmethod
    def schema(scale: int) -> Schema:
        return Decimal.builder(scale).build()

    @staticmethod
    def scale(schema: Schema) -> int:
        raw = (schema.parameters or {}).get("scale")
        if raw is None:
            raise DataError("Invalid Decimal schema: scale parameter not found.")
        try:
            return int(raw)
        except ValueError:
            raise DataError(f"Invalid scale parameter {raw!r} found in Decimal schema") from None

    @staticmethod
    def unscaled(schema: Schema, value: decimal.Decimal) -> int:
        """The unscaled integer of ``value``; its scale must be the schema's."""
        scale = Decimal.scale(schema)
        sign, digits, exponent = value.as_tuple()
        if not isinstance(exponent, int):
            raise DataError(f"Decimal value {value} cannot be stored (not a finite number)")
        if -exponent != scale:
            raise DataError(
                "Decimal value has mismatching scale for given Decimal schema. "
                f"Schema has scale {scale}, value has scale {-exponent}."
            )
        unscaled = int("".join(map(str, digits)) or "0")
        return -unscaled if sign else unscaled

    @staticmethod
    def from_logical(schema: Schema, value: decimal.Decimal) -> bytes:
        n = Decimal.unscaled(schema, value)
        size = (n if n >= 0 else ~n).bit_length() // 8 + 1
        return n.to_bytes(size, "big", signed=True)

    @staticmethod
    def to_logical(schema: Schema, value: bytes) -> decimal.Decimal:
        n = int.from_bytes(value, "big", signed=True)
        return decimal.Decimal(n).scaleb(-Decimal.scale(schema))


class Date:
    """A calendar day, without time of day or zone."""

    LOGICAL_NAME: ClassVar[str] = DATE_NAME
    SCHEMA: ClassVar[Schema]

    @staticmethod
    def builder() -> SchemaBuilder:
        return SchemaBuilder.int32().name(DATE_NAME).version(1)

    @staticmethod
    def from_logical(schema: Schema, value: datetime.date) -> int:
        _check_name(schema, DATE_NAME, "Date")
        if isinstance(value, datetime.datetime):
            if value.utcoffset():
                value = value.astimezone(datetime.UTC)
            if value.time() != datetime.time(0):
                raise DataError(
                    "Kafka Connect Date type should not have any time fields set to non-zero "
                    "values."
                )
            value = value.date()
        return (value - _EPOCH_DATE).days

    @staticmethod
    def to_logical(schema: Schema, value: int) -> datetime.date:
        _check_name(schema, DATE_NAME, "Date")
        return _EPOCH_DATE + datetime.timedelta(days=value)


class Time:
    """A time of day in milliseconds, without a date."""

    LOGICAL_NAME: ClassVar[str] = TIME_NAME
    SCHEMA: ClassVar[Schema]

    @staticmethod
    def builder() -> SchemaBuilder:
        return SchemaBuilder.int32().name(TIME_NAME).version(1)

    @staticmethod
    def from_logical(schema: Schema, value: datetime.time) -> int:
        _check_name(schema, TIME_NAME, "Time")
        if value.utcoffset():
            raise DataError("Kafka Connect Time values must be in UTC (or naive)")
        seconds = (value.hour * 60 + value.minute) * 60 + value.second
        return seconds * 1000 + value.microsecond // 1000

    @staticmethod
    def to_logical(schema: Schema, value: int) -> datetime.time:
        _check_name(schema, TIME_NAME, "Time")
        if not 0 <= value < _MILLIS_PER_DAY:
            raise DataError(
                "Time values must use number of milliseconds greater than 0 and less than 86400000"
            )
        seconds, millis = divmod(value, 1000)
        minutes, second = divmod(seconds, 60)
        hour, minute = divmod(minutes, 60)
        return datetime.time(hour, minute, second, millis * 1000)


class Timestamp:
    """An instant in milliseconds since the epoch (UTC)."""

    LOGICAL_NAME: ClassVar[str] = TIMESTAMP_NAME
    SCHEMA: ClassVar[Schema]

    @staticmethod
    def builder() -> SchemaBuilder:
        return SchemaBuilder.int64().name(TIMESTAMP_NAME).version(1)

    @staticmethod
    def from_logical(schema: Schema, value: datetime.datetime) -> int:
        _check_name(schema, TIMESTAMP_NAME, "Timestamp")
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return (value - _EPOCH) // _ONE_MS

    @staticmethod
    def to_logical(schema: Schema, value: int) -> datetime.datetime:
        _check_name(schema, TIMESTAMP_NAME, "Timestamp")
        return _EPOCH + datetime.timedelta(milliseconds=value)


Date.SCHEMA = Date.builder().build()
Time.SCHEMA = Time.builder().build()
Timestamp.SCHEMA = Timestamp.builder().build()
