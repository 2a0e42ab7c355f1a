"""InsertField, ReplaceField and MaskField, without and with schemas. The docs'
examples (docs.confluent.io transforms reference) are the first test of each; the rest
follow Connect's behaviour (apache/kafka connect/transforms)."""

from __future__ import annotations

import datetime
import decimal

import pytest

from eos.api.logical import Timestamp
from eos.api.schema import (
    BOOLEAN_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    SchemaBuilder,
    SchemaType,
)
from eos.errors import DataError, TransformError
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

UTC = datetime.UTC

# ------------------------------------------------------------------ InsertField


def test_insert_field_docs_example() -> None:
    c = chain(
        {
            "transforms": "InsertField",
            "transforms.InsertField.type": CONNECT + "InsertField$Value",
            "transforms.InsertField.static.field": "MessageSource",
            "transforms.InsertField.static.value": "Kafka Connect framework",
        }
    )
    before = {"author": "Philip K. Dick", "character": "Palmer Eldritch"}
    assert apply(c, record(before)).value == {
        "author": "Philip K. Dick",
        "character": "Palmer Eldritch",
        "MessageSource": "Kafka Connect framework",
    }
    assert before == {"author": "Philip K. Dick", "character": "Palmer Eldritch"}  # untouched


METADATA = {
    "topic_field": "topic_field!",
    "partition_field": "partition_field",
    "timestamp_field": "timestamp_field?",
    "static_field": "instance_id",
    "static_value": "my-instance-id",
}


def test_insert_field_schemaless_metadata() -> None:
    c = one("InsertField$Value", **METADATA)
    out = apply(c, record({"magic": 42}, topic="test", partition=0, timestamp=123))
    assert out.value == {
        "magic": 42,
        "topic_field": "test",
        "partition_field": 0,
        "timestamp_field": 123,
        "instance_id": "my-instance-id",
    }
    # Metadata the record lacks is left out.
    assert apply(c, record({"magic": 42})).value == {
        "magic": 42,
        "topic_field": "orders",
        "instance_id": "my-instance-id",
    }


def test_insert_field_with_schema_copies_the_schema_and_adds_the_fields() -> None:
    builder = SchemaBuilder.struct().name("name").version(1).doc("doc")
    schema = builder.field("magic", INT64_SCHEMA).build()
    c = one("InsertField$Value", **METADATA)
    out = apply(
        c,
        record(
            struct(schema, magic=42), value_schema=schema, topic="test", partition=0, timestamp=123
        ),
    )
    new = out.value_schema
    assert new is not None
    assert new is out.value.schema
    assert (new.name, new.version, new.doc) == ("name", 1, "doc")
    assert [(f.name, f.schema) for f in new.fields] == [
        ("magic", INT64_SCHEMA),
        ("topic_field", STRING_SCHEMA),
        ("partition_field", OPTIONAL_INT32_SCHEMA),
        ("timestamp_field", Timestamp.builder().optional().build()),
        ("instance_id", OPTIONAL_STRING_SCHEMA),
    ]
    assert as_dict(out.value) == {
        "magic": 42,
        "topic_field": "test",
        "partition_field": 0,
        "timestamp_field": datetime.datetime(1970, 1, 1, 0, 0, 0, 123000, tzinfo=UTC),
        "instance_id": "my-instance-id",
    }
    out.value.validate()
    again = apply(c, record(struct(schema, magic=1), value_schema=schema))
    assert again.value_schema is new  # derived once per input schema


def test_insert_field_on_the_key_and_null_passes() -> None:
    c = one("InsertField$Key", static_field="src", static_value="db")
    assert apply(c, record({"v": 1}, key={"id": 1})).key == {"id": 1, "src": "db"}
    tombstone = record(None, key=None)
    assert c.apply(tombstone) is tombstone
    schema = struct_schema(("id", INT32_SCHEMA))
    assert one("InsertField$Value", static_field="s", static_value="v").apply(
        record(None, value_schema=schema)
    ) == record(None, value_schema=schema)


def test_insert_field_replace_null_with_default() -> None:
    with_default = SchemaBuilder.int32().optional().default(5).build()
    schema = struct_schema(("n", with_default))
    value = struct(schema)
    for flag, expected in (("true", 5), ("false", None)):
        c = one(
            "InsertField$Value", static_field="s", static_value="v", replace_null_with_default=flag
        )
        out = apply(c, record(value, value_schema=schema))
        assert out.value.get_without_default("n") == expected


