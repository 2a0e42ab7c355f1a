"""Transforms on record blocks: topic and header steps and their predicates work on the
columns (no record per row); a step that needs single rows turns the rest of the chain
into records, decoded where a step reads keys or values, or says it cannot."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from eos.api import RecordBlock, SourceRecord
from eos.api.schema import INT64_SCHEMA, STRING_SCHEMA
from eos.api.transforms import Predicate
from eos.errors import TransformError
from tests.unit.transform_cases import PARTITION, chain, one

OFFSET = {"line": 3}


def block(**columns: Any) -> RecordBlock:
    fields: dict[str, Any] = {"values": [b'{"id":1}', None, b'{"id":3}'], **columns}
    return RecordBlock(PARTITION, OFFSET, "orders", **fields)


def rows(out: RecordBlock | list[SourceRecord] | None) -> list[tuple[Any, ...]]:
    """Each row as (topic, value, headers)."""
    assert out is not None
    records = out.records() if isinstance(out, RecordBlock) else out
    return [(r.topic, r.value, tuple(r.headers)) for r in records]


def test_regex_router_renames_the_block_topic() -> None:
    c = one("RegexRouter", regex="(.*)", replacement="eu.$1")
    out = c.apply_block(block())
    assert isinstance(out, RecordBlock)
    assert (out.topic, out.topics, out.source_offset) == ("eu.orders", None, OFFSET)
    per_row = c.apply_block(block(topics=["a", "b", "a"]))
    assert isinstance(per_row, RecordBlock)
    assert per_row.topics == ["eu.a", "eu.b", "eu.a"]


def test_filter_with_topic_predicate_drops_rows_of_a_block() -> None:
    c = chain(
        {
            "transforms": "f",
            "transforms.f.type": "Filter",
            "transforms.f.predicate": "p",
            "predicates": "p",
            "predicates.p.type": "TopicNameMatches",
            "predicates.p.pattern": "tmp.*",
        }
    )
    out = c.apply_block(block(topics=["tmp1", "keep", "tmp2"], keys=[b"1", b"2", b"3"]))
    assert isinstance(out, RecordBlock)
    assert (list(out.values), out.keys, out.topic, out.source_offset) == (
        [None],
        [b"2"],
        "keep",
        OFFSET,
    )
    assert c.apply_block(block(topics=["tmp1", "tmp2", "tmp3"])) is None
    untouched = block()
    assert c.apply_block(untouched) is untouched


def test_tombstones_and_headers_as_block_predicates() -> None:
    c = chain(
        {
            "transforms": "t,h",
            "transforms.t.type": "Filter",
            "transforms.t.predicate": "dead",
            "transforms.h.type": "Filter",
            "transforms.h.predicate": "traced",
            "predicates": "dead,traced",
            "predicates.dead.type": "RecordIsTombstone",
            "predicates.traced.type": "HasHeaderKey",
            "predicates.traced.name": "trace",
        }
    )
    out = c.apply_block(block(header_columns={"trace": [None, None, b"x"]}))
    assert rows(out) == [("orders", b'{"id":1}', ())]
    assert c.apply_block(block(headers=(("trace", b"all"),))) is None


def test_insert_header_on_a_block_and_on_the_rows_a_predicate_selects() -> None:
    c = one("InsertHeader", header="src", value_literal="db")
    out = c.apply_block(block(headers=(("a", b"1"),)))
    assert isinstance(out, RecordBlock)
    assert out.headers == (("a", b"1"), ("src", b"db"))
    some = chain(
        {
            "transforms": "i",
            "transforms.i.type": "InsertHeader",
            "transforms.i.header": "src",
            "transforms.i.value.literal": "db",
            "transforms.i.predicate": "p",
            "predicates": "p",
            "predicates.p.type": "TopicNameMatches",
            "predicates.p.pattern": "a",
        }
    )
    out = some.apply_block(block(topics=["a", "b", "a"]))
    assert isinstance(out, RecordBlock)
    assert [r[2] for r in rows(out)] == [(("src", b"db"),), (), (("src", b"db"),)]


def test_insert_header_after_a_header_column_of_the_same_name_goes_row_by_row() -> None:
    c = one("InsertHeader", header="h", value_literal="new")
    out = c.apply_block(block(header_columns={"h": [b"old", None, b"old"]}))
    assert isinstance(out, list)  # a column cannot hold two values of one row
    assert [r[2] for r in rows(out)] == [
        (("h", b"old"), ("h", b"new")),
        (("h", b"new"),),
        (("h", b"old"), ("h", b"new")),
    ]
    assert out[-1].source_offset == OFFSET


def test_drop_headers_on_a_block() -> None:
    b = block(
        headers=(("drop", b"1"), ("keep", b"2")),
        header_columns={"drop": [b"x", None, b"y"], "other": [b"o", b"o", None]},
    )
    out = one("DropHeaders", headers="drop").apply_block(b)
    assert isinstance(out, RecordBlock)
    assert (out.headers, dict(out.header_columns)) == (
        (("keep", b"2"),),
        {"other": [b"o", b"o", None]},
    )
    some = chain(
        {
            "transforms": "d",
            "transforms.d.type": "DropHeaders",
            "transforms.d.headers": "drop",
            "transforms.d.predicate": "p",
            "transforms.d.negate": "true",
            "predicates": "p",
            "predicates.p.type": "TopicNameMatches",
            "predicates.p.pattern": "keep",
        }
    )
    # "drop" is a block header and a column: the rows keeping it need both, in order.
    out = some.apply_block(dataclasses.replace(b, topics=["x", "keep", "x"]))
    assert isinstance(out, list)
    assert [r[2] for r in rows(out)] == [
        (("keep", b"2"), ("other", b"o")),
        (("drop", b"1"), ("keep", b"2"), ("other", b"o")),
        (("keep", b"2"),),
    ]
    only_common = dataclasses.replace(b, topics=["x", "keep", "x"], header_columns={})
    out = some.apply_block(only_common)
    assert isinstance(out, RecordBlock)
    assert [dict(r[2]) for r in rows(out)] == [
        {"keep": b"2"},
        {"drop": b"1", "keep": b"2"},
        {"keep": b"2"},
    ]


def test_timestamp_router_on_a_block() -> None:
    c = one("TimestampRouter", timestamp_format="yyyy")
    out = c.apply_block(block(timestamps=[0, 31_622_400_000, 0]))
    assert isinstance(out, RecordBlock)
    assert out.topics == ["orders-1970", "orders-1971", "orders-1970"]
    with pytest.raises(TransformError, match="Timestamp missing on record"):
        c.apply_block(block())


def test_a_value_transform_on_an_encoded_block_needs_a_decoder() -> None:
    c = chain(
        {
            "transforms": "r,k",
            "transforms.r.type": "RegexRouter",
            "transforms.r.regex": "(.*)",
            "transforms.r.replacement": "x.$1",
            "transforms.k.type": "ValueToKey",
            "transforms.k.fields": "id",
        }
    )
    with pytest.raises(TransformError) as info:
        c.apply_block(block())
    assert str(info.value).startswith(
        "transforms.k (ValueToKey) reads record keys or values, but the connector hands them "
        "over already encoded (record blocks of bytes)"
    )

    class Json:
        def decode(self, b: RecordBlock) -> list[SourceRecord]:
            return [
                dataclasses.replace(
                    r, value=None if r.value is None else json.loads(r.value), encoded=False
                )
                for r in b.records()
            ]

    out = c.apply_block(block(values=[b'{"id":1}', b'{"id":2}']), Json())
    assert isinstance(out, list)
    assert [(r.topic, r.key, r.value, r.encoded) for r in out] == [
        ("x.orders", {"id": 1}, {"id": 1}, False),
        ("x.orders", {"id": 2}, {"id": 2}, False),
    ]
    assert out[-1].source_offset == OFFSET


def test_a_block_of_connect_values_runs_value_transforms_row_by_row() -> None:
    values = RecordBlock(
        PARTITION, OFFSET, "t", values=[1, 2], value_schema=INT64_SCHEMA, encoded=False
    )
    out = one("Cast$Value", spec="string").apply_block(values)
    assert isinstance(out, list)
    assert [(r.value, r.value_schema) for r in out] == [("1", STRING_SCHEMA), ("2", STRING_SCHEMA)]


class TopicStartsWith(Predicate):
    """A user's predicate that reads only topics."""

    reads_values = False

    def test(self, record: SourceRecord) -> bool:
        return record.topic.startswith("a")


def test_a_users_predicate_runs_on_the_rows_of_an_encoded_block() -> None:
    c = chain(
        {
            "transforms": "f",
            "transforms.f.type": "Filter",
            "transforms.f.predicate": "p",
            "predicates": "p",
            "predicates.p.type": f"{__name__}:TopicStartsWith",
        }
    )
    out = c.apply_block(block(topics=["a1", "b", "a2"]))
    assert rows(out) == [("b", None, ())]


def test_an_empty_chain_returns_the_block() -> None:
    b = block()
    assert chain({}).apply_block(b) is b
