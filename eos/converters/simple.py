"""Converters without a format of their own: strings and raw bytes.

``string`` (Connect's ``StringConverter``) writes ``str(value)`` in ``converter.encoding``
(UTF-8 by default) and passes ``bytes`` through; ``bytes`` (Connect's
``ByteArrayConverter``) passes ``bytes``/``bytearray``/``memoryview`` through and refuses
anything else. Both write None as a Kafka null.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Mapping
from typing import Any

from eos.api.schema import Schema, SchemaType
from eos.converters.base import Headers, SchemaConverter
from eos.errors import ConfigError, DataError


class StringConverter(SchemaConverter):
    def __init__(self) -> None:
        self.encoding = "utf-8"

    def configure(self, props: Mapping[str, str], is_key: bool) -> None:
        super().configure(props, is_key)
        encoding = props.get("converter.encoding", "UTF-8")
        try:
            self.encoding = codecs.lookup(encoding).name
        except LookupError:
            raise ConfigError("converter.encoding", encoding, "must be a known encoding") from None

    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Headers | None = None
    ) -> bytes | None:
        return self.convert(topic, value)

    def convert(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, bytes):
            return value
        return str(value).encode(self.encoding)

    def reader(self) -> Callable[[bytes], Any]:
        """Its bytes read back as text (:mod:`eos.columns.decode`)."""
        encoding = self.encoding
        return lambda data: data.decode(encoding)


class BytesConverter(SchemaConverter):
    def reader(self) -> Callable[[bytes], Any]:
        """Its bytes as they are (:mod:`eos.columns.decode`)."""
        return bytes

    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Headers | None = None
    ) -> bytes | None:
        if schema is not None and schema.type is not SchemaType.BYTES:
            raise DataError(f"Invalid schema type for ByteArrayConverter: {schema.type.name}")
        return self.convert(topic, value)

    def convert(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
        raise DataError(f"the bytes converter needs bytes, got {type(value).__name__}")
