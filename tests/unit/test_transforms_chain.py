"""The chain: Connect's settings (``transforms``, ``transforms.<alias>.type`` by full or
short class name, ``predicate``, ``negate``, ``predicates``), order, drops, predicates,
users' own classes, and the records it returns. Expectations from Kafka Connect's
documentation (kafka.apache.org, "Transformations" and "Predicates")."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from eos.api import SourceRecord, Transformation
from eos.api.schema import OPTIONAL_STRING_SCHEMA
from eos.api.transforms import Predicate
from eos.config.definition import NO_DEFAULT, ConfigDef, Type
from eos.errors import DataError, TransformError
from eos.transforms import TransformChain
from eos.transforms.row import copy_record
from tests.unit.transform_cases import CONNECT, OFFSET, PARTITION, apply, chain, record


def test_the_file_source_example_of_the_kafka_docs() -> None:
    # kafka.apache.org "Transformations": HoistField$Value then InsertField$Value on the
    # lines of connect-file-source (schemaless JSON).
    c = chain(
        {
            "transforms": "MakeMap, InsertSource",
            "transforms.MakeMap.type": CONNECT + "HoistField$Value",
            "transforms.MakeMap.field": "line",
            "transforms.InsertSource.type": CONNECT + "InsertField$Value",
            "transforms.InsertSource.static.field": "data_source",
            "transforms.InsertSource.static.value": "test-file-source",
        }
    )
    lines = ["foo", "bar", "hello world"]
    assert [apply(c, record(line)).value for line in lines] == [
        {"line": "foo", "data_source": "test-file-source"},
        {"line": "bar", "data_source": "test-file-source"},
        {"line": "hello world", "data_source": "test-file-source"},
    ]


FILTER_FOO_EXTRACT_UNLESS_BAR = {
    # kafka.apache.org "Predicates": drop topic foo; ExtractField$Key other_field except bar.
    "transforms": "Filter,Extract",
    "transforms.Filter.type": CONNECT + "Filter",
    "transforms.Filter.predicate": "IsFoo",
    "transforms.Extract.type": CONNECT + "ExtractField$Key",
    "transforms.Extract.field": "other_field",
    "transforms.Extract.predicate": "IsBar",
    "transforms.Extract.negate": "true",
    "predicates": "IsFoo,IsBar",
    "predicates.IsFoo.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    "predicates.IsFoo.pattern": "foo",
    "predicates.IsBar.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    "predicates.IsBar.pattern": "bar",
}


def test_the_predicates_example_of_the_kafka_docs() -> None:
    c = chain(FILTER_FOO_EXTRACT_UNLESS_BAR)
    key = {"other_field": 5, "id": 1}
    assert c.apply(record({"v": 1}, topic="foo", key=key)) is None
    assert apply(c, record({"v": 1}, topic="bar", key=key)).key == key
    assert apply(c, record({"v": 1}, topic="baz", key=key)).key == 5
    assert apply(c, record({"v": 1}, topic="food", key=key)).key == 5  # the whole name


def test_short_names_work_as_connects_full_names() -> None:
    short = {
        k: v.rpartition(".")[2] if k.endswith(".type") else v
        for k, v in FILTER_FOO_EXTRACT_UNLESS_BAR.items()
    }
    assert short["transforms.Extract.type"] == "ExtractField$Key"
    c = chain(short)
    key = {"other_field": 5}
    assert c.apply(record(topic="foo")) is None
    assert apply(c, record(topic="baz", key=key)).key == 5


def test_steps_run_in_the_listed_order() -> None:
    props = {
        "transforms": "a,b",
        "transforms.a.type": "HoistField$Value",
        "transforms.a.field": "x",
        "transforms.b.type": "HoistField$Value",
        "transforms.b.field": "y",
    }
    assert apply(chain(props), record(1)).value == {"y": {"x": 1}}
    props["transforms"] = "b,a"
    assert apply(chain(props), record(1)).value == {"x": {"y": 1}}


def test_no_transforms_returns_the_record_itself() -> None:
    c = chain({})
    r = record({"a": 1})
    assert len(c) == 0
    assert c.apply(r) is r
    assert chain({"transforms": ""}).apply(r) is r


def test_an_unchanged_record_comes_back_as_it_is_and_a_changed_one_is_new() -> None:
    c = chain(
        {
            "transforms": "r",
            "transforms.r.type": "RegexRouter",
            "transforms.r.regex": "nomatch",
            "transforms.r.replacement": "x",
        }
    )
    r = record({"a": 1}, headers=(("h", b"1"),), timestamp=5)
    assert c.apply(r) is r
    renamed = apply(c, dataclasses.replace(r, topic="nomatch"))
    assert renamed.topic == "x"
    assert dataclasses.replace(renamed, topic="nomatch") == dataclasses.replace(r, topic="nomatch")


def test_the_chains_copy_has_every_field_of_the_record() -> None:
    # The copy fills the slots one by one: it must cover every field a record has.
    r = SourceRecord(
        PARTITION,
        OFFSET,
        "t",
        b"v",
        key=b"k",
        partition=3,
        timestamp=9,
        headers=(("a", b"b"),),
        encoded=True,
        key_schema=OPTIONAL_STRING_SCHEMA,
        value_schema=OPTIONAL_STRING_SCHEMA,
    )
    copied = copy_record(r)
    assert copied is not r
    assert type(copied) is SourceRecord
    for f in dataclasses.fields(SourceRecord):
        assert getattr(copied, f.name) is getattr(r, f.name), f.name
    assert copied == r


def test_the_new_record_keeps_every_other_field() -> None:
    c = chain(
        {"transforms": "h", "transforms.h.type": "HoistField$Value", "transforms.h.field": "f"}
    )
    r = SourceRecord(
        PARTITION,
        OFFSET,
        "t",
        "v",
        key="k",
        partition=3,
        timestamp=9,
        headers=(("a", b"b"),),
        key_schema=OPTIONAL_STRING_SCHEMA,
    )
    before = dataclasses.replace(r)
    out = apply(c, r)
    assert out == dataclasses.replace(r, value={"f": "v"})
    assert out.source_partition is r.source_partition
    assert out.source_offset is r.source_offset
    assert r == before  # the chain changed its own copy, not the record it was given


class Spy(Transformation):
    """Remembers the topics it saw (and that it was closed)."""

    seen: list[str] = []

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        self.seen.append(record.topic)
        return record

    def close(self) -> None:
        self.seen.append("closed")


class Always(Predicate):
    closed: list[str] = []

    def test(self, record: SourceRecord) -> bool:
        return True

    def close(self) -> None:
        self.closed.append("closed")


def test_a_dropped_record_stops_the_chain() -> None:
    Spy.seen.clear()
    props = {
        "transforms": "drop,spy",
        "transforms.drop.type": "Filter",
        "transforms.spy.type": f"{__name__}:Spy",
    }
    assert chain(props).apply(record()) is None
    assert Spy.seen == []


# ------------------------------------------------------------------- negate


@pytest.mark.parametrize(("negate", "dropped"), [("false", ["foo"]), ("true", ["bar"])])
def test_negate_inverts_the_predicate(negate: str, dropped: list[str]) -> None:
    c = chain(
        {
            "transforms": "f",
            "transforms.f.type": "Filter",
            "transforms.f.predicate": "p",
            "transforms.f.negate": negate,
            "predicates": "p",
            "predicates.p.type": "TopicNameMatches",
            "predicates.p.pattern": "foo",
        }
    )
    assert [t for t in ("foo", "bar") if c.apply(record(topic=t)) is None] == dropped


def test_one_predicate_serves_several_transforms() -> None:
    c = chain(
        {
            "transforms": "a,b",
            "transforms.a.type": "InsertHeader",
            "transforms.a.header": "tomb",
            "transforms.a.value.literal": "yes",
            "transforms.a.predicate": "t",
            "transforms.b.type": "InsertHeader",
            "transforms.b.header": "live",
            "transforms.b.value.literal": "yes",
            "transforms.b.predicate": "t",
            "transforms.b.negate": "true",
            "predicates": "t",
            "predicates.t.type": "RecordIsTombstone",
        }
    )
    assert apply(c, record(None)).headers == (("tomb", b"yes"),)
    assert apply(c, record({"a": 1})).headers == (("live", b"yes"),)


# ------------------------------------------------------------- user classes


class AddSuffix(Transformation):
    """A user's transform: appends ``suffix`` to the topic."""

    reads_values = False

    def config_def(self) -> ConfigDef:
        return ConfigDef().define("suffix", Type.STRING, NO_DEFAULT)

    def configure(self, settings: Mapping[str, str]) -> None:
        self.suffix = self.config_def().parse(settings)["suffix"]

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        return dataclasses.replace(record, topic=record.topic + self.suffix)


