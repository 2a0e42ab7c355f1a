"""RegexRouter, TimestampRouter, InsertHeader, DropHeaders, HeaderFrom, Filter and the
predicates on records (docs' examples first, then Connect's behaviour)."""

from __future__ import annotations

import datetime

import pytest

from eos.api.schema import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
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

APRIL_2018 = int(datetime.datetime(2018, 4, 17, 21, 20, tzinfo=datetime.UTC).timestamp() * 1000)


@pytest.mark.parametrize(
    ("alias", "regex", "replacement", "before", "after"),
    [
        ("dropPrefix", "soe-(.*)", "$1", "soe-Order", "Order"),
        ("AddPrefix", ".*", "acme_$0", "Order", "acme_Order"),
        # The docs render the regex as (.)Stream_(.): their markup ate the asterisks.
        ("RemoveString", "(.*)Stream_(.*)", "$1$2", "Order_Stream_Data", "Order_Data"),
    ],
)
def test_regex_router_docs_examples(
    alias: str, regex: str, replacement: str, before: str, after: str
) -> None:
    c = chain(
        {
            "transforms": alias,
            f"transforms.{alias}.type": CONNECT + "RegexRouter",
            f"transforms.{alias}.regex": regex,
            f"transforms.{alias}.replacement": replacement,
        }
    )
    assert apply(c, record(topic=before)).topic == after


def test_regex_router_matches_the_whole_topic_and_replaces_the_first_match() -> None:
    c = one("RegexRouter", regex="orders", replacement="o")
    assert apply(c, record(topic="orders-eu")).topic == "orders-eu"  # no whole match
    # matches() on the whole topic, then replaceFirst: the first match of a|ab is "a".
    assert apply(one("RegexRouter", regex="a|ab", replacement="X"), record(topic="ab")).topic == (
        "Xb"
    )
    named = one("RegexRouter", regex="(?<db>\\w+)\\.(?<table>\\w+)", replacement="${table}_\\$")
    assert apply(named, record(topic="sales.orders")).topic == "orders_$"


def test_timestamp_router_docs_example_and_defaults() -> None:
    c = chain(
        {
            "transforms": "TimestampRouter",
            "transforms.TimestampRouter.type": CONNECT + "TimestampRouter",
            "transforms.TimestampRouter.topic.format": "foo-${topic}-${timestamp}",
            "transforms.TimestampRouter.timestamp.format": "YYYYMM",
        }
    )
    assert apply(c, record(topic="ordersTopic", timestamp=APRIL_2018)).topic == (
        "foo-ordersTopic-201804"
    )
    default = one("TimestampRouter")
    assert apply(default, record(topic="t", timestamp=APRIL_2018)).topic == "t-20180417"
    # Y is the week year: 30 December 2018 (a Sunday) starts week 1 of 2019.
    new_year = int(datetime.datetime(2018, 12, 30, tzinfo=datetime.UTC).timestamp() * 1000)
    assert apply(c, record(topic="o", timestamp=new_year)).topic == "foo-o-201912"
    hourly = one("TimestampRouter", timestamp_format="yyyy-MM-dd_HH")
    routed = [
        apply(hourly, record(topic="t", timestamp=APRIL_2018 + m * 60_000)).topic
        for m in (0, 39, 40)
    ]
    assert routed == ["t-2018-04-17_21", "t-2018-04-17_21", "t-2018-04-17_22"]


def test_timestamp_router_needs_a_timestamp() -> None:
    with pytest.raises(TransformError, match="Timestamp missing on record for topic 'orders'"):
        one("TimestampRouter").apply(record())


# ------------------------------------------------------------------- headers


def test_insert_header_docs_example() -> None:
    c = chain(
        {
            "transforms": "insertAppIdHeader",
            "transforms.insertAppIdHeader.type": CONNECT + "InsertHeader",
            "transforms.insertAppIdHeader.header": "app.id",
            "transforms.insertAppIdHeader.value.literal": "best-app-ever",
        }
    )
    out = apply(c, record(headers=(("app.id", b"old"),)))
    assert out.headers == (("app.id", b"old"), ("app.id", b"best-app-ever"))  # added, not set
    assert apply(one("InsertHeader", header="n", value_literal="1234"), record()).headers == (
        ("n", b"1234"),
    )
    assert apply(one("InsertHeader", header="n", value_literal="null"), record()).headers == (
        ("n", None),
    )


