"""JSON of a whole ``pyarrow`` column at once: the block path of the JSON converters
(``json`` and Connect's JsonConverter, with or without the schema envelope, and JSON
Schema), with no Python object per row but the final ``bytes``, in the bytes the row path
writes (tests compare the two): orjson's for the value the compiled row path makes of each
row, then Jackson's escapes fixed as the row path fixes them, only when some text may
hold one (a ``\\u00xx`` escape, a character beyond ASCII).

Each value becomes its JSON text in a binary array. Integers, booleans and Date / Time /
Timestamp (their integers: days, milliseconds floor) are cast to strings by Arrow;
strings quoted, orjson's escapes put in by Arrow's ``replace_substring`` where a block
holds a quote, a backslash or a control character (BMP characters stay raw UTF-8, as
orjson leaves them); bytes, and Decimal's unscaled bytes as Java writes them
(``decimal.format=BASE64``), base64'd with numpy; Decimal with ``NUMERIC`` as Arrow writes
it (the text of Python's ``str`` of the Decimal). A double within 10^-3…10^7, or 0.0, is
Arrow's shortest text with ``.0`` where it has no point: orjson's text there; a float32
there likewise from its float32 digits (Java's). Any other double or float (an exponent,
-0.0, NaN, the infinities) goes through the row path's own function, one value at a
time. A struct is its fields in schema order, an array its items, a map an object for
string keys, else ``[key,value]`` pairs (``{"key":…,"value":…}`` objects under JSON
Schema, and for its optional string keys), joined by Arrow (``binary_join_element_wise``
for the parts of each value, ``binary_join`` on the offsets for the items of each). A null
is written as the compiled row path writes it: ``null``, or the default.

Anything else makes :func:`encode_column` answer None, the caller going row by row: a null
row, an Arrow type the row path takes another way (or refuses), a null where the field is
required and has no default, a row of a map with a repeated key (the row path's dict
keeps one), with float or nested keys and several entries, a date, time or timestamp
beyond Python's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from eos.api.logical import Decimal
from eos.api.schema import DATE_NAME, DECIMAL_NAME, TIME_NAME, TIMESTAMP_NAME, Schema, SchemaType
from eos.columns import NeedsRows
from eos.columns.arrow_bytes import (
    binary,
    counts,
    epoch_integers,
    items,
    scatter,
    unscaled_bytes,
    valid_mask,
)
from eos.converters.json_values import OPTIONS, Compiler, as_jackson_rows, to_double, to_float
from eos.errors import DataError

_BINARY = pa.binary()
_INTS = (SchemaType.INT8, SchemaType.INT16, SchemaType.INT32, SchemaType.INT64)
_SHORT_ESCAPES = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"}
_B64 = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", np.uint8)
_DAYS = (-719_162, 2_932_896)
"""Python's dates (1-01-01 … 9999-12-31) in days since the epoch."""
_SECONDS = (-62_135_596_800 + 86_400, 253_402_300_799 - 86_400)
"""Python's datetimes in epoch seconds, a day inside (a zone shifts them)."""
_PER_SECOND = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}


