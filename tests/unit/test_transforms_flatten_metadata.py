"""Flatten and SetSchemaMetadata, without and with schemas (docs' examples first)."""

from __future__ import annotations

import pytest

from eos.api.schema import (
    BOOLEAN_SCHEMA,
    INT32_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    SchemaBuilder,
)
from eos.errors import TransformError
from tests.unit.transform_cases import (
    CONNECT,
    apply,
    as_dict,
    chain,
    one,
    record,
    struct,
    struct_schema,
)

NESTED = {"content": {"id": 42, "name": {"first": "David", "middle": None, "last": "Wong"}}}


@pytest.mark.parametrize("delimiter", [".", "_"])
def test_flatten_docs_example(delimiter: str) -> None:
    c = chain(
        {
            "transforms": "flatten",
            "transforms.flatten.type": CONNECT + "Flatten$Value",
            "transforms.flatten.delimiter": delimiter,
        }
    )
    d = delimiter
    assert apply(c, record(NESTED)).value == {
        f"content{d}id": 42,
        f"content{d}name{d}first": "David",
        f"content{d}name{d}middle": None,
        f"content{d}name{d}last": "Wong",
    }


def test_flatten_keeps_arrays_and_refuses_other_objects() -> None:
    c = one("Flatten$Key")
    out = apply(c, record("v", key={"a": {"b": [1, {"c": 2}]}, "d": b"x"}))
    assert out.key == {"a.b": [1, {"c": 2}], "d": b"x"}
    assert apply(c, record("v", key=None)).key is None
    with pytest.raises(TransformError, match="not supported by Connect's data API"):
        c.apply(record("v", key={"a": object()}))


def test_flatten_with_schema() -> None:
    name = struct_schema(("first", STRING_SCHEMA), ("middle", OPTIONAL_STRING_SCHEMA))
    optional_name = SchemaBuilder.struct().field("first", STRING_SCHEMA).optional().build()
    content = struct_schema(
        ("id", INT32_SCHEMA),
        ("name", name),
        ("alias", optional_name),
        ("tags", SchemaBuilder.array(STRING_SCHEMA).build()),
    )
    schema = struct_schema(("content", content), ("ok", BOOLEAN_SCHEMA), name="event")
    value = struct(
        schema,
        ok=True,
        content=struct(content, id=42, name=struct(name, first="David"), tags=["a"]),
    )
    out = apply(one("Flatten$Value"), record(value, value_schema=schema))
    flat = out.value_schema
    assert flat is not None
    assert flat.name == "event"
    assert [(f.name, f.schema.type.name, f.schema.optional) for f in flat.fields] == [
        ("content.id", "INT32", False),
        ("content.name.first", "STRING", False),
        ("content.name.middle", "STRING", True),
        ("content.alias.first", "STRING", True),  # under an optional struct
        ("content.tags", "ARRAY", False),
        ("ok", "BOOLEAN", False),
    ]
    assert as_dict(out.value) == {
        "content.id": 42,
        "content.name.first": "David",
        "content.name.middle": None,
        "content.alias.first": None,
        "content.tags": ["a"],
        "ok": True,
    }
    out.value.validate()
    assert apply(one("Flatten$Value"), record(None, value_schema=schema)).value_schema == flat


def test_flatten_with_schema_takes_defaults_from_the_parent() -> None:
    inner = SchemaBuilder.struct().field("n", OPTIONAL_INT32_SCHEMA).optional().build()
    with_default = SchemaBuilder.struct().field("n", OPTIONAL_INT32_SCHEMA).optional()
    inner_default = with_default.default(struct(inner, n=5)).build()
    schema = struct_schema(("inner", inner_default))
    out = apply(one("Flatten$Value"), record(struct(schema), value_schema=schema))
    assert out.value_schema is not None
    assert out.value_schema.fields[0].schema.default == 5
    assert as_dict(out.value) == {"inner.n": 5}


def test_flatten_refuses_maps_with_schema() -> None:
    schema = struct_schema(("m", SchemaBuilder.map(STRING_SCHEMA, STRING_SCHEMA).build()))
    with pytest.raises(TransformError, match=r"does not support MAP for record with schemas "):
        one("Flatten$Value").apply(record(struct(schema, m={}), value_schema=schema))


# ------------------------------------------------------------- SetSchemaMetadata


def test_set_schema_metadata_docs_example() -> None:
    c = chain(
        {
            "transforms": "SetSchemaMetadata",
            "transforms.SetSchemaMetadata.type": CONNECT + "SetSchemaMetadata$Value",
            "transforms.SetSchemaMetadata.schema.name": "order-value",
            "transforms.SetSchemaMetadata.schema.version": "2",
        }
    )
    schema = struct_schema(("id", INT32_SCHEMA), name="com.example.Order")
    out = apply(c, record(struct(schema, id=1), value_schema=schema))
    renamed = out.value_schema
    assert renamed is not None
    assert (renamed.name, renamed.version, renamed.fields) == ("order-value", 2, schema.fields)
    assert out.value.schema is renamed
    assert as_dict(out.value) == {"id": 1}


def test_set_schema_metadata_keeps_what_it_is_not_told_to_set() -> None:
    schema = SchemaBuilder.int32().name("old").version(3).doc("d").build()
    out = apply(
        one("SetSchemaMetadata$Key", schema_name="new"), record("v", key=5, key_schema=schema)
    )
    assert out.key == 5
    assert out.key_schema == SchemaBuilder.int32().name("new").version(3).doc("d").build()
    none = record(None)
    assert one("SetSchemaMetadata$Value", schema_version="1").apply(none) is none
    with pytest.raises(TransformError, match=r"Schema required for \[updating schema metadata\]"):
        one("SetSchemaMetadata$Value", schema_version="1").apply(record({"a": 1}))
