"""The record a chain of bundled transforms works on: :class:`Row`, a mutable copy of
the :class:`~eos.api.SourceRecord` fields a transform may change, made once per record
and turned back into one frozen record at the end of the chain.

Why not a new ``SourceRecord`` per step: building a frozen dataclass costs far more than
the steps themselves (``dataclasses.replace`` ~3.4 µs, the constructor ~1.7 µs with its
eleven fields on the reference machine, a plain ``__slots__`` object ~0.3 µs; see
``bench/transforms.py``). :func:`build_record` fills a new record through its slot
descriptors, bypassing the frozen ``__setattr__`` (~0.8 µs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from eos.api.records import SourceRecord
from eos.api.schema import Schema

Headers = Sequence[tuple[str, bytes | None]]
"""A record's headers; a header may have no value (None)."""


class Row:
    """A record being transformed; attribute names match :class:`~eos.api.SourceRecord`,
    so predicates and transforms read either."""

    __slots__ = (
        "headers",
        "key",
        "key_schema",
        "origin",
        "partition",
        "timestamp",
        "topic",
        "value",
        "value_schema",
    )

    origin: SourceRecord
    topic: str
    partition: int | None
    key: Any
    key_schema: Schema | None
    value: Any
    value_schema: Schema | None
    timestamp: int | None
    headers: Headers

    def __init__(self, record: SourceRecord) -> None:
        self.load(record)

    def load(self, record: SourceRecord) -> None:
        """Take every field of ``record`` (e.g. what a user's transform returned)."""
        self.origin = record
        self.topic = record.topic
        self.partition = record.partition
        self.key = record.key
        self.key_schema = record.key_schema
        self.value = record.value
        self.value_schema = record.value_schema
        self.timestamp = record.timestamp
        self.headers = record.headers

    @property
    def encoded(self) -> bool:
        return self.origin.encoded

    @property
    def source_partition(self) -> Any:
        return self.origin.source_partition

    @property
    def source_offset(self) -> Any:
        return self.origin.source_offset

    def record(self) -> SourceRecord:
        """A new frozen record with this row's fields."""
        return build_record(self)


_new = object.__new__


def _setter(name: str) -> Callable[[SourceRecord, Any], None]:
    """The slot descriptor's ``__set__`` of field ``name`` (bypasses the frozen check)."""
    setter: Callable[[SourceRecord, Any], None] = vars(SourceRecord)[name].__set__
    return setter


_set_partition = _setter("source_partition")
_set_offset = _setter("source_offset")
_set_topic = _setter("topic")
_set_value = _setter("value")
_set_key = _setter("key")
_set_kafka_partition = _setter("partition")
_set_timestamp = _setter("timestamp")
_set_headers = _setter("headers")
_set_encoded = _setter("encoded")
_set_key_schema = _setter("key_schema")
_set_value_schema = _setter("value_schema")

BUILT_FIELDS = (
    "source_partition",
    "source_offset",
    "topic",
    "value",
    "key",
    "partition",
    "timestamp",
    "headers",
    "encoded",
    "key_schema",
    "value_schema",
)
"""Every field :func:`build_record` fills (a test checks it is every field there is)."""


def build_record(row: Row) -> SourceRecord:
    """A :class:`~eos.api.SourceRecord` with ``row``'s fields, built slot by slot."""
    origin = row.origin
    record: SourceRecord = _new(SourceRecord)
    _set_partition(record, origin.source_partition)
    _set_offset(record, origin.source_offset)
    _set_topic(record, row.topic)
    _set_value(record, row.value)
    _set_key(record, row.key)
    _set_kafka_partition(record, row.partition)
    _set_timestamp(record, row.timestamp)
    _set_headers(record, row.headers)
    _set_encoded(record, origin.encoded)
    _set_key_schema(record, row.key_schema)
    _set_value_schema(record, row.value_schema)
    return record
