"""Avro through a schema registry: ``io.confluent.connect.avro.AvroConverter``.

A Connect schema becomes the Avro schema Confluent's AvroData gives it (``connect.meta.data``
on): INT8/INT16 are ``int`` with ``"connect.type"``, INT32 ``int``, INT64 ``long``,
FLOAT32 ``float``, FLOAT64 ``double``, BYTES ``bytes``; ARRAY an ``array``; a MAP with
required string keys a ``map``, any other an array of ``MapEntry`` records (``key``,
``value``); a STRUCT a ``record`` named after the schema (``namespace.Name``) or
``io.confluent.connect.avro.ConnectDefault``, ``ConnectDefault2`` … for unnamed ones; an
optional schema the union ``["null", T]`` (``[T, "null"]`` with a default), its field
defaulting to null. Decimal is ``bytes`` with ``logicalType`` decimal (precision from the
``connect.decimal.precision`` parameter, else 64), Date ``date``, Time ``time-millis``,
Timestamp ``timestamp-millis``; name, version, doc, parameters and defaults ride along as
``connect.name``, ``connect.version``, ``connect.doc``, ``connect.parameters``,
``connect.default``.

One record is encoded with fastavro; a block of rows given as a ``pyarrow`` array is
encoded column by column (:mod:`.avro_arrow`: no Python object per row).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

from eos.api.logical import Date, Decimal, Time, Timestamp
from eos.api.schema import (
    DATE_NAME,
    DECIMAL_NAME,
    TIME_NAME,
    TIMESTAMP_NAME,
    Schema,
    SchemaType,
    Struct,
)
from eos.converters.schema_registry import RegistrySchema
from eos.converters.wire_format import Encode, RegistryConverter, Translated, fields_fit
from eos.errors import DataError

try:
    import fastavro
except ImportError as exc:  # pragma: no cover - the error names the extra
    raise ImportError("the Avro converter needs fastavro: pip install 'eos[formats]'") from exc

NAMESPACE = "io.confluent.connect.avro"
DEFAULT_NAME = "ConnectDefault"
_PRIMITIVES = {
    SchemaType.INT8: "int", SchemaType.INT16: "int", SchemaType.INT32: "int",
    SchemaType.INT64: "long", SchemaType.FLOAT32: "float", SchemaType.FLOAT64: "double",
    SchemaType.BOOLEAN: "boolean", SchemaType.STRING: "string", SchemaType.BYTES: "bytes",
}  # fmt: skip
_LOGICAL = {TIME_NAME: "time-millis", TIMESTAMP_NAME: "timestamp-millis", DATE_NAME: "date"}
ToAvro = Callable[[Any], Any]


def _split(name: str) -> tuple[str | None, str]:
    namespace, _, simple = name.rpartition(".")
    return namespace or None, simple


class AvroSchemas:
    """Translates Connect schemas into Avro schemas (JSON-able), one top-level schema per
    instance: named records are defined once, then referred to by their full name."""

    def __init__(self) -> None:
        self._unnamed = 0
        self._defined: dict[Schema, str] = {}

    def convert(self, schema: Schema) -> Any:
        defined = self._defined.get(_required(schema)) if schema.type is SchemaType.STRUCT else None
        base = defined if defined is not None else self._base(schema)
        if isinstance(base, dict):
            self._annotate(schema, base)
        if isinstance(base, dict) and len(base) == 1:
            base = base["type"]
        if not schema.optional:
            return base
        return [base, "null"] if schema.default is not None else ["null", base]

    def _base(self, schema: Schema) -> Any:
        kind = schema.type
        if kind in _PRIMITIVES:
            base: dict[str, Any] = {"type": _PRIMITIVES[kind]}
            if kind in (SchemaType.INT8, SchemaType.INT16):
                base["connect.type"] = kind.value
            return base
        if kind is SchemaType.ARRAY:
            assert schema.value_schema is not None
            return {"type": "array", "items": self.convert(schema.value_schema)}
        if kind is SchemaType.MAP:
            assert schema.key_schema is not None
            assert schema.value_schema is not None
            if schema.key_schema.type is SchemaType.STRING and not schema.key_schema.optional:
                return {"type": "map", "values": self.convert(schema.value_schema)}
            entry = {"type": "record", "name": "MapEntry", "namespace": NAMESPACE, "fields": [
                self._field("key", schema.key_schema), self._field("value", schema.value_schema),
            ]}  # fmt: skip
            return {"type": "array", "items": entry}
        return self._record(schema)

    def _record(self, schema: Schema) -> dict[str, Any]:
        if schema.name is not None:
            namespace, name = _split(schema.name)
        else:
            self._unnamed += 1
            namespace = NAMESPACE
            name = DEFAULT_NAME + (str(self._unnamed) if self._unnamed > 1 else "")
        record: dict[str, Any] = {"type": "record", "name": name}
        if namespace:
            record["namespace"] = namespace
        full = f"{namespace}.{name}" if namespace else name
        self._defined[_required(schema)] = full
        record["fields"] = [self._field(f.name, f.schema) for f in schema.fields]
        return record

    def _field(self, name: str, schema: Schema) -> dict[str, Any]:
        field: dict[str, Any] = {"name": name, "type": self.convert(schema)}
        if schema.default is not None:
            field["default"] = default_json(schema, schema.default)
        elif schema.optional:
            field["default"] = None
        return field

    def _annotate(self, schema: Schema, base: dict[str, Any]) -> None:
        connect_type = base.pop("connect.type", None)
        if schema.doc is not None:
            base["connect.doc"] = schema.doc
        if schema.version is not None:
            base["connect.version"] = schema.version
        if schema.parameters:
            base["connect.parameters"] = dict(schema.parameters)
        if schema.default is not None:
            base["connect.default"] = default_json(schema, schema.default)
        if schema.name is not None:
            base["connect.name"] = schema.name
        if connect_type is not None:
            base["connect.type"] = connect_type
        if schema.name == DECIMAL_NAME:
            params = schema.parameters or {}
            base["logicalType"] = "decimal"
            base["precision"] = int(params.get("connect.decimal.precision", 64))
            base["scale"] = int(params.get("scale", 0))
        elif schema.name in _LOGICAL:
            base["logicalType"] = _LOGICAL[schema.name]


def _required(schema: Schema) -> Schema:
    """``schema`` as a required schema without default (how a named record is keyed)."""
    if not schema.optional and schema.default is None:
        return schema
    return Schema(
        schema.type, False, None, schema.name, schema.version, schema.doc,
        schema.parameters, schema.fields, schema.key_schema, schema.value_schema,
    )  # fmt: skip


def default_json(schema: Schema, value: Any) -> Any:
    """A Connect default as an Avro schema's JSON default (bytes as ISO-8859-1 text)."""
    if value is None:
        return None
    name, kind = schema.name, schema.type
    if name == DECIMAL_NAME:
        return Decimal.from_logical(schema, value).decode("latin-1")
    if name == DATE_NAME:
        return Date.from_logical(schema, value)
    if name == TIME_NAME:
        return Time.from_logical(schema, value)
    if name == TIMESTAMP_NAME:
        return Timestamp.from_logical(schema, value)
    if kind is SchemaType.BYTES:
        return bytes(value).decode("latin-1")
    if kind is SchemaType.ARRAY:
        assert schema.value_schema is not None
        return [default_json(schema.value_schema, v) for v in value]
    if kind is SchemaType.MAP:
        assert schema.value_schema is not None
        return {str(k): default_json(schema.value_schema, v) for k, v in value.items()}
    if kind is SchemaType.STRUCT:
        return {f.name: default_json(f.schema, value.get(f.name)) for f in schema.fields}
    return value


