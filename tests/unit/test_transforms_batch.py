"""``TransformChain.apply_all``: a batch of records step by step (what the record path
does with the records of a poll) gives, record for record, what ``apply`` gives one
record at a time; where it cannot (a user's step, encoded records meeting a step that
reads values, a step failing on some record) it says so with None, and the records go
one by one, so a failure is still named with its record."""

from __future__ import annotations

from typing import Any

import pytest

from eos.api import SourceRecord, Transformation
from eos.api.schema import (
    INT64_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Struct,
)
from eos.errors import TransformError
from tests.unit.transform_cases import PARTITION, chain, struct_schema

ORDER = struct_schema(("id", INT64_SCHEMA), ("name", STRING_SCHEMA), name="Order")
ORDER_V2 = struct_schema(
    ("id", INT64_SCHEMA),
    ("name", STRING_SCHEMA),
    ("note", OPTIONAL_STRING_SCHEMA),
    ("qty", OPTIONAL_INT64_SCHEMA),
    name="Order",
)


def records(*, tombstones: bool = False) -> list[SourceRecord]:
    """Schemaless and Struct values of two schemas, in turn, on two topics, with and
    without timestamps, partitions, keys and headers."""
    out = []
    for i in range(12):
        topic = "tmp-orders" if i % 4 == 3 else "orders"
        extra: dict[str, Any] = {
            "timestamp": 1_700_000_000_000 + i if i % 2 else None,
            "partition": i % 3 if i % 3 else None,
            "headers": [("h", b"1")] if i % 5 == 0 else (),
        }
        if i % 3 == 0:
            value: Any = {"id": i, "name": f"n{i}"}
            out.append(SourceRecord(PARTITION, {"i": i}, topic, value, key={"k": i}, **extra))
        else:
            schema = ORDER if i % 3 == 1 else ORDER_V2
            value = Struct(schema, {"id": i, "name": f"n{i}"})
            key = Struct(ORDER, {"id": i, "name": "key"})
            out.append(
                SourceRecord(
                    PARTITION,
                    {"i": i},
                    topic,
                    value,
                    key=key,
                    key_schema=ORDER,
                    value_schema=schema,
                    **extra,
                )
            )
    if tombstones:
        out.insert(5, SourceRecord(PARTITION, {"i": 99}, "orders", None))
    return out


def props(steps: str, **settings: str) -> dict[str, str]:
    """Connect's settings from ``alias_setting_words=value`` (an alias of two letters
    starting with p is a predicate's)."""
    out = {"transforms": steps}
    predicates = []
    for name, value in settings.items():
        alias, _, setting = name.partition("_")
        key = "transforms"
        if alias.startswith("p") and len(alias) == 2:
            key = "predicates"
            predicates += [] if alias in predicates else [alias]
        out[f"{key}.{alias}.{setting.replace('_', '.')}"] = value
    if predicates:
        out["predicates"] = ",".join(predicates)
    return out


THREE = props(
    "i,r,k",
    i_type="InsertField$Value", i_static_field="src", i_static_value="db",
    r_type="RegexRouter", r_regex="(.*)", r_replacement="eu.$1",
    k_type="ValueToKey", k_fields="id",
)  # fmt: skip
CHAINS = {
    "three": THREE,
    "insert-metadata": props(
        "i",
        i_type="InsertField$Value",
        i_topic_field="t",
        i_partition_field="p",
        i_timestamp_field="ts",
        i_static_field="s",
        i_static_value="v",
    ),
    "insert-key": props("i", i_type="InsertField$Key", i_static_field="s", i_static_value="v"),
    "v2k-two": props("k", k_type="ValueToKey", k_fields="id,name"),
    "replace": props("x", x_type="ReplaceField$Value", x_exclude="name", x_renames="id:order_id"),
    "mask": props("m", m_type="MaskField$Value", m_fields="name"),
    "cast": props("c", c_type="Cast$Value", c_spec="id:string"),
    "hoist-extract": props(
        "h,e",
        h_type="HoistField$Key",
        h_field="wrapped",
        e_type="ExtractField$Key",
        e_field="wrapped",
    ),
    "filter-tmp": props(
        "f,i",
        f_type="Filter",
        f_predicate="pt",
        i_type="InsertField$Value",
        i_static_field="s",
        i_static_value="v",
        pt_type="TopicNameMatches",
        pt_pattern="tmp-.*",
    ),
    "filter-negated": props(
        "f",
        f_type="Filter",
        f_predicate="pt",
        f_negate="true",
        pt_type="TopicNameMatches",
        pt_pattern="tmp-.*",
    ),
    "insert-unless-header": props(
        "i,r",
        i_type="InsertField$Value",
        i_static_field="s",
        i_static_value="v",
        i_predicate="ph",
        i_negate="true",
        r_type="RegexRouter",
        r_regex="tmp-(.*)",
        r_replacement="$1",
        ph_type="HasHeaderKey",
        ph_name="h",
    ),
    "timestamp-router": props("r", r_type="TimestampRouter"),
    "headers": props(
        "a,d",
        a_type="InsertHeader",
        a_header="src",
        a_value_literal="db",
        d_type="DropHeaders",
        d_headers="h",
    ),
    "metadata-flatten": props(
        "s,f",
        s_type="SetSchemaMetadata$Value",
        s_schema_name="Renamed",
        f_type="Flatten$Value",
    ),
}


