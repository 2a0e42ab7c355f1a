"""InsertField and ValueToKey on typed record blocks (``encoded=False``, a ``pyarrow``
struct column with a STRUCT schema) work on the columns, and give what the row path
gives for the block's records: topics, keys, values and schemas."""

from __future__ import annotations

import datetime
import decimal
import io
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from eos.api import RecordBlock, SourceRecord
from eos.api.logical import Decimal, Timestamp
from eos.api.schema import (
    BOOLEAN_SCHEMA,
    FLOAT64_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    SchemaBuilder,
)
from eos.converters.avro import avro_schema, to_avro
from eos.converters.avro_arrow import encode_column
from eos.errors import DataError, TransformError
from eos.transforms import TransformChain
from tests.unit.transform_cases import PARTITION, chain, one

OFFSET = {"row": 3}
ADDRESS = (
    SchemaBuilder.struct().name("Address").field("city", STRING_SCHEMA).field("zip", INT32_SCHEMA)
).build()
SCHEMA = (
    SchemaBuilder.struct()
    .name("Order")
    .version(2)
    .field("id", INT64_SCHEMA)
    .field("name", STRING_SCHEMA)
    .field("amount", FLOAT64_SCHEMA)
    .field("ok", BOOLEAN_SCHEMA)
    .field("note", OPTIONAL_STRING_SCHEMA)
    .field("address", ADDRESS)
    .field("price", Decimal.schema(2))
    .field("at", Timestamp.SCHEMA)
    .build()
)
KEY_SCHEMA = SchemaBuilder.struct().field("id", INT64_SCHEMA).build()
AT = datetime.datetime(2026, 11, 25, 12, 0, tzinfo=datetime.UTC)
ROWS: list[dict[str, Any]] = [
    {
        "id": i,
        "name": f"name-{i}",
        "amount": 12.5 * i,
        "ok": i % 2 == 0,
        "note": None if i == 1 else f"note {i}",
        "address": {"city": "Topeka", "zip": 66600 + i},
        "price": decimal.Decimal(f"{i}.25"),
        "at": AT + datetime.timedelta(seconds=i),
    }
    for i in range(4)
]
ARROW = pa.struct(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("amount", pa.float64()),
        ("ok", pa.bool_()),
        ("note", pa.string()),
        ("address", pa.struct([("city", pa.string()), ("zip", pa.int32())])),
        ("price", pa.decimal128(10, 2)),
        ("at", pa.timestamp("ms", tz="UTC")),
    ]
)
INSERT = {
    "i.type": "InsertField$Value",
    "i.static.field": "src",
    "i.static.value": "db",
}
ROUTE = {"r.type": "RegexRouter", "r.regex": "(.*)", "r.replacement": "eu.$1"}
V2K = {"k.type": "ValueToKey", "k.fields": "id"}


def typed(rows: list[Any] = ROWS, **columns: Any) -> RecordBlock:
    """A block as SparkSource hands it over: one struct array of values."""
    columns.setdefault("value_schema", SCHEMA)
    values = pa.array(rows, columns.pop("arrow", ARROW))
    return RecordBlock(PARTITION, OFFSET, "orders", values, encoded=False, **columns)


def steps(aliases: str, *settings: dict[str, str]) -> TransformChain:
    props = {"transforms": aliases}
    for s in settings:
        props.update({f"transforms.{k}": v for k, v in s.items()})
    return chain(props)


def by_rows(c: TransformChain, block: RecordBlock) -> list[SourceRecord]:
    out = [c.apply(r) for r in block.records()]
    return [r for r in out if r is not None]


def same_as_rows(c: TransformChain, block: RecordBlock) -> RecordBlock:
    """The chain's block, checked against the row path (and that it stayed a column)."""
    out = c.apply_block(block)
    assert isinstance(out, RecordBlock)
    assert not out.encoded
    assert isinstance(out.values, pa.StructArray)
    assert out.keys is None or isinstance(out.keys, pa.Array)
    assert out.records() == by_rows(c, block)
    return out


def test_insert_field_static_and_topic_into_the_value_column() -> None:
    c = one("InsertField$Value", static_field="src", static_value="db", topic_field="topic!")
    out = same_as_rows(c, typed())
    assert out.value_schema is not None
    assert [f.name for f in out.value_schema.fields][-2:] == ["topic", "src"]
    assert (out.value_schema.name, out.value_schema.version) == ("Order", 2)
    assert out.values.field("src").to_pylist() == ["db"] * 4  # type: ignore[attr-defined]
    same_as_rows(c, typed(topics=["a", "b", "a", "c"]))


def test_insert_field_partition_and_timestamp() -> None:
    c = one("InsertField$Value", partition_field="p", timestamp_field="ts")
    stamps = [1_700_000_000_123, None, 0, 5]
    listed = same_as_rows(c, typed(timestamps=stamps))
    arrow = c.apply_block(typed(timestamps=pa.array(stamps, pa.int64())))
    assert isinstance(arrow, RecordBlock)
    assert arrow.values == listed.values
    same_as_rows(c, typed())
    required = one("InsertField$Value", partition_field="p!", timestamp_field="ts!")
    assert isinstance(required.apply_block(typed()), list)  # null in a required field
    stamped = one("InsertField$Value", timestamp_field="ts!")
    same_as_rows(stamped, typed(timestamps=[1, 2, 3, 4]))


