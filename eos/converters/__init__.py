"""Key and value converters: Connect data from connectors → bytes for Kafka.

A connector's ``key.converter`` / ``value.converter`` names one by a short name, by the
class name Kafka Connect or Confluent gives it (so a Connect config moves over
unchanged), or by a class path of its own (``package.module:Class``); its settings are
the ``key.converter.*`` / ``value.converter.*`` properties, as in Connect.

==========  ==========================================================  ===============
short name  Connect / Confluent class                                   module
==========  ==========================================================  ===============
json        ``org.apache.kafka.connect.json.JsonConverter``             :mod:`.json`
string      ``org.apache.kafka.connect.storage.StringConverter``        :mod:`.simple`
bytes       ``org.apache.kafka.connect.converters.ByteArrayConverter``  :mod:`.simple`
(none)      ``io.confluent.connect.avro.AvroConverter``                 :mod:`.avro`
(none)      ``io.confluent.connect.protobuf.ProtobufConverter``         :mod:`.protobuf`
(none)      ``io.confluent.connect.json.JsonSchemaConverter``           :mod:`.jsonschema`
(none)      ``org.apache.kafka.connect.storage.SimpleHeaderConverter``  :mod:`.simple`
(none)      ``org.apache.kafka.connect.converters.IntegerConverter``    :mod:`.simple`
==========  ==========================================================  ===============

(and Connect's other number converters: ``ShortConverter``, ``LongConverter``,
``FloatConverter``, ``DoubleConverter``, ``BooleanConverter``). A ``header.converter``
is made by :func:`make_header_converter`: any of these but the registry formats.

(``json`` keeps ``schemas.enable=false`` by default, eos's behaviour before schemas;
Connect's class name defaults it to true, as Connect does.) The interface is in
:mod:`.base`; :func:`encode_block` turns a block of Connect values into encoded rows, and
:func:`decodable` says whether a pair of converters reads its rows back
(:mod:`eos.columns.decode`).
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from typing import Any, cast

from eos.api.records import RecordBlock
from eos.columns.text_struct import arrow_of
from eos.converters.base import Converter, SchemaConverter
from eos.converters.json import JsonConverter
from eos.converters.simple import BytesConverter, StringConverter
from eos.errors import PluginError
from eos.runtime.plugins import load_class

__all__ = [
    "CONVERTERS",
    "BytesConverter",
    "Converter",
    "JsonConverter",
    "SchemaConverter",
    "StringConverter",
    "decodable",
    "encode_block",
    "make_converter",
    "make_header_converter",
]

_HERE = "eos.converters"
_SIMPLE = f"{_HERE}.simple"
CONVERTERS: dict[str, str] = {
    "json": f"{_HERE}.json:JsonConverter",
    "string": f"{_HERE}.simple:StringConverter",
    "bytes": f"{_HERE}.simple:BytesConverter",
    "org.apache.kafka.connect.json.JsonConverter": f"{_HERE}.json:ConnectJsonConverter",
    "org.apache.kafka.connect.storage.StringConverter": f"{_HERE}.simple:StringConverter",
    "org.apache.kafka.connect.converters.ByteArrayConverter": f"{_HERE}.simple:BytesConverter",
    "io.confluent.connect.avro.AvroConverter": f"{_HERE}.avro:AvroConverter",
    "io.confluent.connect.protobuf.ProtobufConverter": f"{_HERE}.protobuf:ProtobufConverter",
    "io.confluent.connect.json.JsonSchemaConverter": f"{_HERE}.jsonschema:JsonSchemaConverter",
    "org.apache.kafka.connect.storage.SimpleHeaderConverter": f"{_SIMPLE}:SimpleHeaderConverter",
    **{
        f"org.apache.kafka.connect.converters.{java}Converter": f"{_SIMPLE}:{java}Converter"
        for java in ("Short", "Integer", "Long", "Float", "Double", "Boolean")
    },
}
"""Every converter name eos knows → where its class is (imported on first use)."""


def converter_class(name: str) -> type[Any]:
    """The class a converter name stands for: a known name (short ones in any case) or a
    class path."""
    target = CONVERTERS.get(name) or CONVERTERS.get(name.lower())
    if target is not None:
        module, _, attr = target.partition(":")
        try:
            found: type[Any] = getattr(importlib.import_module(module), attr)
        except ImportError as exc:
            raise PluginError(
                f"converter {name!r} needs a package that is not installed ({exc.name}): "
                "pip install 'eos[formats]'"
            ) from exc
        return found
    try:
        return load_class(name)
    except PluginError as exc:
        close = difflib.get_close_matches(name, CONVERTERS, n=1, cutoff=0.85)
        if close:
            raise PluginError(f"unknown converter {name!r}: did you mean {close[0]!r}?") from exc
        known = ", ".join(sorted(CONVERTERS))
        raise PluginError(f"unknown converter {name!r}: not one of {known}, and {exc}") from exc


def make_converter(
    name: str, props: Mapping[str, str] | None = None, is_key: bool | None = None
) -> Converter:
    """The converter called ``name``, configured with ``props`` (its ``key.converter.*`` or
    ``value.converter.*`` settings without the prefix). ``name`` may also be a
    :class:`~eos.config.connector.ConverterSetting`, which carries both."""
    if props is None:
        props = getattr(name, "props", {})
    if is_key is None:
        is_key = bool(getattr(name, "is_key", False))
    instance = converter_class(str(name))()
    if not callable(getattr(instance, "convert", None)):
        raise PluginError(f"converter {str(name)!r} has no convert(topic, value) method")
    configure = getattr(instance, "configure", None)
    if callable(configure):
        configure(dict(props), is_key)
    converter: Converter = instance
    return converter


def make_header_converter(name: str, props: Mapping[str, str] | None = None) -> SchemaConverter:
    """The ``header.converter`` called ``name``, configured with ``props``: one that
    converts header values (:attr:`SchemaConverter.converts_headers`, or a class of one's
    own with ``from_connect_header``), else :class:`PluginError`."""
    found = converter_class(str(name))
    if not getattr(found, "converts_headers", True) or not callable(
        getattr(found, "from_connect_header", None)
    ):
        raise PluginError(
            f"converter {str(name)!r} cannot convert headers: use "
            "org.apache.kafka.connect.storage.SimpleHeaderConverter (the default), "
            "StringConverter, ByteArrayConverter, JsonConverter, a number converter, or a "
            "class with from_connect_header(topic, header, schema, value)"
        )
    converter = make_converter(name, props, False)
    return cast(SchemaConverter, converter)


def encode_block(block: RecordBlock, keys: Converter, values: Converter) -> RecordBlock:
    """``block`` with its keys and values encoded (``encoded=False`` blocks: each column
    converted at once where the converter can, row by row otherwise); an encoded block
    as it is."""
    if block.encoded:
        return block
    encoded_values = _encode(values, block.topic, block.value_schema, block.values)
    encoded_keys = (
        None if block.keys is None else _encode(keys, block.topic, block.key_schema, block.keys)
    )
    return RecordBlock(
        block.source_partition, block.source_offset, block.topic, encoded_values,
        encoded_keys, block.timestamps, block.headers, block.header_columns, block.topics,
        block.key_schema, block.value_schema, encoded=True,
    )  # fmt: skip


def _encode(converter: Converter, topic: str, schema: Any, column: Any) -> list[bytes | None]:
    if getattr(type(converter), "from_connect_block", None) is not JsonConverter.from_connect_block:
        column = arrow_of(column)  # JSON's own writes lines joined; the rest, Arrow
    if isinstance(converter, SchemaConverter):
        return converter.from_connect_block(topic, schema, column)
    from eos.api.schema import column_values

    return [converter.convert(topic, v) for v in column_values(schema, column)]


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