class IsBig(Predicate):
    """A user's predicate: the value's ``n`` is at least ``min``."""

    def configure(self, settings: Mapping[str, str]) -> None:
        self.minimum = int(settings["min"])

    def test(self, record: SourceRecord) -> bool:
        return bool(record.value["n"] >= self.minimum)


USER_CHAIN = {
    "transforms": "route,suffix,hoist",
    "transforms.route.type": "RegexRouter",
    "transforms.route.regex": "(.*)",
    "transforms.route.replacement": "big-$1",
    "transforms.route.predicate": "big",
    "transforms.suffix.type": f"{__name__}:AddSuffix",
    "transforms.suffix.suffix": "-v1",
    "transforms.hoist.type": "HoistField$Value",
    "transforms.hoist.field": "row",
    "predicates": "big",
    "predicates.big.type": f"{__name__}.IsBig",
    "predicates.big.min": "10",
}


def test_users_classes_by_class_path_mix_with_bundled_ones() -> None:
    c = chain(USER_CHAIN)
    assert apply(c, record({"n": 12})).topic == "big-orders-v1"
    small = apply(c, record({"n": 1}))
    assert (small.topic, small.value) == ("orders-v1", {"row": {"n": 1}})


def test_users_classes_by_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A real installed distribution's entry points, on sys.path for this test only.
    info = tmp_path / "my_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[eos.transforms]\nAddSuffix = {__name__}:AddSuffix\n\n"
        f"[eos.predicates]\nIsBig = {__name__}:IsBig\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    props = {**USER_CHAIN, "transforms.suffix.type": "AddSuffix", "predicates.big.type": "IsBig"}
    assert apply(chain(props), record({"n": 12})).topic == "big-orders-v1"


