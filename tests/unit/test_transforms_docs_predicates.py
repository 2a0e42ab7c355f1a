"""The examples of docs/transforms.md for Filter and the three predicates, and the one
that opens the page, as the docs write them: the settings, then the records that come
out. Expectations from Kafka Connect's documentation of the predicates
(``TopicNameMatches``: the whole topic name matches the Java regex; ``HasHeaderKey``: at
least one header of that name, whatever its value; ``RecordIsTombstone``: the value is
null) and of ``Filter`` (drops every record it applies to). The combined example of
Kafka's docs is in test_transforms_chain.py."""

from __future__ import annotations

from tests.unit.transform_cases import CONNECT, apply, chain, record

PREDICATES = CONNECT + "predicates."

DROP_TOMBSTONES = {
    "transforms": "dropTombstones",
    "transforms.dropTombstones.type": CONNECT + "Filter",
    "transforms.dropTombstones.predicate": "isTombstone",
    "predicates": "isTombstone",
    "predicates.isTombstone.type": PREDICATES + "RecordIsTombstone",
}


def test_filter_docs_example_drops_the_tombstones() -> None:
    c = chain(DROP_TOMBSTONES)
    assert c.apply(record(None, key=42)) is None
    kept = record({"id": 42}, key=42)
    assert c.apply(kept) is kept  # unchanged
    # Without a predicate Filter drops every record; with negate=true, all but tombstones.
    assert chain({"transforms": "f", "transforms.f.type": CONNECT + "Filter"}).apply(kept) is None
    negated = chain({**DROP_TOMBSTONES, "transforms.dropTombstones.negate": "true"})
    assert negated.apply(kept) is None
    tombstone = record(None, key=42)
    assert negated.apply(tombstone) is tombstone


def test_topic_name_matches_docs_example_keeps_the_orders_topics() -> None:
    c = chain(
        {
            "transforms": "onlyOrders",
            "transforms.onlyOrders.type": CONNECT + "Filter",
            "transforms.onlyOrders.predicate": "isOrders",
            "transforms.onlyOrders.negate": "true",
            "predicates": "isOrders",
            "predicates.isOrders.type": PREDICATES + "TopicNameMatches",
            "predicates.isOrders.pattern": "orders-.*",
        }
    )
    kept = [t for t in ("orders-eu", "orders-us", "customers", "archived-orders-eu")
            if c.apply(record({"id": 1}, topic=t)) is not None]  # fmt: skip
    assert kept == ["orders-eu", "orders-us"]  # the whole name must match


def test_has_header_key_docs_example_routes_the_replays() -> None:
    c = chain(
        {
            "transforms": "replays",
            "transforms.replays.type": CONNECT + "RegexRouter",
            "transforms.replays.regex": "(.*)",
            "transforms.replays.replacement": "$1-replay",
            "transforms.replays.predicate": "isReplay",
            "predicates": "isReplay",
            "predicates.isReplay.type": PREDICATES + "HasHeaderKey",
            "predicates.isReplay.name": "replay",
        }
    )
    replayed = apply(c, record({"id": 1}, headers=(("replay", b"2024-05-01"),)))
    assert (replayed.topic, replayed.value, replayed.headers) == (
        "orders-replay", {"id": 1}, (("replay", b"2024-05-01"),)
    )  # fmt: skip
    assert apply(c, record({"id": 1}, headers=(("replay", None),))).topic == "orders-replay"
    assert apply(c, record({"id": 1})).topic == "orders"
    assert apply(c, record({"id": 1}, headers=(("Replay", b"x"),))).topic == "orders"  # case


def test_record_is_tombstone_docs_example_keeps_tombstones_tombstones() -> None:
    hoist = {
        "transforms": "MakeMap",
        "transforms.MakeMap.type": CONNECT + "HoistField$Value",
        "transforms.MakeMap.field": "line",
    }
    c = chain(
        {
            **hoist,
            "transforms.MakeMap.predicate": "isTombstone",
            "transforms.MakeMap.negate": "true",
            "predicates": "isTombstone",
            "predicates.isTombstone.type": PREDICATES + "RecordIsTombstone",
        }
    )
    assert apply(c, record("foo", key="k")).value == {"line": "foo"}
    tombstone = record(None, key="k")
    assert c.apply(tombstone) is tombstone  # still a tombstone: compaction deletes "k"
    assert apply(chain(hoist), tombstone).value == {"line": None}  # without the predicate


def test_the_intro_example_routes_everything_and_stamps_all_but_tombstones() -> None:
    c = chain(
        {
            "transforms": "route,stamp",
            "transforms.route.type": CONNECT + "RegexRouter",
            "transforms.route.regex": "soe-(.*)",
            "transforms.route.replacement": "$1",
            "transforms.stamp.type": "InsertField$Value",
            "transforms.stamp.static.field": "source",
            "transforms.stamp.static.value": "orders-db",
            "transforms.stamp.predicate": "isTombstone",
            "transforms.stamp.negate": "true",
            "predicates": "isTombstone",
            "predicates.isTombstone.type": "RecordIsTombstone",
        }
    )
    stamped = apply(c, record({"id": 7}, topic="soe-orders"))
    assert (stamped.topic, stamped.value) == ("orders", {"id": 7, "source": "orders-db"})
    tombstone = apply(c, record(None, topic="soe-orders"))
    assert (tombstone.topic, tombstone.value) == ("orders", None)
