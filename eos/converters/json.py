"""JSON, as Kafka Connect's ``JsonConverter`` writes it.

With a schema, values are written the way Connect writes them, byte for byte: structs as
objects in field order, maps with string keys as objects and others as ``[key, value]``
pairs, bytes as base64, Decimal as base64 of its unscaled bytes (``decimal.format=BASE64``,
the default) or as a number (``NUMERIC``), Date/Time/Timestamp as their integers, a null
with a default as the default (``replace.null.with.default``), and numbers as Java prints
them (``1.0E7``, ``"NaN"``). ``schemas.enable=true`` wraps every value in Connect's
envelope ``{"schema":…,"payload":…}``, the schema in Connect's JSON form (``type``,
``items``/``keys``/``values``/``fields``, ``optional``, ``name``, ``version``, ``doc``,
``parameters``, ``default``; a struct field adds ``field``).

Without a schema (a record that declares none) the value is written as eos always did:
compact JSON, ``bytes`` as base64, datetimes in ISO-8601, Decimals and UUIDs as strings.

``json`` is this converter with ``schemas.enable`` false by default (eos's behaviour);
``org.apache.kafka.connect.json.JsonConverter`` defaults it to true, as Connect does.
The encoder is orjson (measured in docs/formats.md); per schema, the conversion of a
value is compiled once into a chain of small functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

import orjson

from eos.api.schema import (
    Schema,
    SchemaType,
    Struct,
)
from eos.columns.text_struct import TextStruct, text_rows
from eos.converters.base import Headers, SchemaConverter, flag
from eos.converters.json_values import (
    Compiler,
    ToJson,
    as_jackson,
    as_jackson_rows,
    dumps_schemaless,
    jackson_dumps,
)
from eos.errors import ConfigError

Payload = Callable[[Any], bytes]
_BY_ID_MAX = 1024


_JSON_TYPE_NAMES = {SchemaType.FLOAT32: "float", SchemaType.FLOAT64: "double"}
"""Connect's JSON schemas name the floating types ``float`` and ``double``."""


def schema_json(schema: Schema | None, compiler: Compiler) -> Any:
    """Connect's JSON form of ``schema`` (``JsonConverter.asJsonSchema``), as orjson input."""
    if schema is None:
        return None
    out: dict[str, Any] = {"type": _JSON_TYPE_NAMES.get(schema.type, schema.type.value)}
    if schema.type is SchemaType.ARRAY:
        out["items"] = schema_json(schema.value_schema, compiler)
    elif schema.type is SchemaType.MAP:
        out["keys"] = schema_json(schema.key_schema, compiler)
        out["values"] = schema_json(schema.value_schema, compiler)
    elif schema.type is SchemaType.STRUCT:
        out["fields"] = [
            {**schema_json(f.schema, compiler), "field": f.name} for f in schema.fields
        ]
    out["optional"] = schema.optional
    for attr in ("name", "version", "doc"):
        if getattr(schema, attr) is not None:
            out[attr] = getattr(schema, attr)
    if schema.parameters is not None:
        out["parameters"] = dict(schema.parameters)
    if schema.default is not None:
        out["default"] = compiler.compile(schema)(schema.default)
    return out


