"""Cast (Kafka Connect's, same settings, ``$Key`` and ``$Value``): cast fields, or the
whole key or value, to int8 … int64, float32, float64, boolean or string, as Java
does it: integers narrowed by wrapping (``300`` as int8 is ``44``), floats truncated
toward zero, strings parsed strictly, ``string`` written as Java prints values
(:mod:`eos.transforms.value_text`; bytes in base64). Logical values (Date, Time, Timestamp)
cast to numbers as their stored form (days, milliseconds); a whole value cast from a
logical type loses the logical name (Connect copies it onto the new type, which
converters then cannot write)."""

from __future__ import annotations

import datetime
import decimal
import math
from collections.abc import Mapping
from typing import Any

from eos.api.logical import Date, Time, Timestamp
from eos.api.schema import (
    DATE_NAME,
    DECIMAL_NAME,
    TIME_NAME,
    TIMESTAMP_NAME,
    Schema,
    SchemaBuilder,
    SchemaType,
    Struct,
    copy_schema_basics,
)
from eos.config.definition import NO_DEFAULT, ConfigDef, Importance, Type
from eos.errors import ConfigError, DataError
from eos.transforms.base import KeyOrValueTransform
from eos.transforms.java import float32_text
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
from eos.transforms.value_text import connect_string

_INPUTS = ("INT8", "INT16", "INT32", "INT64", "FLOAT32", "FLOAT64", "BOOLEAN", "STRING", "BYTES")
_OUTPUTS = _INPUTS[:-1]
_LOGICAL = (DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME)
_BITS = {SchemaType.INT8: 8, SchemaType.INT16: 16, SchemaType.INT32: 32, SchemaType.INT64: 64}


def parse_spec(key: str, entries: list[str]) -> dict[str | None, SchemaType]:
    """``field:type`` pairs, or one ``type`` for the whole value (key None)."""
    if not entries:
        raise ConfigError(key, "", "Must specify at least one field to cast.")
    casts: dict[str | None, SchemaType] = {}
    for entry in entries:
        parts = entry.split(":")
        if len(parts) > 2:
            raise ConfigError(key, ",".join(entries), f"Invalid cast {entry!r}: use field:type")
        casts[parts[0].strip() if len(parts) == 2 else None] = _output(key, entries, parts[-1])
    if None in casts and len(entries) > 1:
        raise ConfigError(
            key,
            ",".join(entries),
            "Cast transformations that specify a type to "
            "cast the entire value to may only specify a single cast in their spec",
        )
    return casts


def _output(key: str, entries: list[str], name: str) -> SchemaType:
    upper = name.strip().upper()
    if upper not in SchemaType.__members__:
        raise ConfigError(
            key, ",".join(entries), f"Invalid type found in casting spec: {name.strip()}"
        )
    if upper not in _OUTPUTS:
        raise ConfigError(
            key,
            ",".join(entries),
            f"Cast transformation does not support "
            f"casting to {upper}; supported types are {list(_OUTPUTS)}",
        )
    return SchemaType[upper]


class CastSpec:
    allowed = "list of colon-delimited pairs, e.g. foo:int32,bar:string, or one type"

    def __call__(self, key: str, value: Any) -> None:
        parse_spec(key, value)


CAST_CONFIG = with_replace_null(
    ConfigDef().define(
        "spec",
        Type.LIST,
        NO_DEFAULT,
        CastSpec(),
        Importance.HIGH,
        "List of fields and the type to cast them to of the form field1:type,field2:type "
        "to cast fields of Maps or Structs. A single type to cast the entire value. Valid "
        "types are int8, int16, int32, int64, float32, float64, boolean, and string. Note "
        "that binary fields can only be cast to string.",
    )
)


class Cast(KeyOrValueTransform):
    """Cast fields or the whole key or value (see the module's docstring)."""

    def config_def(self) -> ConfigDef:
        return CAST_CONFIG

    def configure(self, settings: Mapping[str, str]) -> None:
        v = CAST_CONFIG.parse(settings)
        self._casts = parse_spec("spec", v["spec"])
        self._whole = self._casts.get(None)
        self._defaults: bool = v[REPLACE_NULL]
        self._schemas: SchemaCache[Schema] = SchemaCache()

    def update(self, row: Row, value: Any, schema: Schema | None) -> tuple[Any, Schema | None]:
        if value is None:
            return value, schema
        if schema is None:
            if self._whole is not None:
                return cast_value(None, value, self._whole), None
            updated = dict(require_map(value, "cast types"))
            for name, target in self._casts.items():
                assert name is not None
                updated[name] = cast_value(None, updated.get(name), target)
            return updated, None
        new_schema = self._schemas.get(schema, self._cast_schema)
        if self._whole is not None:
            return cast_value(schema, value, self._whole), new_schema
        struct = require_struct(value, "cast types")
        values = struct_values(struct, self._defaults)
        for f in schema.fields:
            cast_to = self._casts.get(f.name)
            if cast_to is not None:
                values[f.index] = cast_value(f.schema, values[f.index], cast_to)
        return struct_of(new_schema, values), new_schema

    def _cast_schema(self, schema: Schema) -> Schema:
        if self._whole is not None:
            builder = SchemaBuilder(self._whole)
            if schema.name not in _LOGICAL:  # a logical name on another type would mislead
                copy_schema_basics(schema, builder)
        else:
            builder = copy_schema_basics(schema, SchemaBuilder.struct())
            for f in schema.fields:
                target = self._casts.get(f.name)
                if target is None:
                    builder.field(f.name, f.schema)
                    continue
                field_builder = SchemaBuilder(target)
                if f.schema.optional:
                    field_builder.optional()
                if f.schema.default is not None:
                    field_builder.default(cast_value(f.schema, f.schema.default, target))
                builder.field(f.name, field_builder.build())
        if schema.optional:
            builder.optional()
        if schema.default is not None:
            builder.default(cast_value(schema, schema.default, builder.type))
        return builder.build()


