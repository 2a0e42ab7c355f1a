"""JSON Schema through a schema registry: ``io.confluent.connect.json.JsonSchemaConverter``.

A Connect schema becomes the JSON Schema Confluent's JsonSchemaData gives it: integers
``{"type":"integer","connect.type":"int8"…}``, FLOAT32/64 ``number`` (``connect.type``
float32/float64), BOOLEAN ``boolean``, STRING ``string``, BYTES ``string`` with
``"connect.type":"bytes"`` (Decimal too, or ``number`` with ``decimal.format=NUMERIC``),
ARRAY ``array`` with ``items``, a MAP with required string keys an ``object`` with
``additionalProperties``, any other map an array of ``{"key","value"}`` objects, a STRUCT
an ``object`` with ``properties`` (each with its ``connect.index``); the schema's name is
its ``title``, its doc its ``description``, its version ``connect.version``, its
parameters ``connect.parameters``, its default ``default``; an optional schema is
``{"oneOf":[{"type":"null"},…]}``. Values are the JSON Connect's JsonConverter writes
(:mod:`.json`), maps with other than string keys as ``{"key","value"}`` objects. A
block's column is written at once where the JSON converter writes it so (the same bytes:
plain strings, FileSource's lines, Arrow columns of any type, SparkSource's rows among
them, see :func:`~eos.converters.json.column_rows`), any other row by row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from eos.api.schema import DECIMAL_NAME, Schema, SchemaType
from eos.converters.json import column_rows
from eos.converters.json_values import Compiler, ToJson, jackson_dumps
from eos.converters.schema_registry import RegistrySchema
from eos.converters.wire_format import Encode, RegistryConverter, Translated, fields_fit
from eos.errors import ConfigError

_NUMBERS = {
    SchemaType.INT8: "integer", SchemaType.INT16: "integer", SchemaType.INT32: "integer",
    SchemaType.INT64: "integer", SchemaType.FLOAT32: "number", SchemaType.FLOAT64: "number",
}  # fmt: skip


class _EntryCompiler(Compiler):
    """Connect's JSON, but maps without string keys as ``{"key","value"}`` objects."""

    ENTRY_MAPS = True

    def _map(self, schema: Schema) -> ToJson:
        assert schema.key_schema is not None
        assert schema.value_schema is not None
        if schema.key_schema.type is SchemaType.STRING and not schema.key_schema.optional:
            return super()._map(schema)
        key, value = self.compile(schema.key_schema), self.compile(schema.value_schema)
        return lambda m: [{"key": key(k), "value": value(v)} for k, v in m.items()]


class JsonSchemas:
    def __init__(self, compiler: Compiler) -> None:
        self.compiler = compiler

    def convert(self, schema: Schema, index: int | None = None) -> dict[str, Any]:
        base = self._base(schema)
        if schema.name is not None:
            base["title"] = schema.name
        if schema.version is not None:
            base["connect.version"] = schema.version
        if schema.doc is not None:
            base["description"] = schema.doc
        if schema.parameters:
            base["connect.parameters"] = dict(schema.parameters)
        if schema.default is not None:
            # the row path's JSON of the default (a float32's shortest text, a numeric
            # decimal's digits), as a plain value for the schema's own json.dumps
            base["default"] = json.loads(
                jackson_dumps(self.compiler.compile(schema)(schema.default))
            )
        if schema.optional:
            base = {"oneOf": [{"type": "null"}, base]}
        if index is not None:
            base["connect.index"] = index
        return base

    def _base(self, schema: Schema) -> dict[str, Any]:
        kind = schema.type
        if kind in _NUMBERS:
            return {"type": _NUMBERS[kind], "connect.type": kind.value}
        if kind is SchemaType.BOOLEAN:
            return {"type": "boolean"}
        if kind is SchemaType.STRING:
            return {"type": "string"}
        if kind is SchemaType.BYTES:
            numeric = schema.name == DECIMAL_NAME and self.compiler.decimal_numeric
            return {"type": "number" if numeric else "string", "connect.type": "bytes"}
        if kind is SchemaType.ARRAY:
            assert schema.value_schema is not None
            return {"type": "array", "items": self.convert(schema.value_schema)}
        if kind is SchemaType.MAP:
            assert schema.key_schema is not None
            assert schema.value_schema is not None
            if schema.key_schema.type is SchemaType.STRING and not schema.key_schema.optional:
                return {"type": "object", "additionalProperties": self.convert(schema.value_schema),
                        "connect.type": "map"}  # fmt: skip
            entry = {"type": "object", "properties": {
                "key": self.convert(schema.key_schema, 0),
                "value": self.convert(schema.value_schema, 1),
            }}  # fmt: skip
            return {"type": "array", "items": entry, "connect.type": "map"}
        return {"type": "object", "properties": {
            f.name: self.convert(f.schema, f.index) for f in schema.fields
        }}  # fmt: skip


