"""Converters without a format of their own: strings, raw bytes, numbers, and Connect's
default header converter.

``string`` (Connect's ``StringConverter``) writes ``str(value)`` in ``converter.encoding``
(UTF-8 by default) and passes ``bytes`` through; ``bytes`` (Connect's
``ByteArrayConverter``) passes ``bytes``/``bytearray``/``memoryview`` through and refuses
anything else. Connect's number converters (``ShortConverter``, ``IntegerConverter``,
``LongConverter``, ``FloatConverter``, ``DoubleConverter``, ``BooleanConverter``) write
what Kafka's serializers of those types write: big-endian two's complement in 2, 4 or 8
bytes, IEEE 754 in 4 or 8, a boolean in one byte (1 or 0). ``SimpleHeaderConverter``
writes a header value as its text (:func:`~eos.transforms.value_text.connect_string`)
and reads text back as Connect's ``Values.parseString`` does. All write None as a null.
"""

from __future__ import annotations

import codecs
import math
import struct
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from eos.api.schema import Schema, SchemaType
from eos.converters.base import Headers, SchemaConverter
from eos.errors import ConfigError, DataError
from eos.transforms.value_text import header_bytes, parse_string


class _SchemaBlind(SchemaConverter):
    """A converter that writes a value the same whatever its schema says."""

    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Headers | None = None
    ) -> bytes | None:
        return self.convert(topic, value)


class StringConverter(_SchemaBlind):
    SETTINGS = frozenset({"converter.encoding"})

    def __init__(self) -> None:
        self.encoding = "utf-8"

    def configure(self, props: Mapping[str, str], is_key: bool) -> None:
        super().configure(props, is_key)
        encoding = props.get("converter.encoding", "UTF-8")
        try:
            self.encoding = codecs.lookup(encoding).name
        except LookupError:
            raise ConfigError("converter.encoding", encoding, "must be a known encoding") from None

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


class NumberConverter(_SchemaBlind):
    """One of Connect's number converters: a value of one Java type in Kafka's serializer
    layout (:attr:`layout`, big-endian ``struct`` format)."""

    layout: ClassVar[str]
    java_type: ClassVar[str]
    schema_type: ClassVar[SchemaType]

    def convert(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        if not self.fits(value):
            raise DataError(
                f"Failed to serialize to {self.java_type} (was {type(value).__name__}): {value!r}"
            )
        return struct.pack(self.layout, value)

    def fits(self, value: Any) -> bool:
        if isinstance(value, bool):
            return False
        if not isinstance(value, int):
            return False
        bits = struct.calcsize(self.layout) * 8 - 1
        return -(1 << bits) <= value < (1 << bits)

    def reader(self) -> Callable[[bytes], Any]:
        """Its bytes read back as the number (:mod:`eos.columns.decode`)."""
        layout, size = self.layout, struct.calcsize(self.layout)

        def read(data: bytes) -> Any:
            if len(data) != size:
                raise DataError(
                    f"Size of data received by {self.java_type}Deserializer is not {size}"
                )
            return struct.unpack(layout, data)[0]

        return read

    def to_connect_header(self, topic: str, header: str, data: bytes | None) -> tuple[Any, Any]:
        if data is None:
            return None, None
        return Schema(self.schema_type, optional=True), self.reader()(data)


class ShortConverter(NumberConverter):
    layout, java_type, schema_type = ">h", "Short", SchemaType.INT16


class IntegerConverter(NumberConverter):
    layout, java_type, schema_type = ">i", "Integer", SchemaType.INT32


class LongConverter(NumberConverter):
    layout, java_type, schema_type = ">q", "Long", SchemaType.INT64


class FloatConverter(NumberConverter):
    layout, java_type, schema_type = ">f", "Float", SchemaType.FLOAT32

    def fits(self, value: Any) -> bool:
        """A float or int, within float32's range (or not finite)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return not math.isfinite(value) or abs(value) <= 3.4028234663852886e38


class DoubleConverter(NumberConverter):
    layout, java_type, schema_type = ">d", "Double", SchemaType.FLOAT64

    def fits(self, value: Any) -> bool:
        return not isinstance(value, bool) and isinstance(value, int | float)


class BooleanConverter(NumberConverter):
    layout, java_type, schema_type = ">?", "Boolean", SchemaType.BOOLEAN

    def fits(self, value: Any) -> bool:
        return isinstance(value, bool)

    def reader(self) -> Callable[[bytes], Any]:
        def read(data: bytes) -> bool:
            if len(data) != 1:
                raise DataError("Size of data received by BooleanDeserializer is not 1")
            if data not in (b"\x00", b"\x01"):
                raise DataError("Unexpected byte received by BooleanDeserializer: " + data.hex())
            return data == b"\x01"

        return read


class SimpleHeaderConverter(SchemaConverter):
    """Connect's default ``header.converter``: a value as its text in UTF-8 (numbers as
    Java prints them, bytes in base64, lists, maps and structs in Connect's text forms,
    dates in ISO 8601); text read back typed (:func:`~eos.transforms.value_text.parse_string`)."""

    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Headers | None = None
    ) -> bytes | None:
        return header_bytes(value, schema)

    def to_connect_header(self, topic: str, header: str, data: bytes | None) -> tuple[Any, Any]:
        if data is None:
            return None, None
        return parse_string(data.decode("utf-8"))

    def reader(self) -> Callable[[bytes], Any]:
        """Its bytes read back typed, without the schema."""
        return lambda data: parse_string(data.decode("utf-8"))[1]
