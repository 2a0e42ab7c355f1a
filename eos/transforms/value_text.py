"""Connect values as text, the way Kafka Connect's ``Values.convertToString`` writes
them: what its default header converter (``SimpleHeaderConverter``) puts in a header,
and what Cast writes for ``string``. Numbers as Java prints them (``4761.0``,
``6.352170402E7``), bytes in base64, lists ``[1,2]``, maps and structs ``{"a":1}``,
dates and timestamps in ISO 8601 (UTC, milliseconds).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import re
import struct
from collections.abc import Mapping
from typing import Any

from eos.api.schema import Schema, SchemaType, Struct
from eos.transforms.dates import EPOCH, SimpleDateFormat
from eos.transforms.java import java_double, java_float

_DAY_MS = 86_400_000
_DATE = SimpleDateFormat("yyyy-MM-dd")
_TIME = SimpleDateFormat("HH:mm:ss.SSS'Z'")
_TIMESTAMP = SimpleDateFormat("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")


def connect_string(value: Any, schema: Schema | None = None) -> str | None:
    """``value`` as Connect's ``Values.convertToString`` writes it (None stays None)."""
    if value is None:
        return None
    parts: list[str] = []
    _append(parts, value, schema, embedded=False)
    return "".join(parts)


def header_bytes(value: Any, schema: Schema | None = None) -> bytes | None:
    """The header value Connect's ``SimpleHeaderConverter`` writes for ``value``."""
    text = connect_string(value, schema)
    return None if text is None else text.encode()