def test_drop_headers_docs_example() -> None:
    c = chain(
        {
            "transforms": "dropAppIdHeader",
            "transforms.dropAppIdHeader.type": CONNECT + "DropHeaders",
            "transforms.dropAppIdHeader.headers": "app.id,txn.id",
        }
    )
    before = (("app.id", b"1"), ("keep", b"k"), ("txn.id", b"2"), ("app.id", b"3"))
    assert apply(c, record(headers=before)).headers == (("keep", b"k"),)
    kept = record(headers=(("keep", b"k"),))
    assert c.apply(kept) is kept


HEADER_FROM = {
    "transforms": "moveFieldsToHeader",
    "transforms.moveFieldsToHeader.type": CONNECT + "HeaderFrom$Value",
    "transforms.moveFieldsToHeader.fields": "id,ts",
    "transforms.moveFieldsToHeader.headers": "record_id,event_timestamp",
    "transforms.moveFieldsToHeader.operation": "move",
}
BOOK = {"id": 24, "ts": 1626102708861, "name": "John Smith", "book": "Kafka: The Definitive Guide"}


def test_header_from_docs_example() -> None:
    out = apply(chain(HEADER_FROM), record(BOOK, headers=(("source", b"RedditSource"),)))
    assert out.value == {"name": "John Smith", "book": "Kafka: The Definitive Guide"}
    assert out.headers == (
        ("source", b"RedditSource"),
        ("record_id", b"24"),
        ("event_timestamp", b"1626102708861"),
    )
    copy = apply(
        chain({**HEADER_FROM, "transforms.moveFieldsToHeader.operation": "copy"}), record(BOOK)
    )
    assert copy.value == BOOK
    assert copy.headers == (("record_id", b"24"), ("event_timestamp", b"1626102708861"))


def test_header_from_with_schema_writes_connects_header_text() -> None:
    inner = struct_schema(("a", INT32_SCHEMA), ("b", STRING_SCHEMA))
    schema = struct_schema(
        ("f", FLOAT32_SCHEMA),
        ("ok", BOOLEAN_SCHEMA),
        ("raw", BYTES_SCHEMA),
        ("nested", inner),
        ("none", OPTIONAL_STRING_SCHEMA),
        ("kept", STRING_SCHEMA),
        name="row",
    )
    value = struct(
        schema, f=1.5, ok=True, raw=b"\x01\x02", nested=struct(inner, a=1, b='x"y'), kept="k"
    )
    c = one(
        "HeaderFrom$Value",
        fields="f,ok,raw,nested,none",
        headers="f,ok,raw,nested,none",
        operation="move",
    )
    out = apply(c, record(value, value_schema=schema))
    assert out.headers == (
        ("f", b"1.5"),
        ("ok", b"true"),
        ("raw", b"AQI="),
        ("nested", b'{"a":1,"b":"x\\"y"}'),
        ("none", None),
    )
    assert out.value_schema is not None
    assert out.value_schema.name == "row"
    assert [f.name for f in out.value_schema.fields] == ["kept"]
    assert as_dict(out.value) == {"kept": "k"}
    with pytest.raises(TransformError, match="nope is not a valid field name"):
        one("HeaderFrom$Value", fields="nope", headers="h", operation="copy").apply(
            record(value, value_schema=schema)
        )


def test_header_from_key() -> None:
    c = one("HeaderFrom$Key", fields="id", headers="key_id", operation="copy")
    out = apply(c, record("v", key={"id": 3}))
    assert (out.key, out.headers) == ({"id": 3}, (("key_id", b"3"),))


# ---------------------------------------------------------- Filter, predicates


def test_filter_alone_drops_every_record() -> None:
    assert one("Filter").apply(record({"a": 1})) is None


@pytest.mark.parametrize(
    ("predicate", "settings", "matching", "other"),
    [
        (
            "TopicNameMatches",
            {"pattern": "orders-.*"},
            record(topic="orders-eu"),
            record(topic="eu-orders-x"),
        ),
        (
            "HasHeaderKey",
            {"name": "trace"},
            record(headers=(("a", b""), ("trace", None))),
            record(headers=(("Trace", b"x"),)),
        ),
        ("RecordIsTombstone", {}, record(None, key="k"), record({"v": 1})),
    ],
)
def test_predicates_with_filter(
    predicate: str, settings: dict[str, str], matching: object, other: object
) -> None:
    props = {
        "transforms": "drop",
        "transforms.drop.type": "Filter",
        "transforms.drop.predicate": "p",
        "predicates": "p",
        "predicates.p.type": f"{CONNECT}predicates.{predicate}",
        **{f"predicates.p.{k}": v for k, v in settings.items()},
    }
    c = chain(props)
    assert c.apply(matching) is None  # type: ignore[arg-type]
    assert c.apply(other) is other  # type: ignore[arg-type]
