"""Reading encoded rows back, for the transforms that read keys or values: a block a
connector hands over already encoded in its converters' format (SparkSource's JSON,
VerifiableSource's blocks) becomes records of Connect values when such a transform meets
it (:class:`~eos.transforms.BlockDecoder`).

Only formats that read back without a schema can: ``json`` without ``schemas.enable``
(objects become ``dict``s), ``string`` (text in ``converter.encoding``), ``bytes``.
:func:`decoder_for` answers None for any other pair of converters; validation then refuses
such transforms for such a connector, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from eos.api.records import RecordBlock, SourceRecord
from eos.converters.base import Converter
from eos.converters.json import JsonConverter
from eos.converters.simple import BytesConverter, StringConverter

Decode = Callable[[bytes], Any]


def _reader(converter: Converter) -> Decode | None:
    if isinstance(converter, JsonConverter):
        return None if converter.schemas_enable else orjson.loads
    if isinstance(converter, StringConverter):
        encoding = converter.encoding
        return lambda data: data.decode(encoding)
    if isinstance(converter, BytesConverter):
        return bytes
    return None


class RowDecoder:
    """Decodes a block's keys and values with two readers (see the module docstring)."""

    def __init__(self, key: Decode, value: Decode) -> None:
        self.key = key
        self.value = value

    def decode(self, block: RecordBlock) -> list[SourceRecord]:
        key, value = self.key, self.value
        return [
            SourceRecord(
                r.source_partition,
                r.source_offset,
                r.topic,
                None if r.value is None else value(r.value),
                None if r.key is None else key(r.key),
                r.partition,
                r.timestamp,
                r.headers,
            )
            for r in block.records()
        ]


def decoder_for(keys: Converter, values: Converter) -> RowDecoder | None:
    """A decoder for rows ``keys`` and ``values`` encoded, or None if one cannot read."""
    key, value = _reader(keys), _reader(values)
    if key is None or value is None:
        return None
    return RowDecoder(key, value)


def decodable(key_converter: str, value_converter: str, props: Mapping[str, Any]) -> bool:
    """Whether rows written by these converters (as named in a connector's settings) can
    be read back (for validation, which has no converter instances)."""
    for which, name in (("key", key_converter), ("value", value_converter)):
        short = name.strip().lower()
        if short in ("string", "bytes") or name in (
            "org.apache.kafka.connect.storage.StringConverter",
            "org.apache.kafka.connect.converters.ByteArrayConverter",
        ):
            continue
        schemas = str(props.get(f"{which}.converter.schemas.enable", "false")).strip().lower()
        if short == "json" and schemas != "true":
            continue
        return False
    return True