def epoch_millis(value: datetime.date | datetime.time) -> int:
    """Milliseconds since the epoch of a date (midnight UTC), time (on 1970-01-01) or
    datetime (naive means UTC)."""
    if isinstance(value, datetime.datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
    elif isinstance(value, datetime.date):
        moment = datetime.datetime(value.year, value.month, value.day, tzinfo=datetime.UTC)
    else:
        moment = datetime.datetime.combine(EPOCH.date(), value, datetime.UTC)
    return (moment - EPOCH) // datetime.timedelta(milliseconds=1)


def date_text(value: datetime.date | datetime.time) -> str:
    """Java's ``Values.dateFormatFor``: a time of day before 1970-01-02, a date at
    midnight, a timestamp otherwise."""
    millis = epoch_millis(value)
    if millis < _DAY_MS:
        return _TIME.format_millis(millis)
    if millis % _DAY_MS == 0:
        return _DATE.format_millis(millis)
    return _TIMESTAMP.format_millis(millis)


def _append(out: list[str], value: Any, schema: Schema | None, *, embedded: bool) -> None:
    if value is None:
        out.append("null")
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        is_float32 = schema is not None and schema.type is SchemaType.FLOAT32
        out.append(java_float(value) if is_float32 else java_double(value))
    elif isinstance(value, decimal.Decimal):
        out.append(str(value))
    elif isinstance(value, str):
        out.append(f'"{_escape(value)}"' if embedded else value)
    elif isinstance(value, bytes | bytearray | memoryview):
        text = base64.b64encode(bytes(value)).decode("ascii")
        out.append(f'"{text}"' if embedded else text)
    elif isinstance(value, datetime.date | datetime.time):
        out.append(date_text(value))
    elif isinstance(value, Struct):
        _struct(out, value)
    elif isinstance(value, Mapping):
        _map(out, value, schema)
    elif isinstance(value, list | tuple):
        element = schema.value_schema if schema is not None else None
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _append(out, item, element, embedded=True)
        out.append("]")
    else:
        raise TypeError(f"{type(value).__name__} is not a Connect value")


def _map(out: list[str], value: Mapping[Any, Any], schema: Schema | None) -> None:
    keys = schema.key_schema if schema is not None else None
    values = schema.value_schema if schema is not None else None
    out.append("{")
    for i, (k, v) in enumerate(value.items()):
        if i:
            out.append(",")
        _append(out, k, keys, embedded=True)
        out.append(":")
        _append(out, v, values, embedded=True)
    out.append("}")


def _struct(out: list[str], value: Struct) -> None:
    out.append("{")
    for i, field in enumerate(value.schema.fields):
        if i:
            out.append(",")
        _append(out, field.name, None, embedded=True)
        out.append(":")
        _append(out, value.get(field), field.schema, embedded=True)
    out.append("}")


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


# ------------------------------------------------------------------ text back into values

_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_DATE_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIME_TEXT = re.compile(r"\d{2}:\d{2}:\d{2}\.\d{3}Z")
_TIMESTAMP_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
_INTEGERS = (
    (SchemaType.INT8, 7),
    (SchemaType.INT16, 15),
    (SchemaType.INT32, 31),
    (SchemaType.INT64, 63),
)
_WIDTH = {
    SchemaType.INT8: 0,
    SchemaType.INT16: 1,
    SchemaType.INT32: 2,
    SchemaType.INT64: 3,
    SchemaType.FLOAT32: 4,
    SchemaType.FLOAT64: 5,
}
_FLOAT32_MAX = decimal.Decimal("3.4028234663852886e38")
_FLOAT64_MAX = decimal.Decimal("1.7976931348623157e308")


def parse_string(text: str) -> tuple[Schema | None, Any]:
    """``text`` as Connect's ``Values.parseString`` reads it (what its
    ``SimpleHeaderConverter`` gives for a header's bytes): ``null`` → (None, None); true
    and false; a number as the narrowest of INT8 to INT64 (a whole number, ``1.0`` and
    ``1e3`` too), FLOAT32 or FLOAT64 (a fraction), else a Decimal; ISO dates, times
    (``12:34:56.789Z``) and timestamps; ``[…]`` arrays and ``{…}`` maps of such values (the
    element schema where all agree, numbers widened); anything else the string itself."""
    parsed = _Parser(text).whole()
    return parsed if parsed is not None else (Schema(SchemaType.STRING), text)


def _scalar(token: str) -> tuple[Schema | None, Any] | None:
    if token == "null":
        return None, None
    if token in ("true", "false"):
        return Schema(SchemaType.BOOLEAN), token == "true"
    if _NUMBER.fullmatch(token):
        return _number(token)
    for pattern, logical in ((_TIMESTAMP_TEXT, "ts"), (_DATE_TEXT, "date"), (_TIME_TEXT, "t")):
        if pattern.fullmatch(token):
            return _moment(token, logical)
    return None


def _number(token: str) -> tuple[Schema, Any]:
    from eos.api.logical import Decimal

    number = decimal.Decimal(token)
    if number == number.to_integral_value():
        whole = int(number)
        for kind, bits in _INTEGERS:
            if -(1 << bits) <= whole < (1 << bits):
                return Schema(kind), whole
        if token.lstrip("+-").isdigit():
            return Decimal.schema(0), number
    if abs(number) <= _FLOAT32_MAX:
        return Schema(SchemaType.FLOAT32), struct.unpack("<f", struct.pack("<f", float(number)))[0]
    if abs(number) <= _FLOAT64_MAX:
        return Schema(SchemaType.FLOAT64), float(number)
    exponent = number.as_tuple().exponent
    return Decimal.schema(-exponent if isinstance(exponent, int) else 0), number


def _moment(token: str, logical: str) -> tuple[Schema, Any]:
    from eos.api.logical import Date, Time, Timestamp

    if logical == "date":
        return Date.SCHEMA, datetime.date.fromisoformat(token)
    if logical == "t":
        return Time.SCHEMA, datetime.time.fromisoformat(token[:-1])
    moment = datetime.datetime.fromisoformat(token[:-1]).replace(tzinfo=datetime.UTC)
    return Timestamp.SCHEMA, moment


def _common(schemas: list[Schema | None]) -> Schema | None:
    """The element schema every one fits: the same, or the widest of plain numbers."""
    first = schemas[0]
    if all(s == first for s in schemas):
        return first
    if any(s is None or s.name is not None or s.type not in _WIDTH for s in schemas):
        return None
    return Schema(max((s.type for s in schemas if s is not None), key=_WIDTH.__getitem__))


def _widened(schema: Schema | None, value: Any) -> Any:
    if schema is not None and schema.type in (SchemaType.FLOAT32, SchemaType.FLOAT64):
        return float(value)
    return value


class _Parser:
    """Connect's text forms of arrays and maps, with quoted strings inside."""

    def __init__(self, text: str) -> None:
        self.text, self.at = text, 0

    def whole(self) -> tuple[Schema | None, Any] | None:
        stripped = self.text.strip()
        if not stripped:
            return None
        if stripped[0] in "[{":
            self.text, self.at = stripped, 0
            try:
                found = self.value()
            except ValueError:
                return None
            return found if self.at == len(self.text) else None
        return _scalar(stripped)

    def value(self) -> tuple[Schema | None, Any]:
        self.skip()
        head = self.text[self.at : self.at + 1]
        if head == "[":
            return self.array()
        if head == "{":
            return self.map()
        if head == '"':
            return Schema(SchemaType.STRING), self.quoted()
        start = self.at
        while self.at < len(self.text) and self.text[self.at] not in ",]}:":
            self.at += 1
        token = self.text[start : self.at].strip()
        found = _scalar(token)
        if not token:
            raise ValueError("empty element")
        return found if found is not None else (Schema(SchemaType.STRING), token)

    def quoted(self) -> str:
        out, self.at = [], self.at + 1
        while self.at < len(self.text):
            c = self.text[self.at]
            self.at += 1
            if c == "\\" and self.at < len(self.text):
                out.append(self.text[self.at])
                self.at += 1
            elif c == '"':
                return "".join(out)
            else:
                out.append(c)
        raise ValueError("unterminated string")

    def array(self) -> tuple[Schema | None, Any]:
        self.at += 1
        items: list[tuple[Schema | None, Any]] = []
        while not self.close("]"):
            if items:
                self.expect(",")
            items.append(self.value())
        element = _common([s for s, _ in items]) if items else None
        values = [_widened(element, v) for _, v in items]
        return Schema(SchemaType.ARRAY, value_schema=element), values

    def map(self) -> tuple[Schema | None, Any]:
        self.at += 1
        entries: list[tuple[tuple[Schema | None, Any], tuple[Schema | None, Any]]] = []
        while not self.close("}"):
            if entries:
                self.expect(",")
            key = self.value()
            self.expect(":")
            entries.append((key, self.value()))
        keys = _common([k[0] for k, _ in entries]) if entries else None
        values = _common([v[0] for _, v in entries]) if entries else None
        result = {_widened(keys, k[1]): _widened(values, v[1]) for k, v in entries}
        return Schema(SchemaType.MAP, key_schema=keys, value_schema=values), result

    def skip(self) -> None:
        while self.at < len(self.text) and self.text[self.at].isspace():
            self.at += 1

    def close(self, bracket: str) -> bool:
        self.skip()
        if self.text[self.at : self.at + 1] == bracket:
            self.at += 1
            return True
        if self.at >= len(self.text):
            raise ValueError("unclosed")
        return False

    def expect(self, separator: str) -> None:
        self.skip()
        if self.text[self.at : self.at + 1] != separator:
            raise ValueError(f"expected {separator}")
        self.at += 1