def test_insert_field_and_value_to_key_follow_each_records_schema() -> None:
    # Each keeps what it derived from the last schema: records of two schemas, alternating.
    small = struct_schema(("id", INT32_SCHEMA))
    wide = struct_schema(
        ("id", INT32_SCHEMA), ("n", SchemaBuilder.int32().optional().default(5).build())
    )
    c = chain(
        {
            "transforms": "i,k",
            "transforms.i.type": "InsertField$Value",
            "transforms.i.static.field": "s",
            "transforms.i.static.value": "v",
            "transforms.k.type": "ValueToKey",
            "transforms.k.fields": "id",
        }
    )
    for _ in range(2):
        out = apply(c, record(struct(small, id=1), value_schema=small))
        assert [f.name for f in out.value.schema.fields] == ["id", "s"]
        assert as_dict(out.value) == {"id": 1, "s": "v"}
        out = apply(c, record(struct(wide, id=2), value_schema=wide))
        assert [f.name for f in out.value.schema.fields] == ["id", "n", "s"]
        assert as_dict(out.value) == {"id": 2, "n": 5, "s": "v"}
        assert out.value_schema is out.value.schema
        assert as_dict(out.key) == {"id": 2}
        assert out.key_schema is not None
        assert out.key_schema.fields[0].schema == INT32_SCHEMA


def test_insert_field_needs_a_map_or_struct() -> None:
    with pytest.raises(TransformError) as info:
        one("InsertField$Value", static_field="s", static_value="v").apply(record("text"))
    assert str(info.value.__cause__) == (
        "Only Map objects supported in absence of schema for [field insertion], found: str"
    )
    with pytest.raises(TransformError, match=r"Only Struct objects supported for \[field "):
        one("InsertField$Value", static_field="s", static_value="v").apply(
            record([1], value_schema=struct_schema(("a", INT32_SCHEMA)))
        )


def test_a_struct_given_as_a_dict_is_a_struct_to_the_transforms() -> None:
    """The record API lets a STRUCT value be a plain dict (VerifiableSource's are): the
    chain reads it as the Struct the converters would, as Connect's transforms need."""
    schema = struct_schema(("a", INT32_SCHEMA))
    out = one("InsertField$Value", static_field="s", static_value="v").apply(
        record({"a": 1}, value_schema=schema)
    )
    assert out is not None
    assert (out.value.get("a"), out.value.get("s")) == (1, "v")


# ----------------------------------------------------------------- ReplaceField


def test_replace_field_docs_examples() -> None:
    drop = chain(
        {
            "transforms": "ReplaceField",
            "transforms.ReplaceField.type": CONNECT + "ReplaceField$Value",
            "transforms.ReplaceField.exclude": "c2",
        }
    )
    assert apply(drop, record({"c1": 22, "c2": "foo"})).value == {"c1": 22}
    rename = chain(
        {
            "transforms": "RenameField",
            "transforms.RenameField.type": CONNECT + "ReplaceField$Value",
            "transforms.RenameField.renames": "foo:c1,bar:c2",
        }
    )
    assert apply(rename, record({"foo": 22, "bar": "baz"})).value == {"c1": 22, "c2": "baz"}


def test_replace_field_exclude_wins_over_include() -> None:
    c = one("ReplaceField$Value", include="a,b", exclude="b", renames="a:x")
    assert apply(c, record({"a": 1, "b": 2, "c": 3})).value == {"x": 1}


def test_replace_field_reads_the_older_blacklist_and_whitelist() -> None:
    assert apply(one("ReplaceField$Value", blacklist="c2"), record({"c1": 1, "c2": 2})).value == {
        "c1": 1
    }
    assert apply(one("ReplaceField$Value", whitelist="c2"), record({"c1": 1, "c2": 2})).value == {
        "c2": 2
    }
    both = one("ReplaceField$Value", include="c1", whitelist="c2")  # the new name wins
    assert apply(both, record({"c1": 1, "c2": 2})).value == {"c1": 1}


def test_replace_field_with_schema() -> None:
    schema = struct_schema(
        ("dont", STRING_SCHEMA),
        ("abc", INT32_SCHEMA),
        ("foo", BOOLEAN_SCHEMA),
        ("etc", STRING_SCHEMA),
        name="row",
    )
    value = struct(schema, dont="whatever", abc=42, foo=True, etc="etc")
    c = one("ReplaceField$Value", exclude="dont", renames="abc:xyz,foo:bar")
    out = apply(c, record(value, value_schema=schema))
    assert out.value_schema is not None
    assert out.value_schema.name == "row"
    assert [(f.name, f.schema) for f in out.value_schema.fields] == [
        ("xyz", INT32_SCHEMA),
        ("bar", BOOLEAN_SCHEMA),
        ("etc", STRING_SCHEMA),
    ]
    assert as_dict(out.value) == {"xyz": 42, "bar": True, "etc": "etc"}
    assert c.apply(record(None, value_schema=schema)) is not None


