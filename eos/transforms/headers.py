"""Header transforms: InsertHeader, DropHeaders and HeaderFrom (Kafka Connect's, same
settings). Header values are the bytes Connect's default header converter
(``SimpleHeaderConverter``) would write (:mod:`eos.transforms.value_text`).

InsertHeader and DropHeaders also work on a record block: a header every selected row
gets becomes a block header or a header column; one some rows lose becomes a header
column with None where it is gone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from eos.api.records import RecordBlock
from eos.api.schema import Schema, SchemaBuilder, Struct, copy_schema_basics
from eos.config.definition import NO_DEFAULT, ConfigDef, Importance, OneOf, Type
from eos.errors import DataError
from eos.transforms.base import KeyOrValueTransform, Mask, NeedsRows, RowTransform
from eos.transforms.row import Row
from eos.transforms.schemas import SchemaCache, field_value, require_map, require_struct
from eos.transforms.setting_validators import (
    REPLACE_NULL,
    NonEmptyList,
    setting_error,
    with_replace_null,
)
from eos.transforms.value_text import header_bytes

INSERT_HEADER_CONFIG = (
    ConfigDef()
    .define("header", Type.STRING, NO_DEFAULT, None, Importance.HIGH, "The name of the header.")
    .define(
        "value.literal",
        Type.STRING,
        NO_DEFAULT,
        None,
        Importance.HIGH,
        "The literal value that is to be set as the header value on all records.",
    )
)


class InsertHeader(RowTransform):
    """Add a header with a literal value to each record (``null`` adds a header without
    a value, as Connect's literal parsing does)."""

    reads_values = False

    def config_def(self) -> ConfigDef:
        return INSERT_HEADER_CONFIG

    def configure(self, settings: Mapping[str, str]) -> None:
        v = INSERT_HEADER_CONFIG.parse(settings)
        literal: str = v["value.literal"]
        self._header: tuple[str, bytes | None] = (
            v["header"],
            None if literal == "null" else literal.encode(),
        )

    def transform(self, row: Row) -> bool:
        row.headers = (*row.headers, self._header)
        return True

    def transform_block(self, block: RecordBlock, mask: Mask) -> RecordBlock | None:
        name, value = self._header
        if name in block.header_columns:  # the new header must come after the column's
            raise NeedsRows
        if mask is None and value is not None:
            return dataclasses.replace(block, headers=(*block.headers, (name, value)))
        if mask is None or value is None:
            raise NeedsRows  # a header without a value cannot be a column entry
        column = [value if chosen else None for chosen in mask]
        return dataclasses.replace(block, header_columns={**block.header_columns, name: column})


DROP_HEADERS_CONFIG = ConfigDef().define(
    "headers",
    Type.LIST,
    NO_DEFAULT,
    NonEmptyList(),
    Importance.HIGH,
    "The name of the headers to be removed.",
)


class DropHeaders(RowTransform):
    """Remove every header with one of the configured names."""

    reads_values = False

    def config_def(self) -> ConfigDef:
        return DROP_HEADERS_CONFIG

    def configure(self, settings: Mapping[str, str]) -> None:
        self._names = frozenset(DROP_HEADERS_CONFIG.parse(settings)["headers"])

    def transform(self, row: Row) -> bool:
        names = self._names
        if any(h[0] in names for h in row.headers):
            row.headers = tuple(h for h in row.headers if h[0] not in names)
        return True

    def transform_block(self, block: RecordBlock, mask: Mask) -> RecordBlock | None:
        names = self._names
        columns = {n: c for n, c in block.header_columns.items()}
        kept = [h for h in block.headers if h[0] not in names]
        if mask is None:
            columns = {n: c for n, c in columns.items() if n not in names}
        else:
            for name, column in list(columns.items()):
                if name in names:
                    columns[name] = [None if m else v for v, m in zip(column, mask, strict=True)]
            for name, value in block.headers:
                if name not in names:
                    continue
                if name in columns or sum(h[0] == name for h in block.headers) > 1:
                    raise NeedsRows
                columns[name] = [None if m else value for m in mask]
        return dataclasses.replace(block, headers=tuple(kept), header_columns=columns)


HEADER_FROM_CONFIG = with_replace_null(
    ConfigDef()
    .define(
        "fields",
        Type.LIST,
        NO_DEFAULT,
        NonEmptyList(),
        Importance.HIGH,
        "Field names in the record whose values are to be copied or moved to headers.",
    )
    .define(
        "headers",
        Type.LIST,
        NO_DEFAULT,
        NonEmptyList(),
        Importance.HIGH,
        "Header names, in the same order as the field names listed in the fields "
        "configuration property.",
    )
    .define(
        "operation",
        Type.STRING,
        NO_DEFAULT,
        OneOf("move", "copy", case_sensitive=True),
        Importance.HIGH,
        "Either move if the fields are to be moved to the headers "
        "(removed from the key/value), or copy if the fields are to be copied to the "
        "headers (retained in the key/value).",
    )
)


class HeaderFrom(KeyOrValueTransform):
    """Move or copy fields of the key or value into headers: ``fields[i]`` goes to the
    header ``headers[i]``."""

    def config_def(self) -> ConfigDef:
        return HEADER_FROM_CONFIG

    def configure(self, settings: Mapping[str, str]) -> None:
        v = HEADER_FROM_CONFIG.parse(settings)
        self._fields: list[str] = v["fields"]
        self._names: list[str] = v["headers"]
        if len(self._fields) != len(self._names):
            raise setting_error(
                "headers",
                ",".join(self._names),
                "'headers' config must have the same number of elements as 'fields' config",
            )
        self._move = v["operation"] == "move"
        self._defaults: bool = v[REPLACE_NULL]
        self._moved: SchemaCache[Schema] = SchemaCache()

    def update(self, row: Row, value: Any, schema: Schema | None) -> tuple[Any, Schema | None]:
        added: list[tuple[str, bytes | None]] = []
        if schema is None:
            found = require_map(value, f"header {self._operation}")
            for field, name in zip(self._fields, self._names, strict=True):
                added.append((name, header_bytes(found.get(field))))
            if self._move:
                value = {k: v for k, v in found.items() if k not in self._fields}
        else:
            struct = require_struct(value, f"header {self._operation}")
            for field, name in zip(self._fields, self._names, strict=True):
                f = schema.field(field)
                if f is None:
                    raise DataError(f"{field} is not a valid field name")
                added.append((name, header_bytes(field_value(struct, f, self._defaults), f.schema)))
            if self._move:
                schema = self._moved.get(schema, self._without_fields)
                value = Struct(
                    schema,
                    {f.name: field_value(struct, f.name, self._defaults) for f in schema.fields},
                )
        row.headers = (*row.headers, *added)
        return value, schema

    @property
    def _operation(self) -> str:
        return "move" if self._move else "copy"

    def _without_fields(self, schema: Schema) -> Schema:
        builder = copy_schema_basics(schema, SchemaBuilder.struct())
        for f in schema.fields:
            if f.name not in self._fields:
                builder.field(f.name, f.schema)
        return builder.build()


class HeaderFromKey(HeaderFrom):
    on_key = True


class HeaderFromValue(HeaderFrom):
    on_key = False
