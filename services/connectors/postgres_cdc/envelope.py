"""Debezium's record shape for one table: the key (the primary key's columns), the row
(``<prefix>.<schema>.<table>.Value``) and the change envelope around it (``before``,
``after``, ``source``, ``op``, ``ts_ms``/``ts_us``/``ts_ns``, ``transaction``), with
Debezium's schema names and versions, so Debezium's consumers and
``ExtractNewRecordState`` read eos's records unchanged."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eos.api import Schema, SchemaBuilder, SourceRecord, Struct
from eos.api.schema import OPTIONAL_STRING_SCHEMA
from services.connectors.postgres_cdc.catalog import CatalogColumn
from services.connectors.postgres_cdc.column_types import (
    Mapped,
    column_schema,
    default_text,
    map_type,
)

log = logging.getLogger(__name__)

CONNECTOR = "postgresql"
SNAPSHOT_VALUES = ("true", "first", "first_in_data_collection", "last_in_data_collection",
                   "last", "false", "incremental")  # fmt: skip
_OPTIONAL_INT64 = SchemaBuilder.int64().optional().build()


def _source_schema() -> Schema:
    snapshot = (
        SchemaBuilder.string().name("io.debezium.data.Enum").version(1)
        .parameter("allowed", ",".join(SNAPSHOT_VALUES)).default("false").optional().build()
    )  # fmt: skip
    return (
        SchemaBuilder.struct().name("io.debezium.connector.postgresql.Source").version(1)
        .field("version", SchemaBuilder.string().build())
        .field("connector", SchemaBuilder.string().build())
        .field("name", SchemaBuilder.string().build())
        .field("ts_ms", SchemaBuilder.int64().build())
        .field("snapshot", snapshot)
        .field("db", SchemaBuilder.string().build())
        .field("sequence", OPTIONAL_STRING_SCHEMA)
        .field("ts_us", _OPTIONAL_INT64)
        .field("ts_ns", _OPTIONAL_INT64)
        .field("schema", SchemaBuilder.string().build())
        .field("table", SchemaBuilder.string().build())
        .field("txId", _OPTIONAL_INT64)
        .field("lsn", _OPTIONAL_INT64)
        .field("xmin", _OPTIONAL_INT64)
        .field("origin", OPTIONAL_STRING_SCHEMA)
        .field("origin_lsn", _OPTIONAL_INT64)
        .build()
    )  # fmt: skip


SOURCE_SCHEMA = _source_schema()
_ABSENT = object()
TRANSACTION_SCHEMA = (
    SchemaBuilder.struct().optional().name("event.block").version(1)
    .field("id", SchemaBuilder.string().build())
    .field("total_order", SchemaBuilder.int64().build())
    .field("data_collection_order", SchemaBuilder.int64().build())
    .build()
)  # fmt: skip


@dataclass(frozen=True)
class Change:
    """Where a change comes from: what ``source`` says of it."""

    commit_us: int
    """Commit time (snapshot: read time), Unix microseconds."""
    tx_id: int | None
    lsn: int | None
    snapshot: str = "false"
    sequence: str | None = None


@dataclass(frozen=True)
class _Column:
    name: str
    mapped: Mapped
    schema: Schema
    key: bool

    @property
    def parse(self) -> Any:
        return self.mapped.parser(self.schema)


def _with_default(mapped: Mapped, column: CatalogColumn) -> Schema:
    """The column's schema, with its DEFAULT as the schema's default when that is a
    constant (Debezium's column defaults), the value the column's parser makes of it; for
    NOT NULL columns only. A nullable column's default is left out: Connect's converters
    write a null of a field that has a default as the default (Debezium's users turn that
    off with ``ignore.default.for.nullables``), so a NULL row value would reach Kafka as
    the default."""
    schema = column_schema(mapped, column.nullable)
    text = default_text(column.default)
    if text is None or column.nullable:
        return schema
    try:
        return column_schema(mapped, column.nullable, mapped.parser(schema)(text))
    except Exception as exc:  # a constant this type's parser does not read: no default
        log.debug("column default not used: %s %r (%s)", column.name, column.default, exc)
        return schema


class TableShape:
    """The schemas of one table's records and how to build them from column texts."""

    def __init__(
        self, prefix: str, database: str, name: str, columns: Sequence[CatalogColumn],
        version: str, *, avro_names: bool = False,
    ) -> None:  # fmt: skip
        self.schema_name, _, self.table = name.partition(".")
        self.name, self.prefix, self.database, self.version = name, prefix, database, version
        self.topic = f"{prefix}.{name}"
        named = avro_name(self.topic) if avro_names else self.topic
        self.columns: list[_Column] = []
        self.unmapped: list[str] = []
        for column in columns:
            mapped = map_type(column.type)
            if mapped is None:
                self.unmapped.append(f"{column.name} ({column.type.name})")
                continue
            schema = _with_default(mapped, column)
            self.columns.append(_Column(column.name, mapped, schema, column.key_position > 0))
        self._parse = [c.parse for c in self.columns]
        keyed = sorted((c for c in columns if c.key_position > 0), key=lambda c: c.key_position)
        self.key_names = [c.name for c in keyed]
        self.key_types = {c.name: c.sql_type for c in keyed}
        by_name = {c.name: c for c in self.columns}
        self.key_schema: Schema | None = None
        if self.key_names:
            builder = SchemaBuilder.struct().name(f"{named}.Key")
            for key in self.key_names:
                builder.field(key, by_name[key].schema)
            self.key_schema = builder.build()
        builder = SchemaBuilder.struct().name(f"{named}.Value").optional()
        for shaped in self.columns:
            builder.field(shaped.name, shaped.schema)
        self.value_schema = builder.build()
        self.envelope_schema = (
            SchemaBuilder.struct().name(f"{named}.Envelope").version(2)
            .field("before", self.value_schema)
            .field("after", self.value_schema)
            .field("source", SOURCE_SCHEMA)
            .field("op", SchemaBuilder.string().build())
            .field("ts_ms", _OPTIONAL_INT64)
            .field("ts_us", _OPTIONAL_INT64)
            .field("ts_ns", _OPTIONAL_INT64)
            .field("transaction", TRANSACTION_SCHEMA)
            .build()
        )  # fmt: skip
        self._by_name = by_name

    def row(self, texts: Mapping[str, str | None], *, missing: bool = False) -> Struct:
        """The row of column texts (None: NULL); ``missing``: columns absent from
        ``texts`` were not sent (a deleted row's non-key columns) and get their fallback."""
        values: list[Any] = []
        for column, parse in zip(self.columns, self._parse, strict=True):
            text = texts.get(column.name, _ABSENT)
            if text is _ABSENT:
                absent = missing and not column.schema.optional
                values.append(column.mapped.fallback if absent else None)
            else:
                values.append(None if text is None else parse(text))
        # built unchecked: every value comes from its column's parser, right by
        # construction (checking each field again cost 4/5 of a snapshot row's time)
        return Struct.unchecked(self.value_schema, values)

    def key(self, row: Struct) -> Struct | None:
        if self.key_schema is None:
            return None
        return Struct.unchecked(
            self.key_schema, [row.get_without_default(k) for k in self.key_names]
        )

    def key_texts(self, texts: Mapping[str, str | None]) -> tuple[str | None, ...]:
        return tuple(texts.get(k) for k in self.key_names)

    def record(
        self, op: str, before: Struct | None, after: Struct | None, change: Change,
        partition: Mapping[str, Any], offset: Mapping[str, Any] | None,
    ) -> SourceRecord:  # fmt: skip
        """One change event: key from ``after`` (``before`` for a delete)."""
        now_ns = time.time_ns()
        commit_us = change.commit_us
        source = Struct.unchecked(SOURCE_SCHEMA, [  # in SOURCE_SCHEMA's field order
            self.version, CONNECTOR, self.prefix, commit_us // 1000, change.snapshot,
            self.database, change.sequence, commit_us, commit_us * 1000, self.schema_name,
            self.table, change.tx_id, change.lsn, None, None, None,
        ])  # fmt: skip
        envelope = Struct.unchecked(self.envelope_schema, [
            before, after, source, op, now_ns // 1_000_000, now_ns // 1000, now_ns, None,
        ])  # fmt: skip
        keyed = after if after is not None else before
        return SourceRecord(
            partition, offset, self.topic, envelope,
            key=None if keyed is None else self.key(keyed),
            key_schema=self.key_schema, value_schema=self.envelope_schema,
            timestamp=commit_us // 1000,
        )  # fmt: skip

    def tombstone(self, deleted: SourceRecord, offset: Mapping[str, Any] | None) -> SourceRecord:
        return SourceRecord(
            deleted.source_partition, offset, self.topic, None, key=deleted.key,
            key_schema=self.key_schema, value_schema=None, timestamp=deleted.timestamp,
        )  # fmt: skip


def avro_name(name: str) -> str:
    """``name`` with each dotted part made a valid Avro name (Debezium's
    ``schema.name.adjustment.mode=avro``): other characters become ``_``, as does a
    leading digit."""
    parts = [re.sub(r"[^A-Za-z0-9_]", "_", part) for part in name.split(".")]
    return ".".join(f"_{p[1:]}" if p[:1].isdigit() else p for p in parts)


def sequence(last_commit_lsn: int | None, lsn: int) -> str:
    """Debezium's ``source.sequence``: the last commit's LSN and this change's."""
    return json.dumps([None if last_commit_lsn is None else str(last_commit_lsn), str(lsn)])