# ------------------------------------------------------------------- errors


class Broken(Transformation):
    def apply(self, record: SourceRecord) -> SourceRecord | None:
        raise DataError("no good")


def test_a_failing_step_is_named_with_the_record() -> None:
    c = chain({"transforms": "x", "transforms.x.type": f"{__name__}:Broken"})
    with pytest.raises(TransformError) as info:
        c.apply(record({"a": 1}))
    message = str(info.value)
    assert message.startswith(f"transforms.x ({__name__}:Broken) failed on the record")
    assert "topic 'orders'" in message
    assert "{'table': 'orders'}" in message
    assert "{'id': 7}" in message
    assert message.endswith(": no good")
    assert isinstance(info.value.__cause__, DataError)
    assert info.value.alias == "x"


def test_a_value_transform_on_encoded_records_says_what_to_do() -> None:
    c = chain({"transforms": "k", "transforms.k.type": "ValueToKey", "transforms.k.fields": "id"})
    with pytest.raises(TransformError, match=r"^transforms.k \(ValueToKey\) reads record keys "):
        c.apply(record(b'{"id":1}', encoded=True))
    router = chain(
        {
            "transforms": "r",
            "transforms.r.type": "RegexRouter",
            "transforms.r.regex": "o.*",
            "transforms.r.replacement": "x",
        }
    )
    assert apply(router, record(b"{}", encoded=True)).topic == "x"


def test_close_closes_each_step_and_predicate_once() -> None:
    Spy.seen.clear()
    Always.closed.clear()
    props: dict[str, Any] = {
        "transforms": "a,b",
        "transforms.a.type": f"{__name__}:Spy",
        "transforms.a.predicate": "p",
        "transforms.b.type": f"{__name__}:Spy",
        "transforms.b.predicate": "p",
        "predicates": "p",
        "predicates.p.type": f"{__name__}:Always",
    }
    TransformChain.from_config(props).close()
    assert (Spy.seen, Always.closed) == (["closed", "closed"], ["closed"])