# -------------------------------------------------------------------- MaskField


def test_mask_field_docs_examples() -> None:
    mask = chain(
        {
            "transforms": "MaskField",
            "transforms.MaskField.type": CONNECT + "MaskField$Value",
            "transforms.MaskField.fields": "string_field",
        }
    )
    assert apply(mask, record({"integer_field": 22, "string_field": "foo"})).value == {
        "integer_field": 22,
        "string_field": "",
    }
    replace = chain(
        {
            "transforms": "SSNMask,IPMask,PhoneMask",
            "transforms.SSNMask.type": CONNECT + "MaskField$Value",
            "transforms.SSNMask.fields": "SSN",
            "transforms.SSNMask.replacement": "***-***-****",
            "transforms.IPMask.type": CONNECT + "MaskField$Value",
            "transforms.IPMask.fields": "IPAddress",
            "transforms.IPMask.replacement": "xxx.xxx.xxx.xxx",
            "transforms.PhoneMask.type": CONNECT + "MaskField$Value",
            "transforms.PhoneMask.fields": "office,mobile",
            "transforms.PhoneMask.replacement": "+0-000-000-0000",
        }
    )
    before = {
        "name": "Ann",
        "SSN": "123-45-6789",
        "IPAddress": "10.1.2.3",
        "office": "+1-555-123-4567",
        "mobile": "+1-555-765-4321",
    }
    assert apply(replace, record(before)).value == {
        "name": "Ann",
        "SSN": "***-***-****",
        "IPAddress": "xxx.xxx.xxx.xxx",
        "office": "+0-000-000-0000",
        "mobile": "+0-000-000-0000",
    }


def test_mask_field_schemaless_valid_null_values() -> None:
    value = {
        "int": 42,
        "float": 42.5,
        "bool": True,
        "str": "s",
        "dec": decimal.Decimal("4.2"),
        "ts": datetime.datetime(2020, 1, 1, tzinfo=UTC),
        "date": datetime.date(2020, 1, 1),
        "list": [1, 2],
        "map": {"a": 1},
        "null": None,
        "kept": "k",
    }
    masked = [k for k in value if k != "kept"] + ["absent"]
    out = apply(one("MaskField$Value", fields=",".join(masked)), record(value)).value
    assert out == {
        "int": 0,
        "float": 0.0,
        "bool": False,
        "str": "",
        "dec": decimal.Decimal(0),
        "ts": datetime.datetime(1970, 1, 1, tzinfo=UTC),
        "date": datetime.date(1970, 1, 1),
        "list": [],
        "map": {},
        "null": None,
        "kept": "k",
        "absent": None,
    }
    with pytest.raises(TransformError, match="Cannot mask value of type: bytes"):
        one("MaskField$Value", fields="b").apply(record({"b": b"x"}))


def test_mask_field_with_schema() -> None:
    schema = struct_schema(
        ("id", INT8_SCHEMA),
        ("name", STRING_SCHEMA),
        ("score", FLOAT64_SCHEMA),
        ("ok", BOOLEAN_SCHEMA),
    )
    value = struct(schema, id=5, name="Ann", score=1.5, ok=True)
    out = apply(one("MaskField$Value", fields="id,name,ok"), record(value, value_schema=schema))
    assert out.value_schema is schema
    assert as_dict(out.value) == {"id": 0, "name": "", "score": 1.5, "ok": False}
    assert as_dict(value) == {"id": 5, "name": "Ann", "score": 1.5, "ok": True}


def test_mask_field_custom_replacement_converts_to_the_field_type() -> None:
    c = one("MaskField$Value", fields="i,f,s,d", replacement="123")
    assert apply(c, record({"i": 1, "f": 2.5, "s": "x", "d": decimal.Decimal(1)})).value == {
        "i": 123,
        "f": 123.0,
        "s": "123",
        "d": decimal.Decimal(123),
    }
    with pytest.raises(TransformError, match="Cannot mask value of type bool with custom"):
        one("MaskField$Value", fields="b", replacement="1").apply(record({"b": True}))
    with pytest.raises(TransformError, match=r"Unable to convert abc \(str\) to number"):
        one("MaskField$Value", fields="i", replacement="abc").apply(record({"i": 1}))
    schema = struct_schema(("i", INT8_SCHEMA))
    with pytest.raises(TransformError) as info:
        one("MaskField$Value", fields="i", replacement="1000").apply(
            record(struct(schema, i=1), value_schema=schema)
        )
    assert isinstance(info.value.__cause__, DataError)
    assert "out of range for INT8" in str(info.value)
    assert SchemaType.INT8 is schema.fields[0].schema.type
