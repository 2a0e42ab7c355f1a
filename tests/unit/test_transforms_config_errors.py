"""Bad ``transforms`` / ``predicates`` settings: each problem is one line naming the
full setting and saying what would do; validation lists them all."""

from __future__ import annotations

import pytest

from eos.errors import ConfigError
from eos.transforms import TransformChain
from eos.transforms.chain_validation import problems
from tests.unit.transform_cases import CONNECT

ROUTE = {
    "transforms": "route",
    "transforms.route.type": "RegexRouter",
    "transforms.route.regex": "(.*)",
    "transforms.route.replacement": "x-$1",
}


def error(props: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        TransformChain.from_config(props)
    assert "\n" not in str(info.value)
    return info.value


def test_an_unknown_transform_lists_what_would_do() -> None:
    e = error({**ROUTE, "transforms.route.type": "RegexRuoter"})
    assert e.key == "transforms.route.type"
    assert str(e).startswith(
        "invalid value 'RegexRuoter' for setting 'transforms.route.type': unknown "
        "transformation 'RegexRuoter'; use one of Cast$Key, Cast$Value, DropHeaders,"
    )
    assert CONNECT + "ValueToKey" in str(e)
    assert "class path (package.module:Class) of an eos.api.Transformation" in str(e)


def test_a_connect_transform_eos_lacks_is_named_as_such() -> None:
    e = error({**ROUTE, "transforms.route.type": CONNECT + "Nope"})
    assert "Kafka Connect's org.apache.kafka.connect.transforms.Nope is not a transformation" in (
        str(e)
    )


def test_a_class_path_that_is_no_transformation() -> None:
    e = error({**ROUTE, "transforms.route.type": "collections:OrderedDict"})
    assert "'collections:OrderedDict' is not a concrete eos.api.Transformation subclass" in str(e)
    e = error({**ROUTE, "transforms.route.type": "no_such_module:Thing"})
    assert "cannot import 'no_such_module'" in str(e)


def test_an_unknown_predicate() -> None:
    props = {
        **ROUTE,
        "transforms.route.predicate": "p",
        "predicates": "p",
        "predicates.p.type": "TopicNameMatchez",
    }
    e = error(props)
    assert e.key == "predicates.p.type"
    assert "unknown predicate 'TopicNameMatchez'; use one of HasHeaderKey, " in str(e)


def test_a_missing_type() -> None:
    e = error({"transforms": "a"})
    assert str(e) == (
        "invalid value None for setting 'transforms.a.type': required setting is missing: "
        "the transformation's class, e.g. InsertField$Value"
    )


def test_a_missing_required_setting_of_the_transform() -> None:
    e = error({"transforms": "k", "transforms.k.type": "ValueToKey"})
    assert e.key == "transforms.k.fields"
    assert str(e).startswith(
        "invalid value None for setting 'transforms.k.fields': required setting is missing. "
        "Field names on the record value"
    )


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("transforms.route.regex", "(", "not a valid regular expression: missing ), "),
        ("transforms.route.regex", "[a-z&&[^q]]", "nested character classes"),
        ("transforms.route.replacement", "$2", "no group 2: the regex has 1"),
        ("transforms.route.replacement", "$x", "illegal group reference"),
        ("transforms.route.replacement", "${name}", "no group with name {name}"),
    ],
)
def test_a_bad_regex_or_replacement(key: str, value: str, says: str) -> None:
    e = error({**ROUTE, key: value})
    assert e.key == key
    assert says in str(e)
    assert str(e).startswith(f"invalid value {value!r} for setting {key!r}: ")


def test_a_bad_predicate_pattern() -> None:
    props = {
        **ROUTE,
        "transforms.route.predicate": "p",
        "predicates": "p",
        "predicates.p.type": "TopicNameMatches",
        "predicates.p.pattern": "a(b",
    }
    e = error(props)
    assert e.key == "predicates.p.pattern"
    assert "missing ), unterminated subpattern" in str(e)


def test_negate_without_predicate() -> None:
    e = error({**ROUTE, "transforms.route.negate": "true"})
    assert e.key == "transforms.route.negate"
    assert "there is no 'transforms.route.predicate' defining a predicate to be negated" in str(e)


def test_negate_that_is_no_boolean() -> None:
    props = {
        **ROUTE,
        "transforms.route.predicate": "p",
        "transforms.route.negate": "yes",
        "predicates": "p",
        "predicates.p.type": "RecordIsTombstone",
    }
    e = error(props)
    assert (e.key, e.allowed) == ("transforms.route.negate", "expected true or false")


def test_a_predicate_that_is_not_listed() -> None:
    e = error({**ROUTE, "transforms.route.predicate": "IsFoo"})
    assert e.key == "transforms.route.predicate"
    assert "no predicate 'IsFoo' is defined: list it in 'predicates' (which lists nothing)" in (
        str(e)
    )


