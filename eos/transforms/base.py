"""What the bundled transforms and predicates share: they work on a :data:`Row` in
place (the chain's fast path: its own copy of the record, made once), and, where their
work is on topics, headers or timestamps, on a :class:`~eos.api.RecordBlock`'s columns.

Block methods take a *mask*: None for every row, else one bool per row saying which rows
the step applies to (its predicate matched). They raise :class:`NeedsRows` when the
block's columns cannot express the result; the chain then runs the step and the rest
of the chain row by row.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from eos.api.records import RecordBlock, SourceRecord
from eos.api.schema import Schema
from eos.api.transforms import Predicate, Transformation
from eos.columns import Mask as Mask
from eos.columns import NeedsRows as NeedsRows
from eos.transforms.row import Row, copy_record, same_as


class RowTransform(Transformation):
    """A bundled transform: :meth:`transform` changes a :data:`Row` in place."""

    @abstractmethod
    def transform(self, row: Row) -> bool:
        """Change ``row``; False drops the record."""

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        row = copy_record(record)
        if not self.transform(row):
            return None
        return record if same_as(row, record) else row

    def transform_rows(self, rows: list[Row]) -> list[Row]:
        """:meth:`transform` on each of ``rows`` (the chain's copies): the rows kept, in
        order. A step on the per-record path overrides it with one loop of its own work
        (a call less per row, its settings read once per batch)."""
        transform = self.transform
        return [row for row in rows if transform(row)]

    def transform_block(self, block: RecordBlock, mask: Mask) -> RecordBlock | None:
        """The block with the step applied to the rows of ``mask`` (None: all dropped)."""
        raise NeedsRows


class RowPredicate(Predicate):
    """A bundled predicate: tests a :data:`Row` or a record alike."""

    @abstractmethod
    def test(self, record: SourceRecord) -> bool: ...

    def test_block(self, block: RecordBlock) -> bool | Sequence[bool]:
        """One answer for every row, or one per row."""
        raise NeedsRows


class KeyOrValueTransform(RowTransform):
    """A transform with Connect's ``$Key`` and ``$Value`` variants: :meth:`update`
    turns the key (or value) and its schema into new ones."""

    on_key: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = vars(cls)
        if "on_key" in own and "transform" not in own:  # $Key or $Value: no test per record
            cls.transform = _on_key if cls.on_key else _on_value  # type: ignore[method-assign]

    def transform(self, row: Row) -> bool:
        return (_on_key if self.on_key else _on_value)(self, row)

    @abstractmethod
    def update(self, row: Row, value: Any, schema: Schema | None) -> tuple[Any, Schema | None]:
        """The new (value, schema) of the operated side of ``row``."""


def _on_key(self: KeyOrValueTransform, row: Row) -> bool:
    row.key, row.key_schema = self.update(row, row.key, row.key_schema)
    return True


def _on_value(self: KeyOrValueTransform, row: Row) -> bool:
    row.value, row.value_schema = self.update(row, row.value, row.value_schema)
    return True
