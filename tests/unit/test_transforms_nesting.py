"""ValueToKey, ExtractField and HoistField, without and with schemas (docs' examples
first, then Connect's behaviour)."""

from __future__ import annotations

import pytest

from eos.api.schema import (
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    SchemaBuilder,
)
from eos.errors import TransformError
from eos.transforms.nesting import field_path
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

# ------------------------------------------------------------------- ValueToKey


def test_value_to_key_docs_example() -> None:
    c = chain(
        {
            "transforms": "ValueToKey",
            "transforms.ValueToKey.type": CONNECT + "ValueToKey",
            "transforms.ValueToKey.fields": "userId,city,state",
        }
    )
    before = {
        "userId": 12,
        "address": "1942 Wilhelm Boulevard",
        "city": "Topeka",
        "state": "KS",
        "country": "US",
    }
    out = apply(c, record(before))
    assert out.key == {"userId": 12, "city": "Topeka", "state": "KS"}
    assert out.value == before
    assert out.key_schema is None


def test_value_to_key_and_extract_field_docs_chain() -> None:
    # docs.confluent.io ValueToKey, "Chained Transformation": the key becomes c1's int.
    c = chain(
        {
            "transforms": "createKey,extractInt",
            "transforms.createKey.type": CONNECT + "ValueToKey",
            "transforms.createKey.fields": "c1",
            "transforms.extractInt.type": CONNECT + "ExtractField$Key",
            "transforms.extractInt.field": "c1",
        }
    )
    schema = struct_schema(
        ("c1", INT32_SCHEMA), ("c2", OPTIONAL_STRING_SCHEMA), ("create_ts", INT64_SCHEMA)
    )
    value = struct(schema, c1=1, c2="foo", create_ts=1501796305000)
    out = apply(c, record(value, value_schema=schema))
    assert (out.key, out.key_schema) == (1, INT32_SCHEMA)
    assert apply(c, record({"c1": 2, "c2": "foo"})).key == 2


def test_value_to_key_with_schema() -> None:
    schema = struct_schema(("a", INT32_SCHEMA), ("b", INT32_SCHEMA), ("c", INT32_SCHEMA))
    value = struct(schema, a=1, b=2, c=3)
    c = one("ValueToKey", fields="a,b")
    out = apply(c, record(value, value_schema=schema, key="old"))
    assert out.key_schema == struct_schema(("a", INT32_SCHEMA), ("b", INT32_SCHEMA))
    assert out.key.schema is out.key_schema
    assert as_dict(out.key) == {"a": 1, "b": 2}
    assert (out.value, out.value_schema) == (value, schema)
    again = apply(c, record(struct(schema, a=5, b=6, c=7), value_schema=schema))
    assert again.key_schema is out.key_schema


def test_value_to_key_missing_fields() -> None:
    assert apply(one("ValueToKey", fields="a,x"), record({"a": 1})).key == {"a": 1, "x": None}
    schema = struct_schema(("a", INT32_SCHEMA))
    with pytest.raises(TransformError, match="Field does not exist: x"):
        one("ValueToKey", fields="x").apply(record(struct(schema, a=1), value_schema=schema))
    with pytest.raises(TransformError, match=r"in absence of schema .* found: null"):
        one("ValueToKey", fields="a").apply(record(None))


# ----------------------------------------------------------------- ExtractField


@pytest.mark.parametrize("side", ["Key", "Value"])
def test_extract_field_docs_example(side: str) -> None:
    c = chain(
        {
            "transforms": "ExtractField",
            "transforms.ExtractField.type": f"{CONNECT}ExtractField${side}",
            "transforms.ExtractField.field": "id",
        }
    )
    before = {"id": 42, "cost": 4000}
    out = apply(c, record(before, key=before))
    assert (out.key if side == "Key" else out.value) == 42


