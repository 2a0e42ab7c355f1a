"""Struct columns of ``encoded=False`` record blocks, for the field transforms' block
path (InsertField, ValueToKey): a ``pyarrow`` struct array whose children are the
fields of the block's STRUCT schema, in order, changed a child at a time (no Python
object per row).

Anything else (a Python sequence, no schema, children that do not line up with the
schema, a null to fill with a default the column cannot hold exactly) raises
:class:`~eos.transforms.base.NeedsRows`: the row path does it; so do, in the callers, a
mask and a null row (a null passes InsertField with its old schema). A column can only be a
``pyarrow`` array if ``pyarrow`` is loaded, so it is looked up, never imported, here.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from eos.api.records import RecordBlock
from eos.api.schema import Schema, SchemaType
from eos.columns.text_struct import arrow_of
from eos.transforms.base import NeedsRows
from eos.transforms.schemas import Defaults

_EXACT = frozenset(
    {
        SchemaType.INT8,
        SchemaType.INT16,
        SchemaType.INT32,
        SchemaType.INT64,
        SchemaType.FLOAT64,
        SchemaType.BOOLEAN,
        SchemaType.STRING,
        SchemaType.BYTES,
    }
)
"""Types whose default an Arrow column holds as the row path's value (FLOAT32 would
round it; logical types are left to the row path)."""


def arrow() -> Any:
    """The ``pyarrow`` module (NeedsRows when it is not loaded: no column is an array)."""
    pa = sys.modules.get("pyarrow")
    if pa is None:
        raise NeedsRows
    return pa


_FROM_LIST = {SchemaType.STRING: "string"}
"""Schema types whose values a Python list column holds as exactly the Arrow type named
(a FileSource block's lines): :func:`plain_column` builds the array in one call."""


def plain_column(column: Any, schema: Schema | None) -> Any:
    """``column`` as an Arrow array without nulls: an array as it is, or a Python list of
    a plain STRING schema's values (``pyarrow`` imported here: such a list is not one);
    NeedsRows otherwise (a null, a value of another type, another schema)."""
    if schema is None or column is None:
        raise NeedsRows
    column = arrow_of(column)
    if type(column) is list:
        kind = _FROM_LIST.get(schema.type) if schema.name is None else None
        if kind is None:
            raise NeedsRows
        import pyarrow as pa

        try:
            column = pa.array(column, getattr(pa, kind)())
        except (pa.ArrowException, TypeError, ValueError):
            raise NeedsRows from None
    elif not isinstance(column, arrow().Array):
        raise NeedsRows
    if column.null_count:
        raise NeedsRows
    return column


def struct_column(column: Any, schema: Schema | None) -> tuple[Any, Schema]:
    """``column`` and ``schema`` if the one is a struct array of the other (a STRUCT),
    its children the schema's fields in order; NeedsRows otherwise."""
    if schema is None or schema.type is not SchemaType.STRUCT or column is None:
        raise NeedsRows
    column = arrow_of(column)
    pa = arrow()
    if not isinstance(column, pa.StructArray):
        raise NeedsRows
    kind = column.type
    fields = schema.fields
    if kind.num_fields != len(fields):
        raise NeedsRows
    for i, f in enumerate(fields):
        if kind.field(i).name != f.name:
            raise NeedsRows
    return column, schema


def children(
    column: Any, schema: Schema, positions: Sequence[int], defaults: Defaults
) -> list[Any]:
    """The children of ``column`` at ``positions``, a null entry of a field with a
    default in ``defaults`` ((index, default) pairs, :func:`field_defaults`) taking it,
    as the row path fills them."""
    found = [column.field(i) for i in positions]
    if not defaults:
        return found
    by_index = dict(defaults)
    for n, i in enumerate(positions):
        if i in by_index and found[n].null_count:
            found[n] = _filled(found[n], schema.fields[i].schema, by_index[i])
    return found


def _filled(child: Any, schema: Schema, default: Any) -> Any:
    if schema.name is not None or schema.type not in _EXACT:
        raise NeedsRows
    pa = arrow()
    try:
        return child.fill_null(pa.scalar(default, child.type))
    except (pa.ArrowException, TypeError, ValueError):
        raise NeedsRows from None


def fields_of(column: Any, positions: Sequence[int]) -> list[Any]:
    """The Arrow fields of ``column``'s children at ``positions``."""
    kind = column.type
    return [kind.field(i) for i in positions]


def field(name: str, kind: Any) -> Any:
    """A new Arrow field."""
    return arrow().field(name, kind)


def struct_array(values: Sequence[Any], fields: Sequence[Any]) -> Any:
    """A struct array of ``values`` (children, of Arrow ``fields``), no row null (the
    transforms leave a column with null rows to the row path, or fail on it as it does)."""
    return arrow().StructArray.from_arrays(list(values), fields=list(fields))


def repeated(value: Any, rows: int) -> Any:
    """A string column of ``rows`` times ``value``."""
    pa = arrow()
    return pa.repeat(pa.scalar(value, pa.string()), rows)


def topic_column(block: RecordBlock) -> Any:
    """Each row's topic, as a string column."""
    if block.topics is None:
        return repeated(block.topic, len(block))
    return arrow().array(list(block.topics), arrow().string())


def partition_column(rows: int) -> Any:
    """A block's rows have no partition (the producer chooses): an INT32 column of nulls."""
    pa = arrow()
    return pa.nulls(rows, pa.int32())


def timestamp_column(block: RecordBlock) -> Any:
    """Each row's timestamp (None: null) as a UTC timestamp column of milliseconds."""
    pa = arrow()
    kind = pa.timestamp("ms", tz="UTC")
    stamps: Any = block.timestamps
    if stamps is None:
        return pa.nulls(len(block), kind)
    if isinstance(stamps, pa.ChunkedArray):
        stamps = stamps.combine_chunks()
    if not isinstance(stamps, pa.Array):
        stamps = pa.array(stamps, pa.int64())
    return stamps.cast(pa.int64()).cast(kind)
