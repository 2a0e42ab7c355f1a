"""JSON of a flat struct column at once: a typed block's values as an Arrow struct array
(a FileSource line after HoistField and InsertField, for one) written without a
:class:`~eos.api.Struct` or a Python call per field, in the bytes the row path writes
(a Struct's fields in schema order, compact; the converter then fixes the escapes that
Jackson writes otherwise, where a row has one).

Only what writes exactly so takes this path: a struct array of a STRUCT schema, its
children the fields in order, each an integer, boolean or string without a logical name,
of the matching Arrow type, and no null anywhere. A child holding one value throughout
(InsertField's static field) is written once. When one string child varies and none of
its strings needs an escape, Arrow joins each row around it (:func:`_around`); otherwise
each varying child's texts come from orjson and the rows from one ``b"".join`` each.
Anything else is None: the caller goes row by row.
"""

from __future__ import annotations

import sys
from itertools import repeat
from typing import Any, cast

import orjson

from eos.api.schema import Schema, SchemaType

_INTEGERS = frozenset({SchemaType.INT8, SchemaType.INT16, SchemaType.INT32, SchemaType.INT64})


def _arrow_kind_fits(schema: Schema, kind: Any, pa: Any) -> bool:
    """Whether an Arrow child of type ``kind`` holds the values the row path writes as
    they are for a field of ``schema`` (its ``_PLAIN`` types)."""
    if schema.name is not None:
        return False
    types = pa.types
    if schema.type is SchemaType.STRING:
        return bool(types.is_string(kind) or types.is_large_string(kind))
    if schema.type in _INTEGERS:
        return bool(types.is_integer(kind))
    if schema.type is SchemaType.BOOLEAN:
        return bool(types.is_boolean(kind))
    return False


def struct_rows(schema: Schema | None, column: Any) -> list[bytes] | None:
    """The JSON object of each row of ``column`` as orjson writes it (see the module
    docstring; the caller fixes the escapes Jackson writes otherwise); None where the row
    path must do it."""
    pa = sys.modules.get("pyarrow")
    if (
        pa is None or schema is None or schema.type is not SchemaType.STRUCT
        or not isinstance(column, pa.StructArray) or column.null_count or not len(column)
    ):  # fmt: skip
        return None
    kind = column.type
    fields = schema.fields
    if kind.num_fields != len(fields) or not fields:
        return None
    import pyarrow.compute as pc

    pieces: list[Any] = []  # JSON bytes, or a child whose values differ (an Arrow array)
    prefix = b"{"
    for i, f in enumerate(fields):
        child = column.field(i)
        if (
            kind.field(i).name != f.name or child.null_count
            or not _arrow_kind_fits(f.schema, child.type, pa)
        ):  # fmt: skip
            return None
        pieces.append(prefix + orjson.dumps(f.name) + b":")
        first = child[0].as_py()
        pieces.append(orjson.dumps(first) if _constant(child, first, pc) else child)
        prefix = b","
    pieces.append(b"}")
    varying = [i for i, p in enumerate(pieces) if type(p) is not bytes]
    if not varying:  # every child one value throughout
        return [b"".join(pieces)] * len(column)
    if len(varying) == 1:
        at = varying[0]
        head, tail = b"".join(pieces[:at]), b"".join(pieces[at + 1 :])
        rows = _around(head, pieces[at], tail, pa, pc)
        if rows is not None:
            return rows
    columns = (repeat(p) if type(p) is bytes else _texts(p, pa) for p in pieces)
    return list(map(b"".join, zip(*columns, strict=False)))  # repeat: endless


def _constant(child: Any, first: Any, pc: Any) -> bool:
    """Whether every value of ``child`` is ``first`` (its first): the last one is looked
    at before all of them, which a column of lines fails at once."""
    n = len(child)
    return n == 1 or (child[n - 1].as_py() == first and pc.all(pc.equal(child, first)).as_py())


def _texts(child: Any, pa: Any) -> list[bytes]:
    """The JSON text of each value of ``child``: a string's one by one; numbers and
    booleans, which hold no comma, from one ``orjson.dumps`` of them all."""
    values = child.to_pylist()
    if pa.types.is_string(child.type) or pa.types.is_large_string(child.type):
        return list(map(orjson.dumps, values))
    return orjson.dumps(values)[1:-1].split(b",")


def _around(head: bytes, child: Any, tail: bytes, pa: Any, pc: Any) -> list[bytes] | None:
    """``head + json(value) + tail`` for each string of ``child``, joined by Arrow and
    cut at a NUL that ends each row: no Python object but the rows. Exact where no
    string needs an escape (no byte below 0x20, no quote, no backslash: the JSON of each
    is then the string in quotes, as orjson writes it); None otherwise."""
    if not pa.types.is_string(child.type):
        return None
    data = child.buffers()[2]
    if data is not None and data.size:
        low = pc.min(pa.Array.from_buffers(pa.uint8(), data.size, [None, data])).as_py()
        raw = data.to_pybytes()
        if low < 0x20 or raw.find(b'"') >= 0 or raw.find(b"\\") >= 0:
            return None
    joined = pc.binary_join_element_wise(
        (head + b'"').decode(), child, (b'"' + tail + b"\x00").decode(), ""
    )
    offsets, text = joined.buffers()[1:3]  # int32 offsets: where each row begins

    def offset(i: int) -> int:
        return int.from_bytes(offsets.slice((joined.offset + i) * 4, 4).to_pybytes(), "little")

    start = offset(0)
    rows = text.slice(start, offset(len(joined)) - start).to_pybytes().split(b"\x00")
    rows.pop()  # after the last NUL
    return cast(list[bytes], rows)