class JsonSchemaConverter(RegistryConverter):
    FORMAT = "JSON"

    def __init__(self) -> None:
        super().__init__()
        self._compiler: Compiler = _EntryCompiler(False, True)

    SETTINGS = RegistryConverter.SETTINGS | {"decimal.format"}

    def configure(self, props: Mapping[str, str], is_key: bool) -> None:
        super().configure(props, is_key)
        fmt = str(props.get("decimal.format", "BASE64")).strip().upper()
        if fmt not in ("BASE64", "NUMERIC"):
            raise ConfigError(
                "decimal.format", props["decimal.format"], "must be BASE64 or NUMERIC"
            )
        self._compiler = _EntryCompiler(fmt == "NUMERIC", True)

    def translate(self, schema: Schema) -> Translated:
        text = json.dumps(JsonSchemas(self._compiler).convert(schema), separators=(",", ":"))
        return Translated(RegistrySchema("JSON", text), schema.name, schema)

    def fit(
        self, translated: Translated, latest: RegistrySchema
    ) -> tuple[list[str], list[str], list[str]]:
        """Properties by name: the latest's required ones without a default must be in the
        record; the record's must be in the latest unless it allows additional ones."""
        mine = json.loads(translated.registry_schema.text)
        theirs = json.loads(latest.text)
        if not isinstance(theirs, dict) or "properties" not in mine:
            return [], [], []
        properties = theirs.get("properties") or {}
        required = set(theirs.get("required") or ())
        lacking, unknown, _ = fields_fit(
            list(mine["properties"]),
            [(n, n not in required or "default" in (p or {})) for n, p in properties.items()],
        )
        if theirs.get("additionalProperties", True) is not False:
            unknown = []
        return lacking, unknown, []

    def encoder(self, translated: Translated, latest: RegistrySchema | None) -> Encode:
        to_json = self._compiler.compile(translated.compiled)
        if latest is None:
            return lambda value: jackson_dumps(to_json(value))
        theirs = json.loads(latest.text)
        properties = theirs.get("properties") if isinstance(theirs, dict) else None
        if not properties:
            return lambda value: jackson_dumps(to_json(value))
        defaults = {n: p["default"] for n, p in properties.items() if "default" in (p or {})}
        closed = theirs.get("additionalProperties", True) is False

        def encode(value: Any) -> bytes:
            out = to_json(value)
            if isinstance(out, dict):  # in the latest's shape: its defaults, its properties
                for name, default in defaults.items():
                    out.setdefault(name, default)
                if closed:
                    out = {k: v for k, v in out.items() if k in properties}
            return jackson_dumps(out)

        return encode

    def from_connect_block(
        self, topic: str, schema: Schema | None, column: Any
    ) -> list[bytes | None]:
        if schema is None or self.use_latest:  # the latest's shape: row by row
            return super().from_connect_block(topic, schema, column)
        rows, column = column_rows(schema, column, self._compiler)
        if rows is None:
            return super().from_connect_block(topic, schema, column)
        if not rows:
            return []
        header = self.writer(topic, schema).header
        return [header + row for row in rows]
