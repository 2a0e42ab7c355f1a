"""JSON, as Kafka Connect's ``JsonConverter`` writes it.

With a schema, values are written the way Connect writes them, byte for byte: structs as
objects in field order, maps with string keys as objects and others as ``[key, value]``
pairs, bytes as base64, Decimal as base64 of its unscaled bytes (``decimal.format=BASE64``,
the default) or as a number (``NUMERIC``), Date/Time/Timestamp as their integers, a null
with a default as the default (``replace.null.with.default``), and numbers as Java prints
them (``1.0E7``, ``"NaN"``). ``schemas.enable=true`` wraps every value in Connect's
envelope ``{"schema":…,"payload":…}``, the schema in Connect's JSON form (``type``,
``items``/``keys``/``values``/``fields``, ``optional``, ``name``, ``version``, ``doc``,
``parameters``, ``default``; a struct field adds ``field``).

Without a schema (a record that declares none) the value is written as eos always did:
compact JSON, ``bytes`` as base64, datetimes in ISO-8601, Decimals and UUIDs as strings.

``json`` is this converter with ``schemas.enable`` false by default (eos's behaviour);
``org.apache.kafka.connect.json.JsonConverter`` defaults it to true, as Connect does.
The encoder is orjson (measured in docs/formats.md); per schema, the conversion of a
value is compiled once into a chain of small functions.
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
from collections.abc import Callable, Mapping
from typing import Any, cast

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
from eos.converters.base import Headers, SchemaConverter, flag
from eos.errors import ConfigError, DataError
from eos.transforms.text_struct import TextStruct, text_rows

ToJson = Callable[[Any], Any]
Payload = Callable[[Any], bytes]
_OPTIONS = orjson.OPT_NON_STR_KEYS
_LOWER_ESCAPE = re.compile(rb"(?<!\\)((?:\\\\)*)\\u00([0-9a-f]{2})")
_ASTRAL = re.compile(rb"[\xf0-\xf4][\x80-\xbf]{3}")
_BY_ID_MAX = 1024


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


_COMPACT = json.JSONEncoder(separators=(",", ":"), default=_json_default)


def dumps_schemaless(value: Any) -> bytes:
    """Compact JSON of a value without a schema (orjson; the standard library for what
    orjson refuses, such as integers beyond 64 bits)."""
    try:
        return orjson.dumps(value, default=_json_default, option=_OPTIONS)
    except TypeError:
        return _COMPACT.encode(value).encode()


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


def _double(x: Any) -> Any:
    x = float(x)
    if 1e-3 <= abs(x) < 1e7 or (x == 0 and math.copysign(1.0, x) > 0):
        return x  # orjson writes these exactly as Java does
    return orjson.Fragment(java_double(x).encode())


def _float(x: Any) -> Any:
    return orjson.Fragment(java_float(float(x)).encode())


def _b64(value: Any) -> str:
    return base64.b64encode(bytes(value)).decode("ascii")


# ------------------------------------------------------------------ with a schema


class _Compiler:
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
            return _double
        if kind is SchemaType.FLOAT32:
            return _float
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


_JSON_TYPE_NAMES = {SchemaType.FLOAT32: "float", SchemaType.FLOAT64: "double"}
"""Connect's JSON schemas name the floating types ``float`` and ``double``."""


def schema_json(schema: Schema | None, compiler: _Compiler) -> Any:
    """Connect's JSON form of ``schema`` (``JsonConverter.asJsonSchema``), as orjson input."""
    if schema is None:
        return None
    out: dict[str, Any] = {"type": _JSON_TYPE_NAMES.get(schema.type, schema.type.value)}
    if schema.type is SchemaType.ARRAY:
        out["items"] = schema_json(schema.value_schema, compiler)
    elif schema.type is SchemaType.MAP:
        out["keys"] = schema_json(schema.key_schema, compiler)
        out["values"] = schema_json(schema.value_schema, compiler)
    elif schema.type is SchemaType.STRUCT:
        out["fields"] = [
            {**schema_json(f.schema, compiler), "field": f.name} for f in schema.fields
        ]
    out["optional"] = schema.optional
    for attr in ("name", "version", "doc"):
        if getattr(schema, attr) is not None:
            out[attr] = getattr(schema, attr)
    if schema.parameters is not None:
        out["parameters"] = dict(schema.parameters)
    if schema.default is not None:
        out["default"] = compiler.compile(schema)(schema.default)
    return out


