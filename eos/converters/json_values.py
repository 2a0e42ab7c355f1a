"""Connect values as Kafka Connect's ``JsonConverter`` writes them, byte for byte: what the
converter's row path (:mod:`.json`) and its column path (:mod:`.json_arrow`) share.

:class:`Compiler` turns a schema into a function from a Connect value to orjson input
(structs as objects in field order, maps with string keys as objects and others as
``[key, value]`` pairs, bytes and BASE64 decimals as base64, numbers as Java prints
them); :func:`jackson_dumps` and :func:`as_jackson_rows` give orjson's bytes Jackson's
escapes. :func:`dumps_schemaless` writes a value without a schema, as eos always did.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
import re
import struct
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from eos.api.logical import Date, Decimal, Time, Timestamp
from eos.api.schema import (
    DATE_NAME,
    DECIMAL_NAME,
    TIME_NAME,
    TIMESTAMP_NAME,
    Schema,
    SchemaType,
    Struct,
)
from eos.errors import DataError

ToJson = Callable[[Any], Any]
OPTIONS = orjson.OPT_NON_STR_KEYS
_LOWER_ESCAPE = re.compile(rb"(?<!\\)((?:\\\\)*)\\u00([0-9a-f]{2})")
_ASTRAL = re.compile(rb"[\xf0-\xf4][\x80-\xbf]{3}")


# ------------------------------------------------------------------ schemaless (eos's own)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, Struct):
        return {f.name: value.get(f.name) for f in value.schema.fields}
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


COMPACT = json.JSONEncoder(separators=(",", ":"), default=_json_default)


def dumps_schemaless(value: Any) -> bytes:
    """Compact JSON of a value without a schema (orjson; the standard library for what
    orjson refuses, such as integers beyond 64 bits)."""
    try:
        return orjson.dumps(value, default=_json_default, option=OPTIONS)
    except TypeError:
        return COMPACT.encode(value).encode()


# ------------------------------------------------------------------ numbers as Java prints them


def _java_text(digits: str, exponent: int) -> str:
    """``0.digits x 10^exponent`` as Java's Double/Float.toString: plain from 10^-3 up to
    10^7, else ``d.dddE±n`` (one digit after the point at least)."""
    digits = digits.rstrip("0") or "0"
    sci = exponent - 1  # the exponent with one digit before the point
    if -3 <= sci < 7:
        if exponent <= 0:
            return "0." + "0" * -exponent + digits
        whole, fraction = digits[:exponent].ljust(exponent, "0"), digits[exponent:]
        return f"{whole}.{fraction or '0'}"
    return f"{digits[0]}.{digits[1:] or '0'}E{sci}"


def _digits(text: str, exact: float) -> tuple[str, int]:
    """The digits of the shortest ``text`` that reads back as ``exact``; Java writes at
    least two, the two closest to the exact binary value (4.9E-324, not 5.0E-324)."""
    t = decimal.Decimal(text).as_tuple()
    assert isinstance(t.exponent, int)
    digits = "".join(map(str, t.digits)).rstrip("0") or "0"
    point = len(t.digits) + t.exponent
    if len(digits) == 1:
        two = decimal.Decimal(exact).normalize(decimal.Context(prec=2)).as_tuple()
        assert isinstance(two.exponent, int)
        digits, point = "".join(map(str, two.digits)), len(two.digits) + two.exponent
    return digits, point


def java_double(x: float) -> str:
    """JSON text of a double as Jackson writes it (``"NaN"`` and infinities quoted)."""
    if not math.isfinite(x):
        return '"NaN"' if x != x else ('"Infinity"' if x > 0 else '"-Infinity"')
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    return sign + _java_text(*_digits(repr(abs(x)), abs(x)))


def _float32(x: float) -> float:
    try:
        return float(struct.unpack("<f", struct.pack("<f", x))[0])
    except OverflowError:
        return math.copysign(math.inf, x)


def java_float(x: float) -> str:
    """JSON text of a float32 as Jackson writes it (Java's Float.toString digits)."""
    f = _float32(x)
    if not math.isfinite(f) or f == 0:
        return java_double(f)
    for precision in range(1, 10):
        text = f"{abs(f):.{precision - 1}e}"
        if _float32(float(text)) == abs(f):
            break
    return ("-" if f < 0 else "") + _java_text(*_digits(text, abs(f)))


def to_double(x: Any) -> Any:
    x = float(x)
    if 1e-3 <= abs(x) < 1e7 or (x == 0 and math.copysign(1.0, x) > 0):
        return x  # orjson writes these exactly as Java does
    return orjson.Fragment(java_double(x).encode())


def to_float(x: Any) -> Any:
    return orjson.Fragment(java_float(float(x)).encode())


def _b64(value: Any) -> str:
    return base64.b64encode(bytes(value)).decode("ascii")


# ------------------------------------------------------------------ with a schema


class Compiler:
    """Compiles a schema into a function from its Connect values to orjson input."""

    ENTRY_MAPS = False
    """Maps but those of required string keys as ``{"key","value"}`` objects (JSON Schema)."""

    def __init__(self, decimal_numeric: bool, replace_null_with_default: bool) -> None:
        self.decimal_numeric = decimal_numeric
        self.replace_null = replace_null_with_default

    def compile(self, schema: Schema) -> ToJson:
        inner = self._non_null(schema)
        default = schema.default
        default_json = inner(default) if default is not None and self.replace_null else None
        optional = schema.optional

        def convert(value: Any) -> Any:
            if value is not None:
                return inner(value)
            if default_json is not None:
                return default_json
            if optional:
                return None
            raise DataError(
                "Conversion error: null value for field that is required and has no default value"
            )

        plain = _PLAIN.get(schema.type) if schema.name is None else None
        if plain is None:
            return convert

        def exact(value: Any) -> Any:
            # an integer, boolean or string of exactly its type is written as it is (one
            # call a field); a null, a subclass or a wrong type goes through the checks
            return value if type(value) is plain else convert(value)

        return exact

    def _non_null(self, schema: Schema) -> ToJson:
        logical = self._logical(schema)
        if logical is not None:
            return logical
        kind = schema.type
        if kind in (SchemaType.INT8, SchemaType.INT16, SchemaType.INT32, SchemaType.INT64):
            return _checked(int, schema)
        if kind is SchemaType.FLOAT64:
            return to_double
        if kind is SchemaType.FLOAT32:
            return to_float
        if kind is SchemaType.BOOLEAN:
            return _checked(bool, schema)
        if kind is SchemaType.STRING:
            return _checked(str, schema)
        if kind is SchemaType.BYTES:
            return _b64
        if kind is SchemaType.ARRAY:
            assert schema.value_schema is not None
            item = self.compile(schema.value_schema)
            return lambda v: [item(x) for x in v]
        if kind is SchemaType.MAP:
            return self._map(schema)
        return self._struct(schema)

    def _logical(self, schema: Schema) -> ToJson | None:
        name = schema.name
        if name == DECIMAL_NAME:
            if self.decimal_numeric:
                return lambda v: orjson.Fragment(str(v).encode())
            return lambda v: _b64(Decimal.from_logical(schema, v))
        if name == DATE_NAME:
            return lambda v: Date.from_logical(schema, v)
        if name == TIME_NAME:
            return lambda v: Time.from_logical(schema, v)
        if name == TIMESTAMP_NAME:
            return lambda v: Timestamp.from_logical(schema, v)
        return None

    def _map(self, schema: Schema) -> ToJson:
        assert schema.key_schema is not None
        assert schema.value_schema is not None
        key, value = self.compile(schema.key_schema), self.compile(schema.value_schema)
        if schema.key_schema.type is SchemaType.STRING:
            return lambda m: {key(k): value(v) for k, v in m.items()}
        return lambda m: [[key(k), value(v)] for k, v in m.items()]

    def _struct(self, schema: Schema) -> ToJson:
        fields = [(f.name, f.index, self.compile(f.schema)) for f in schema.fields]

        def convert(value: Any) -> Any:
            if type(value) is dict:  # a plain dict stands for a Struct of the schema
                get = value.get
                return {name: conv(get(name)) for name, _, conv in fields}
            if type(value) is not Struct or (value.schema is not schema and value.schema != schema):
                raise DataError(f"Mismatching schema: {type(value).__name__} for {schema}")
            slots = value._values
            return {name: conv(slots[i]) for name, i, conv in fields}

        return convert


_PLAIN: dict[SchemaType, type] = {
    SchemaType.INT8: int,
    SchemaType.INT16: int,
    SchemaType.INT32: int,
    SchemaType.INT64: int,
    SchemaType.BOOLEAN: bool,
    SchemaType.STRING: str,
}
"""The Python type of a Connect value that the JSON converter writes as it is."""


def _checked(kind: type, schema: Schema) -> ToJson:
    def check(value: Any) -> Any:
        if type(value) is kind or (isinstance(value, kind) and not isinstance(value, bool)):
            return value
        raise DataError(f"Invalid type for {schema.type.name}: {type(value).__name__}")

    return check


def _surrogates(match: re.Match[bytes]) -> bytes:
    code = ord(match.group().decode("utf-8")) - 0x10000
    return b"\\u%X\\u%X" % (0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF))


def jackson_dumps(value: Any) -> bytes:
    """orjson's bytes as Jackson writes them: ``\\u00XX`` escapes in upper case, and
    characters beyond the BMP as escaped surrogate pairs (``\\uD83D\\uDE00``)."""
    out = orjson.dumps(value, option=OPTIONS)
    if out.find(b"\\u00") >= 0 or not out.isascii():  # find: see _payload
        return as_jackson(out)
    return out


def as_jackson_rows(rows: list[bytes]) -> list[bytes]:
    """orjson's ``rows`` of a block as Jackson writes them; one look over the whole block
    first (a backslash, then ``\\u00``: looking for the one byte is 50 times faster)."""
    joined = b"".join(rows)
    if (joined.find(b"\\") < 0 or joined.find(b"\\u00") < 0) and joined.isascii():
        return rows
    return [as_jackson(r) if r.find(b"\\u00") >= 0 or not r.isascii() else r for r in rows]


def as_jackson(out: bytes) -> bytes:
    if b"\\u00" in out:
        out = _LOWER_ESCAPE.sub(lambda m: m.group(1) + b"\\u00" + m.group(2).upper(), out)
    if not out.isascii():
        out = _ASTRAL.sub(_surrogates, out)
    return out
