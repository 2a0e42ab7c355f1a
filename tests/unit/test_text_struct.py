"""HoistField and InsertField's static field on a block of lines keep the lines a Python
list (:class:`TextStruct`), which the JSON converter writes with one join: the bytes,
records and schemas are those of the row path and of the ``pyarrow`` column it stands
for, whatever the lines hold; every other reader gets that ``pyarrow`` column."""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa
import pytest

from eos.api import RecordBlock, SourceRecord
from eos.api.schema import Schema
from eos.columns.text_struct import TextStruct
from eos.converters import encode_block
from eos.converters.base import SchemaConverter
from eos.converters.json import ConnectJsonConverter, JsonConverter
from eos.transforms import TransformChain
from services.connectors.file import lines_block
from tests.unit.transform_cases import CONNECT, chain


def lines_chain(*extra: tuple[str, dict[str, str]], value: str = "file", name: str = "src",
                more: dict[str, str] | None = None) -> TransformChain:  # fmt: skip
    props = {
        **(more or {}),
        "transforms.hoist.type": CONNECT + "HoistField$Value",
        "transforms.hoist.field": "line",
        "transforms.stamp.type": CONNECT + "InsertField$Value",
        "transforms.stamp.static.field": name,
        "transforms.stamp.static.value": value,
    }
    aliases = ["hoist", "stamp"]
    for alias, settings in extra:
        aliases.append(alias)
        props.update({f"transforms.{alias}.{k}": v for k, v in settings.items()})
    return chain({"transforms": ",".join(aliases), **props})


def block(texts: list[str]) -> RecordBlock:
    return lines_block("/data/a.log", texts, 42, "files")


def by_rows(c: TransformChain, b: RecordBlock) -> list[SourceRecord]:
    out = [c.apply(r) for r in b.records()]
    return [r for r in out if r is not None]


def converters() -> list[JsonConverter]:
    plain, enveloped = JsonConverter(), ConnectJsonConverter()
    plain.configure({}, False)
    enveloped.configure({}, False)
    return [plain, enveloped]


LINES = {
    "plain": ["a", "b c", "", "line 4"],
    "a quote": ['say "hi"', "x"],
    "a backslash": ["C:\\temp", "y"],
    "control characters": ["tab\there", "nul\x00", "\x1f"],
    "DEL": ["a\x7fb"],
    "non-ASCII": ["é", "\u2028 line separator"],
    "astral": ["\U0001f600 smile"],
    "one line": ["only"],
}
CONSTANTS = {
    "plain": ("file", "src"),
    "escapes in the constant and its name": ('q"uo\u00e9\\', "n\x01me"),
    "an astral constant": ("\U0001f600", "s"),
}


@pytest.mark.parametrize("texts", list(LINES.values()), ids=list(LINES))
@pytest.mark.parametrize("constant", list(CONSTANTS.values()), ids=list(CONSTANTS))
def test_the_joined_rows_are_the_row_paths_and_the_arrow_columns(
    texts: list[str], constant: tuple[str, str]
) -> None:
    c = lines_chain(value=constant[0], name=constant[1])
    out = c.apply_block(block(texts))
    assert isinstance(out, RecordBlock)
    assert isinstance(out.values, TextStruct)
    assert out.records() == by_rows(c, block(texts))
    as_arrow = dataclasses.replace(out, values=out.values.to_arrow())
    for converter in converters():
        rows = [converter.from_connect_data(r.topic, r.value_schema, r.value)
                for r in by_rows(c, block(texts))]  # fmt: skip
        assert encode_block(out, converter, converter).values == rows
        assert encode_block(as_arrow, converter, converter).values == rows


def test_it_is_the_arrow_column_it_stands_for() -> None:
    out = lines_chain().apply_block(block(LINES["plain"]))
    assert isinstance(out, RecordBlock)
    column = out.values
    assert isinstance(column, TextStruct)
    arrow = column.to_arrow()
    assert arrow.type == pa.struct([("line", pa.string()), ("src", pa.string())])
    assert column.to_pylist() == arrow.to_pylist() == list(column)
    assert len(column) == len(arrow) == 4
    assert column.null_count == 0
    assert column[1] == {"line": "b c", "src": "file"}
    assert column[1:3].to_pylist() == arrow[1:3].to_pylist()
    assert column.take([0, 3]).to_pylist() == arrow.take([0, 3]).to_pylist()
    assert column[4:].to_pylist() == []
    plain = converters()[0]
    assert encode_block(dataclasses.replace(out, values=column[4:]), plain, plain).values == []


TOMBSTONES = {
    "predicates": "isTomb",
    "predicates.isTomb.type": CONNECT + "predicates.RecordIsTombstone",
}


STEPS = {
    "ValueToKey": (("key", {"type": CONNECT + "ValueToKey", "fields": "line"}), {}),
    "InsertField of the topic": (
        ("topic", {"type": CONNECT + "InsertField$Value", "topic.field": "t"}),
        {},
    ),
    "HoistField again": (("again", {"type": CONNECT + "HoistField$Value", "field": "o"}), {}),
    "ReplaceField (rows)": (
        ("drop", {"type": CONNECT + "ReplaceField$Value", "exclude": "src"}),
        {},
    ),
    "Filter of tombstones": (
        ("tomb", {"type": CONNECT + "Filter", "predicate": "isTomb"}),
        TOMBSTONES,
    ),
}


@pytest.mark.parametrize(("step", "more"), list(STEPS.values()), ids=list(STEPS))
def test_steps_after_it_read_it_as_arrow_or_rows(
    step: tuple[str, dict[str, str]], more: dict[str, str]
) -> None:
    c = lines_chain(step, more=more)
    texts = ["one", 'two "quoted"', "three"]
    out = c.apply_block(block(texts))
    records = out.records() if isinstance(out, RecordBlock) else out
    assert records == by_rows(c, block(texts))
    if isinstance(out, RecordBlock):
        for converter in converters():
            rows = [converter.from_connect_data(r.topic, r.value_schema, r.value)
                    for r in records]  # fmt: skip
            assert encode_block(out, converter, converter).values == rows


class _ColumnKinds(SchemaConverter):
    """A converter of another format: writes what kind of column it was given."""

    def configure(self, props: Any, is_key: bool) -> None:
        pass

    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Any = None
    ) -> bytes | None:
        return b"row"

    def from_connect_block(self, topic: str, schema: Schema | None, column: Any) -> list[Any]:
        return [type(column).__name__.encode()] * len(column)


def test_other_converters_get_the_arrow_column() -> None:
    out = lines_chain().apply_block(block(LINES["plain"]))
    assert isinstance(out, RecordBlock)
    other = _ColumnKinds()
    assert set(encode_block(out, other, other).values) == {b"StructArray"}
