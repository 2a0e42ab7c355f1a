"""Key and value converters: Python values from connectors → bytes for Kafka.

``json`` (default) writes compact JSON (``bytes`` values as base64 strings,
datetimes as ISO-8601); ``string`` writes ``str(value)`` as UTF-8; ``bytes``
passes ``bytes``/``bytearray``/``memoryview`` through and rejects anything
else. A dotted path (``package.module:Class`` or ``package.module.Class``)
names a custom class with a ``convert(topic, value) -> bytes | None`` method.
``None`` always converts to ``None`` (a Kafka null).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import uuid
from typing import Any, Protocol

from eos.errors import PluginError
from eos.runtime.plugins import load_class


class Converter(Protocol):
    def convert(self, topic: str, value: Any) -> bytes | None: ...


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


_COMPACT = json.JSONEncoder(separators=(",", ":"), default=_json_default)


class JsonConverter:
    def convert(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        # One shared encoder: json.dumps with options builds a new one per call.
        return _COMPACT.encode(value).encode()


class StringConverter:
    def convert(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, bytes):
            return value
        return str(value).encode()


class BytesConverter:
    def convert(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
        raise TypeError(f"the bytes converter needs bytes, got {type(value).__name__}")


CONVERTERS: dict[str, type[Converter]] = {
    "json": JsonConverter,
    "string": StringConverter,
    "bytes": BytesConverter,
}


def make_converter(name: str) -> Converter:
    """The converter called ``name`` (json, string, bytes) or at dotted path ``name``."""
    builtin = CONVERTERS.get(name.lower())
    if builtin is not None:
        return builtin()
    cls = load_class(name)
    instance = cls()
    if not callable(getattr(instance, "convert", None)):
        raise PluginError(f"converter {name!r} has no convert(topic, value) method")
    converter: Converter = instance
    return converter
