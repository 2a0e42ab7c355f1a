"""What a source task hands to the framework, and what it gets back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Sized
from dataclasses import dataclass, field
from typing import Any

from eos.api.schema import Schema, column_values

SourcePartition = Mapping[str, Any]
"""A part of the external system one task reads (a file, a table, a topic-partition).
Must be JSON-serialisable; it is the key under which the task's progress is stored."""

SourceOffset = Mapping[str, Any]
"""How far a source partition has been read. Must be JSON-serialisable."""


@dataclass(slots=True, unsafe_hash=True)
class SourceRecord:
    """One record for Kafka, with the (partition → offset) pair that describes
    how far the source has been read once this record is written.

    ``key`` and ``value`` are converted by the connector's ``key.converter`` and
    ``value.converter`` (JSON by default). ``partition=None`` lets the producer
    choose; ``timestamp`` is epoch milliseconds or None for the producer's clock.
    A record whose ``source_offset`` is None advances no offset.

    ``key_schema`` and ``value_schema`` describe ``key`` and ``value`` in Connect's
    schema model (:mod:`eos.api.schema`); None means schemaless (a :class:`Struct`
    value carries its schema anyway). Converters that write typed formats (JSON with
    ``schemas.enable=true``, Avro, Protobuf, JSON Schema) need them.

    ``headers`` are (name, value) pairs: a value given as ``bytes`` (or None) is written
    as it is; any other Connect value (``str``, numbers, ``bool``, ``Decimal``, dates, lists,
    dicts, a :class:`Struct`) is converted by the connector's ``header.converter``
    (Connect's ``SimpleHeaderConverter``, the value's text, by default) when the record is
    written.

    ``encoded=True`` says ``key`` and ``value`` already are the bytes to write
    (``bytes`` or None) and the converters are skipped: for connectors that
    produce the connector's converter format themselves, faster than Python
    could (SparkSource has Spark write the JSON when both converters are ``json``).

    A record is a value: once handed over (returned from ``poll``, given to or
    returned by a transform) it must not be changed; make a changed copy with
    ``dataclasses.replace(record, topic=…)``. This is not enforced: a record is built
    per row on the typical path, and a frozen dataclass costs three times as much to
    build (1.5 µs instead of 0.4 µs for eleven fields on the reference machine).
    Records compare and hash by their fields, as frozen dataclasses do.
    """

    source_partition: SourcePartition
    source_offset: SourceOffset | None
    topic: str
    value: Any
    key: Any = None
    partition: int | None = None
    timestamp: int | None = None
    headers: Sequence[tuple[str, Any]] = ()
    encoded: bool = False
    key_schema: Schema | None = None
    value_schema: Schema | None = None


@dataclass(frozen=True, slots=True)
class RecordBlock:
    """Many records at once, column by column: the fast way to hand over many rows
    (a poll may return blocks and :class:`SourceRecord` s mixed).

    Row ``i`` is the record ``(keys[i], values[i])`` for ``topic`` (or ``topics[i]``),
    with timestamp ``timestamps[i]`` (epoch ms; None or no column: the producer's
    clock) and the headers ``headers`` followed by ``(name, column[i])`` for each
    entry of ``header_columns`` whose value is not None. The producer chooses each
    row's partition from its key.

    ``encoded=True`` (the default): keys and values are the bytes to write (or None),
    as with ``SourceRecord(encoded=True)``; converters are skipped.
    ``encoded=False``: they are values of ``key_schema`` / ``value_schema`` — every row
    shares the block's schemas — given as a Python sequence (Connect values, or plain
    ones: a ``dict`` for a STRUCT, pairs or a ``dict`` for a MAP) or as a ``pyarrow``
    array of the matching type (a struct array for a STRUCT schema), which the
    converters encode a whole column at a time. With ``encoded=True`` the schemas, if
    given, say what the bytes hold.

    ``source_offset`` describes the source once the *last* row is written; the rows
    before it advance no offset. Every column must be as long as ``values``.
    A block counts as one record for :class:`TransactionContext` requests and
    as ``len(block)`` records everywhere else (metrics, ``commit_record``, which
    receives each row as a ``SourceRecord``).
    """

    source_partition: SourcePartition
    source_offset: SourceOffset | None
    topic: str
    values: Sequence[Any]
    keys: Sequence[Any] | None = None
    timestamps: Sequence[int | None] | None = None
    headers: Sequence[tuple[str, bytes]] = ()
    header_columns: Mapping[str, Sequence[bytes | None]] = field(default_factory=dict)
    topics: Sequence[str] | None = None
    key_schema: Schema | None = None
    value_schema: Schema | None = None
    encoded: bool = True

    def __post_init__(self) -> None:
        rows = len(self.values)
        columns: dict[str, Sized | None] = {
            "keys": self.keys, "timestamps": self.timestamps, "topics": self.topics
        }  # fmt: skip
        columns.update((f"header_columns[{n!r}]", c) for n, c in self.header_columns.items())
        for name, column in columns.items():
            if column is not None and len(column) != rows:
                raise ValueError(
                    f"RecordBlock.{name} has {len(column)} entries for {rows} values: "
                    "give every column one entry per row"
                )

    def __len__(self) -> int:
        return len(self.values)

    def records(self) -> list[SourceRecord]:
        """The rows as :class:`SourceRecord` s (the offset on the last one); rows of an
        ``encoded=False`` block carry Connect values and the block's schemas."""
        n = len(self.values)
        values: Sequence[Any] = self.values
        keys: Sequence[Any] = self.keys if self.keys is not None else [None] * n
        if not self.encoded:
            values = column_values(self.value_schema, self.values)
            if self.keys is not None:
                keys = column_values(self.key_schema, self.keys)
        stamps = self.timestamps if self.timestamps is not None else [None] * n
        topics = self.topics if self.topics is not None else [self.topic] * n
        columns = list(self.header_columns.items())
        common = tuple(self.headers)

        def headers(i: int) -> tuple[tuple[str, bytes], ...]:
            return common + tuple((h, v) for h, c in columns if (v := c[i]) is not None)

        return [
            SourceRecord(
                self.source_partition,
                self.source_offset if i == n - 1 else None,
                topics[i],
                values[i],
                keys[i],
                timestamp=stamps[i],
                headers=headers(i),
                encoded=self.encoded,
                key_schema=self.key_schema,
                value_schema=self.value_schema,
            )
            for i in range(n)
        ]


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where Kafka stored a record."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None = None
