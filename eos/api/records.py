"""What a source task hands to the framework, and what it gets back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SourcePartition = Mapping[str, Any]
"""A part of the external system one task reads (a file, a table, a topic-partition).
Must be JSON-serialisable; it is the key under which the task's progress is stored."""

SourceOffset = Mapping[str, Any]
"""How far a source partition has been read. Must be JSON-serialisable."""


@dataclass(frozen=True, slots=True)
class SourceRecord:
    """One record for Kafka, with the (partition → offset) pair that describes
    how far the source has been read once this record is written.

    ``key`` and ``value`` are converted by the connector's ``key.converter`` and
    ``value.converter`` (JSON by default). ``partition=None`` lets the producer
    choose; ``timestamp`` is epoch milliseconds or None for the producer's clock.
    A record whose ``source_offset`` is None advances no offset.

    ``encoded=True`` says ``key`` and ``value`` already are the bytes to write
    (``bytes`` or None) and the converters are skipped: for connectors that
    produce the connector's converter format themselves, faster than Python
    could (SparkSource has Spark write the JSON when both converters are ``json``).
    """

    source_partition: SourcePartition
    source_offset: SourceOffset | None
    topic: str
    value: Any
    key: Any = None
    partition: int | None = None
    timestamp: int | None = None
    headers: Sequence[tuple[str, bytes]] = field(default_factory=tuple)
    encoded: bool = False


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where Kafka stored a record."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None = None
