"""Dead letters of source records: what ``errors.deadletterqueue.topic.name`` receives
for a record ``errors.tolerance=all`` skipped (docs/transforms.md, "Errors and dead letters").

A source record never had bytes of its own, so a dead letter holds **the record as the
failing step received it**: the record the connector handed over for a transform that
failed, the transformed record for a converter that failed. Its key and value are JSON,
readable without the connector's converters or a schema registry:

- a value (or key) with a schema: Connect's JSON with the schema envelope,
  ``{"schema": …, "payload": …}`` (what ``JsonConverter`` with ``schemas.enable=true``
  writes);
- without a schema, or not fitting it: plain JSON (datetimes ISO-8601, Decimals as
  strings, bytes base64);
- already encoded by the connector (``encoded=True``): the bytes as handed over;
- a value that cannot be written so (the poison itself, often): its ``repr`` as a JSON
  string; None stays a Kafka null.

The record's own headers come first; with
``errors.deadletterqueue.context.headers.enable=true`` Kafka Connect's context headers
follow (the names of Connect's ``DeadLetterQueueReporter``: ``__connect.errors.topic``,
``.partition``, ``.offset``, ``.connector.name``, ``.task.id``, ``.stage``,
``.class.name``, ``.exception.class.name``, ``.exception.message``,
``.exception.stacktrace``), then eos's ``__eos.errors.source.partition`` and
``__eos.errors.source.offset`` (JSON; a source record has no Kafka offset, so Connect's
``offset`` header is ``-1``). The timestamp is the record's.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from eos.api import SourceRecord
from eos.api.schema import Schema
from eos.converters.json import ConnectJsonConverter
from eos.converters.json_values import dumps_schemaless
from eos.transforms.value_text import header_bytes

Stage = Literal["TRANSFORMATION", "HEADER_CONVERTER", "KEY_CONVERTER", "VALUE_CONVERTER"]
"""Where a record failed, with Kafka Connect's stage names."""

CONNECT = "__connect.errors."
EOS = "__eos.errors."


@dataclass(frozen=True)
class Failure:
    """A record that failed: the record as the step received it, the stage, the step's
    name (a transform's ``transforms.<alias>.type``, a converter's class name), and the
    step's own error."""

    record: SourceRecord
    stage: Stage
    step: str
    error: BaseException


class DeadLetters:
    """Makes the dead letters of one task."""

    def __init__(self, topic: str, connector: str, task_id: int, context_headers: bool) -> None:
        self.topic = topic
        self.connector = connector
        self.task_id = str(task_id).encode()
        self.context_headers = context_headers
        self._json = ConnectJsonConverter()

    def of(self, failure: Failure) -> SourceRecord:
        """The dead letter of ``failure`` (never raises for a strange record)."""
        record = failure.record
        key = self._bytes(record.key, record.key_schema, record.encoded)
        value = self._bytes(record.value, record.value_schema, record.encoded)
        headers = [(name, _header_text(v)) for name, v in record.headers]
        if self.context_headers:
            headers += self.context(failure)
        return SourceRecord(
            record.source_partition, None, self.topic, value, key,
            timestamp=record.timestamp, headers=headers, encoded=True,
        )  # fmt: skip

    def context(self, failure: Failure) -> list[tuple[str, bytes | None]]:
        """Connect's context headers, then eos's."""
        record, error = failure.record, failure.error
        partition = -1 if record.partition is None else record.partition
        shown = [
            ("topic", record.topic),
            ("partition", str(partition)),
            ("offset", "-1"),
            ("connector.name", self.connector),
        ]
        headers: list[tuple[str, bytes | None]] = [(CONNECT + n, v.encode()) for n, v in shown]
        headers.append((CONNECT + "task.id", self.task_id))
        for name, text in (
            ("stage", failure.stage),
            ("class.name", failure.step),
            ("exception.class.name", qualified_name(error)),
            ("exception.message", str(error)),
            ("exception.stacktrace", "".join(traceback.format_exception(error))),
        ):
            headers.append((CONNECT + name, text.encode("utf-8", "replace")))
        headers.append((EOS + "source.partition", _json(record.source_partition)))
        headers.append((EOS + "source.offset", _json(record.source_offset)))
        return headers

    def _bytes(self, value: Any, schema: Schema | None, encoded: bool) -> bytes | None:
        if value is None:
            return None
        if encoded and isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
        if schema is not None:
            try:
                return self._json.from_connect_data(self.topic, schema, value)
            except Exception:
                pass  # the value does not fit its schema: as it is
        try:
            return dumps_schemaless(value)
        except Exception:
            return orjson.dumps(repr(value))


def qualified_name(error: BaseException) -> str:
    kind = type(error)
    return (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )


def _json(value: Any) -> bytes:
    try:
        return dumps_schemaless(None if value is None else dict(value))
    except Exception:
        return orjson.dumps(repr(value))


def _header_text(value: Any) -> bytes | None:
    """A header value as bytes: as it is, or (a Connect value the header converter failed
    on) its text as Connect's SimpleHeaderConverter writes it, else its ``repr``."""
    if value is None or type(value) is bytes:
        return value
    try:
        return header_bytes(value)
    except Exception:
        return repr(value).encode()
