"""JSON Schema text of fields with defaults of every kind: the default is written as the
row path writes a value (a FLOAT32's shortest text, a numeric Decimal's digits)."""

from __future__ import annotations

import decimal
import json

import pytest

from eos.api import Decimal, SchemaBuilder
from eos.api.schema import Schema
from eos.converters.jsonschema import JsonSchemaConverter


def _translated(field: Schema, **props: str) -> dict[str, object]:
    converter = JsonSchemaConverter()
    converter.configure({"schema.registry.url": "http://127.0.0.1:1", **props}, False)
    schema = SchemaBuilder.struct().name("Row").field("f", field).build()
    text = converter.translate(schema).registry_schema.text
    properties = json.loads(text)["properties"]
    assert isinstance(properties, dict)
    found: dict[str, object] = properties["f"]
    return found


@pytest.mark.parametrize(
    ("field", "props", "default"),
    [
        (SchemaBuilder.float32().default(1.1).build(), {}, 1.1),
        (SchemaBuilder.float64().default(1e300).build(), {}, 1e300),
        (SchemaBuilder.float64().default(-0.0).build(), {}, -0.0),
        (Decimal.builder(2).default(decimal.Decimal("12.30")).build(),
         {"decimal.format": "NUMERIC"}, 12.3),
        (Decimal.builder(2).default(decimal.Decimal("12.30")).build(), {}, "BM4="),
        (SchemaBuilder.string().default("é").build(), {}, "é"),
    ],
)  # fmt: skip
def test_defaults_of_every_kind_are_written(
    field: Schema, props: dict[str, str], default: object
) -> None:
    assert _translated(field, **props)["default"] == default
