"""Protobuf through a schema registry: ``io.confluent.connect.protobuf.ProtobufConverter``.

A Connect STRUCT becomes a proto3 message as Confluent's ProtobufData makes it: named
after the schema (``package.Name``) or ``ConnectDefault1``; field numbers 1, 2, … in
field order; INT8/INT16/INT32 ``int32``, INT64 ``int64``, FLOAT32 ``float``, FLOAT64
``double``, BOOLEAN ``bool``, STRING ``string``, BYTES ``bytes``; ARRAY a ``repeated``
field (arrays of arrays cannot be written); MAP a ``map<K, V>`` (a repeated ``…Entry``
message where Protobuf allows no map key of that type); a nested STRUCT a nested message
(named after its schema, else ``ConnectDefault2``, …). Decimal is
``confluent.type.Decimal`` (registered as the reference ``confluent/type/decimal.proto``),
Date ``google.type.Date``, Time ``google.type.TimeOfDay``, Timestamp
``google.protobuf.Timestamp``. Proto3 has no null: an optional field that is None is left
unset (its zero value on reading) unless ``optional.for.nullables=true``, which declares
optional fields ``optional`` (presence kept), as Confluent's setting of that name does.
The top-level schema must be a STRUCT.

The wire format adds the message index ``[0]`` (the first message of the file). Messages
are serialized deterministically (a map's entries sorted by key, not in the order of
upb's hash table, which changes from one process to the next). A block of rows given as a
``pyarrow`` struct array is encoded column by column (:mod:`.protobuf_arrow`: no Python
object per row), in the same bytes.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from eos.api.logical import Date, Decimal, Time, Timestamp
from eos.api.schema import DATE_NAME, DECIMAL_NAME, TIME_NAME, TIMESTAMP_NAME, Schema, SchemaType
from eos.converters.base import as_struct, flag
from eos.converters.proto_text import render, top_messages
from eos.converters.protobuf_types import MAP_KEYS, SCALARS
from eos.converters.schema_registry import Reference, RegistrySchema
from eos.converters.wire_format import Encode, RegistryConverter, Translated
from eos.errors import DataError

try:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
except ImportError as exc:  # pragma: no cover - the error names the extra
    raise ImportError("the Protobuf converter needs protobuf: pip install 'eos[formats]'") from exc

FDP = descriptor_pb2.FieldDescriptorProto
DEFAULT_NAME = "ConnectDefault"
DECIMAL_FILE = "confluent/type/decimal.proto"
_LOGICAL = {
    DECIMAL_NAME: (DECIMAL_FILE, ".confluent.type.Decimal"),
    DATE_NAME: ("google/type/date.proto", ".google.type.Date"),
    TIME_NAME: ("google/type/timeofday.proto", ".google.type.TimeOfDay"),
    TIMESTAMP_NAME: ("google/protobuf/timestamp.proto", ".google.protobuf.Timestamp"),
}


def _file(name: str, package: str, message: str, fields: list[tuple[str, int]]) -> Any:
    proto = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto3")
    msg = proto.message_type.add(name=message)
    for number, (field, kind) in enumerate(fields, start=1):
        msg.field.add(name=field, number=number, type=kind, label=FDP.LABEL_OPTIONAL)
    return proto


DEPENDENCIES = {
    DECIMAL_FILE: _file(DECIMAL_FILE, "confluent.type", "Decimal",
                        [("value", FDP.TYPE_BYTES), ("precision", FDP.TYPE_UINT32),
                         ("scale", FDP.TYPE_INT32)]),
    "google/type/date.proto": _file("google/type/date.proto", "google.type", "Date",
                                    [("year", FDP.TYPE_INT32), ("month", FDP.TYPE_INT32),
                                     ("day", FDP.TYPE_INT32)]),
    "google/type/timeofday.proto": _file(
        "google/type/timeofday.proto", "google.type", "TimeOfDay",
        [("hours", FDP.TYPE_INT32), ("minutes", FDP.TYPE_INT32), ("seconds", FDP.TYPE_INT32),
         ("nanos", FDP.TYPE_INT32)]),
    "google/protobuf/timestamp.proto": descriptor_pb2.FileDescriptorProto.FromString(
        timestamp_pb2.DESCRIPTOR.serialized_pb
    ),
}  # fmt: skip
"""The files a translated schema may import (Confluent's and Google's definitions)."""


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


class ProtoSchemas:
    """Builds the ``.proto`` file of one top-level Connect STRUCT."""

    def __init__(self, optional_for_nullables: bool) -> None:
        self.optional_for_nullables = optional_for_nullables
        self.imports: set[str] = set()
        self._unnamed = 1

    def file(self, schema: Schema) -> Any:
        if schema.type is not SchemaType.STRUCT:
            raise DataError(f"the Protobuf converter writes STRUCT schemas, not {schema.type.name}")
        package, _, name = (schema.name or DEFAULT_NAME + "1").rpartition(".")
        proto = descriptor_pb2.FileDescriptorProto(
            name=f"{package.replace('.', '/') + '/' if package else ''}{name}.proto",
            package=package, syntax="proto3",
        )  # fmt: skip
        proto.message_type.append(self._message(schema, name))
        proto.dependency.extend(sorted(self.imports))
        return proto

    def _message(self, schema: Schema, name: str) -> Any:
        message = descriptor_pb2.DescriptorProto(name=name)
        for field in schema.fields:
            self._field(message, field.name, field.schema, field.index + 1)
        return message

    def _field(self, message: Any, name: str, schema: Schema, number: int) -> None:
        field = message.field.add(name=name, number=number, label=FDP.LABEL_OPTIONAL)
        if schema.type is SchemaType.ARRAY:
            field.label = FDP.LABEL_REPEATED
            assert schema.value_schema is not None
            schema = schema.value_schema
            if schema.type is SchemaType.ARRAY:
                raise DataError(f"field {name!r}: Protobuf cannot hold an array of arrays")
        elif schema.type is SchemaType.MAP:
            self._map(message, field, name, schema)
            return
        elif schema.optional and self.optional_for_nullables and schema.type in SCALARS:
            field.proto3_optional = True
            field.oneof_index = len(message.oneof_decl)
            message.oneof_decl.add(name=f"_{name}")
        self._type(message, field, name, schema)

    def _type(self, message: Any, field: Any, name: str, schema: Schema) -> None:
        logical = _LOGICAL.get(schema.name or "")
        if logical is not None:
            self.imports.add(logical[0])
            field.type, field.type_name = FDP.TYPE_MESSAGE, logical[1]
        elif schema.type in SCALARS:
            field.type = SCALARS[schema.type]
        elif schema.type is SchemaType.STRUCT:
            nested = schema.name.rpartition(".")[2] if schema.name else None
            if nested is None:
                self._unnamed += 1
                nested = f"{DEFAULT_NAME}{self._unnamed}"
            if nested == name:
                nested += "Message"
            if all(m.name != nested for m in message.nested_type):
                message.nested_type.append(self._message(schema, nested))
            field.type, field.type_name = FDP.TYPE_MESSAGE, nested
        else:
            raise DataError(f"field {name!r}: Protobuf cannot hold a {schema.type.name} here")

    def _map(self, message: Any, field: Any, name: str, schema: Schema) -> None:
        assert schema.key_schema is not None
        assert schema.value_schema is not None
        entry = descriptor_pb2.DescriptorProto(name=f"{_camel(name)}Entry")
        native = schema.key_schema.type in MAP_KEYS and schema.value_schema.type not in (
            SchemaType.ARRAY, SchemaType.MAP)  # fmt: skip
        if native:
            entry.options.map_entry = True
        for number, (which, part) in enumerate(
            (("key", schema.key_schema), ("value", schema.value_schema)), start=1
        ):
            sub = entry.field.add(name=which, number=number, label=FDP.LABEL_OPTIONAL)
            self._type(entry, sub, which, part)
        message.nested_type.append(entry)
        field.label, field.type, field.type_name = FDP.LABEL_REPEATED, FDP.TYPE_MESSAGE, entry.name


# ------------------------------------------------------------------ values into messages

Fill = Callable[[Any, str, Any], None]


def _filler(schema: Schema) -> Fill:
    """How to put a Connect value of ``schema`` into field ``name`` of a message."""
    kind = schema.type
    if kind is SchemaType.ARRAY:
        assert schema.value_schema is not None
        item = _item(schema.value_schema)
        return lambda msg, name, v: item(getattr(msg, name), v)
    if kind is SchemaType.MAP:
        return _map_filler(schema)
    convert = _logical(schema)
    if convert is not None:
        return lambda msg, name, v: getattr(msg, name).CopyFrom(convert(getattr(msg, name), v))
    if kind is SchemaType.STRUCT:
        fill = struct_filler(schema)
        return lambda msg, name, v: fill(getattr(msg, name), v)
    if kind is SchemaType.BYTES:
        return lambda msg, name, v: setattr(msg, name, bytes(v))
    return setattr


def _item(schema: Schema) -> Callable[[Any, Any], None]:
    """How to append Connect values of ``schema`` to a repeated field."""
    convert = _logical(schema)
    if schema.type is SchemaType.STRUCT:
        fill = struct_filler(schema)
        convert = lambda msg, v: fill(msg, v)  # noqa: E731
    if convert is not None:
        into = convert

        def messages(rep: Any, values: Any) -> None:
            for v in values:
                if v is not None:
                    into(rep.add(), v)

        return messages
    if schema.type is SchemaType.BYTES:
        return lambda rep, values: rep.extend(bytes(v) for v in values if v is not None)
    return lambda rep, values: rep.extend(v for v in values if v is not None)


def _map_filler(schema: Schema) -> Fill:
    assert schema.key_schema is not None
    assert schema.value_schema is not None
    key_schema, value_schema = schema.key_schema, schema.value_schema
    if key_schema.type not in MAP_KEYS or value_schema.type in (SchemaType.ARRAY, SchemaType.MAP):
        key, value = _filler(key_schema), _filler(value_schema)

        def entries(msg: Any, name: str, mapping: Mapping[Any, Any]) -> None:
            target = getattr(msg, name)
            for k, v in mapping.items():
                entry = target.add()
                key(entry, "key", k)
                if v is not None:
                    value(entry, "value", v)

        return entries
    convert = _logical(value_schema)
    if value_schema.type is SchemaType.STRUCT:
        fill_struct = struct_filler(value_schema)
        convert = lambda msg, v: fill_struct(msg, v)  # noqa: E731
    plain = bytes if value_schema.type is SchemaType.BYTES else None

    def native(msg: Any, name: str, mapping: Mapping[Any, Any]) -> None:
        target = getattr(msg, name)
        for k, v in mapping.items():
            if v is None:
                continue  # proto3 has no null
            if convert is not None:
                convert(target[k], v)
            else:
                target[k] = plain(v) if plain else v

    return native


def _logical(schema: Schema) -> Callable[[Any, Any], Any] | None:
    name = schema.name
    if name == DECIMAL_NAME:

        def decimal(msg: Any, v: Any) -> Any:
            msg.value = Decimal.from_logical(schema, v)
            msg.precision = len(v.as_tuple().digits)
            msg.scale = Decimal.scale(schema)
            return msg

        return decimal
    if name == DATE_NAME:

        def date(msg: Any, v: Any) -> Any:
            day = Date.to_logical(schema, Date.from_logical(schema, v))
            msg.year, msg.month, msg.day = day.year, day.month, day.day
            return msg

        return date
    if name == TIME_NAME:

        def time(msg: Any, v: Any) -> Any:
            millis = Time.from_logical(schema, v)
            msg.hours, rest = divmod(millis, 3_600_000)
            msg.minutes, rest = divmod(rest, 60_000)
            msg.seconds, ms = divmod(rest, 1000)
            msg.nanos = ms * 1_000_000
            return msg

        return time
    if name == TIMESTAMP_NAME:

        def timestamp(msg: Any, v: datetime.datetime) -> Any:
            msg.seconds, ms = divmod(Timestamp.from_logical(schema, v), 1000)
            msg.nanos = ms * 1_000_000
            return msg

        return timestamp
    return None


def struct_filler(schema: Schema) -> Callable[[Any, Any], None]:
    """Fill a message from a Struct of ``schema`` (None fields left unset)."""
    fields = [(f.name, f, _filler(f.schema)) for f in schema.fields]

    def fill(msg: Any, struct: Any) -> None:
        for name, field, put in fields:
            value = struct.get(field)
            if value is not None:
                put(msg, name, value)

    return fill


class ProtobufConverter(RegistryConverter):
    FORMAT = "PROTOBUF"
    optional_for_nullables = False

    SETTINGS = RegistryConverter.SETTINGS | {"optional.for.nullables"}

    def configure(self, props: Mapping[str, str], is_key: bool) -> None:
        super().configure(props, is_key)
        self.optional_for_nullables = flag(props, "optional.for.nullables", False)

    def translate(self, schema: Schema) -> Translated:
        builder = ProtoSchemas(self.optional_for_nullables)
        proto = builder.file(schema)
        refs = (
            (Reference(DECIMAL_FILE, DECIMAL_FILE, 0),) if DECIMAL_FILE in builder.imports else ()
        )
        text = render(proto)
        full = f"{proto.package}.{proto.message_type[0].name}".lstrip(".")
        return Translated(RegistrySchema("PROTOBUF", text, refs), full, (proto, schema), [0])

    def with_references(self, translated: Translated) -> RegistrySchema:
        """Register ``confluent/type/decimal.proto`` first where the schema imports it."""
        schema = translated.registry_schema
        if not schema.references:
            return schema
        assert self.client is not None
        refs = []
        for ref in schema.references:
            self.client.register(
                ref.subject, RegistrySchema("PROTOBUF", render(DEPENDENCIES[ref.name]))
            )
            refs.append(
                Reference(ref.name, ref.subject, self.client.latest(ref.subject).version or 1)
            )
        return RegistrySchema("PROTOBUF", schema.text, tuple(refs))

    def fit(
        self, translated: Translated, latest: RegistrySchema
    ) -> tuple[list[str], list[str], list[str]]:
        """The record's message in the latest by name: each field it shares must have the
        same number and type (the bytes are then those of the latest; a field of the latest
        that the record lacks is its default, as Protobuf has one for every field)."""
        proto = translated.compiled[0]
        name = proto.message_type[0].name
        theirs = top_messages(latest.text).get(name)
        if theirs is None:
            return [], [], [name]
        mine = top_messages(render(proto))[name][1]
        unknown = [field for field in mine if field not in theirs[1]]
        numbers = {number for _, number in theirs[1].values()}
        moved = [f for f in mine if f in theirs[1] and theirs[1][f] != mine[f]]
        moved += [f for f in unknown if mine[f][1] in numbers]  # its number is another's
        return [], unknown, moved

    def latest_indexes(
        self, translated: Translated, latest: RegistrySchema
    ) -> Sequence[int] | None:
        found = top_messages(latest.text).get(translated.compiled[0].message_type[0].name)
        return [found[0]] if found is not None else translated.message_indexes

    def encoder(self, translated: Translated, latest: RegistrySchema | None) -> Encode:
        proto, schema = translated.compiled
        pool = descriptor_pool.DescriptorPool()
        for name in proto.dependency:
            pool.Add(DEPENDENCIES[name])
        pool.Add(proto)
        full = f"{proto.package}.{proto.message_type[0].name}".lstrip(".")
        message_class = message_factory.GetMessageClass(pool.FindMessageTypeByName(full))
        fill = struct_filler(schema)
        left_out = self.fit(translated, latest)[1] if latest is not None else []

        def encode(value: Any) -> bytes:
            message = message_class()
            fill(message, as_struct(schema, value))
            for name in left_out:  # not in the latest (latest.compatibility.strict=false)
                message.ClearField(name)
            data: bytes = message.SerializeToString(deterministic=True)
            return data

        return encode

    def row_bytes(self, schema: Schema, value: Any) -> bytes:
        """``value`` of ``schema`` as the row path encodes it (no header)."""
        data: bytes = self.encoder(self.translate(schema), None)(value)
        return data

    def from_connect_block(
        self, topic: str, schema: Schema | None, column: Any
    ) -> list[bytes | None]:
        if (
            schema is None or not hasattr(column, "type") or column.null_count == len(column)
            or self.use_latest  # the latest schema: row by row, as Avro
        ):  # fmt: skip
            return super().from_connect_block(topic, schema, column)
        from eos.converters.protobuf_arrow import encode_column

        writer = self.writer(topic, schema)
        rows = encode_column(
            column, schema, writer.header, self.optional_for_nullables, self.row_bytes
        )
        return super().from_connect_block(topic, schema, column) if rows is None else rows
