"""What the schema-registry converters share: Confluent's wire format, subject names, and
the settings ``auto.register.schemas``, ``use.latest.version`` and
``key.subject.name.strategy`` / ``value.subject.name.strategy``.

Wire format: byte 0 (the magic byte), the schema id (4 bytes, big-endian), for Protobuf
the message indexes (a zig-zag varint count then each index; ``[0]`` — the first message
— as the single byte 0), then the encoded value.

Subject name strategies (Confluent's class names, or the short ones):
``TopicNameStrategy`` (default) ``<topic>-key`` / ``<topic>-value``;
``RecordNameStrategy`` the record's full name; ``TopicRecordNameStrategy``
``<topic>-<full name>``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eos.api.schema import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT64_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    Schema,
    Struct,
    column_values,
)
from eos.converters.base import Headers, SchemaConverter, flag
from eos.converters.schema_registry import RegistryClient, RegistrySchema
from eos.errors import ConfigError, DataError, SchemaRegistryError

SubjectName = Callable[[str, bool, "str | None"], str]
_PACKAGE = "io.confluent.kafka.serializers.subject."


def _topic(topic: str, is_key: bool, record: str | None) -> str:
    return f"{topic}-{'key' if is_key else 'value'}"


def _record(topic: str, is_key: bool, record: str | None) -> str:
    if record is None:
        raise DataError("RecordNameStrategy needs a named record schema (give the schema a name)")
    return record


def _topic_record(topic: str, is_key: bool, record: str | None) -> str:
    return f"{topic}-{_record(topic, is_key, record)}"


STRATEGIES: dict[str, SubjectName] = {
    "TopicNameStrategy": _topic,
    "RecordNameStrategy": _record,
    "TopicRecordNameStrategy": _topic_record,
}


def subject_strategy(props: Mapping[str, str], is_key: bool) -> SubjectName:
    key = f"{'key' if is_key else 'value'}.subject.name.strategy"
    raw = str(props.get(key, "TopicNameStrategy")).strip()
    found = STRATEGIES.get(raw.removeprefix(_PACKAGE))
    if found is None:
        raise ConfigError(key, raw, "must be TopicNameStrategy, RecordNameStrategy or "
                          f"TopicRecordNameStrategy (optionally as {_PACKAGE}<name>)")  # fmt: skip
    return found


def zigzag_varint(n: int) -> bytes:
    """``n`` as a zig-zag varint (Avro's and Protobuf's sint encoding)."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def wire_header(schema_id: int, message_indexes: Sequence[int] | None = None) -> bytes:
    """Magic byte, schema id and (Protobuf) message indexes."""
    header = b"\x00" + schema_id.to_bytes(4, "big")
    if message_indexes is None:
        return header
    if list(message_indexes) == [0]:
        return header + b"\x00"
    return (
        header
        + zigzag_varint(len(message_indexes))
        + b"".join(zigzag_varint(i) for i in message_indexes)
    )


_INFERRED = {bool: BOOLEAN_SCHEMA, int: INT64_SCHEMA, float: FLOAT64_SCHEMA, str: STRING_SCHEMA,
             bytes: BYTES_SCHEMA}  # fmt: skip


def schema_of(value: Any, what: str) -> Schema:
    """The schema of a value that came without one: a Struct's own, or that of a
    primitive; a registry format cannot write anything else without a schema."""
    if isinstance(value, Struct):
        return value.schema
    found = _INFERRED.get(type(value))
    if found is None:
        raise DataError(
            f"the {what} converter needs a schema for a {type(value).__name__} value: declare "
            "key_schema/value_schema on the record, or hand over a Struct"
        )
    return found


@dataclass(frozen=True)
class Translated:
    """A Connect schema in the converter's format: what to register, the record's full
    name (for the record strategies), the Protobuf message indexes, and the format's own
    compiled form (what :meth:`RegistryConverter.encoder` needs)."""

    registry_schema: RegistrySchema
    record_name: str | None
    compiled: Any
    message_indexes: Sequence[int] | None = None


Encode = Callable[[Any], bytes]


@dataclass(frozen=True)
class Writer:
    header: bytes
    encode: Encode
    translated: Translated


