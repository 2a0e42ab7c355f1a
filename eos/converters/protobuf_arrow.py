"""Protobuf binary encoding of a whole ``pyarrow`` struct column at once: the block path of
the Protobuf converter, with no Python object per row but the final ``bytes``, in the
bytes :class:`~eos.converters.protobuf.ProtobufConverter` writes row by row for
the message it generates (tests compare the two).

What the row path writes, and so this: fields in number order (1, 2, … in schema order);
a scalar left out when null, and when zero (proto3), unless ``optional.for.nullables``
made it ``optional`` (then only when null); INT8…INT64 as varints (a negative one in 10
bytes, not zig-zag), FLOAT32/FLOAT64 as 4/8 little-endian bytes, BOOLEAN 1, STRING and
BYTES length-delimited; a nested STRUCT a length-delimited message, left out when none of
its fields was set (all null); ARRAY a repeated field without its null items, numbers and
booleans packed (tag, length, values), strings, bytes and messages one tag each; a MAP
with native keys entries (key 1, value 2, both always written) without those whose value
is null, sorted as upb's deterministic serialization sorts them, any other map its
``…Entry`` messages in order; Decimal ``confluent.type.Decimal`` (the unscaled bytes as
Java's ``BigInteger`` writes them, the precision as the count of the unscaled digits, the
scale), Date ``google.type.Date``, Time ``google.type.TimeOfDay`` and Timestamp
``google.protobuf.Timestamp`` as their integer fields (milliseconds, floor), each one
always written when not null.

Arrow types taken: integers (within int32 for INT8…INT32), ``float32`` for FLOAT32,
``float32``/``float64`` for FLOAT64, booleans, (large) strings, (large, fixed-size)
binaries, ``decimal128`` of the schema's scale, ``date32``/``date64``, ``time32``/
``time64``, ``timestamp`` (any unit and zone), (large) lists, maps, structs with the
schema's fields. Anything else (a field with a default and nulls, a duplicate map key, a
map of other keys with more than one entry in a row, upb sorting maps otherwise than
this module expects, …) makes :func:`encode_column` answer None: the caller goes row by
row.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eos.api.logical import Decimal
from eos.api.schema import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    DATE_NAME,
    DECIMAL_NAME,
    INT32_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    TIME_NAME,
    TIMESTAMP_NAME,
    Schema,
    SchemaBuilder,
    SchemaType,
    struct_schema,
)
from eos.columns import NeedsRows
from eos.columns.arrow_bytes import (
    Part,
    counts,
    decimal_words,
    empty,
    epoch_integers,
    fixed,
    items,
    join,
    on_valid,
    per_row,
    scatter,
    unscaled_bytes,
    uvarints,
    valid_mask,
)
from eos.converters.protobuf_types import MAP_KEYS, SCALARS
from eos.errors import DataError

IMPLICIT, OPTIONAL, ALWAYS = range(3)
"""When a field is written: proto3's implicit presence (not when null or zero), an
``optional`` field (not when null), a map entry's key and value or a repeated item
(always)."""

Written = tuple[Any, np.ndarray]
"""A field's encoding in each row (an array, None if in no row) and the rows it set."""

_INTS = (SchemaType.INT8, SchemaType.INT16, SchemaType.INT32, SchemaType.INT64)
_PACKED = (*_INTS, SchemaType.FLOAT32, SchemaType.FLOAT64, SchemaType.BOOLEAN)
_LOGICAL = (DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME)
_INT32_RANGE = (-(2**31), 2**31 - 1)
_POWERS = [10**k for k in range(1, 39)]
_U64 = np.uint64


def _ints(*names: str) -> Schema:
    return struct_schema((name, INT32_SCHEMA) for name in names)


_MESSAGES = {
    TIMESTAMP_NAME: struct_schema([("seconds", INT64_SCHEMA), ("nanos", INT32_SCHEMA)]),
    DATE_NAME: _ints("year", "month", "day"),
    TIME_NAME: _ints("hours", "minutes", "seconds", "nanos"),
    DECIMAL_NAME: struct_schema(
        [("value", BYTES_SCHEMA), ("precision", INT64_SCHEMA), ("scale", INT32_SCHEMA)]
    ),
}
"""The messages of the logical types as Connect STRUCTs (``precision`` is a uint32, of
the same varint as an int64 of its values)."""