class JsonConverter(SchemaConverter):
    """``json`` (schemas off unless ``schemas.enable=true``); see the module docstring."""

    SCHEMAS_ENABLE_DEFAULT = False
    SETTINGS = frozenset(
        {"schemas.enable", "schemas.cache.size", "decimal.format", "replace.null.with.default"}
    )

    def __init__(self) -> None:
        self.schemas_enable = self.SCHEMAS_ENABLE_DEFAULT
        self._compiler = Compiler(decimal_numeric=False, replace_null_with_default=True)
        self._compiled: dict[Schema, tuple[ToJson, bytes]] = {}
        self._by_id: dict[int, tuple[Schema, Payload, bytes]] = {}
        """id(schema) → (schema, …): a record's schema is most often the very object of the
        last one, and hashing a schema walks all of it (the schema kept: its id stays its)."""

    def configure(self, props: Mapping[str, str], is_key: bool) -> None:
        super().configure(props, is_key)
        self.schemas_enable = flag(props, "schemas.enable", self.SCHEMAS_ENABLE_DEFAULT)
        fmt = str(props.get("decimal.format", "BASE64")).strip().upper()
        if fmt not in ("BASE64", "NUMERIC"):
            raise ConfigError(
                "decimal.format", props["decimal.format"], "must be BASE64 or NUMERIC"
            )
        replace = flag(props, "replace.null.with.default", True)
        self._compiler = Compiler(fmt == "NUMERIC", replace)
        self._compiled.clear()
        self._by_id.clear()

    def _for(self, schema: Schema) -> tuple[Schema, Payload, bytes]:
        found = self._compiled.get(schema)
        if found is None:
            text = jackson_dumps(schema_json(schema, self._compiler))
            found = (self._compiler.compile(schema), text)
            self._compiled[schema] = found
        if len(self._by_id) >= _BY_ID_MAX:  # schemas built per record: equal, not identical
            self._by_id.clear()
        entry = self._by_id[id(schema)] = (schema, _payload(schema, found[0]), found[1])
        return entry

    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Headers | None = None
    ) -> bytes | None:
        if schema is None:
            if value is None:
                return None
            payload = dumps_schemaless(value)
            return b'{"schema":null,"payload":' + payload + b"}" if self.schemas_enable else payload
        entry = self._by_id.get(id(schema))
        if entry is None or entry[0] is not schema:
            entry = self._for(schema)
        payload = entry[1](value)
        if not self.schemas_enable:
            return payload
        return b'{"schema":' + entry[2] + b',"payload":' + payload + b"}"

    def from_connect_block(
        self, topic: str, schema: Schema | None, column: Any
    ) -> list[bytes | None]:
        """The rows :func:`column_rows` writes at once, any other column row by row."""
        rows, column = column_rows(schema, column, self._compiler)
        if rows is None:
            return super().from_connect_block(topic, schema, column)
        if self.schemas_enable:
            assert schema is not None  # column_rows needs one
            head = b'{"schema":' + self._for(schema)[2] + b',"payload":'
            rows = [b"".join((head, o, b"}")) for o in rows]
        return cast(list[bytes | None], rows)

    def reader(self) -> Callable[[bytes], Any] | None:
        """Its bytes read back (:mod:`eos.columns.decode`): only without the envelope."""
        return None if self.schemas_enable else orjson.loads

    def convert(self, topic: str, value: Any) -> bytes | None:
        if type(value) is not Struct and not self.schemas_enable:
            return None if value is None else dumps_schemaless(value)  # the hot path
        return super().convert(topic, value)


class ConnectJsonConverter(JsonConverter):
    """``org.apache.kafka.connect.json.JsonConverter``: schemas on by default, as in Connect."""

    SCHEMAS_ENABLE_DEFAULT = True


_STR = {str}


def column_rows(
    schema: Schema | None, column: Any, compiler: Compiler
) -> tuple[list[bytes] | None, Any]:
    """A block's column written at once, in the bytes of its values one by one: a list of
    plain STRING values (FileSource's lines) through orjson in one C loop, lines after
    HoistField (and InsertField) a :class:`TextStruct` at a time, an Arrow column whole
    with ``compiler`` (the converter's; :mod:`~eos.converters.json_arrow`:
    SparkSource's rows, any type); Jackson's escapes fixed only where a value needs them.
    None otherwise, with the column as the row path takes it (a TextStruct as its Arrow
    struct column)."""
    if (
        schema is not None and schema.type is SchemaType.STRING and schema.name is None
        and type(column) is list and set(map(type, column)) == _STR
    ):  # fmt: skip
        return as_jackson_rows(list(map(orjson.dumps, column))), column
    if type(column) is TextStruct:  # lines after HoistField (and InsertField)
        rows = text_rows(schema, column)
        if rows is not None:
            return as_jackson_rows(rows), column
        column = column.to_arrow()
    if schema is not None and hasattr(column, "type"):
        from eos.converters.json_arrow import encode_column

        return encode_column(column, schema, compiler), column  # its escapes fixed
    return None, column


def _payload(schema: Schema, to_json: ToJson) -> Payload:
    """The JSON bytes of a value of ``schema``: for a plain STRING (FileSource's lines, the
    commonest typed value) a str goes straight to orjson; the rest through ``to_json``."""
    if schema.type is SchemaType.STRING and schema.name is None:
        dumps = orjson.dumps

        def string(value: Any) -> bytes:
            if type(value) is str:
                out = dumps(value)
                if len(out) == len(value) + 2 and value.isascii():
                    return out  # ASCII, nothing escaped: no escape to fix (the common line)
                # find, not ``in``: on Python 3.11 ``bytes in bytes`` first tries the
                # needle as an int and clears the TypeError (0.24 µs a record, find 0.14)
                if out.find(b"\\u00") >= 0 or not out.isascii():
                    return as_jackson(out)
                return out
            return jackson_dumps(to_json(value))

        return string
    return lambda value: jackson_dumps(to_json(value))
