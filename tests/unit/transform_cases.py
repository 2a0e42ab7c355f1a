"""Helpers of the transform tests: a chain from Connect-style settings, a record, one
transform applied to one value."""

from __future__ import annotations

from typing import Any

from eos.api import SourceRecord
from eos.api.schema import Schema, Struct
from eos.api.schema import struct_schema as schema_of
from eos.transforms import TransformChain

CONNECT = "org.apache.kafka.connect.transforms."
"""Where Connect's transforms live (their full class names start with it)."""
PARTITION = {"table": "orders"}
OFFSET = {"id": 7}


def record(value: Any = None, **fields: Any) -> SourceRecord:
    fields.setdefault("topic", "orders")
    return SourceRecord(PARTITION, OFFSET, value=value, **fields)


def chain(props: dict[str, str]) -> TransformChain:
    return TransformChain.from_config(props)


def one(type_name: str, **settings: str) -> TransformChain:
    """A chain of one transform ``t`` of ``type_name`` with ``settings``."""
    props = {"transforms": "t", "transforms.t.type": type_name}
    props.update({f"transforms.t.{k.replace('_', '.')}": v for k, v in settings.items()})
    return chain(props)


def apply(c: TransformChain, r: SourceRecord) -> SourceRecord:
    out = c.apply(r)
    assert out is not None
    return out


def struct_schema(*fields: tuple[str, Schema], name: str | None = None) -> Schema:
    return schema_of(fields, name)


def struct(schema: Schema, **values: Any) -> Struct:
    return Struct(schema, values)


def as_dict(value: Struct) -> dict[str, Any]:
    return {f.name: value.get_without_default(f) for f in value.schema.fields}