RowBytes = Callable[[Schema, Any], bytes]
"""The row path's encoding of a value of a schema (no header)."""


def encode_column(
    column: Any, schema: Schema, header: bytes, optional_for_nullables: bool, row: RowBytes
) -> list[bytes | None] | None:
    """Every row of ``column`` (an Arrow struct array of ``schema``) as ``header`` + its
    Protobuf encoding (None for a null row); None where the row path must do it (``row``:
    its bytes, against which the map order is checked once)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if schema.type is not SchemaType.STRUCT or not pa.types.is_struct(array.type):
        return None
    if len(array) == 0:
        return []
    encoder = _Encoder(optional_for_nullables, _map_order_known(row))
    try:
        body = on_valid(array, lambda valid: encoder.message(valid, schema)[0])
    except (NeedsRows, DataError, pa.ArrowException):
        return None
    rows: list[bytes | None] = join(pa.scalar(header, pa.binary()), body).to_pylist()
    return rows


@functools.cache
def _tag(number: int, wire: int) -> pa.Scalar:
    return pa.scalar(uvarints(np.array([number << 3 | wire], _U64))[0].as_py(), pa.binary())


def _lengths(data: pa.Array) -> pa.Array:
    """The varint length of each binary of ``data``."""
    return uvarints(pc.binary_length(data).to_numpy().astype(_U64))


def _spread(encoded: pa.Array, write: np.ndarray) -> Part | None:
    """``encoded`` (the rows where ``write``) in place, empty elsewhere; None if none."""
    if not write.any():
        return None
    return scatter(encoded, write).fill_null(b"") if not write.all() else encoded


def _expand(local: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """A mask over the valid rows as a mask over all rows (false where null)."""
    if valid.all():
        return local
    out = np.zeros(len(valid), dtype=bool)
    out[valid] = local
    return out


def _take(array: pa.Array, mask: np.ndarray) -> pa.Array:
    return array if mask.all() else array.filter(pa.array(mask))


class _Encoder:
    def __init__(self, optional_for_nullables: bool, sort_maps: bool) -> None:
        self.optional = optional_for_nullables
        self.sort_maps = sort_maps

    def message(self, array: pa.Array, schema: Schema, plain: bool = False) -> Written:
        """The bodies of the messages of a struct ``array`` without nulls, and which of them
        the row path touched (a field set, which makes a nested message present);
        ``plain``: no field is ``optional`` (the logical types' messages)."""
        typ, n = array.type, len(array)
        if not pa.types.is_struct(typ):
            raise NeedsRows
        children = {typ.field(i).name: c for i, c in enumerate(array.flatten())}
        parts: list[Part] = []
        touched = np.zeros(n, dtype=bool)
        for f in schema.fields:
            child = children.get(f.name)
            if child is None or (child.null_count and f.schema.default is not None):
                raise NeedsRows
            optional = not plain and self.optional and f.schema.optional
            mode = OPTIONAL if optional and f.schema.type in SCALARS else IMPLICIT
            part, set_here = self.field(child, f.schema, f.index + 1, mode)
            if part is not None:
                parts.append(part)
            touched |= set_here
        return (join(*parts) if parts else empty(n)), touched

    def field(self, child: pa.Array, schema: Schema, number: int, mode: int) -> Written:
        """Field ``number``'s encoding in each row (None if in none) and the rows it set."""
        valid = valid_mask(child)
        if not valid.any():  # nothing to write (a column of Spark's void type among them)
            return None, valid
        kind = schema.type
        if kind is SchemaType.ARRAY:
            return self.repeated(child, schema, number, valid)
        if kind is SchemaType.MAP:
            return self.map(child, schema, number, valid)
        if schema.name in _LOGICAL or kind is SchemaType.STRUCT:
            values = _take(child, valid)
            if schema.name in _LOGICAL:
                body, _ = self.message(_logical(values, schema), _MESSAGES[schema.name], True)
                keep = np.ones(len(values), dtype=bool)
            else:
                body, keep = self.message(values, schema)
                keep = keep if mode != ALWAYS else np.ones(len(values), dtype=bool)
            body = _take(body, keep)
            write = _expand(keep, valid)
            return _spread(join(_tag(number, 2), _lengths(body), body), write), write
        if kind not in SCALARS:
            raise NeedsRows
        canon = _canonical(child, schema)
        filled = canon.fill_null(_ZEROS[canon.type]) if canon.null_count else canon
        write = valid if mode != IMPLICIT else valid & _nonzero(filled, schema)
        parts, wire = _scalar(_take(filled, write), schema)
        return _spread(join(_tag(number, wire), *parts), write), valid

    def repeated(self, child: pa.Array, schema: Schema, number: int, valid: np.ndarray) -> Written:
        item = schema.value_schema
        if item is None or not (pa.types.is_list(child.type) or pa.types.is_large_list(child.type)):
            raise NeedsRows
        rows = _take(child, valid)
        elements, sizes = items(rows), counts(rows)
        kept = sizes
        if elements.null_count:
            present = np.concatenate([[0], np.cumsum(valid_mask(elements))])
            ends = np.cumsum(sizes)
            kept = present[ends] - present[ends - sizes]
            elements = elements.drop_null()
        messages = item.name in _LOGICAL or item.type is SchemaType.STRUCT
        if not messages and item.type in _PACKED:
            parts, _ = _scalar(_canonical(elements, item), item)
            payload = per_row(kept, join(*parts))
            body = join(_tag(number, 2), _lengths(payload), payload)
        else:
            encoded, _ = self.field(elements, item, number, ALWAYS)
            body = per_row(kept, encoded if encoded is not None else empty(len(elements)))
        write = kept > 0
        touched = write if messages else np.ones(len(rows), dtype=bool)
        return _spread(_take(body, write), _expand(write, valid)), _expand(touched, valid)

    def map(self, child: pa.Array, schema: Schema, number: int, valid: np.ndarray) -> Written:
        key, value = schema.key_schema, schema.value_schema
        if key is None or value is None or not pa.types.is_map(child.type):
            raise NeedsRows
        rows = _take(child, valid)
        sizes = counts(rows)
        keys, values = items(rows).flatten()
        if key.type in MAP_KEYS and value.type not in (SchemaType.ARRAY, SchemaType.MAP):
            if key.name is not None:
                raise NeedsRows
            parent = np.repeat(np.arange(len(rows)), sizes)
            order = self.sorted_entries(keys, key, parent) if (sizes > 1).any() else None
            keep = valid_mask(values)
            chosen = np.nonzero(keep)[0] if order is None else order[keep[order]]
            keys, values = keys.take(pa.array(chosen)), values.take(pa.array(chosen))
            sizes = np.bincount(parent[chosen], minlength=len(rows)).astype(np.int64)
            entry_parts = [
                self.field(keys, key, 1, ALWAYS)[0],
                self.field(values, value, 2, ALWAYS)[0],
            ]
        else:
            if (sizes > 1).any():  # the row path's dict would merge equal keys
                raise NeedsRows
            entry_parts = [
                self.field(keys, key, 1, IMPLICIT)[0],
                self.field(values, value, 2, IMPLICIT)[0],
            ]
        parts = [p for p in entry_parts if p is not None]
        entries = join(*parts) if parts else empty(len(keys))
        body = per_row(sizes, join(_tag(number, 2), _lengths(entries), entries))
        write = sizes > 0
        return _spread(_take(body, write), _expand(write, valid)), _expand(write, valid)

    def sorted_entries(self, keys: pa.Array, schema: Schema, parent: np.ndarray) -> np.ndarray:
        """The order upb's deterministic serialization writes a map's entries in: by row,
        then by key descending (integers as unsigned), strings by their bytes ascending but
        a string before its own prefixes; NeedsRows for a duplicate key."""
        if not self.sort_maps:
            raise NeedsRows
        if schema.type is SchemaType.STRING:
            data = _canonical(keys, schema)
            buffers = data.buffers()
            raw = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0)
            inverted = pa.py_buffer(np.invert(raw.astype(np.uint8)))
            sort_key = pa.Array.from_buffers(
                pa.binary(), len(data), [None, buffers[1], inverted], offset=data.offset
            )  # descending on the inverted bytes: ascending on the bytes, a prefix last
        else:
            ints = _canonical(keys, schema).to_numpy(zero_copy_only=False)
            if schema.type is SchemaType.INT64:
                ints = ints.view(_U64)
            elif schema.type is not SchemaType.BOOLEAN:
                ints = ints.astype(np.int32).view(np.uint32)
            sort_key = pa.array(ints)
        table = pa.table({"row": pa.array(parent), "key": sort_key})
        order = pc.sort_indices(table, [("row", "ascending"), ("key", "descending")]).to_numpy()
        ranked = sort_key.take(pa.array(order))
        if len(order) > 1:
            same_row = parent[order][1:] == parent[order][:-1]
            same_key = pc.equal(ranked.slice(0, len(order) - 1), ranked.slice(1))
            if (same_row & same_key.to_numpy(zero_copy_only=False)).any():
                raise NeedsRows
        result: np.ndarray = order
        return result


