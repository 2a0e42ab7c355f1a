"""TimestampConverter (Kafka Connect's, same settings, ``$Key`` and ``$Value``): convert
a timestamp field, or the whole key or value, between Unix epoch numbers (``unix``,
``unix.precision``), strings (``string``, a SimpleDateFormat ``format``, UTC) and
Connect's ``Date``, ``Time`` and ``Timestamp`` (``datetime.date``, ``datetime.time``,
``datetime.datetime`` in UTC).

Without a schema the input type is read off the value: an ``int`` is Unix time, a
``str`` a formatted string, a ``datetime`` a Timestamp (a ``date`` a Date, a ``time`` a
Time). With one, off the schema: the logical names, else INT64 is Unix time and STRING
a formatted string. Precision finer than milliseconds is lost, as in Connect.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Final

from eos.api.logical import Date, Time, Timestamp
from eos.api.schema import (
    DATE_NAME,
    INT64_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    TIME_NAME,
    TIMESTAMP_NAME,
    Schema,
    SchemaBuilder,
    SchemaType,
    copy_schema_basics,
)
from eos.config.definition import NO_DEFAULT, ConfigDef, Importance, OneOf, Type
from eos.errors import ConfigError, DataError
from eos.transforms.base import KeyOrValueTransform
from eos.transforms.dates import EPOCH, SimpleDateFormat
from eos.transforms.row import Row
from eos.transforms.schemas import (
    SchemaCache,
    class_name,
    require_map,
    require_struct,
    struct_of,
    struct_values,
)
from eos.transforms.setting_validators import REPLACE_NULL, with_replace_null
from eos.transforms.value_text import epoch_millis

STRING, UNIX, DATE, TIME, TIMESTAMP = "string", "unix", "Date", "Time", "Timestamp"
_PER_MS: Final = {
    "seconds": -1000,
    "milliseconds": 1,
    "microseconds": 1000,
    "nanoseconds": 1_000_000,
}
"""Units of ``unix.precision`` per millisecond (negative: milliseconds per unit)."""
_DAY_MS = 86_400_000

TIMESTAMP_CONVERTER_CONFIG = with_replace_null(
    ConfigDef()
    .define(
        "field",
        Type.STRING,
        "",
        None,
        Importance.HIGH,
        "The field containing the timestamp, or empty if the entire value is a timestamp",
    )
    .define(
        "target.type",
        Type.STRING,
        NO_DEFAULT,
        OneOf(STRING, UNIX, DATE, TIME, TIMESTAMP, case_sensitive=True),
        Importance.HIGH,
        "The desired timestamp representation: string, unix, Date, Time, or Timestamp",
    )
    .define(
        "format",
        Type.STRING,
        "",
        None,
        Importance.MEDIUM,
        "A SimpleDateFormat-compatible format for the timestamp. Used to generate the "
        "output when type=string or used to parse the input if the input is a string.",
    )
    .define(
        "unix.precision",
        Type.STRING,
        "milliseconds",
        OneOf("nanoseconds", "microseconds", "milliseconds", "seconds", case_sensitive=True),
        Importance.LOW,
        "The desired Unix precision for the timestamp: seconds, milliseconds, microseconds, "
        "or nanoseconds. Used to generate the output when type=unix or used to parse the "
        "input if the input is a Long. Note: This SMT will cause precision loss during "
        "conversions from, and to, values with sub-millisecond components.",
    )
)

_SCHEMAS: Final = {
    STRING: (STRING_SCHEMA, OPTIONAL_STRING_SCHEMA),
    UNIX: (INT64_SCHEMA, OPTIONAL_INT64_SCHEMA),
    DATE: (Date.SCHEMA, Date.builder().optional().build()),
    TIME: (Time.SCHEMA, Time.builder().optional().build()),
    TIMESTAMP: (Timestamp.SCHEMA, Timestamp.builder().optional().build()),
}


class TimestampConverter(KeyOrValueTransform):
    """Convert timestamps between formats (see the module's docstring)."""

    def config_def(self) -> ConfigDef:
        return TIMESTAMP_CONVERTER_CONFIG

    def configure(self, settings: Mapping[str, str]) -> None:
        v = TIMESTAMP_CONVERTER_CONFIG.parse(settings)
        self._field: str = v["field"]
        self._target: str = v["target.type"]
        self._per_ms: int = _PER_MS[v["unix.precision"]]
        self._defaults: bool = v[REPLACE_NULL]
        pattern: str = v["format"]
        if self._target == STRING and not pattern.strip():
            raise ConfigError(
                "format",
                pattern,
                "TimestampConverter requires format option to "
                "be specified when using string timestamps",
            )
        try:
            self._format = SimpleDateFormat(pattern) if pattern.strip() else None
        except ValueError as exc:
            raise ConfigError(
                "format",
                pattern,
                f"TimestampConverter requires a SimpleDateFormat-compatible pattern: {exc}",
            ) from None
        self._schemas: SchemaCache[Schema] = SchemaCache()

    def update(self, row: Row, value: Any, schema: Schema | None) -> tuple[Any, Schema | None]:
        if schema is None:
            if value is None or not self._field:
                return self.convert(value, None), None
            updated = dict(require_map(value, "converting timestamp formats"))
            updated[self._field] = self.convert(updated.get(self._field), None)
            return updated, None
        if not self._field:
            target = _SCHEMAS[self._target][1 if schema.optional else 0]
            return self.convert(value, _input_type(schema)), target
        struct = None if value is None else require_struct(value, "converting timestamp formats")
        new_schema = self._schemas.get(schema, self._converted_schema)
        return (None if struct is None else self._struct(struct, new_schema)), new_schema

    def _struct(self, struct: Any, new_schema: Schema) -> Any:
        values = struct_values(struct, self._defaults)
        for f in struct.schema.fields:
            if f.name == self._field:
                values[f.index] = self.convert(values[f.index], _input_type(f.schema))
        return struct_of(new_schema, values)

    def _converted_schema(self, schema: Schema) -> Schema:
        builder = copy_schema_basics(schema, SchemaBuilder.struct())
        for f in schema.fields:
            if f.name == self._field:
                builder.field(f.name, _SCHEMAS[self._target][1 if f.schema.optional else 0])
            else:
                builder.field(f.name, f.schema)
        if schema.optional:
            builder.optional()
        if schema.default is not None:
            built = builder.build()
            builder.default(self._struct(schema.default, built))
        return builder.build()

    def convert(self, value: Any, kind: str | None) -> Any:
        """``value`` (of type ``kind``, or read off the value) in the target type."""
        if value is None:
            return None
        return self._to_target(self._to_millis(value, kind or _inferred(value)))

    def _to_millis(self, value: Any, kind: str) -> int:
        if kind == STRING:
            if not isinstance(value, str):
                raise DataError(
                    f"Expected string timestamp to be a String, but found {class_name(value)}"
                )
            if self._format is None:
                raise DataError("a string timestamp needs the format setting to be parsed")
            try:
                return epoch_millis(self._format.parse(value))
            except ValueError:
                raise DataError(
                    f"Could not parse timestamp: value ({value}) does not match "
                    f"pattern ({self._format.pattern})"
                ) from None
        if kind == UNIX:
            if not isinstance(value, int) or isinstance(value, bool):
                raise DataError(
                    f"Expected Unix timestamp to be a Long, but found {class_name(value)}"
                )
            per_ms = self._per_ms
            return value * -per_ms if per_ms < 0 else _toward_zero(value, per_ms)
        expected = datetime.time if kind == TIME else datetime.date
        if not isinstance(value, expected):
            raise DataError(
                f"Expected {kind} to be a {expected.__name__}, but found {class_name(value)}"
            )
        return epoch_millis(value)

    def _to_target(self, millis: int) -> Any:
        target = self._target
        if target == UNIX:
            per_ms = self._per_ms
            return _toward_zero(millis, -per_ms) if per_ms < 0 else millis * per_ms
        if target == STRING:
            assert self._format is not None
            return self._format.format_millis(millis)
        moment = EPOCH + datetime.timedelta(milliseconds=millis)
        if target == DATE:
            return moment.date()
        if target == TIME:
            return moment.time()
        return moment


def _toward_zero(value: int, divisor: int) -> int:
    """Java's integer division (``TimeUnit`` conversions): rounded toward zero."""
    quotient = abs(value) // divisor
    return -quotient if value < 0 else quotient


def _inferred(value: Any) -> str:
    if isinstance(value, datetime.datetime | datetime.date):
        return TIMESTAMP if isinstance(value, datetime.datetime) else DATE
    if isinstance(value, datetime.time):
        return TIME
    if isinstance(value, int) and not isinstance(value, bool):
        return UNIX
    if isinstance(value, str):
        return STRING
    raise DataError(
        f"TimestampConverter does not support {class_name(value)} objects as timestamps"
    )


def _input_type(schema: Schema) -> str:
    if schema.name == TIMESTAMP_NAME:
        return TIMESTAMP
    if schema.name == DATE_NAME:
        return DATE
    if schema.name == TIME_NAME:
        return TIME
    if schema.type is SchemaType.STRING:
        return STRING
    if schema.type is SchemaType.INT64:
        return UNIX
    raise DataError(f"Schema {schema} does not correspond to a known timestamp type format")


class TimestampConverterKey(TimestampConverter):
    on_key = True


class TimestampConverterValue(TimestampConverter):
    on_key = False
