"""PostgreSQL column types as Debezium's PostgreSQL connector maps them, with its default
settings (``decimal.handling.mode=precise``, ``time.precision.mode=adaptive``,
``binary.handling.mode=bytes``, ``interval.handling.mode=numeric``): the Connect schema of a
column, and its value from the column's text.

Every value, snapshot or stream, comes from the same text: the server's output function,
which is what ``pgoutput`` sends and what ``SELECT col::text`` returns. The sessions that
produce it pin what the text depends on (:data:`SESSION_SETTINGS`: ISO dates, UTC,
ISO 8601 intervals, shortest exact floats), so a row reads the same in both phases.

A column of a type not listed here is left out of the record, as Debezium does with
``include.unknown.datatypes=false`` (its default); the task logs it once per table.
"""

from __future__ import annotations

import datetime
import decimal
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eos.api import Schema, SchemaBuilder, Struct

SESSION_SETTINGS = (
    "-c DateStyle=ISO -c TimeZone=UTC -c IntervalStyle=iso_8601 -c extra_float_digits=1"
)
"""``options`` for every connection whose text the connector reads."""

UNAVAILABLE = "__debezium_unavailable_value"
"""Debezium's ``unavailable.value.placeholder``: an unchanged TOASTed text that the
server did not send with an update."""

_EPOCH = datetime.date(1970, 1, 1)
_EPOCH_TIME = datetime.datetime(1970, 1, 1)
_DAYS_PER_MONTH = 365.25 / 12
_MICROS_PER_DAY = 86_400_000_000

Parse = Callable[[str], Any]


@dataclass(frozen=True)
class ColumnType:
    """What the catalog says of a column's type (:mod:`.catalog`)."""

    name: str
    """``pg_type.typname`` (of the element, for an array)."""
    typmod: int
    array: bool = False
    enum_labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class Mapped:
    """A column as it appears in records: its optional-ness is the column's."""

    builder: Callable[[], SchemaBuilder]
    parse: Parse
    fallback: Any = None
    """The value of a NOT NULL column the server did not send (the non-key columns of a
    deleted row's ``before``): Debezium's fallback for the type."""
    bind: Callable[[Schema], Parse] | None = None
    """For a type whose values are Structs: the parser for the column's own schema."""

    def parser(self, schema: Schema) -> Parse:
        return self.parse if self.bind is None else self.bind(schema)


def _named(base: Callable[[], SchemaBuilder], name: str) -> Callable[[], SchemaBuilder]:
    return lambda: base().name(name).version(1)