_ZEROS = {pa.int64(): 0, pa.float32(): 0.0, pa.float64(): 0.0, pa.bool_(): False,
          pa.binary(): b""}  # fmt: skip


def _canonical(array: pa.Array, schema: Schema) -> pa.Array:
    """``array`` as int64, float32, float64, bool or binary for a scalar of ``schema``;
    NeedsRows for an Arrow type the row path may take otherwise (or refuse)."""
    typ, kind = array.type, schema.type
    types = pa.types
    if kind in _INTS and types.is_integer(typ):
        out = array.cast(pa.int64())  # a uint64 beyond int64: ArrowInvalid, the row path
        if kind is not SchemaType.INT64 and len(out) > out.null_count:
            low, high = pc.min_max(out).values()
            if low.as_py() < _INT32_RANGE[0] or high.as_py() > _INT32_RANGE[1]:
                raise NeedsRows  # the row path refuses it
        return out
    if kind is SchemaType.FLOAT32 and types.is_float32(typ):
        return array
    if kind is SchemaType.FLOAT64 and (types.is_float32(typ) or types.is_float64(typ)):
        return array.cast(pa.float64())
    if kind is SchemaType.BOOLEAN and types.is_boolean(typ):
        return array
    if kind is SchemaType.STRING and (types.is_string(typ) or types.is_large_string(typ)):
        return array.cast(pa.binary())
    binaries = types.is_binary(typ) or types.is_large_binary(typ) or types.is_fixed_size_binary(typ)
    if kind is SchemaType.BYTES and binaries:
        return array.cast(pa.binary())
    raise NeedsRows