def test_extract_field_with_schema_and_nulls() -> None:
    schema = struct_schema(("magic", INT32_SCHEMA), ("note", OPTIONAL_STRING_SCHEMA))
    c = one("ExtractField$Value", field="magic")
    out = apply(c, record(struct(schema, magic=42), value_schema=schema))
    assert (out.value, out.value_schema) == (42, INT32_SCHEMA)
    tombstone = apply(c, record(None, value_schema=schema))
    assert (tombstone.value, tombstone.value_schema) == (None, INT32_SCHEMA)
    assert apply(c, record(None)).value is None
    assert apply(c, record({"other": 1})).value is None
    with pytest.raises(TransformError, match="Unknown field: nope"):
        one("ExtractField$Value", field="nope").apply(
            record(struct(schema, magic=1), value_schema=schema)
        )


def test_extract_field_default_of_a_null_field() -> None:
    schema = struct_schema(("n", SchemaBuilder.int32().optional().default(7).build()))
    assert (
        apply(
            one("ExtractField$Value", field="n"), record(struct(schema), value_schema=schema)
        ).value
        == 7
    )
    no_default = one("ExtractField$Value", field="n", replace_null_with_default="false")
    assert apply(no_default, record(struct(schema), value_schema=schema)).value is None


def test_extract_field_nested_with_syntax_v2() -> None:
    inner = struct_schema(("b", STRING_SCHEMA))
    schema = struct_schema(("a", inner), ("a.b", STRING_SCHEMA))
    value = struct(schema, a=struct(inner, b="nested"), **{"a.b": "dotted"})
    v2 = one("ExtractField$Value", field="a.b", field_syntax_version="V2")
    out = apply(v2, record(value, value_schema=schema))
    assert (out.value, out.value_schema) == ("nested", STRING_SCHEMA)
    assert (
        apply(one("ExtractField$Value", field="a.b"), record(value, value_schema=schema)).value
        == "dotted"
    )
    quoted = one("ExtractField$Value", field="`a.b`", field_syntax_version="v2")
    assert apply(quoted, record(value, value_schema=schema)).value == "dotted"
    assert apply(v2, record({"a": {"b": 1}})).value == 1
    assert apply(v2, record({"a": None})).value is None


@pytest.mark.parametrize(
    ("path", "steps"),
    [
        ("foo", ["foo"]),
        ("foo.bar", ["foo", "bar"]),
        ("`foo.bar`.baz", ["foo.bar", "baz"]),
        ("foo.`bar.baz`", ["foo", "bar.baz"]),
        ("`foo`bar`.baz", ["foo`bar", "baz"]),
        ("`foo\\`.bar`.baz", ["foo`.bar", "baz"]),
        ("foo.", ["foo", ""]),
    ],
)
def test_field_path_v2_steps(path: str, steps: list[str]) -> None:
    assert field_path(path, "V2") == steps
    assert field_path(path, "V1") == [path]


# ------------------------------------------------------------------- HoistField


def test_hoist_field_docs_example() -> None:
    c = chain(
        {
            "transforms": "HoistField",
            "transforms.HoistField.type": CONNECT + "HoistField$Value",
            "transforms.HoistField.field": "line",
        }
    )
    assert [apply(c, record(m)).value for m in ("Foo", "Bar")] == [{"line": "Foo"}, {"line": "Bar"}]


def test_hoist_field_with_schema_and_on_the_key() -> None:
    c = one("HoistField$Key", field="magic")
    out = apply(c, record("v", key=42, key_schema=INT32_SCHEMA))
    assert out.key_schema == struct_schema(("magic", INT32_SCHEMA))
    assert as_dict(out.key) == {"magic": 42}
    assert apply(c, record("v", key=None)).key == {"magic": None}


def test_value_to_key_takes_defaults_of_null_fields() -> None:
    schema = struct_schema(
        ("a", SchemaBuilder.int32().optional().default(9).build()), ("b", INT32_SCHEMA)
    )
    value = struct(schema, b=2)
    out = apply(one("ValueToKey", fields="a,b"), record(value, value_schema=schema))
    assert as_dict(out.key) == {"a": 9, "b": 2}
    plain = one("ValueToKey", fields="a,b", replace_null_with_default="false")
    assert as_dict(apply(plain, record(value, value_schema=schema)).key) == {"a": None, "b": 2}
