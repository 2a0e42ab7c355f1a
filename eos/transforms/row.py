"""The record a chain of bundled transforms works on: :class:`Row`, a mutable twin of
:class:`~eos.api.SourceRecord` (the same slots, in the same order), made once per record,
changed in place by each step, and turned into the frozen record at the end by
switching its class (:meth:`Row.freeze`): no second copy.

Why: building a frozen dataclass costs more than the steps themselves. On the reference
machine (2 shared cores) ``dataclasses.replace`` takes ~3.4 µs, the constructor ~1.7 µs
(eleven fields, each set through ``object.__setattr__``), filling the slots through their
descriptors ~0.8 µs; this twin, ~0.5 µs for the copy and nothing for the switch
(``bench/transforms.py``). Python allows assigning ``__class__`` between classes of the
same slot layout; a test checks that the twin's fields are the record's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from eos.api.records import SourceOffset, SourcePartition, SourceRecord
from eos.api.schema import Schema

Headers = Sequence[tuple[str, bytes | None]]
"""A record's headers; a header may have no value (None)."""


class Row:
    """A record being transformed: the attributes of :class:`~eos.api.SourceRecord`,
    writable, so predicates and transforms read either."""

    __slots__ = SourceRecord.__slots__

    source_partition: SourcePartition
    source_offset: SourceOffset | None
    topic: str
    value: Any
    key: Any
    partition: int | None
    timestamp: int | None
    headers: Headers
    encoded: bool
    key_schema: Schema | None
    value_schema: Schema | None

    def __init__(self, record: SourceRecord | Row) -> None:
        self.source_partition = record.source_partition
        self.source_offset = record.source_offset
        self.topic = record.topic
        self.value = record.value
        self.key = record.key
        self.partition = record.partition
        self.timestamp = record.timestamp
        self.headers = record.headers
        self.encoded = record.encoded
        self.key_schema = record.key_schema
        self.value_schema = record.value_schema

    load = __init__
    """Take every field of ``record`` (e.g. what a user's transform returned)."""

    def same_as(self, record: SourceRecord) -> bool:
        """Whether no field differs from ``record``'s (compared by identity)."""
        return (
            self.value is record.value
            and self.topic is record.topic
            and self.key is record.key
            and self.headers is record.headers
            and self.timestamp is record.timestamp
            and self.value_schema is record.value_schema
            and self.key_schema is record.key_schema
            and self.partition is record.partition
            and self.source_offset is record.source_offset
            and self.source_partition is record.source_partition
            and self.encoded is record.encoded
        )

    def freeze(self) -> SourceRecord:
        """This row, now a frozen :class:`~eos.api.SourceRecord` (use it no more as a row)."""
        self.__class__ = SourceRecord  # type: ignore[assignment]
        return cast(SourceRecord, self)

    def record(self) -> SourceRecord:
        """A frozen copy; the row stays usable."""
        return Row(self).freeze()


BUILT_FIELDS = Row.__slots__
"""Every field a row copies (a test checks it is every field a SourceRecord has)."""
