"""Debezium's ``io.debezium.transforms.ExtractNewRecordState``: a change event's envelope
unwrapped to the row it leaves (``after``), for consumers that want rows, not changes.

Settings, as Debezium 3 names them:

- ``delete.tombstone.handling.mode``: what becomes of a delete (``op=d``) and of the
  tombstone after it. ``tombstone`` (the default): the delete becomes a tombstone, the
  tombstone stays. ``drop``: both dropped. ``rewrite``: the delete becomes its ``before``
  row with ``__deleted=true`` (every other row gets ``__deleted=false``), the tombstone is
  dropped. ``rewrite-with-tombstone``: as ``rewrite``, the tombstone kept.
  ``delete-to-tombstone``: the delete becomes a tombstone, the original tombstone dropped.
- ``add.fields``: envelope or ``source`` fields added to the row as ``__<name>``
  (``op,table,lsn,source.ts_ms`` → ``__op``, ``__table``, ``__lsn``, ``__source_ts_ms``);
  ``add.fields.prefix`` replaces ``__``.
- ``add.headers`` / ``add.headers.prefix``: the same fields as headers.

A record that is not a change event (no ``op`` field, e.g. a heartbeat) passes unchanged;
so does a truncate (``op=t``), which has no row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from eos.api import Schema, SchemaBuilder, SourceRecord, Struct
from eos.api.transforms import Transformation
from eos.config.definition import ConfigDef, Importance, OneOf, Type
from eos.errors import ConfigError

MODES = ("drop", "tombstone", "rewrite", "rewrite-with-tombstone", "delete-to-tombstone")
DELETED = "deleted"

CONFIG = (
    ConfigDef()
    .define("delete.tombstone.handling.mode", Type.STRING, "tombstone", OneOf(*MODES),
            Importance.MEDIUM, "What becomes of deletes and tombstones.")
    .define("add.fields", Type.LIST, "", None, Importance.LOW,
            "Envelope or source fields to add to the row (source.<name> for a source field "
            "of the same name as an envelope field).")
    .define("add.fields.prefix", Type.STRING, "__", None, Importance.LOW,
            "Prefix of the added fields' names.")
    .define("add.headers", Type.LIST, "", None, Importance.LOW,
            "Envelope or source fields to add as headers.")
    .define("add.headers.prefix", Type.STRING, "__", None, Importance.LOW,
            "Prefix of the added headers' names.")
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class _Added:
    name: str
    """As the setting names it: ``op``, ``source.ts_ms``."""
    label: str
    """Without the prefix: ``op``, ``source_ts_ms``."""


def _parse_added(names: list[str]) -> list[_Added]:
    return [_Added(n, n.replace(".", "_")) for n in names if n]


class ExtractNewRecordState(Transformation):
    def config_def(self) -> ConfigDef:
        return CONFIG

    def configure(self, settings: Mapping[str, str]) -> None:
        values = CONFIG.parse(settings)
        self._mode: str = values["delete.tombstone.handling.mode"]
        self._fields = _parse_added(values["add.fields"])
        self._headers = _parse_added(values["add.headers"])
        self._field_prefix: str = values["add.fields.prefix"]
        self._header_prefix: str = values["add.headers.prefix"]
        for added in self._fields + self._headers:
            if added.name.count(".") > 1 or (
                "." in added.name and not added.name.startswith("source.")
            ):
                raise ConfigError("add.fields", added.name, "expected <field> or source.<field>")
        self._rewrite = self._mode.startswith("rewrite")
        self._schemas: dict[Schema, Schema] = {}

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        envelope = record.value
        if envelope is None:
            keep = self._mode in ("tombstone", "rewrite-with-tombstone")
            return record if keep else None
        if not isinstance(envelope, Struct) or envelope.schema.field("op") is None:
            return record
        op = envelope.get("op")
        if op == "t":
            return record
        headers = tuple(record.headers) + tuple(
            (self._header_prefix + a.label, _lookup(envelope, a.name)) for a in self._headers
        )
        if op == "d":
            if self._mode == "drop":
                return None
            if not self._rewrite:
                return dataclasses.replace(record, value=None, value_schema=None, headers=headers)
            row = envelope.get("before")
        else:
            row = envelope.get("after")
        if not isinstance(row, Struct):
            return dataclasses.replace(record, value=None, value_schema=None, headers=headers)
        schema = self._schemas.get(row.schema)
        if schema is None:
            schema = self._schemas[row.schema] = self._schema(envelope, row.schema)
        values = {f.name: row.get_without_default(f.name) for f in row.schema.fields}
        for added in self._fields:
            values[self._field_prefix + added.label] = _lookup(envelope, added.name)
        if self._rewrite:
            values[self._field_prefix + DELETED] = "true" if op == "d" else "false"
        return dataclasses.replace(
            record, value=Struct(schema, values), value_schema=schema, headers=headers
        )

    def _schema(self, envelope: Struct, row: Schema) -> Schema:
        builder = SchemaBuilder.struct()
        if row.name:
            builder.name(row.name)
        if row.version is not None:
            builder.version(row.version)
        if row.optional:
            builder.optional()
        for f in row.fields:
            builder.field(f.name, f.schema)
        for added in self._fields:
            found = _field_schema(envelope.schema, added.name)
            builder.field(self._field_prefix + added.label, _optional(found))
        if self._rewrite:
            builder.field(self._field_prefix + DELETED, SchemaBuilder.string().optional().build())
        return builder.build()


def _lookup(envelope: Struct, name: str) -> Any:
    if name.startswith("source."):
        source = envelope.get("source")
        return None if source is None else source.get(name.removeprefix("source."))
    if envelope.schema.field(name) is not None:
        return envelope.get(name)
    source = envelope.get("source")
    if isinstance(source, Struct) and source.schema.field(name) is not None:
        return source.get(name)
    return None


def _field_schema(envelope: Schema, name: str) -> Schema | None:
    if name.startswith("source."):
        source = envelope.field("source")
        inner = None if source is None else source.schema.field(name.removeprefix("source."))
        return None if inner is None else inner.schema
    found = envelope.field(name)
    if found is not None:
        return found.schema
    source = envelope.field("source")
    inner = None if source is None else source.schema.field(name)
    return None if inner is None else inner.schema


def _optional(schema: Schema | None) -> Schema:
    if schema is None:
        return SchemaBuilder.string().optional().build()
    return dataclasses.replace(schema, optional=True, default=None)
