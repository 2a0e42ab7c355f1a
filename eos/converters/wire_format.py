"""What the schema-registry converters share: Confluent's wire format, subject names, and
the settings ``auto.register.schemas``, ``use.latest.version`` with
``latest.compatibility.strict`` (values written in the subject's latest schema, each format
saying how the record fits it: :meth:`RegistryConverter.fit`) and
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
from eos.converters.schema_registry import CLIENT_SETTINGS, RegistryClient, RegistrySchema
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
    SETTINGS = CLIENT_SETTINGS | {
        "auto.register.schemas", "use.latest.version", "latest.compatibility.strict",
        "normalize.schemas", "key.subject.name.strategy", "value.subject.name.strategy",
        "max.schemas.per.subject", "latest.cache.size", "schemas.cache.config",
        "id.compatibility.strict",
    }  # fmt: skip
    """The registry's and the serializer's (the last four size caches or apply only to
    settings eos refuses: accepted, nothing to do)."""

    FORMAT = ""

    def __init__(self) -> None:
        self.client: RegistryClient | None = None
        self.auto_register = True
        self.use_latest = False
        self.latest_strict = True
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
        self.latest_strict = flag(props, "latest.compatibility.strict", True)
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

    def fit(
        self, translated: Translated, latest: RegistrySchema
    ) -> tuple[list[str], list[str], list[str]]:
        """How the record's schema fits the subject's latest (``use.latest.version``): the
        latest's fields without a default the record lacks, the record's fields the latest
        lacks, and fields the formats would write differently (Protobuf's numbers)."""
        return [], [], []

    def latest_indexes(
        self, translated: Translated, latest: RegistrySchema
    ) -> Sequence[int] | None:
        """The message indexes of the record's message in the latest schema (Protobuf)."""
        return translated.message_indexes

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
            schema_id, latest = self._latest(client, subject, translated)
        else:
            register = client.register if self.auto_register else client.lookup
            schema_id = register(subject, self.with_references(translated))
        indexes = translated.message_indexes
        if latest is not None:
            indexes = self.latest_indexes(translated, latest)
        header = wire_header(schema_id, indexes)
        return Writer(header, self.encoder(translated, latest), translated)

    def _latest(
        self, client: RegistryClient, subject: str, translated: Translated
    ) -> tuple[int, RegistrySchema]:
        """The subject's latest schema (``use.latest.version``) if the record's values can
        be written in it: :class:`SchemaRegistryError` naming the field that does not fit."""
        registered = client.latest(subject)
        latest = registered.schema
        assert latest is not None  # a latest version comes with its text
        if latest.schema_type != translated.registry_schema.schema_type:
            raise SchemaRegistryError(
                f"the latest schema of subject {subject!r} is {latest.schema_type}, not "
                f"{self.FORMAT}: use.latest.version needs one of this converter's format"
            )
        lacking, unknown, moved = self.fit(translated, latest)
        where = f"the latest schema of subject {subject!r} (version {registered.version})"
        if moved:
            raise SchemaRegistryError(
                f"{where} gives field {moved[0]!r} another number or type than the record's "
                "schema: its values cannot be written in it"
            )
        if self.latest_strict and lacking:
            raise SchemaRegistryError(
                f"{where} has field {lacking[0]!r} without a default, which the record "
                "lacks (latest.compatibility.strict=true)"
            )
        if self.latest_strict and unknown:
            raise SchemaRegistryError(
                f"{where} has no field {unknown[0]!r}, which the record has: its values "
                "would be lost (latest.compatibility.strict=true; false leaves them out)"
            )
        return registered.schema_id, latest

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


def fields_fit(
    mine: Sequence[str], theirs: Sequence[tuple[str, bool]]
) -> tuple[list[str], list[str], list[str]]:
    """:meth:`RegistryConverter.fit` for formats that match fields by name: ``mine`` the
    record's field names, ``theirs`` the latest's (name, has a default)."""
    names = {name for name, _ in theirs}
    lacking = [name for name, default in theirs if not default and name not in mine]
    return lacking, [name for name in mine if name not in names], []