FAILING = {"metadata-flatten", "timestamp-router"}
"""Chains that fail on some record of the batch (SetSchemaMetadata on a schemaless value,
TimestampRouter on a record without a timestamp)."""


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_a_batch_gives_what_each_record_gives_alone(name: str) -> None:
    batch, one = chain(CHAINS[name]), chain(CHAINS[name])
    inputs = records()
    expected: list[SourceRecord | None] = []
    for r in inputs:
        try:
            expected.append(one.apply(r))
        except TransformError:
            assert name in FAILING
    results = batch.apply_all(inputs)
    if name in FAILING:
        assert results is None
        return
    assert results == expected
    assert results is not None
    for given, result in zip(inputs, results, strict=True):
        assert result is not given  # a copy, never the record as polled
    assert inputs == records()  # the records as polled are left as they were


def test_the_three_steps_of_the_bench_on_schemaless_and_struct_values() -> None:
    results = chain(THREE).apply_all(records())
    assert results is not None
    first, second, fourth = results[0], results[1], results[3]
    assert first is not None
    assert second is not None
    assert fourth is not None
    assert (first.topic, first.key, first.value) == (
        "eu.orders", {"id": 0}, {"id": 0, "name": "n0", "src": "db"}
    )  # fmt: skip
    assert second.topic == "eu.orders"
    assert isinstance(second.value, Struct)
    assert second.value.get("src") == "db"
    assert second.value_schema is second.value.schema
    assert isinstance(second.key, Struct)
    assert second.key.get("id") == 1
    assert fourth.topic == "eu.tmp-orders"


def test_dropped_records_are_none_in_their_place() -> None:
    results = chain(CHAINS["filter-tmp"]).apply_all(records())
    assert results is not None
    assert [r is None for r in results] == [i % 4 == 3 for i in range(12)]


def test_a_failing_record_sends_the_batch_one_by_one_where_apply_names_it() -> None:
    c = chain(THREE)
    inputs = records(tombstones=True)  # ValueToKey fails on a null value
    assert c.apply_all(inputs) is None
    with pytest.raises(TransformError, match=r"^transforms.k \(ValueToKey\) failed on the rec"):
        c.apply(inputs[5])
    assert c.apply_all(records()) is not None  # the next batch goes as a batch again


class Count(Transformation):
    seen = 0

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        Count.seen += 1
        return record


def test_a_users_step_goes_record_by_record() -> None:
    c = chain({**THREE, "transforms": "i,u", "transforms.u.type": f"{__name__}:Count"})
    assert c.apply_all(records()) is None
    assert Count.seen == 0  # not run on the batch at all: it sees each record once


def test_encoded_records_meeting_a_step_that_reads_values_go_one_by_one() -> None:
    c = chain(THREE)
    encoded = [SourceRecord(PARTITION, {"i": 1}, "orders", b'{"id":1}', encoded=True)]
    assert c.apply_all(encoded) is None
    router = chain(props("r", r_type="RegexRouter", r_regex="o.*", r_replacement="x"))
    routed = router.apply_all(encoded)
    assert routed is not None
    assert routed[0] is not None
    assert routed[0].topic == "x"


def test_no_steps_and_no_records() -> None:
    inputs = records()
    assert chain({}).apply_all(inputs) == inputs
    assert chain(THREE).apply_all([]) == []