class CastKey(Cast):
    on_key = True


class CastValue(Cast):
    on_key = False


def _inferred(value: Any) -> SchemaType | None:
    """Connect's type of a schemaless value (None: not a Connect value)."""
    kinds = [
        (bool, SchemaType.BOOLEAN),
        (int, SchemaType.INT64),
        (float, SchemaType.FLOAT64),
        (str, SchemaType.STRING),
        (bytes | bytearray | memoryview, SchemaType.BYTES),
        (list | tuple, SchemaType.ARRAY),
        (Struct, SchemaType.STRUCT),
        (Mapping, SchemaType.MAP),
    ]
    return next((t for kind, t in kinds if isinstance(value, kind)), None)


def cast_value(schema: Schema | None, value: Any, target: SchemaType) -> Any:
    """``value`` (of ``schema``, or schemaless) cast to ``target``."""
    if value is None:
        return None
    kind = schema.type if schema is not None else _inferred(value)
    if kind is None:
        raise DataError(
            f"Cast transformation was passed a value of type {class_name(value)} "
            "which is not supported by Connect's data API"
        )
    if kind.name not in _INPUTS:
        raise DataError(
            f"Cast transformation does not support casting from {kind.name}; "
            f"supported types are {list(_INPUTS)}"
        )
    if target is SchemaType.STRING:
        return connect_string(value, schema)
    if schema is not None and schema.name is not None:
        value = _stored(schema, value)
    try:
        if target in _BITS:
            return _integer(value, _BITS[target])
        if target is SchemaType.BOOLEAN:
            return _boolean(value)
        number = _float(value)
        return float(float32_text(number)) if target is SchemaType.FLOAT32 else number
    except (ValueError, OverflowError):
        raise DataError(f"Value ({value}) was out of range for requested data type") from None


def _stored(schema: Schema, value: Any) -> Any:
    """A Date, Time or Timestamp value as the number Connect stores."""
    if schema.name == DATE_NAME and isinstance(value, datetime.date):
        return Date.from_logical(schema, value)
    if schema.name == TIME_NAME and isinstance(value, datetime.time):
        return Time.from_logical(schema, value)
    if schema.name == TIMESTAMP_NAME and isinstance(value, datetime.datetime):
        return Timestamp.from_logical(schema, value)
    return value


def _integer(value: Any, bits: int) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        number = int(value) if value.lstrip("+-").isdigit() else _fail(value)
        if not -(1 << (bits - 1)) <= number < 1 << (bits - 1):
            raise ValueError(value)
        return number
    if isinstance(value, float | decimal.Decimal):
        value = _truncated(value, 64 if bits == 64 else 32)
    if isinstance(value, int):
        wrapped = value & ((1 << bits) - 1)
        return wrapped - (1 << bits) if wrapped >= 1 << (bits - 1) else wrapped
    raise DataError(f"Unexpected type in Cast transformation: {class_name(value)}")


def _truncated(value: float | decimal.Decimal, bits: int) -> int:
    """Java's ``(int)``/``(long)`` of a floating value: toward zero, saturating, NaN 0."""
    if isinstance(value, float) and math.isnan(value):
        return 0
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if isinstance(value, float) and math.isinf(value):
        return high if value > 0 else low
    return max(low, min(high, int(value)))


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.lower() == "true"
    if isinstance(value, int | float | decimal.Decimal):
        return _truncated(value, 64) != 0 if not isinstance(value, int) else value != 0
    raise DataError(f"Unexpected type in Cast transformation: {class_name(value)}")


def _float(value: Any) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, str):
        return float(value.strip())
    if isinstance(value, int | float | decimal.Decimal):
        return float(value)
    raise DataError(f"Unexpected type in Cast transformation: {class_name(value)}")


def _fail(value: str) -> int:
    raise ValueError(value)
