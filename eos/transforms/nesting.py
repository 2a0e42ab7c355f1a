"""Transforms that move data between levels: ValueToKey (fields of the value become the
key), ExtractField (a field becomes the whole key or value) and HoistField (the whole
key or value becomes a field). Kafka Connect's, same settings."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, cast

from eos.api.records import RecordBlock
from eos.api.schema import Field, Schema, SchemaBuilder, SchemaType, Struct
from eos.columns.text_struct import TextStruct
from eos.config.definition import NO_DEFAULT, ConfigDef, Importance, OneOf, Type
from eos.errors import ConfigError, DataError
from eos.transforms.base import KeyOrValueTransform, Mask, NeedsRows, RowTransform
from eos.transforms.row import Row
from eos.transforms.schemas import (
    SchemaCache,
    field_defaults,
    field_value,
    require_map,
    require_struct,
    struct_of,
    struct_picked,
)
from eos.transforms.setting_validators import REPLACE_NULL, NonEmptyList, with_replace_null
from eos.transforms.struct_columns import (
    children,
    field,
    fields_of,
    plain_column,
    struct_array,
    struct_column,
)

VALUE_TO_KEY_CONFIG = with_replace_null(
    ConfigDef().define(
        "fields",
        Type.LIST,
        NO_DEFAULT,
        NonEmptyList(),
        Importance.HIGH,
        "Field names on the record value to extract as the record key.",
    )
)


class ValueToKey(RowTransform):
    """Replace the record key with a new key formed from a subset of fields in the record
    value (a map without a schema, a Struct with one)."""

    def config_def(self) -> ConfigDef:
        return VALUE_TO_KEY_CONFIG

    def configure(self, settings: Mapping[str, str]) -> None:
        v = VALUE_TO_KEY_CONFIG.parse(settings)
        self._fields: list[str] = v["fields"]
        self._defaults: bool = v[REPLACE_NULL]
        self._keys: SchemaCache[_KeyPlan] = SchemaCache()

    def transform(self, row: Row) -> bool:
        value = row.value
        if row.value_schema is None:
            if type(value) is not dict:  # the common case skips the ABC check
                value = require_map(value, "copying fields from value to key")
            fields = self._fields
            if len(fields) == 1:  # the common case, without a loop
                row.key = {fields[0]: value.get(fields[0])}
            else:
                key = {}
                for name in fields:  # a loop is faster here than a comprehension
                    key[name] = value.get(name)
                row.key = key
            row.key_schema = None
            return True
        if type(value) is not Struct:  # the common case skips the call
            value = require_struct(value, "copying fields from value to key")
        plans, schema = self._keys, value.schema
        plan = plans.last_built if schema is plans.last else plans.get(schema, self._plan)
        row.key = struct_picked(plan[0], value, plan[1], self._defaults)
        row.key_schema = plan[0]
        row.value_schema = schema
        return True

    def transform_rows(self, rows: list[Row]) -> list[Row]:
        # transform's common cases in one loop, its settings and last plan in locals
        fields, plans, plan, defaults = self._fields, self._keys, self._plan, self._defaults
        one = fields[0] if len(fields) == 1 else None
        picked, last = struct_picked, cast(Schema | None, None)
        key_schema, positions = cast(Schema, None), cast(list[int], [])  # set with last
        for row in rows:
            value = row.value
            if row.value_schema is None and type(value) is dict and one is not None:
                row.key = {one: value.get(one)}
                row.key_schema = None
            elif row.value_schema is not None and type(value) is Struct:
                if value.schema is not last:
                    last = value.schema
                    key_schema, positions = plans.get(last, plan)
                row.key = picked(key_schema, value, positions, defaults)
                row.key_schema = key_schema
                row.value_schema = last
            else:
                self.transform(row)
        return rows

    def transform_block(self, block: RecordBlock, mask: Mask) -> RecordBlock | None:
        """Keys of the value's struct column: a struct column of the fields' children
        (every row: with a mask the keys would have two schemas; else NeedsRows)."""
        if mask is not None or block.encoded:
            raise NeedsRows
        array, schema = struct_column(block.values, block.value_schema)
        if array.null_count:  # as the row path fails on a null value
            require_struct(None, "copying fields from value to key")
        key_schema, positions = self._keys.get(schema, self._plan)
        defaults = field_defaults(schema) if self._defaults else ()
        keys = struct_array(
            children(array, schema, positions, defaults), fields_of(array, positions)
        )
        return dataclasses.replace(block, keys=keys, key_schema=key_schema)

    def _plan(self, value_schema: Schema) -> _KeyPlan:
        """The key schema, and where each of its fields is in the value."""
        builder = SchemaBuilder.struct()
        positions = []
        for name in self._fields:
            found = value_schema.field(name)
            if found is None:
                raise DataError(f"Field does not exist: {name}")
            builder.field(name, found.schema)
            positions.append(found.index)
        return builder.build(), positions


_KeyPlan = tuple[Schema, list[int]]


EXTRACT_FIELD_CONFIG = with_replace_null(
    ConfigDef()
    .define("field", Type.STRING, NO_DEFAULT, None, Importance.MEDIUM, "Field name to extract.")
    .define(
        "field.syntax.version",
        Type.STRING,
        "V1",
        OneOf("V1", "V2"),
        Importance.HIGH,
        "Defines the version of the syntax to access fields. If set to V1, then the field "
        "paths are limited to access the elements at the root level of the struct or map. "
        "If set to V2, the syntax will support accessing nested elements. To access nested "
        "elements, dotted notation is used. If dots are already included in the field "
        "name, then backtick pairs can be used to wrap field names containing dots. E.g. "
        'to access the subfield baz from a field named "foo.bar" in a struct/map the '
        'following format can be used to access its elements: "`foo.bar`.baz".',
    )
)


def field_path(text: str, version: str) -> list[str]:
    """The steps of a field path: V1 the whole text; V2 dotted, with backticks around a
    step that holds dots (a backtick inside one is escaped with a backslash)."""
    if version.upper() == "V1":
        return [text]
    steps: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] != "`":
            end = text.find(".", i)
            steps.append(text[i:] if end < 0 else text[i:end])
            i = n if end < 0 else end + 1
            continue
        opened, i, step = i, i + 1, []
        while True:
            close = text.find("`", i)
            if close < 0:
                raise ValueError(
                    f"Incomplete backtick pair in path: [{text}], consider adding a backslash "
                    f"before backtick at position {opened} to escape it"
                )
            escaped = text[close - 1] == "\\"
            if close + 1 < n and text[close + 1] != ".":
                step.append(text[i : close + 1])  # a backtick inside the step
                i = close + 1
            elif escaped and close + 1 < n:
                step.append(text[i : close - 1] + "`")
                i = close + 1
            elif escaped:
                raise ValueError(
                    f"Incomplete backtick pair in path: [{text}], consider adding "
                    f"a backslash before backtick at position {opened} to escape it"
                )
            else:
                step.append(text[i:close])
                steps.append("".join(step))
                i = close + 2
                break
    if text.endswith("."):
        steps.append("")
    return steps


class ExtractField(KeyOrValueTransform):
    """Replace the key or value with one of its fields (``field.syntax.version=V2``: a
    nested one, ``a.b``). A null key or value stays null."""

    def config_def(self) -> ConfigDef:
        return EXTRACT_FIELD_CONFIG

    def configure(self, settings: Mapping[str, str]) -> None:
        v = EXTRACT_FIELD_CONFIG.parse(settings)
        self._original: str = v["field"]
        try:
            self._path = field_path(v["field"], v["field.syntax.version"])
        except ValueError as exc:
            raise ConfigError("field", v["field"], str(exc)) from None
        self._defaults: bool = v[REPLACE_NULL]

    def update(self, row: Row, value: Any, schema: Schema | None) -> tuple[Any, Schema | None]:
        *parents, last = self._path
        if schema is None:
            current = None if value is None else require_map(value, "field extraction")
            for step in parents:
                if current is None:
                    break
                current = _map_or_none(current.get(step))
            return (None if current is None else current.get(last)), None
        found = self._field(schema)
        struct = None if value is None else require_struct(value, "field extraction")
        for step in parents:
            if struct is None or struct.schema.field(step) is None:
                return None, found.schema
            inner = struct.get(step)
            struct = None if inner is None else require_struct(inner, "nested field access")
        if struct is None or struct.schema.field(last) is None:
            return None, found.schema
        return field_value(struct, last, self._defaults), found.schema

    def _field(self, schema: Schema) -> Field:
        found: Field | None = None
        for step in self._path:
            found = schema.field(step)
            if found is None:
                raise DataError(f"Unknown field: {self._original}")
            schema = found.schema
        assert found is not None  # a path has at least one step
        return found


def _map_or_none(value: Any) -> Mapping[str, Any] | None:
    return None if value is None else require_map(value, "nested field access")


class ExtractFieldKey(ExtractField):
    on_key = True


class ExtractFieldValue(ExtractField):
    on_key = False


HOIST_FIELD_CONFIG = ConfigDef().define(
    "field",
    Type.STRING,
    NO_DEFAULT,
    None,
    Importance.MEDIUM,
    "Field name for the single field that will be created in the resulting Struct or Map.",
)


class HoistField(KeyOrValueTransform):
    """Wrap the key or value in a Struct (with a schema) or a map (without) with one
    field, ``field``. On a block with a schema, the column becomes the one child of a
    struct column (a FileSource block's lines: a string column first)."""

    def config_def(self) -> ConfigDef:
        return HOIST_FIELD_CONFIG

    def configure(self, settings: Mapping[str, str]) -> None:
        self._name: str = HOIST_FIELD_CONFIG.parse(settings)["field"]
        self._schemas: SchemaCache[Schema] = SchemaCache()

    def update(self, row: Row, value: Any, schema: Schema | None) -> tuple[Any, Schema | None]:
        if schema is None:
            return {self._name: value}, None
        wrapper = self._schemas.get(schema, self._wrapper)
        return struct_of(wrapper, [value]), wrapper

    def transform_block(self, block: RecordBlock, mask: Mask) -> RecordBlock | None:
        """Every row of a column with a schema and no null, at once (with a mask the rows
        would have two schemas; else NeedsRows)."""
        if mask is not None or block.encoded:
            raise NeedsRows
        on_key = self.on_key
        schema = block.key_schema if on_key else block.value_schema
        column = block.keys if on_key else block.values
        hoisted: Any = None
        if schema is not None and schema.type is SchemaType.STRING and schema.name is None:
            hoisted = TextStruct.hoisted(self._name, column)  # a list of lines: stays one
        if hoisted is None:
            child = plain_column(column, schema)
            hoisted = struct_array([child], [field(self._name, child.type)])
        assert schema is not None  # plain_column: NeedsRows without one
        wrapper = self._schemas.get(schema, self._wrapper)
        if on_key:
            return dataclasses.replace(block, keys=hoisted, key_schema=wrapper)
        return dataclasses.replace(block, values=hoisted, value_schema=wrapper)

    def _wrapper(self, schema: Schema) -> Schema:
        return SchemaBuilder.struct().field(self._name, schema).build()


class HoistFieldKey(HoistField):
    on_key = True


class HoistFieldValue(HoistField):
    on_key = False