def encode_column(column: Any, schema: Schema, compiler: Compiler) -> list[bytes] | None:
    """The JSON of each row of ``column`` (an Arrow array of values of ``schema``): the bytes
    of the row path of the JSON converter whose compiler is ``compiler``, Jackson's escapes
    included; None where the row path must do it."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not isinstance(array, pa.Array) or array.null_count:
        return None
    if len(array) == 0:
        return []
    writer = _Writer(compiler)
    try:
        texts = writer.value(array, schema)
    except (NeedsRows, DataError, pa.ArrowException):
        return None
    rows: list[bytes] = texts.to_pylist()
    return as_jackson_rows(rows) if writer.to_fix else rows


Parts = list[Any]
"""The JSON texts of an array's values as the row-wise concatenation of its parts: bytes
(the same in every row) and binary arrays (one text a row), one array at least."""


def _bytes(text: bytes) -> pa.Scalar:
    return pa.scalar(text, _BINARY)


def _join(*parts: Any) -> pa.Array:
    """The row-wise concatenation of ``parts`` (bytes or binary arrays, one at least)."""
    merged: Parts = []
    for p in parts:  # neighbouring bytes as one
        if isinstance(p, bytes) and merged and isinstance(merged[-1], bytes):
            merged[-1] += p
        else:
            merged.append(p)
    if len(merged) == 1:
        return merged[0]
    return pc.binary_join_element_wise(
        *(_bytes(p) if isinstance(p, bytes) else p for p in merged), b""
    )


def _per_row(sizes: np.ndarray, texts: pa.Array, open_: bytes, close: bytes) -> Parts:
    """``open_`` + each row's ``texts`` (``sizes`` of them, in order) joined by commas +
    ``close``."""
    offsets = np.zeros(len(sizes) + 1, dtype=np.int32)
    np.cumsum(sizes, out=offsets[1:])
    return [open_, pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), texts), b","), close]


def _text(array: pa.Array) -> pa.Array:
    """Arrow's text of each value (integers, booleans, decimals), as binaries."""
    return array.cast(pa.string()).cast(_BINARY)