def _nonzero(array: pa.Array, schema: Schema) -> np.ndarray:
    """Which values of a canonical ``array`` without nulls proto3 writes (not zero: the
    bits of a float, so -0.0 is written)."""
    kind = schema.type
    if kind in (SchemaType.STRING, SchemaType.BYTES):
        lengths: np.ndarray = pc.binary_length(array).to_numpy() > 0
        return lengths
    values = array.to_numpy(zero_copy_only=False)
    if kind in (SchemaType.FLOAT32, SchemaType.FLOAT64):
        values = values.view(np.uint32 if values.dtype == np.float32 else _U64)
    nonzero: np.ndarray = values != 0
    return nonzero


def _scalar(array: pa.Array, schema: Schema) -> tuple[list[Part], int]:
    """The encodings of a canonical ``array`` without nulls, and their wire type."""
    kind = schema.type
    if kind in _INTS:
        return [uvarints(array.to_numpy().view(_U64))], 0
    if kind is SchemaType.FLOAT32:  # through a double, as a Python float goes
        values = array.to_numpy().astype(np.float64).astype("<f4")
        return [fixed(values, 4)], 5
    if kind is SchemaType.FLOAT64:
        return [fixed(array.to_numpy().astype("<f8"), 8)], 1
    if kind is SchemaType.BOOLEAN:
        return [fixed(array.to_numpy(zero_copy_only=False).astype(np.uint8), 1)], 0
    return [_lengths(array), array], 2