def _decimal_bytes(unscaled: int) -> bytes:
    size = max(1, (unscaled.bit_length() + 8) // 8)
    return unscaled.to_bytes(size, "big", signed=True)


def _numeric(typmod: int) -> Mapped:
    if typmod < 4:  # numeric without a precision: Debezium's VariableScaleDecimal

        def variable() -> SchemaBuilder:
            return (
                SchemaBuilder.struct()
                .name("io.debezium.data.VariableScaleDecimal")
                .version(1)
                .doc("Variable scaled decimal")
                .field("scale", SchemaBuilder.int32().build())
                .field("value", SchemaBuilder.bytes().build())
            )

        def bind(schema: Schema) -> Parse:
            def parse_variable(text: str) -> Any:
                if text == "NaN":
                    return None
                value = decimal.Decimal(text).normalize()  # trailing zeros off, as Debezium
                if value.as_tuple().exponent > 0:  # type: ignore[operator]
                    value = value.quantize(1)
                sign, digits, exponent = value.as_tuple()
                assert isinstance(exponent, int)
                unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
                return Struct(schema, {"scale": -exponent, "value": _decimal_bytes(unscaled)})

            return parse_variable

        return Mapped(variable, bind(variable().build()), bind=bind)
    precision, scale = (typmod - 4) >> 16, (typmod - 4) & 0xFFFF

    def fixed() -> SchemaBuilder:
        return (
            SchemaBuilder.bytes()
            .name("org.apache.kafka.connect.data.Decimal")
            .version(1)
            .parameter("scale", str(scale))
            .parameter("connect.decimal.precision", str(precision))
        )

    quantum = decimal.Decimal(1).scaleb(-scale)
    return Mapped(
        fixed, lambda text: None if text == "NaN" else decimal.Decimal(text).quantize(quantum)
    )


def _money(text: str) -> decimal.Decimal:
    negative = text.startswith(("-", "("))
    digits = re.sub(r"[^0-9.]", "", text)
    value = decimal.Decimal(digits).quantize(decimal.Decimal("0.01"))
    return -value if negative else value


def _float(text: str) -> float:
    return float({"Infinity": "inf", "-Infinity": "-inf"}.get(text, text))


def _date(text: str) -> int:
    return (datetime.date.fromisoformat(text) - _EPOCH).days


def _timestamp_micros(text: str) -> int:
    moment = datetime.datetime.fromisoformat(text)
    delta = moment.replace(tzinfo=None) - _EPOCH_TIME
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _time_micros(text: str) -> int:
    if text.startswith("24:00:00"):
        return _MICROS_PER_DAY
    moment = datetime.time.fromisoformat(text)
    seconds = moment.hour * 3600 + moment.minute * 60 + moment.second
    return seconds * 1_000_000 + moment.microsecond


def _precision(typmod: int) -> int:
    return 6 if typmod < 0 else typmod


def _zoned_timestamp(width: int) -> Parse:
    def parse(text: str) -> str:
        moment = datetime.datetime.fromisoformat(text).astimezone(datetime.UTC)
        return _iso(moment.strftime("%Y-%m-%dT%H:%M:%S"), moment.microsecond, width) + "Z"

    return parse


def _zoned_time(width: int) -> Parse:
    def parse(text: str) -> str:
        moment = datetime.datetime.fromisoformat(f"2000-01-01T{text}")
        utc = moment.astimezone(datetime.UTC)
        return _iso(utc.strftime("%H:%M:%S"), utc.microsecond, width) + "Z"

    return parse


def _iso(whole: str, micros: int, width: int) -> str:
    """``whole`` with a fraction of ``width`` digits (Debezium's formatter for a column of
    that precision), or, for width 0, as many as needed (Java's ISO format)."""
    if width > 0:
        digits = f"{micros:06d}000"[:width]
        return f"{whole}.{digits}"
    return f"{whole}.{f'{micros:06d}'.rstrip('0')}" if micros else whole


_INTERVAL = re.compile(
    r"P(?:(?P<y>-?\d+)Y)?(?:(?P<mo>-?\d+)M)?(?:(?P<d>-?\d+)D)?"
    r"(?:T(?:(?P<h>-?\d+)H)?(?:(?P<mi>-?\d+)M)?(?:(?P<s>-?[\d.]+)S)?)?"
)


def _interval_micros(text: str) -> int:
    """An ISO 8601 interval (``IntervalStyle=iso_8601``) in microseconds, computed as
    Debezium's ``MicroDuration`` computes it: in doubles, a month being 365.25 / 12 days,
    truncated (so a long interval rounds as Debezium's does)."""
    match = _INTERVAL.fullmatch(text)
    if match is None:
        raise ValueError(f"not an ISO 8601 interval: {text!r}")
    part = {k: v or "0" for k, v in match.groupdict().items()}
    days = (int(part["y"]) * 12 + int(part["mo"])) * _DAYS_PER_MONTH + int(part["d"])
    seconds = ((days * 24 + int(part["h"])) * 60 + int(part["mi"])) * 60 + float(part["s"])
    return int(seconds * 1e6)


def _bytea(text: str) -> bytes:
    return bytes.fromhex(text[2:]) if text.startswith("\\x") else text.encode()


_TEXT = {
    "text", "varchar", "bpchar", "char", "name", "citext", "inet", "cidr", "macaddr",
    "macaddr8", "ltree", "tsvector", "point", "line", "lseg", "box", "path", "polygon",
    "circle",
}  # fmt: skip
_NAMED_TEXT = {"json": "io.debezium.data.Json", "jsonb": "io.debezium.data.Json",
               "uuid": "io.debezium.data.Uuid", "xml": "io.debezium.data.Xml"}  # fmt: skip


_FALLBACKS: dict[str, Any] = {"bool": False, "float4": 0.0, "float8": 0.0, "bytea": b""}


def map_type(column: ColumnType) -> Mapped | None:
    """How Debezium writes a column of this type, or None for a type it leaves out."""
    element = _element(column)
    if element is None or not column.array:
        return element

    item_schema = element.builder().optional().build()
    parse_item = element.parser(item_schema)

    def array() -> SchemaBuilder:
        return SchemaBuilder.array(item_schema)

    return Mapped(array, lambda text: [None if item is None else parse_item(item)
                                      for item in parse_array(text)], [])  # fmt: skip


def _element(column: ColumnType) -> Mapped | None:
    name, typmod = column.name, column.typmod
    simple: dict[str, tuple[Callable[[], SchemaBuilder], Parse]] = {
        "bool": (SchemaBuilder.bool, lambda t: t == "t"),
        "int2": (SchemaBuilder.int16, int),
        "int4": (SchemaBuilder.int32, int),
        "int8": (SchemaBuilder.int64, int),
        "oid": (SchemaBuilder.int64, int),
        "float4": (SchemaBuilder.float32, _float),
        "float8": (SchemaBuilder.float64, _float),
        "bytea": (SchemaBuilder.bytes, _bytea),
        "date": (_named(SchemaBuilder.int32, "io.debezium.time.Date"), _date),
        "interval": (
            _named(SchemaBuilder.int64, "io.debezium.time.MicroDuration"),
            _interval_micros,
        ),
    }
    if name in simple:
        builder, parse = simple[name]
        return Mapped(builder, parse, _FALLBACKS.get(name, 0))
    if name in _TEXT:
        return Mapped(SchemaBuilder.string, str, "")
    if name in _NAMED_TEXT:
        return Mapped(_named(SchemaBuilder.string, _NAMED_TEXT[name]), str, "")
    if name == "numeric":
        return _numeric(typmod)
    if name == "money":

        def money() -> SchemaBuilder:
            return (
                SchemaBuilder.bytes().name("org.apache.kafka.connect.data.Decimal").version(1)
                .parameter("scale", "2")
            )  # fmt: skip

        return Mapped(money, _money)
    if name == "timestamp":
        if _precision(typmod) <= 3:
            return Mapped(
                _named(SchemaBuilder.int64, "io.debezium.time.Timestamp"),
                lambda t: _timestamp_micros(t) // 1000,
            )
        return Mapped(_named(SchemaBuilder.int64, "io.debezium.time.MicroTimestamp"),
                      _timestamp_micros)  # fmt: skip
    if name == "timestamptz":
        return Mapped(
            _named(SchemaBuilder.string, "io.debezium.time.ZonedTimestamp"),
            _zoned_timestamp(_precision(typmod)),
        )
    if name == "time":
        if _precision(typmod) <= 3:
            return Mapped(
                _named(SchemaBuilder.int32, "io.debezium.time.Time"),
                lambda t: _time_micros(t) // 1000,
            )
        return Mapped(_named(SchemaBuilder.int64, "io.debezium.time.MicroTime"), _time_micros)
    if name == "timetz":
        return Mapped(
            _named(SchemaBuilder.string, "io.debezium.time.ZonedTime"),
            _zoned_time(_precision(typmod)),
        )
    if column.enum_labels:
        labels = ",".join(column.enum_labels)
        return Mapped(
            lambda: _named(SchemaBuilder.string, "io.debezium.data.Enum")().parameter(
                "allowed", labels
            ),
            str,
        )
    return None


def parse_array(text: str) -> list[str | None]:
    """The elements of a one-dimensional array's text (``{1,2,NULL}``, ``{"a b",c}``),
    unquoted; NULL as None."""
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError(f"not an array literal: {text!r}")
    items: list[str | None] = []
    body, at = text[1:-1], 0
    if not body:
        return items
    while at <= len(body):
        if at < len(body) and body[at] == '"':
            at += 1
            chars: list[str] = []
            while body[at] != '"':
                if body[at] == "\\":
                    at += 1
                chars.append(body[at])
                at += 1
            items.append("".join(chars))
            at += 2  # the closing quote and the comma
        else:
            end = body.find(",", at)
            end = len(body) if end < 0 else end
            word = body[at:end]
            items.append(None if word == "NULL" else word)
            at = end + 1
    return items


_NO_DEFAULT = object()


def column_schema(mapped: Mapped, nullable: bool, default: Any = _NO_DEFAULT) -> Schema:
    builder = mapped.builder()
    if nullable:
        builder.optional()
    if default is not _NO_DEFAULT:
        builder.default(default)
    return builder.build()


_QUOTED = re.compile(r"'((?:[^']|'')*)'(?:::[\w .\"\[\]()]+)?")
_NUMBER = re.compile(r"\(?(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\)?(?:::[\w .\"()]+)?")


def default_text(expression: str | None) -> str | None:
    """The constant a column's DEFAULT expression (as ``pg_get_expr`` prints it) stands
    for, in the text the server sends for such a value; None for no default, a NULL one,
    or an expression (``now()``, ``nextval(...)``: Debezium evaluates none either).

    ``'abc'::text`` is ``abc`` (quotes doubled inside), ``42``, ``(-1)`` and
    ``'1.5'::numeric`` are numbers, ``true``/``false`` are ``t``/``f``."""
    if expression is None:
        return None
    text = expression.strip()
    if text in ("true", "false"):
        return text[0]
    quoted = _QUOTED.fullmatch(text)
    if quoted:
        return quoted[1].replace("''", "'")
    number = _NUMBER.fullmatch(text)
    return number[1] if number else None
