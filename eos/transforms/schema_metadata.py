"""SetSchemaMetadata (Kafka Connect's, same settings, ``$Key`` and ``$Value``): set the
name, the version or both of the key's or value's schema; a Struct is rebuilt on the
renamed schema. A key or value without a schema fails (unless it is null too)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from eos.api.schema import Schema, Struct
from eos.config.definition import ConfigDef, Importance, Type
from eos.errors import ConfigError
from eos.transforms.base import KeyOrValueTransform
from eos.transforms.row import Row
from eos.transforms.schemas import SchemaCache, require_schema, struct_of, struct_values
from eos.transforms.setting_validators import REPLACE_NULL, WHOLE, with_replace_null

SET_SCHEMA_METADATA_CONFIG = with_replace_null(
    ConfigDef()
    .define("schema.name", Type.STRING, None, None, Importance.HIGH, "Schema name to set.")
    .define("schema.version", Type.INT, None, None, Importance.HIGH, "Schema version to set.")
)


class SetSchemaMetadata(KeyOrValueTransform):
    """Set the schema name and/or version (see the module's docstring)."""

    def config_def(self) -> ConfigDef:
        return SET_SCHEMA_METADATA_CONFIG

    def configure(self, settings: Mapping[str, str]) -> None:
        v = SET_SCHEMA_METADATA_CONFIG.parse(settings)
        self._name: str | None = v["schema.name"]
        self._version: int | None = v["schema.version"]
        if self._name is None and self._version is None:
            raise ConfigError(
                WHOLE,
                "SetSchemaMetadata",
                "Neither schema name nor version "
                "configured: set schema.name, schema.version or both",
            )
        self._defaults: bool = v[REPLACE_NULL]
        self._schemas: SchemaCache[Schema] = SchemaCache()

    def update(self, row: Row, value: Any, schema: Schema | None) -> tuple[Any, Schema | None]:
        if value is None and schema is None:
            return value, schema
        renamed = self._schemas.get(
            require_schema(schema, "updating schema metadata"), self._renamed
        )
        if isinstance(value, Struct):
            value = struct_of(renamed, struct_values(value, self._defaults))
        return value, renamed

    def _renamed(self, schema: Schema) -> Schema:
        return dataclasses.replace(
            schema,
            name=self._name if self._name is not None else schema.name,
            version=self._version if self._version is not None else schema.version,
        )


class SetSchemaMetadataKey(SetSchemaMetadata):
    on_key = True


class SetSchemaMetadataValue(SetSchemaMetadata):
    on_key = False