@pytest.mark.parametrize(
    ("settings", "key", "says"),
    [
        (
            {"transforms.t.type": "InsertField$Value"},
            "transforms.t.type",
            "no field insertion configured",
        ),
        (
            {"transforms.t.type": "InsertField$Value", "transforms.t.static.field": "s"},
            "transforms.t.static.value",
            "No value specified for static field: s",
        ),
        (
            {"transforms.t.type": "InsertField$Value", "transforms.t.offset.field": "o"},
            "transforms.t.offset.field",
            "only known to sink connectors",
        ),
        (
            {"transforms.t.type": "Cast$Value", "transforms.t.spec": "a:bytes"},
            "transforms.t.spec",
            "does not support casting to BYTES",
        ),
        (
            {"transforms.t.type": "Cast$Value", "transforms.t.spec": "a:int33"},
            "transforms.t.spec",
            "Invalid type found in casting spec: int33",
        ),
        (
            {"transforms.t.type": "Cast$Value", "transforms.t.spec": "int8,a:int16"},
            "transforms.t.spec",
            "may only specify a single cast",
        ),
        (
            {"transforms.t.type": "ReplaceField$Value", "transforms.t.renames": "a:b:c"},
            "transforms.t.renames",
            "Invalid rename mapping: a:b:c",
        ),
        (
            {"transforms.t.type": "TimestampConverter$Value", "transforms.t.target.type": "string"},
            "transforms.t.format",
            "requires format option",
        ),
        (
            {"transforms.t.type": "TimestampConverter$Value", "transforms.t.target.type": "date"},
            "transforms.t.target.type",
            "must be one of: string, unix, Date, Time, Timestamp",
        ),
        (
            {
                "transforms.t.type": "TimestampConverter$Value",
                "transforms.t.target.type": "unix",
                "transforms.t.format": "yyyy-qq",
            },
            "transforms.t.format",
            "illegal pattern character 'q'",
        ),
        (
            {"transforms.t.type": "TimestampRouter", "transforms.t.timestamp.format": "'open"},
            "transforms.t.timestamp.format",
            "unterminated quote",
        ),
        (
            {
                "transforms.t.type": "HeaderFrom$Value",
                "transforms.t.fields": "a,b",
                "transforms.t.headers": "x",
                "transforms.t.operation": "copy",
            },
            "transforms.t.headers",
            "must have the same number of elements as 'fields'",
        ),
        (
            {
                "transforms.t.type": "HeaderFrom$Value",
                "transforms.t.fields": "a",
                "transforms.t.headers": "x",
                "transforms.t.operation": "Move",
            },
            "transforms.t.operation",
            "must be one of: move, copy",
        ),
        (
            {"transforms.t.type": "MaskField$Value", "transforms.t.fields": ""},
            "transforms.t.fields",
            "must list at least one entry",
        ),
        (
            {"transforms.t.type": "SetSchemaMetadata$Value"},
            "transforms.t.type",
            "Neither schema name nor version configured",
        ),
        (
            {"transforms.t.type": "SetSchemaMetadata$Value", "transforms.t.schema.version": "x"},
            "transforms.t.schema.version",
            "expected an integer",
        ),
        (
            {
                "transforms.t.type": "ExtractField$Value",
                "transforms.t.field": "`a.b",
                "transforms.t.field.syntax.version": "V2",
            },
            "transforms.t.field",
            "Incomplete backtick pair in path: [`a.b]",
        ),
    ],
)
def test_settings_of_bundled_transforms(settings: dict[str, str], key: str, says: str) -> None:
    e = error({"transforms": "t", **settings})
    assert e.key == key
    assert says in str(e)
    if key == "transforms.t.type":  # the value shown is the type as the user set it
        assert e.value == settings[key]


def test_duplicate_aliases_are_the_frameworks_check() -> None:
    from eos.config.connector import CONNECTOR_CONFIG

    with pytest.raises(ConfigError, match="Duplicate alias provided"):
        CONNECTOR_CONFIG.keys["transforms"].parse("a,b,a")


def test_validation_lists_every_problem_at_once() -> None:
    props = {
        "transforms": "a,b,c",
        "transforms.a.type": "Nope",
        "transforms.b.type": "RegexRouter",
        "transforms.b.predicate": "missing",
        "transforms.c.type": "TimestampConverter$Value",
        "predicates": "p",
        "predicates.p.type": "HasHeaderKey",
    }
    found = {(e.key, e.allowed.split(";")[0].split(".")[0]) for e in problems(props)}
    assert found == {
        ("transforms.a.type", "unknown transformation 'Nope'"),
        (
            "transforms.b.predicate",
            "no predicate 'missing' is defined: list it in 'predicates' "
            "(which lists p) and set its predicates",
        ),
        ("transforms.b.regex", "required setting is missing"),
        ("transforms.b.replacement", "required setting is missing"),
        ("transforms.c.target.type", "required setting is missing"),
        ("predicates.p.name", "required setting is missing"),
    }
    assert problems(ROUTE) == []
