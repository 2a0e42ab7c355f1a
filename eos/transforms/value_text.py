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
