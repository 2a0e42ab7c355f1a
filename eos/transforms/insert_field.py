"""InsertField (Kafka Connect's, same settings, ``$Key`` and ``$Value``): fields from the
record's metadata (topic, partition, timestamp) or a static value added to the key or
value. Without a schema the key or value must be a Mapping (a new ``dict`` comes out);
with one, a :class:`~eos.api.Struct`, and the derived schema is built once per input
schema (:class:`SchemaCache`). On a typed record block, the fields are new children of
its struct column."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any, cast

from eos.api.logical import Timestamp
from eos.api.records import RecordBlock
from eos.api.schema import (
    INT32_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaBuilder,
    SchemaType,
    Struct,
    copy_schema_basics,
)
from eos.columns.text_struct import TextStruct
from eos.config.definition import ConfigDef, Importance, Type
from eos.errors import ConfigError
from eos.transforms.base import KeyOrValueTransform, Mask, NeedsRows
from eos.transforms.dates import EPOCH
from eos.transforms.row import Row
from eos.transforms.schemas import (
    Defaults,
    SchemaCache,
    field_defaults,
    require_map,
    require_struct,
    struct_extended,
)
from eos.transforms.setting_validators import REPLACE_NULL, WHOLE, with_replace_null
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
        self._static_only: list[Any] = [] if self._static is None else [self._static_value]
        """The inserted values of a Struct without metadata fields: the same each record."""
        self._static_only_block = self._static is not None and not self._metadata
        """Whether a struct column of lines (:class:`TextStruct`) stays one."""

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
        if type(column) is TextStruct and self._static_only_block:
            return self._static_on_text(block, column)
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

    def _static_on_text(self, block: RecordBlock, column: TextStruct) -> RecordBlock:
        """The static field added to a struct column of lines, which stays one."""
        on_key = self.on_key
        schema = block.key_schema if on_key else block.value_schema
        if schema is None or schema.type is not SchemaType.STRUCT:
            raise NeedsRows
        new_schema = self._plans.get(schema, self._plan)[0]
        assert self._static_name is not None
        assert self._static_value is not None
        inserted = column.with_constant(self._static_name, self._static_value)
        if on_key:
            return dataclasses.replace(block, keys=inserted, key_schema=new_schema)
        return dataclasses.replace(block, values=inserted, value_schema=new_schema)

    def _into_struct(self, row: Row, struct: Struct) -> Struct:
        """A Struct key or value with the fields added (its schema derived once)."""
        plans, schema = self._plans, struct.schema
        plan = plans.last_built if schema is plans.last else plans.get(schema, self._plan)
        added = self._metadata_of(row) if self._metadata else self._static_only
        return struct_extended(plan[0], struct, plan[1], added)

    def _metadata_of(self, row: Row) -> list[Any]:
        """The values of the inserted fields of a Struct, in the schema's order."""
        added: list[Any] = []
        if self._topic:
            added.append(row.topic)
        if self._partition:
            added.append(row.partition)
        if self._timestamp:
            stamp = row.timestamp
            added.append(None if stamp is None else EPOCH + datetime.timedelta(milliseconds=stamp))
        if self._static_name is not None:
            added.append(self._static_value)
        return added

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

    def transform_rows(self, rows: list[Row]) -> list[Row]:
        # transform's work in one loop, its settings and last plan in locals
        if self._metadata:  # values that differ per record: transform's own way
            return super().transform_rows(rows)
        plans, plan, extended = self._plans, self._plan, struct_extended
        name, static, added = self._static_name, self._static_value, self._static_only
        last: Schema | None = None
        new_schema, defaults = cast(Schema, None), cast(Defaults, ())  # set with last
        for row in rows:
            value = row.value
            if type(value) is dict and row.value_schema is None:
                updated = value.copy()
                updated[name] = static
                row.value = updated
            elif type(value) is Struct and row.value_schema is not None:
                if value.schema is not last:
                    last = value.schema
                    new_schema, defaults = plans.get(last, plan)
                row.value = extended(new_schema, value, defaults, added)
                row.value_schema = new_schema
            elif value is not None:
                row.value, row.value_schema = self.update(row, value, row.value_schema)
        return rows