def test_the_block_encodes_as_the_rows_in_avro() -> None:
    inserts = {"t.type": "InsertField$Value", "t.topic.field": "t", "t.timestamp.field": "ts"}
    c = steps("i,r,k,t", INSERT, ROUTE, V2K, inserts)
    block = typed(timestamps=[1_700_000_000_123, None, 0, -5])
    out = c.apply_block(block)
    assert isinstance(out, RecordBlock)
    assert out.value_schema is not None
    avro = fastavro.parse_schema(avro_schema(out.value_schema))
    convert = to_avro(out.value_schema)
    encoded = encode_column(out.values, out.value_schema, b"")
    for data, row in zip(encoded, by_rows(c, block), strict=True):
        written = io.BytesIO()
        fastavro.schemaless_writer(written, avro, convert(row.value))
        assert data == written.getvalue()


def test_insert_field_into_the_key_column() -> None:
    c = one("InsertField$Key", static_field="src", static_value="db", topic_field="t")
    keys = pa.array([{"id": r["id"]} for r in ROWS], pa.struct([("id", pa.int64())]))
    out = same_as_rows(c, typed(keys=keys, key_schema=KEY_SCHEMA))
    assert out.key_schema is not None
    assert [f.name for f in out.key_schema.fields] == ["id", "t", "src"]
    no_keys = typed()
    assert c.apply_block(no_keys) is no_keys


def test_insert_field_fills_defaults_as_the_row_path() -> None:
    schema = (
        SchemaBuilder.struct()
        .field("id", INT64_SCHEMA)
        .field("note", SchemaBuilder.string().optional().default("none").build())
        .build()
    )
    arrow = pa.struct([("id", pa.int64()), ("note", pa.string())])
    rows = [{"id": 1, "note": None}, {"id": 2, "note": "x"}]
    block = typed(rows, value_schema=schema, arrow=arrow)
    for replace in ("true", "false"):
        c = one(
            "InsertField$Value",
            static_field="src",
            static_value="db",
            replace_null_with_default=replace,
        )
        out = same_as_rows(c, block)
        assert out.records()[0].value.get_without_default("note") == (
            "none" if replace == "true" else None
        )
        k = one("ValueToKey", fields="note", replace_null_with_default=replace)
        same_as_rows(k, block)


def test_value_to_key_one_and_several_fields() -> None:
    for fields in ("id", "name,address,price,at", "note,id"):
        c = one("ValueToKey", fields=fields)
        out = same_as_rows(c, typed())
        assert out.key_schema is not None
        assert [f.name for f in out.key_schema.fields] == fields.split(",")
        assert out.value_schema is SCHEMA


def test_value_to_key_on_a_sliced_column() -> None:
    block = typed()
    values: Any = block.values
    sliced = RecordBlock(
        PARTITION, OFFSET, "orders", values[1:3], value_schema=SCHEMA, encoded=False
    )
    same_as_rows(one("ValueToKey", fields="id,name"), sliced)
    same_as_rows(one("InsertField$Value", static_field="s", static_value="v"), sliced)


def test_the_three_step_chain_of_the_issue() -> None:
    c = steps("i,r,k", INSERT, ROUTE, V2K)
    out = same_as_rows(c, typed())
    assert out.topic == "eu.orders"
    assert out.keys is not None
    assert out.keys.to_pylist() == [{"id": i} for i in range(4)]  # type: ignore[attr-defined]


def test_a_step_with_a_predicate_gives_the_row_path_answer() -> None:
    props = {
        "transforms": "i,k",
        "transforms.i.type": "InsertField$Value",
        "transforms.i.static.field": "src",
        "transforms.i.static.value": "db",
        "transforms.i.predicate": "eu",
        "transforms.k.type": "ValueToKey",
        "transforms.k.fields": "id",
        "predicates": "eu",
        "predicates.eu.type": "TopicNameMatches",
        "predicates.eu.pattern": "eu.*",
    }
    c = chain(props)
    block = typed(topics=["eu.a", "us.b", "eu.c", "us.d"])
    out = c.apply_block(block)
    assert isinstance(out, list)  # the rows have two value schemas: row by row
    assert out == by_rows(c, block)
    every = typed(topics=["eu.a", "eu.b", "eu.c", "eu.d"])
    same_as_rows(c, every)  # the predicate matches every row: no mask


def test_null_values_are_left_to_the_row_path_or_fail_as_it_does() -> None:
    rows: list[Any] = [*ROWS[:2], None, *ROWS[2:]]
    block = typed(rows)
    insert = one("InsertField$Value", static_field="src", static_value="db")
    out = insert.apply_block(block)
    assert out == by_rows(insert, block)  # a null keeps its schema: row by row
    v2k = one("ValueToKey", fields="id")
    with pytest.raises(TransformError) as on_rows:
        by_rows(v2k, block)
    with pytest.raises(TransformError) as on_block:
        v2k.apply_block(block)
    assert isinstance(on_block.value.__cause__, DataError)
    assert str(on_block.value.__cause__) == str(on_rows.value.__cause__)


def test_a_missing_field_fails_as_on_the_row_path() -> None:
    c = one("ValueToKey", fields="id,nope")
    with pytest.raises(TransformError, match=r"transforms\.t \(ValueToKey\)") as on_block:
        c.apply_block(typed())
    assert str(on_block.value.__cause__) == "Field does not exist: nope"
    with pytest.raises(TransformError):
        by_rows(c, typed())


def test_other_columns_go_row_by_row() -> None:
    c = steps("i,k", INSERT, V2K)
    schemaless = RecordBlock(PARTITION, OFFSET, "orders", list(ROWS), encoded=False)
    assert c.apply_block(schemaless) == by_rows(c, schemaless)
    as_dicts = typed()
    listed = RecordBlock(
        PARTITION, OFFSET, "orders", as_dicts.values.to_pylist(), value_schema=SCHEMA,  # type: ignore[attr-defined]
        encoded=False,
    )  # fmt: skip
    out = c.apply_block(listed)
    assert isinstance(out, list)
    assert out == by_rows(c, listed)
