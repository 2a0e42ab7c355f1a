"""Field transforms of a key or value: InsertField, ReplaceField and MaskField (Kafka
Connect's, same settings, ``$Key`` and ``$Value``). Without a schema the key or value
must be a Mapping (a new ``dict`` comes out); with one, a :class:`~eos.api.Struct`, and
the derived schema is built once per input schema (:class:`SchemaCache`)."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
from collections.abc import Mapping
from typing import Any, Final

import structlog

from eos.api.logical import Timestamp
from eos.api.records import RecordBlock
from eos.api.schema import (
    INT32_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaBuilder,
    Struct,
    copy_schema_basics,
)
from eos.config.definition import NO_DEFAULT, ConfigDef, Importance, NonEmpty, Type
from eos.errors import ConfigError, DataError
from eos.transforms.base import KeyOrValueTransform, Mask, NeedsRows
from eos.transforms.dates import EPOCH
from eos.transforms.row import Row
from eos.transforms.schemas import (
    Defaults,
    SchemaCache,
    class_name,
    field_defaults,
    require_map,
    require_struct,
    struct_of,
    struct_values,
    values_with,
)
from eos.transforms.settings import REPLACE_NULL, WHOLE, NonEmptyList, with_replace_null
from eos.transforms.struct_columns import (
    children,
    field,
    fields_of,
    partition_column,
    repeated,
    struct_array,
    struct_column,
    timestamp_column,
    topic_column,
)

log = structlog.get_logger(__name__)

_OPTIONALITY = (
    " Suffix with ! to make this a required field, or ? to keep it optional (the default)."
)


INSERT_FIELD_CONFIG = with_replace_null(
    ConfigDef()
    .define(
        "topic.field",
        Type.STRING,
        None,
        None,
        Importance.MEDIUM,
        "Field name for Kafka topic." + _OPTIONALITY,
    )
    .define(
        "partition.field",
        Type.STRING,
        None,
        None,
        Importance.MEDIUM,
        "Field name for Kafka partition." + _OPTIONALITY,
    )
    .define(
        "offset.field",
        Type.STRING,
        None,
        None,
        Importance.MEDIUM,
        "Field name for Kafka offset - only applicable to sink connectors." + _OPTIONALITY,
    )
    .define(
        "timestamp.field",
        Type.STRING,
        None,
        None,
        Importance.MEDIUM,
        "Field name for record timestamp." + _OPTIONALITY,
    )
    .define(
        "static.field",
        Type.STRING,
        None,
        None,
        Importance.MEDIUM,
        "Field name for static data field." + _OPTIONALITY,
    )
    .define(
        "static.value",
        Type.STRING,
        None,
        None,
        Importance.MEDIUM,
        "Static field value, if field name configured.",
    )
)

_OPTIONAL_TIMESTAMP = Timestamp.builder().optional().build()


def _spec(raw: str | None) -> tuple[str, bool] | None:
    """(field name, optional) of ``name``, ``name?`` or ``name!``."""
    if raw is None:
        return None
    if raw.endswith(("?", "!")):
        return raw[:-1], raw.endswith("?")
    return raw, True


class InsertField(KeyOrValueTransform):
    """Insert fields from the record's metadata (topic, partition, timestamp) or a static
    value. A null key or value passes unchanged; a field whose metadata the record lacks
    (no partition, no timestamp) is left out (schemaless) or null."""

    def config_def(self) -> ConfigDef:
        return INSERT_FIELD_CONFIG

    def configure(self, settings: Mapping[str, str]) -> None:
        v = INSERT_FIELD_CONFIG.parse(settings)
        if v["offset.field"] is not None:
            raise ConfigError(
                "offset.field",
                v["offset.field"],
                "the Kafka offset is only known "
                "to sink connectors, after the record is written; remove it",
            )
        self._topic = _spec(v["topic.field"])
        self._partition = _spec(v["partition.field"])
        self._timestamp = _spec(v["timestamp.field"])
        self._static = _spec(v["static.field"])
        self._static_value: str | None = v["static.value"]
        if not (self._topic or self._partition or self._timestamp or self._static):
            raise ConfigError(
                WHOLE,
                "InsertField",
                "no field insertion configured: set "
                "topic.field, partition.field, timestamp.field or static.field",
            )
        if self._static is not None and self._static_value is None:
            raise ConfigError(
                "static.value", None, f"No value specified for static field: {self._static[0]}"
            )
        self._defaults: bool = v[REPLACE_NULL]
        self._plans: SchemaCache[tuple[Schema, Defaults]] = SchemaCache()
        self._static_name = None if self._static is None else self._static[0]
        self._metadata = bool(self._topic or self._partition or self._timestamp)

    def update(self, row: Row, value: Any, schema: Schema | None) -> tuple[Any, Schema | None]:
        if value is None:
            return value, schema
        if schema is None:
            return self._into_map(row, value), None
        struct = self._into_struct(row, require_struct(value, "field insertion"))
        return struct, struct.schema

    def transform_block(self, block: RecordBlock, mask: Mask) -> RecordBlock | None:
        """A struct column with a STRUCT schema gets the fields as new children (every
        row: with a mask the rows would have two schemas; else NeedsRows)."""
        if mask is not None or block.encoded:
            raise NeedsRows
        on_key = self.on_key
        column = block.keys if on_key else block.values
        if column is None:  # no keys: every key is null, and passes unchanged
            return block
        array, schema = struct_column(column, block.key_schema if on_key else block.value_schema)
        if array.null_count:  # a null passes with its schema: the rows' schemas would differ
            raise NeedsRows
        new_schema, defaults = self._plans.get(schema, self._plan)
        old = range(len(schema.fields))
        added = []
        if self._topic:
            added.append(topic_column(block))
        if self._partition:
            if not self._partition[1]:  # a required field the row path leaves null
                raise NeedsRows
            added.append(partition_column(len(block)))
        if self._timestamp:
            added.append(stamps := timestamp_column(block))
            if not self._timestamp[1] and stamps.null_count:
                raise NeedsRows
        if self._static_name is not None:
            added.append(repeated(self._static_value, len(block)))
        names = [f.name for f in new_schema.fields[len(old) :]]
        inserted = struct_array(
            children(array, schema, old, defaults) + added,
            fields_of(array, old) + [field(n, c.type) for n, c in zip(names, added, strict=True)],
        )
        if on_key:
            return dataclasses.replace(block, keys=inserted, key_schema=new_schema)
        return dataclasses.replace(block, values=inserted, value_schema=new_schema)

    def _into_struct(self, row: Row, struct: Struct) -> Struct:
        """A Struct key or value with the fields added (its schema derived once)."""
        plans, schema = self._plans, struct.schema
        plan = plans.last_built if schema is plans.last else plans.get(schema, self._plan)
        new_schema, defaults = plan
        values = values_with(struct, defaults)
        if self._metadata:
            if self._topic:
                values.append(row.topic)
            if self._partition:
                values.append(row.partition)
            if self._timestamp:
                stamp = row.timestamp
                values.append(
                    None if stamp is None else EPOCH + datetime.timedelta(milliseconds=stamp)
                )
        if self._static_name is not None:
            values.append(self._static_value)
        return struct_of(new_schema, values)

    def _into_map(self, row: Row, value: Any) -> dict[str, Any]:
        """A schemaless key or value with the fields added."""
        if type(value) is dict:  # the common case: no ABC check
            updated = value.copy()
        else:
            updated = dict(require_map(value, "field insertion"))
        if self._metadata:
            if self._topic:
                updated[self._topic[0]] = row.topic
            if self._partition and row.partition is not None:
                updated[self._partition[0]] = row.partition
            if self._timestamp and row.timestamp is not None:
                updated[self._timestamp[0]] = row.timestamp
        if self._static_name is not None:
            updated[self._static_name] = self._static_value
        return updated

    def _plan(self, schema: Schema) -> tuple[Schema, Defaults]:
        """The schema with the fields added, and the input's defaults to fill in."""
        return self._with_fields(schema), field_defaults(schema) if self._defaults else ()

    def _with_fields(self, schema: Schema) -> Schema:
        builder = copy_schema_basics(schema, SchemaBuilder.struct())
        for f in schema.fields:
            builder.field(f.name, f.schema)
        added = [
            (self._topic, OPTIONAL_STRING_SCHEMA, STRING_SCHEMA),
            (self._partition, OPTIONAL_INT32_SCHEMA, INT32_SCHEMA),
            (self._timestamp, _OPTIONAL_TIMESTAMP, Timestamp.SCHEMA),
            (self._static, OPTIONAL_STRING_SCHEMA, STRING_SCHEMA),
        ]
        for spec, optional, required in added:
            if spec is not None:
                builder.field(spec[0], optional if spec[1] else required)
        return builder.build()


class InsertFieldKey(InsertField):
    on_key = True


class InsertFieldValue(InsertField):
    on_key = False

    def transform(self, row: Row) -> bool:
        # update's common cases, a call or two less per record
        value = row.value
        if type(value) is dict and row.value_schema is None:
            row.value = self._into_map(row, value)
        elif type(value) is Struct and row.value_schema is not None:
            row.value = struct = self._into_struct(row, value)
            row.value_schema = struct.schema
        elif value is not None:
            row.value, row.value_schema = self.update(row, value, row.value_schema)
        return True


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