def _values_bytes(data: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The offsets (int64, from 0) and the bytes of a binary array's values."""
    buffers = data.buffers()
    offsets = np.frombuffer(buffers[1], np.int32)[data.offset : data.offset + len(data) + 1]
    start, end = int(offsets[0]), int(offsets[-1])
    raw = np.frombuffer(buffers[2], np.uint8)[start:end] if buffers[2] is not None else None
    return offsets.astype(np.int64) - start, raw if raw is not None else np.zeros(0, np.uint8)


def _base64(data: pa.Array) -> Parts:
    """The base64 of each value of a binary array (no nulls), in quotes."""
    offsets, raw = _values_bytes(data)
    lengths = np.diff(offsets)
    groups = (lengths + 2) // 3
    padded_at = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(groups * 3, out=padded_at[1:])
    padded = np.zeros(int(padded_at[-1]), np.uint8)
    padded[np.arange(len(raw)) + np.repeat(padded_at[:-1] - offsets[:-1], lengths)] = raw
    triples = padded.reshape(-1, 3).astype(np.uint32)
    word = triples[:, 0] << 16 | triples[:, 1] << 8 | triples[:, 2]
    shifts = np.array([18, 12, 6, 0], np.uint32)
    chars = _B64[(word[:, None] >> shifts) & 63].reshape(-1)
    out = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(groups * 4, out=out[1:])
    short = lengths % 3  # 1: the last two characters are padding, 2: the last one
    chars[out[1:][short == 1] - 2] = ord("=")
    chars[out[1:][short > 0] - 1] = ord("=")
    return [b'"', binary(out, chars), b'"']


def _numbers(values: np.ndarray) -> pa.Array:
    return _text(pa.array(values))


def _floats(values: np.ndarray, single: bool) -> pa.Array:
    """The JSON text of float64 (``single``: float32) values as the row path writes it:
    Arrow's shortest text where orjson's (and Java's) is plain, the rest one by one."""
    size = np.abs(values)
    plain = ((size >= 1e-3) & (size < 1e7)) | ((values == 0) & ~np.signbit(values))
    at = np.nonzero(plain)[0]
    texts = pa.array(values[at]).cast(pa.string())
    if len(texts):
        exponent = pc.match_substring(texts, "e").to_numpy(zero_copy_only=False)
        if exponent.any():  # not seen; the row path's own function then
            plain[at[exponent]] = False
            at, texts = at[~exponent], texts.filter(pa.array(~exponent))
        integral = pc.invert(pc.match_substring(texts, "."))
        texts = pc.if_else(integral, pc.binary_join_element_wise(texts, ".0", ""), texts)
    texts = texts.cast(_BINARY)
    if len(at) == len(values):
        return texts
    one = to_float if single else to_double
    rest = np.nonzero(~plain)[0]
    others = pa.array([orjson.dumps(one(v)) for v in values[rest].tolist()], _BINARY)
    order = np.empty(len(values), np.int64)
    order[at], order[rest] = np.arange(len(at)), np.arange(len(at), len(values))
    return pc.take(pa.concat_arrays([texts, others]), pa.array(order))


def _within(array: pa.Array, low: int, high: int) -> None:
    """NeedsRows unless every value's integer (in its unit) is within ``low``…``high``:
    beyond Python's dates and times, the row path refuses it."""
    raw = array.cast(pa.int64() if array.type.bit_width == 64 else pa.int32()).to_numpy()
    if len(raw) and (int(raw.min()) < low or int(raw.max()) > high):
        raise NeedsRows


def _logical(array: pa.Array, name: str) -> np.ndarray:
    """The integers of Date (days), Time and Timestamp (milliseconds, floor) values."""
    typ = array.type
    if name == DATE_NAME and pa.types.is_date32(typ):
        _within(array, *_DAYS)
    elif name == TIME_NAME and pa.types.is_time(typ):
        _within(array, 0, 86_400 * _PER_SECOND[typ.unit] - 1)
    elif name == TIMESTAMP_NAME and pa.types.is_timestamp(typ):
        per_second = _PER_SECOND[typ.unit]
        _within(array, _SECONDS[0] * per_second, _SECONDS[1] * per_second)
    else:
        raise NeedsRows
    return epoch_integers(array, name)


class _Writer:
    """The JSON texts of a compiler's values (``decimal.format``, defaults, map style)."""

    def __init__(self, compiler: Compiler) -> None:
        self.compiler = compiler
        self.entries = compiler.ENTRY_MAPS
        self.to_fix = False
        """Whether a text may hold what Jackson writes otherwise (a ``\\u00xx`` escape, a
        character beyond ASCII): the rows are then looked at as the row path's are."""

    def constant(self, text: bytes) -> bytes:
        """``text``, the same in every row (a field's name, a null's default)."""
        if text.find(b"\\u00") >= 0 or not text.isascii():
            self.to_fix = True
        return text

    def value(self, array: pa.Array, schema: Schema) -> pa.Array:
        """The JSON text of every value of ``array``, a null's too."""
        if len(array) == 0:
            return pa.array([], _BINARY)
        if array.null_count == 0:
            return _join(*self.parts(array, schema))
        null = _bytes(self.null(schema))
        if array.null_count == len(array):
            return pa.nulls(len(array), _BINARY).fill_null(null)
        valid = valid_mask(array)
        present = _join(*self.parts(array.filter(pa.array(valid)), schema))
        return scatter(present, valid).fill_null(null)

    def null(self, schema: Schema) -> bytes:
        """What the row path writes for a null of ``schema`` (its default, or null)."""
        try:
            null = self.compiler.compile(schema)(None)
        except DataError:
            raise NeedsRows from None  # required, no default: the row path refuses it
        return self.constant(orjson.dumps(null, option=OPTIONS))

    def strings(self, array: pa.Array) -> Parts:
        """Each string in quotes, escaped as orjson escapes it."""
        data = array.cast(_BINARY)
        _, raw = _values_bytes(data)
        text = raw.tobytes()
        if text.find(b"\\") >= 0:
            data = pc.replace_substring(data, "\\", "\\\\")
        if text.find(b'"') >= 0:
            data = pc.replace_substring(data, '"', '\\"')
        if len(raw) and raw.min() < 0x20:
            for byte in np.unique(raw[raw < 0x20]).tolist():
                escape = _SHORT_ESCAPES.get(byte)
                if escape is None:  # as orjson writes it, in lower case: fixed then
                    escape, self.to_fix = f"\\u{byte:04x}", True
                data = pc.replace_substring(data, chr(byte), escape)
        if not text.isascii():
            self.to_fix = True
        return [b'"', data, b'"']

    def parts(self, array: pa.Array, schema: Schema) -> Parts:
        """The JSON text of every value of ``array`` (no nulls), in parts."""
        name, kind, typ = schema.name, schema.type, array.type
        types = pa.types
        if name == DECIMAL_NAME:
            if not types.is_decimal128(typ) or typ.scale < 0:
                raise NeedsRows
            if self.compiler.decimal_numeric:
                return [_text(array)]
            if typ.scale != Decimal.scale(schema):
                raise NeedsRows  # the row path refuses it
            return _base64(unscaled_bytes(array)[1])
        if name in (DATE_NAME, TIME_NAME, TIMESTAMP_NAME):
            return [_numbers(_logical(array, name))]
        if (kind in _INTS and types.is_integer(typ)) or (
            kind is SchemaType.BOOLEAN and types.is_boolean(typ)
        ):
            return [_text(array)]
        if kind is SchemaType.FLOAT64 and types.is_floating(typ) and typ.bit_width > 16:
            return [_floats(array.cast(pa.float64()).to_numpy(), False)]
        if kind is SchemaType.FLOAT32 and types.is_float32(typ):
            return [_floats(array.to_numpy(), True)]
        if kind is SchemaType.STRING and (types.is_string(typ) or types.is_large_string(typ)):
            return self.strings(array)
        if kind is SchemaType.BYTES and (
            types.is_binary(typ) or types.is_large_binary(typ) or types.is_fixed_size_binary(typ)
        ):
            return _base64(array.cast(_BINARY))
        item = schema.value_schema
        if kind is SchemaType.ARRAY and item is not None:
            if not (types.is_list(typ) or types.is_large_list(typ)):
                raise NeedsRows
            return _per_row(counts(array), self.value(items(array), item), b"[", b"]")
        if kind is SchemaType.MAP and item is not None and types.is_map(typ):
            return self.map(array, schema)
        if kind is SchemaType.STRUCT and types.is_struct(typ):
            return self.struct(array, schema)
        raise NeedsRows

    def map(self, array: pa.Array, schema: Schema) -> Parts:
        key, value = schema.key_schema, schema.value_schema
        assert key is not None
        assert value is not None
        if key.type in (SchemaType.ARRAY, SchemaType.MAP):
            raise NeedsRows  # a list or dict is no dict key: the row path refuses it
        sizes = counts(array)
        keys, values = items(array).flatten()
        key_texts, value_texts = self.value(keys, key), self.value(values, value)
        if (sizes > 1).any():
            # equal keys have equal texts (not always the other way round: two times a
            # microsecond apart, which go to the rows), but for floats (-0.0 == 0.0)
            if key.type not in (*_INTS, SchemaType.BOOLEAN, SchemaType.STRING, SchemaType.BYTES):
                raise NeedsRows
            rows = pa.array(np.repeat(np.arange(len(sizes)), sizes))
            distinct = pa.table({"row": rows, "key": key_texts}).group_by(["row", "key"])
            if distinct.aggregate([]).num_rows != len(keys):
                raise NeedsRows  # a repeated key: the row path's dict keeps one
        if key.type is SchemaType.STRING and not (self.entries and key.optional):
            return _per_row(sizes, _join(key_texts, b":", value_texts), b"{", b"}")
        if self.entries:
            entries = _join(b'{"key":', key_texts, b',"value":', value_texts, b"}")
        else:
            entries = _join(b"[", key_texts, b",", value_texts, b"]")
        return _per_row(sizes, entries, b"[", b"]")

    def struct(self, array: pa.Array, schema: Schema) -> Parts:
        typ = array.type
        names = [typ.field(i).name for i in range(typ.num_fields)]
        if len(set(names)) != len(names):
            raise NeedsRows  # the row path's dict keeps one of each name
        children = dict(zip(names, array.flatten(), strict=True))
        parts: Parts = []
        prefix = b"{"
        for f in schema.fields:
            parts.append(self.constant(prefix + orjson.dumps(f.name) + b":"))
            child = children.get(f.name)
            if child is None:
                parts.append(self.null(f.schema))
            elif child.null_count:
                parts.append(self.value(child, f.schema))
            else:  # its parts among the struct's: one join for them all
                parts.extend(self.parts(child, f.schema))
            prefix = b","
        parts.append(b"}" if schema.fields else b"{}")
        if all(isinstance(p, bytes) for p in parts):
            return [pa.array([b"".join(parts)] * len(array), _BINARY)]
        return parts