def avro_schema(schema: Schema) -> Any:
    """The Avro schema (JSON-able) of a Connect schema."""
    return AvroSchemas().convert(schema)


# ------------------------------------------------------------------ values for fastavro


def to_avro(schema: Schema) -> ToAvro:
    """A function from Connect values of ``schema`` to what fastavro writes for it."""
    kind = schema.type
    if kind is SchemaType.STRUCT:
        fields = [(f.name, f, to_avro(f.schema)) for f in schema.fields]

        def record(value: Any) -> Any:
            if value is None:
                return None
            if type(value) is dict:  # a plain dict stands for a Struct of the schema
                get = value.get
                return {name: conv(get(name)) for name, _, conv in fields}
            if not isinstance(value, Struct):
                raise DataError(f"a STRUCT value must be a Struct, not {type(value).__name__}")
            return {name: conv(value.get(f)) for name, f, conv in fields}

        return record
    if kind is SchemaType.ARRAY and schema.value_schema is not None:
        item = to_avro(schema.value_schema)
        return lambda v: None if v is None else [item(x) for x in v]
    if kind is SchemaType.MAP and schema.key_schema is not None and schema.value_schema is not None:
        key, val = to_avro(schema.key_schema), to_avro(schema.value_schema)
        if schema.key_schema.type is SchemaType.STRING and not schema.key_schema.optional:
            return lambda m: None if m is None else {k: val(v) for k, v in m.items()}
        return lambda m: (
            None if m is None else [{"key": key(k), "value": val(v)} for k, v in m.items()]
        )
    if kind is SchemaType.BYTES and schema.name != DECIMAL_NAME:
        return lambda v: v if v is None or type(v) is bytes else bytes(v)
    if kind is SchemaType.FLOAT32 or kind is SchemaType.FLOAT64:
        return lambda v: v if v is None else float(v)
    default = schema.default
    if default is not None:
        return lambda v: default if v is None else v
    return lambda v: v


