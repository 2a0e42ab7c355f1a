"""Reading encoded rows back, for the transforms that read keys or values: a block a
connector hands over already encoded in its converters' format (SparkSource's JSON,
VerifiableSource's blocks) becomes records of Connect values when such a transform meets
it (:class:`~eos.transforms.BlockDecoder`).

A converter offers a ``reader()``: a function from its bytes back to a value, or None
where its bytes do not read back without a schema. ``json`` without ``schemas.enable``
(objects become ``dict``s), ``string`` (text in ``converter.encoding``) and ``bytes``
offer one; :func:`decoder_for` answers None for any other pair of converters (validation
then refuses such transforms for such a connector:
:func:`eos.converters.decodable`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eos.api.records import RecordBlock, SourceRecord

Decode = Callable[[bytes], Any]


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


def _reader(converter: object) -> Decode | None:
    offer = getattr(converter, "reader", None)
    return offer() if callable(offer) else None


def decoder_for(keys: object, values: object) -> RowDecoder | None:
    """A decoder for rows ``keys`` and ``values`` encoded, or None if one cannot read."""
    key, value = _reader(keys), _reader(values)
    if key is None or value is None:
        return None
    return RowDecoder(key, value)
