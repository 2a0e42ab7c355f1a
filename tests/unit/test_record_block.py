"""``RecordBlock``: column checks, its length, and its rows as ``SourceRecord`` s."""

from __future__ import annotations

from typing import Any

import pytest

from eos.api import RecordBlock, SourceRecord

PARTITION = {"file": "a.csv"}


def block(**columns: Any) -> RecordBlock:
    fields: dict[str, Any] = {"values": [b"v0", b"v1", b"v2"], **columns}
    return RecordBlock(PARTITION, {"line": 3}, "out", **fields)


@pytest.mark.parametrize(
    ("column", "name"),
    [
        ({"keys": [b"k0", b"k1"]}, "RecordBlock.keys has 2 entries for 3 values"),
        ({"timestamps": [1, 2, 3, 4]}, "RecordBlock.timestamps has 4 entries for 3 values"),
        ({"topics": ["a"]}, "RecordBlock.topics has 1 entries for 3 values"),
        (
            {"header_columns": {"ok": [b"1", b"2", b"3"], "id": [b"1"]}},
            "RecordBlock.header_columns['id'] has 1 entries for 3 values",
        ),
    ],
)
def test_a_column_of_another_length_is_named(column: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=r"^" + name.replace("[", r"\[")) as info:
        block(**column)
    assert "one entry per row" in str(info.value)


def test_every_column_as_long_as_values_is_accepted() -> None:
    b = block(
        keys=[None, b"k1", b"k2"],
        timestamps=[None, 5, 6],
        topics=["a", "b", "a"],
        header_columns={"h": [None, None, b"x"]},
    )
    assert len(b) == 3


def test_len_is_the_number_of_rows() -> None:
    assert len(block()) == 3
    assert len(RecordBlock(PARTITION, None, "out", [b"only"])) == 1
    empty = RecordBlock(PARTITION, {"line": 0}, "out", [])
    assert len(empty) == 0


def test_records_are_the_rows_with_the_offset_on_the_last() -> None:
    b = block(
        keys=[b"k0", None, b"k2"],
        timestamps=[100, None, 300],
        headers=[("origin", b"csv"), ("v", b"1")],
        header_columns={"id": [b"i0", None, b"i2"], "tag": [None, b"t1", b"t2"]},
    )
    assert b.records() == [
        SourceRecord(
            PARTITION, None, "out", b"v0", b"k0", timestamp=100,
            headers=(("origin", b"csv"), ("v", b"1"), ("id", b"i0")), encoded=True,
        ),
        SourceRecord(
            PARTITION, None, "out", b"v1", None, timestamp=None,
            headers=(("origin", b"csv"), ("v", b"1"), ("tag", b"t1")), encoded=True,
        ),
        SourceRecord(
            PARTITION, {"line": 3}, "out", b"v2", b"k2", timestamp=300,
            headers=(("origin", b"csv"), ("v", b"1"), ("id", b"i2"), ("tag", b"t2")),
            encoded=True,
        ),
    ]  # fmt: skip


def test_records_without_optional_columns() -> None:
    records = block().records()
    assert [r.value for r in records] == [b"v0", b"v1", b"v2"]
    assert all(r.key is None and r.timestamp is None and r.partition is None for r in records)
    assert all(r.headers == () and r.encoded and r.topic == "out" for r in records)
    assert [r.source_offset for r in records] == [None, None, {"line": 3}]
    assert all(r.source_partition == PARTITION for r in records)


def test_records_take_each_rows_topic() -> None:
    b = block(topics=["a", "b", "a"], values=[b"v0", None, b"v2"])
    records = b.records()
    assert [r.topic for r in records] == ["a", "b", "a"]
    assert [r.value for r in records] == [b"v0", None, b"v2"]


def test_records_of_a_block_without_offset_advance_none() -> None:
    b = RecordBlock(PARTITION, None, "out", [b"a", b"b"])
    assert [r.source_offset for r in b.records()] == [None, None]