class AvroConverter(RegistryConverter):
    FORMAT = "AVRO"

    def translate(self, schema: Schema) -> Translated:
        avro = avro_schema(schema)
        text = json.dumps(avro, separators=(",", ":"))
        record = None
        if schema.type is SchemaType.STRUCT:
            record = schema.name or f"{NAMESPACE}.{DEFAULT_NAME}"
        return Translated(RegistrySchema("AVRO", text), record, (avro, schema))

    def fit(
        self, translated: Translated, latest: RegistrySchema
    ) -> tuple[list[str], list[str], list[str]]:
        """Fields by name (the record's are written in the latest's, which fills in its
        defaults and leaves out fields it lacks)."""
        mine, theirs = translated.compiled[0], json.loads(latest.text)
        if not (isinstance(mine, dict) and isinstance(theirs, dict)):
            return [], [], []
        if mine.get("type") != "record" or theirs.get("type") != "record":
            return [], [], []
        return fields_fit(
            [f["name"] for f in mine["fields"]],
            [(f["name"], "default" in f) for f in theirs["fields"]],
        )

    def encoder(self, translated: Translated, latest: RegistrySchema | None) -> Encode:
        avro, schema = translated.compiled
        writer_schema = json.loads(latest.text) if latest is not None else avro
        parsed = fastavro.parse_schema(writer_schema, named_schemas={})
        convert = to_avro(schema)
        write = fastavro.schemaless_writer

        def encode(value: Any) -> bytes:
            out = io.BytesIO()
            write(out, parsed, convert(value))
            return out.getvalue()

        return encode

    def from_connect_block(
        self, topic: str, schema: Schema | None, column: Any
    ) -> list[bytes | None]:
        if schema is None or not hasattr(column, "type") or self.use_latest:
            return super().from_connect_block(topic, schema, column)
        from eos.converters.avro_arrow import encode_column

        writer = self.writer(topic, schema)
        return encode_column(column, schema, writer.header)