class RegistryConverter(SchemaConverter):
    """The registry converters' common part; a format supplies :meth:`translate` and
    :meth:`encoder` (and may supply :meth:`encode_column` for whole blocks)."""

    converts_headers = False  # as Confluent's: not a HeaderConverter

    FORMAT = ""

    def __init__(self) -> None:
        self.client: RegistryClient | None = None
        self.auto_register = True
        self.use_latest = False
        self.subject_name: SubjectName = _topic
        self._writers: dict[tuple[str, Schema], Writer] = {}
        self._refused: dict[tuple[str, Schema], str] = {}
        """Schemas the registry refused to register (asked once per task: a refusal is for
        good). A schema it does not hold (``auto.register.schemas=false``,
        ``use.latest.version``) is asked again: someone may register it meanwhile."""

    def configure(self, props: Mapping[str, str], is_key: bool) -> None:
        super().configure(props, is_key)
        if self.client is not None:
            self.client.close()
        self.client = RegistryClient.from_settings(props)
        self.auto_register = flag(props, "auto.register.schemas", True)
        self.use_latest = flag(props, "use.latest.version", False)
        self.subject_name = subject_strategy(props, is_key)
        self._writers.clear()
        self._refused.clear()

    def close(self) -> None:
        if self.client is not None:
            self.client.close()

    def probe(self) -> None:
        """Reach the registry (see :meth:`RegistryClient.probe`)."""
        if self.client is not None:
            self.client.probe()

    def known(self, topic: str, schema: Schema) -> bool:
        """Whether writing values of ``schema`` to ``topic`` needs no registry request."""
        key = (topic, schema)
        return key in self._writers or key in self._refused

    def translate(self, schema: Schema) -> Translated:
        raise NotImplementedError

    def encoder(self, translated: Translated, latest: RegistrySchema | None) -> Encode:
        """The function from a Connect value to the format's bytes (``latest``: the
        subject's latest schema to write with, under ``use.latest.version``)."""
        raise NotImplementedError

    def with_references(self, translated: Translated) -> RegistrySchema:
        """The schema to register, once what it imports is registered (Protobuf's
        dependencies; nothing for the other formats)."""
        return translated.registry_schema

    def writer(self, topic: str, schema: Schema) -> Writer:
        key = (topic, schema)
        found = self._writers.get(key)
        if found is None:
            refused = self._refused.get(key)
            if refused is not None:
                raise SchemaRegistryError(refused)
            try:
                found = self._writers[key] = self._new_writer(topic, schema)
            except SchemaRegistryError as exc:
                if self.auto_register and not self.use_latest:
                    self._refused[key] = str(exc)
                raise
        return found

    def _new_writer(self, topic: str, schema: Schema) -> Writer:
        client = self.client
        if client is None:
            raise ConfigError(f"{self.FORMAT} converter", None, "was not configured")
        translated = self.translate(schema)
        subject = self.subject_name(topic, self.is_key, translated.record_name)
        latest = None
        if self.use_latest:
            registered = client.latest(subject)
            schema_id, latest = registered.schema_id, registered.schema
        else:
            register = client.register if self.auto_register else client.lookup
            schema_id = register(subject, self.with_references(translated))
        header = wire_header(schema_id, translated.message_indexes)
        return Writer(header, self.encoder(translated, latest), translated)

    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Headers | None = None
    ) -> bytes | None:
        if value is None:
            return None
        if schema is None:
            schema = schema_of(value, self.FORMAT)
        writer = self.writer(topic, schema)
        return writer.header + writer.encode(value)

    def from_connect_block(
        self, topic: str, schema: Schema | None, column: Any
    ) -> list[bytes | None]:
        """Every row of a block's column row by row, the writer looked up once (hashing a
        schema to find it walks all of it: 5 µs a row for SparkSource's sample rows)."""
        if schema is None:
            return super().from_connect_block(topic, schema, column)
        values = column_values(schema, column)
        if all(v is None for v in values):
            return [None] * len(values)
        writer = self.writer(topic, schema)
        header, encode = writer.header, writer.encode
        return [None if v is None else header + encode(v) for v in values]