def _logical(values: pa.Array, schema: Schema) -> pa.StructArray:
    """A logical type's values (no nulls) as the struct of its message's fields."""
    name, typ, n = schema.name, values.type, len(values)
    if name == DECIMAL_NAME:
        scale = Decimal.scale(schema)
        if not pa.types.is_decimal128(typ) or typ.scale != scale or scale < 0:
            raise NeedsRows
        _, data = unscaled_bytes(values)
        return _struct(value=data, precision=_precision(values), scale=np.full(n, scale))
    if name == DATE_NAME:
        if not pa.types.is_date(typ):
            raise NeedsRows
        days = epoch_integers(values, name).astype("datetime64[D]")
        months = days.astype("datetime64[M]")
        year = days.astype("datetime64[Y]").astype(np.int64) + 1970
        if n and (year.min() < 1 or year.max() > 9999):
            raise NeedsRows  # beyond Python's dates: the row path refuses it
        return _struct(year=year, month=months.astype(np.int64) % 12 + 1,
                       day=(days - months).astype(np.int64) + 1)  # fmt: skip
    if name == TIME_NAME and pa.types.is_time(typ):
        millis = epoch_integers(values, name)
        hours, rest = np.divmod(millis, 3_600_000)
        minutes, rest = np.divmod(rest, 60_000)
        seconds, rest = np.divmod(rest, 1000)
        return _struct(hours=hours, minutes=minutes, seconds=seconds, nanos=rest * 1_000_000)
    if name == TIMESTAMP_NAME and pa.types.is_timestamp(typ):
        seconds, rest = np.divmod(epoch_integers(values, name), 1000)
        return _struct(seconds=seconds, nanos=rest * 1_000_000)
    raise NeedsRows


def _struct(**children: Any) -> pa.StructArray:
    arrays = [c if isinstance(c, pa.Array) else pa.array(c) for c in children.values()]
    return pa.StructArray.from_arrays(arrays, names=list(children))


def _precision(values: pa.Array) -> np.ndarray:
    """The number of digits of each unscaled value of a ``decimal128`` array (at least 1:
    Python's ``len(value.as_tuple().digits)``), from its two 64-bit halves."""
    halves = np.ascontiguousarray(decimal_words(values)).view(">u8").astype(_U64)
    high, low = halves[:, 0], halves[:, 1]
    negative = (high >> _U64(63)) == 1
    low_abs = np.where(negative, ~low + _U64(1), low)
    high = np.where(negative, ~high + (low == 0).astype(_U64), high)
    digits = np.ones(len(values), dtype=np.int64)
    for power in _POWERS:
        p_high, p_low = _U64(power >> 64), _U64(power & (2**64 - 1))
        digits += (high > p_high) | ((high == p_high) & (low_abs >= p_low))
    return digits


_MAP_ORDER: list[bool] = []
"""Whether upb's map order is known, once checked."""


def _map_order_known(row: RowBytes) -> bool:
    if not _MAP_ORDER:
        _MAP_ORDER.append(_check_map_order(row))
    return _MAP_ORDER[0]


def _check_map_order(row: RowBytes) -> bool:
    """Whether upb sorts map entries as :meth:`_Encoder.sorted_entries` does (checked once
    on a row of every native key type: a protobuf release that sorts otherwise sends rows
    with maps of several entries to the row path instead of writing other bytes)."""
    keys: dict[str, tuple[Schema, pa.DataType, list[Any]]] = {
        "s": (STRING_SCHEMA, pa.string(), ["b", "a", "aa", "", "é", "\x00", "ab", "ÿ"]),
        "l": (INT64_SCHEMA, pa.int64(), [5, -3, 0, 1 << 40, -(1 << 63), 2]),
        "i": (INT32_SCHEMA, pa.int32(), [5, -3, 0, 7, -(1 << 31)]),
        "b": (BOOLEAN_SCHEMA, pa.bool_(), [False, True]),
    }
    schema = struct_schema(
        (name, SchemaBuilder.map(k, INT32_SCHEMA).build()) for name, (k, _, _) in keys.items()
    )
    value = {name: {k: i for i, k in enumerate(ks)} for name, (_, _, ks) in keys.items()}
    arrow = pa.array(
        [{name: list(v.items()) for name, v in value.items()}],
        pa.struct([(name, pa.map_(t, pa.int32())) for name, (_, t, _) in keys.items()]),
    )
    try:
        expected = row(schema, value)
        body, _ = _Encoder(False, True).message(arrow, schema)
    except (NeedsRows, DataError, pa.ArrowException):
        return False
    return bool(body[0].as_py() == expected)
