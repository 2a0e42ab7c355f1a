"""Field transforms of a key or value: ReplaceField and MaskField (Kafka Connect's, same
settings, ``$Key`` and ``$Value``; InsertField is in :mod:`eos.transforms.insert_field`).
Without a schema the key or value must be a Mapping (a new ``dict`` comes out); with
one, a :class:`~eos.api.Struct`, and the derived schema is built once per input schema
(:class:`SchemaCache`)."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Mapping
from typing import Any, Final

import structlog

from eos.api.schema import Schema, SchemaBuilder, Struct, copy_schema_basics
from eos.config.definition import NO_DEFAULT, ConfigDef, Importance, NonEmpty, Type
from eos.errors import ConfigError, DataError
from eos.transforms.base import KeyOrValueTransform
from eos.transforms.dates import EPOCH
from eos.transforms.row import Row
from eos.transforms.schemas import (
    SchemaCache,
    class_name,
    require_map,
    require_struct,
    struct_of,
    struct_values,
)
from eos.transforms.setting_validators import REPLACE_NULL, NonEmptyList, with_replace_null

log = structlog.get_logger(__name__)


class RenameMappings:
    """``old:new`` pairs."""

    allowed = "list of colon-delimited pairs, e.g. foo:bar,abc:xyz"

    def __call__(self, key: str, value: Any) -> None:
        for mapping in value or ():
            if len(mapping.split(":")) != 2:
                raise ConfigError(key, ",".join(value), f"Invalid rename mapping: {mapping}")


REPLACE_FIELD_CONFIG = with_replace_null(
    ConfigDef()
    .define(
        "exclude",
        Type.LIST,
        [],
        None,
        Importance.MEDIUM,
        "Fields to exclude. This takes precedence over the fields to include.",
    )
    .define(
        "include",
        Type.LIST,
        [],
        None,
        Importance.MEDIUM,
        "Fields to include. If specified, only these fields will be used.",
    )
    .define("renames", Type.LIST, [], RenameMappings(), Importance.MEDIUM, "Field rename mappings.")
    .define(
        "blacklist",
        Type.LIST,
        None,
        None,
        Importance.LOW,
        "Deprecated: use exclude (used only when exclude is not set).",
    )
    .define(
        "whitelist",
        Type.LIST,
        None,
        None,
        Importance.LOW,
        "Deprecated: use include (used only when include is not set).",
    )
)

_DEPRECATED: Final = {"exclude": "blacklist", "include": "whitelist"}


class ReplaceField(KeyOrValueTransform):
    """Filter or rename fields: drop those in ``exclude``, keep only those in ``include``
    (when set), rename per ``renames`` (``old:new``). Connect's older ``blacklist`` and
    ``whitelist`` are read as ``exclude`` and ``include`` when those are not set."""

    def config_def(self) -> ConfigDef:
        return REPLACE_FIELD_CONFIG

    def configure(self, settings: Mapping[str, str]) -> None:
        settings = dict(settings)
        for target, old in _DEPRECATED.items():
            if old in settings and target not in settings:
                log.warning("deprecated setting: use the new name", setting=old, instead=target)
                settings[target] = settings[old]
        v = REPLACE_FIELD_CONFIG.parse(settings)
        self._exclude = frozenset(v["exclude"])
        self._include = frozenset(v["include"])
        self._renames: dict[str, str] = dict(m.split(":") for m in v["renames"])
        self._defaults: bool = v[REPLACE_NULL]
        self._schemas: SchemaCache[Schema] = SchemaCache()

    def _keep(self, name: str) -> bool:
        return name not in self._exclude and (not self._include or name in self._include)

    def update(self, row: Row, value: Any, schema: Schema | None) -> tuple[Any, Schema | None]:
        if value is None:
            return value, schema
        renames = self._renames
        if schema is None:
            found = require_map(value, "field replacement")
            return {renames.get(k, k): v for k, v in found.items() if self._keep(k)}, None
        struct = require_struct(value, "field replacement")
        new_schema = self._schemas.get(struct.schema, self._replaced)
        values = struct_values(struct, self._defaults)
        kept = [values[f.index] for f in struct.schema.fields if self._keep(f.name)]
        return struct_of(new_schema, kept), new_schema

    def _replaced(self, schema: Schema) -> Schema:
        builder = copy_schema_basics(schema, SchemaBuilder.struct())
        for f in schema.fields:
            if self._keep(f.name):
                builder.field(self._renames.get(f.name, f.name), f.schema)
        return builder.build()


class ReplaceFieldKey(ReplaceField):
    on_key = True


class ReplaceFieldValue(ReplaceField):
    on_key = False


MASK_FIELD_CONFIG = with_replace_null(
    ConfigDef()
    .define(
        "fields", Type.LIST, NO_DEFAULT, NonEmptyList(), Importance.HIGH, "Names of fields to mask."
    )
    .define(
        "replacement",
        Type.STRING,
        None,
        NonEmpty(),
        Importance.LOW,
        "Custom value replacement, that will be applied to all 'fields' values "
        "(numeric or non-empty string values only).",
    )
)

_EMPTY: list[tuple[type, Any]] = [
    (bool, False),
    (int, 0),
    (float, 0.0),
    (decimal.Decimal, decimal.Decimal(0)),
    (str, ""),
    (datetime.datetime, EPOCH),
    (datetime.date, datetime.date(1970, 1, 1)),
    (datetime.time, datetime.time(0)),
]
"""A masked value by type (Connect's valid null values); bool before int, datetime
before date."""


class MaskField(KeyOrValueTransform):
    """Mask fields with the valid null value of their type (0, false, "", an empty list
    or map, the epoch) or with ``replacement`` converted to the field's type."""

    def config_def(self) -> ConfigDef:
        return MASK_FIELD_CONFIG

    def configure(self, settings: Mapping[str, str]) -> None:
        v = MASK_FIELD_CONFIG.parse(settings)
        self._fields = frozenset(v["fields"])
        self._replacement: str | None = v["replacement"]
        self._defaults: bool = v[REPLACE_NULL]

    def update(self, row: Row, value: Any, schema: Schema | None) -> tuple[Any, Schema | None]:
        if schema is None:
            updated = dict(require_map(value, "mask fields"))
            for name in self._fields:
                updated[name] = self._masked(updated.get(name))
            return updated, None
        struct = require_struct(value, "mask fields")
        masked = struct_of(struct.schema, struct_values(struct, self._defaults))
        for f in struct.schema.fields:
            if f.name in self._fields:
                masked.put(f, self._masked(masked.get_without_default(f)))
        return masked, schema

    def _masked(self, value: Any) -> Any:
        if value is None:
            return None
        if self._replacement is not None:
            return _replaced(value, self._replacement)
        for kind, empty in _EMPTY:
            if isinstance(value, kind):
                return empty
        if isinstance(value, list | tuple):
            return []
        if isinstance(value, Mapping) and not isinstance(value, Struct):
            return {}
        raise DataError(f"Cannot mask value of type: {class_name(value)}")


def _replaced(value: Any, replacement: str) -> Any:
    convert: Any = None
    if isinstance(value, str):
        return replacement
    if isinstance(value, int) and not isinstance(value, bool):
        convert = int
    elif isinstance(value, float):
        convert = float
    elif isinstance(value, decimal.Decimal):
        convert = decimal.Decimal
    if convert is None:
        raise DataError(f"Cannot mask value of type {class_name(value)} with custom replacement.")
    try:
        return convert(replacement)
    except (ValueError, decimal.InvalidOperation):
        raise DataError(f"Unable to convert {replacement} (str) to number") from None


class MaskFieldKey(MaskField):
    on_key = True


class MaskFieldValue(MaskField):
    on_key = False
