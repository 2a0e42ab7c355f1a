"""Flatten (Kafka Connect's, same settings, ``$Key`` and ``$Value``): nested maps (no
schema) or Structs (with one) become one level, each field named by the path to it
joined with ``delimiter`` (``content.name.first``). Arrays stay as they are; a MAP
inside a schema is refused, as in Connect. With a schema, a field under an optional
Struct becomes optional, and keeps the default of the field or of its parent's default."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Mapping
from typing import Any

from eos.api.schema import Schema, SchemaBuilder, SchemaType, Struct, copy_schema_basics
from eos.config.definition import ConfigDef, Importance, Type
from eos.errors import DataError
from eos.transforms.base import KeyOrValueTransform
from eos.transforms.row import Row
from eos.transforms.schemas import SchemaCache, class_name, require_map, require_struct

FLATTEN_CONFIG = ConfigDef().define(
    "delimiter",
    Type.STRING,
    ".",
    None,
    Importance.MEDIUM,
    "Delimiter to insert between field names from the input record when generating field "
    "names for the output record",
)

_LEAVES = (bool, int, float, str, bytes, bytearray, memoryview, list, tuple)
"""Schemaless values kept as they are (Connect's primitives, bytes and arrays)."""


class Flatten(KeyOrValueTransform):
    """Flatten a nested key or value (see the module's docstring)."""

    def config_def(self) -> ConfigDef:
        return FLATTEN_CONFIG

    def configure(self, settings: Mapping[str, str]) -> None:
        self._delimiter: str = FLATTEN_CONFIG.parse(settings)["delimiter"]
        self._schemas: SchemaCache[Schema] = SchemaCache()

    def _name(self, prefix: str, name: str) -> str:
        return f"{prefix}{self._delimiter}{name}" if prefix else name

    def update(self, row: Row, value: Any, schema: Schema | None) -> tuple[Any, Schema | None]:
        if value is None and schema is None:
            return value, schema
        if schema is None:
            flat: dict[str, Any] = {}
            self._flatten_map(require_map(value, "flattening"), "", flat)
            return flat, None
        struct = None if value is None else require_struct(value, "flattening")
        flat_schema = self._schemas.get(schema, self._flat_schema)
        if struct is None:
            return None, flat_schema
        result = Struct(flat_schema)
        self._flatten_struct(struct, "", result)
        return result, flat_schema

    def _flatten_map(self, value: Mapping[str, Any], prefix: str, out: dict[str, Any]) -> None:
        for key, item in value.items():
            name = self._name(prefix, key)
            if item is None or isinstance(item, _LEAVES):
                out[name] = item
            elif isinstance(item, Mapping) and not isinstance(item, Struct):
                self._flatten_map(item, name, out)
            elif isinstance(item, Struct | decimal.Decimal | datetime.date | datetime.time):
                raise DataError(
                    f"Flatten transformation does not support {class_name(item)} "
                    f"for record without schemas (for field {name})."
                )
            else:
                raise DataError(
                    f"Flatten transformation was passed a value of type "
                    f"{class_name(item)} which is not supported by Connect's data "
                    "API"
                )

    def _flat_schema(self, schema: Schema) -> Schema:
        builder = copy_schema_basics(schema, SchemaBuilder.struct())
        self._add_fields(schema, "", builder, schema.optional, schema.default)
        return builder.build()

    def _add_fields(
        self,
        schema: Schema,
        prefix: str,
        builder: SchemaBuilder,
        optional: bool,
        parent_default: Struct | None,
    ) -> None:
        for f in schema.fields:
            name = self._name(prefix, f.name)
            field_optional = optional or f.schema.optional
            default = f.schema.default
            if default is None and parent_default is not None:
                default = parent_default.get(f)
            kind = f.schema.type
            if kind is SchemaType.STRUCT:
                self._add_fields(f.schema, name, builder, field_optional, default)
            elif kind is SchemaType.MAP:
                raise DataError(
                    f"Flatten transformation does not support {kind.name} for "
                    f"record with schemas (for field {name})."
                )
            else:
                builder.field(name, _leaf_schema(f.schema, field_optional, default))

    def _flatten_struct(self, struct: Struct, prefix: str, out: Struct) -> None:
        for f in struct.schema.fields:
            name = self._name(prefix, f.name)
            if f.schema.type is SchemaType.STRUCT:
                inner = struct.get(f)
                if inner is not None:
                    self._flatten_struct(inner, name, out)
            else:
                out.put(name, struct.get(f))


def _leaf_schema(schema: Schema, optional: bool, default: Any) -> Schema:
    if schema.type is SchemaType.ARRAY:
        assert schema.value_schema is not None
        builder = SchemaBuilder.array(schema.value_schema)
    else:
        builder = SchemaBuilder(schema.type)
    copy_schema_basics(schema, builder)
    if optional:
        builder.optional()
    if default is not None:
        builder.default(default)
    return builder.build()


class FlattenKey(Flatten):
    on_key = True


class FlattenValue(Flatten):
    on_key = False