class JsonConverter(SchemaConverter):
    """``json`` (schemas off unless ``schemas.enable=true``); see the module docstring."""

    SCHEMAS_ENABLE_DEFAULT = False

    def __init__(self) -> None:
        self.schemas_enable = self.SCHEMAS_ENABLE_DEFAULT
        self._compiler = _Compiler(decimal_numeric=False, replace_null_with_default=True)
        self._compiled: dict[Schema, tuple[ToJson, bytes]] = {}
        self._by_id: dict[int, tuple[Schema, Payload, bytes]] = {}
        """id(schema) → (schema, …): a record's schema is most often the very object of the
        last one, and hashing a schema walks all of it (the schema kept: its id stays its)."""

    def configure(self, props: Mapping[str, str], is_key: bool) -> None:
        super().configure(props, is_key)
        self.schemas_enable = flag(props, "schemas.enable", self.SCHEMAS_ENABLE_DEFAULT)
        fmt = str(props.get("decimal.format", "BASE64")).strip().upper()
        if fmt not in ("BASE64", "NUMERIC"):
            raise ConfigError(
                "decimal.format", props["decimal.format"], "must be BASE64 or NUMERIC"
            )
        replace = flag(props, "replace.null.with.default", True)
        self._compiler = _Compiler(fmt == "NUMERIC", replace)
        self._compiled.clear()
        self._by_id.clear()

    def _for(self, schema: Schema) -> tuple[Schema, Payload, bytes]:
        found = self._compiled.get(schema)
        if found is None:
            found = (self._compiler.compile(schema), _dumps(schema_json(schema, self._compiler)))
            self._compiled[schema] = found
        if len(self._by_id) >= _BY_ID_MAX:  # schemas built per record: equal, not identical
            self._by_id.clear()
        entry = self._by_id[id(schema)] = (schema, _payload(schema, found[0]), found[1])
        return entry

    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Headers | None = None
    ) -> bytes | None:
        if schema is None:
            if value is None:
                return None
            payload = dumps_schemaless(value)
            return b'{"schema":null,"payload":' + payload + b"}" if self.schemas_enable else payload
        entry = self._by_id.get(id(schema))
        if entry is None or entry[0] is not schema:
            entry = self._for(schema)
        payload = entry[1](value)
        if not self.schemas_enable:
            return payload
        return b'{"schema":' + entry[2] + b',"payload":' + payload + b"}"

    def from_connect_block(
        self, topic: str, schema: Schema | None, column: Any
    ) -> list[bytes | None]:
        """The rows :func:`column_rows` writes at once, any other column row by row."""
        rows, column = column_rows(schema, column, self._compiler)
        if rows is None:
            return super().from_connect_block(topic, schema, column)
        if self.schemas_enable:
            assert schema is not None  # column_rows needs one
            head = b'{"schema":' + self._for(schema)[2] + b',"payload":'
            rows = [b"".join((head, o, b"}")) for o in rows]
        return cast(list[bytes | None], rows)

    def convert(self, topic: str, value: Any) -> bytes | None:
        if type(value) is not Struct and not self.schemas_enable:
            return None if value is None else dumps_schemaless(value)  # the hot path
        return super().convert(topic, value)


class ConnectJsonConverter(JsonConverter):
    """``org.apache.kafka.connect.json.JsonConverter``: schemas on by default, as in Connect."""

    SCHEMAS_ENABLE_DEFAULT = True


def _surrogates(match: re.Match[bytes]) -> bytes:
    code = ord(match.group().decode("utf-8")) - 0x10000
    return b"\\u%X\\u%X" % (0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF))


def _dumps(value: Any) -> bytes:
    """orjson's bytes as Jackson writes them: ``\\u00XX`` escapes in upper case, and
    characters beyond the BMP as escaped surrogate pairs (``\\uD83D\\uDE00``)."""
    out = orjson.dumps(value, option=_OPTIONS)
    if out.find(b"\\u00") >= 0 or not out.isascii():  # find: see _payload
        return _as_jackson(out)
    return out


_STR = {str}


def column_rows(
    schema: Schema | None, column: Any, compiler: _Compiler
) -> tuple[list[bytes] | None, Any]:
    """A block's column written at once, in the bytes of its values one by one: a list of
    plain STRING values (FileSource's lines) through orjson in one C loop, lines after
    HoistField (and InsertField) a :class:`TextStruct` at a time, an Arrow column whole
    with ``compiler`` (the converter's; :mod:`~eos.converters.json_arrow`:
    SparkSource's rows, any type); Jackson's escapes fixed only where a value needs them.
    None otherwise, with the column as the row path takes it (a TextStruct as its Arrow
    struct column)."""
    if (
        schema is not None and schema.type is SchemaType.STRING and schema.name is None
        and type(column) is list and set(map(type, column)) == _STR
    ):  # fmt: skip
        return _as_jackson_rows(list(map(orjson.dumps, column))), column
    if type(column) is TextStruct:  # lines after HoistField (and InsertField)
        rows = text_rows(schema, column)
        if rows is not None:
            return _as_jackson_rows(rows), column
        column = column.to_arrow()
    if schema is not None and hasattr(column, "type"):
        from eos.converters.json_arrow import encode_column

        return encode_column(column, schema, compiler), column  # its escapes fixed
    return None, column


def _as_jackson_rows(rows: list[bytes]) -> list[bytes]:
    """orjson's ``rows`` of a block as Jackson writes them; one look over the whole block
    first (a backslash, then ``\\u00``: looking for the one byte is 50 times faster)."""
    joined = b"".join(rows)
    if (joined.find(b"\\") < 0 or joined.find(b"\\u00") < 0) and joined.isascii():
        return rows
    return [_as_jackson(r) if r.find(b"\\u00") >= 0 or not r.isascii() else r for r in rows]


def _as_jackson(out: bytes) -> bytes:
    if b"\\u00" in out:
        out = _LOWER_ESCAPE.sub(lambda m: m.group(1) + b"\\u00" + m.group(2).upper(), out)
    if not out.isascii():
        out = _ASTRAL.sub(_surrogates, out)
    return out


def _payload(schema: Schema, to_json: ToJson) -> Payload:
    """The JSON bytes of a value of ``schema``: for a plain STRING (FileSource's lines, the
    commonest typed value) a str goes straight to orjson; the rest through ``to_json``."""
    if schema.type is SchemaType.STRING and schema.name is None:
        dumps = orjson.dumps

        def string(value: Any) -> bytes:
            if type(value) is str:
                out = dumps(value)
                if len(out) == len(value) + 2 and value.isascii():
                    return out  # ASCII, nothing escaped: no escape to fix (the common line)
                # find, not ``in``: on Python 3.11 ``bytes in bytes`` first tries the
                # needle as an int and clears the TypeError (0.24 µs a record, find 0.14)
                if out.find(b"\\u00") >= 0 or not out.isascii():
                    return _as_jackson(out)
                return out
            return _dumps(to_json(value))

        return string
    return lambda value: _dumps(to_json(value))
