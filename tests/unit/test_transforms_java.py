"""Java's regexes, replacement strings, SimpleDateFormat patterns and value text, as
Connect's transforms read and write them."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest

from eos.api.schema import FLOAT32_SCHEMA, INT32_SCHEMA, SchemaBuilder, Struct
from eos.transforms.dates import SimpleDateFormat
from eos.transforms.java import java_double, java_float, java_regex, java_replacement
from eos.transforms.value_text import connect_string

UTC = datetime.UTC


@pytest.mark.parametrize(
    ("pattern", "topic", "matches"),
    [
        ("(?<db>[a-z]+)\\.(\\k<db>)", "s.s", True),
        ("\\p{Alpha}+-\\p{Digit}", "abc-1", True),
        ("[\\p{Lower}\\d]+", "ab1", True),
        ("\\P{Digit}+", "ab", True),
        ("\\Qa.b\\E", "a.b", True),
        ("\\Qa.b\\E", "axb", False),
        ("a*+b", "aab", True),
        ("foo\\z", "foo", True),
    ],
)
def test_java_regex(pattern: str, topic: str, matches: bool) -> None:
    assert (java_regex(pattern).fullmatch(topic) is not None) is matches


def test_java_replacement() -> None:
    regex = java_regex("(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)")
    text = "abcdefghijk"
    assert regex.sub(java_replacement("$11-$1$2", regex), text) == "k-ab"
    assert regex.sub(java_replacement("$12", regex), text) == "a2"  # group 1, then "2"
    assert regex.sub(java_replacement("\\$1 \\\\ $0", regex), text) == "$1 \\ abcdefghijk"
    with pytest.raises(ValueError, match="character to be escaped is missing"):
        java_replacement("a\\", regex)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1.0"),
        (100.5, "100.5"),
        (1e7, "1.0E7"),
        (1.5e-5, "1.5E-5"),
        (0.001, "0.001"),
        (-2.5e20, "-2.5E20"),
        (float("nan"), "NaN"),
        (float("-inf"), "-Infinity"),
        (-0.0, "-0.0"),
    ],
)
def test_java_double(value: float, text: str) -> None:
    assert java_double(value) == text


def test_java_float() -> None:
    assert (java_float(0.1), java_float(1.23456789), java_float(16777217.0)) == (
        "0.1",
        "1.2345679",
        "1.6777216E7",
    )


MOMENT = datetime.datetime(2019, 4, 25, 14, 2, 16, 123000, tzinfo=UTC)


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("yyyyMMdd", "20190425"),
        ("yy-M-d", "19-4-25"),
        ("yyyy-MM-dd'T'HH:mm:ss.SSSZ", "2019-04-25T14:02:16.123+0000"),
        ("yyyy-MM-dd'T'HH:mm:ss.SSSX", "2019-04-25T14:02:16.123Z"),
        ("EEE, d MMM yyyy hh:mm a z", "Thu, 25 Apr 2019 02:02 PM UTC"),
        ("EEEE MMMM", "Thursday April"),
        ("D w W F u k K S", "115 17 4 4 4 14 2 123"),
        ("'It''s' h 'o''clock'", "It's 2 o'clock"),
        ("G yyyyy", "AD 02019"),
    ],
)
def test_simple_date_format(pattern: str, text: str) -> None:
    assert SimpleDateFormat(pattern).format(MOMENT) == text


@pytest.mark.parametrize(
    ("pattern", "text", "moment"),
    [
        ("yyyy-MM-dd'T'HH:mm:ss.SSSZ", "2019-04-25T16:02:16.123+0200", MOMENT),
        ("yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "2019-04-25T14:02:16.123Z", MOMENT),
        ("yyyyMMddHHmmssSSS", "20190425140216123", MOMENT),
        ("dd MMM yyyy hh:mm:ss.SSS a", "25 apr 2019 02:02:16.123 PM", MOMENT),
        ("yyyy-MM-dd", "2019-04-25 and more", datetime.datetime(2019, 4, 25, tzinfo=UTC)),
        ("yyyy-MM-dd", "2019-13-01", datetime.datetime(2020, 1, 1, tzinfo=UTC)),  # lenient
    ],
)
def test_simple_date_format_parses(pattern: str, text: str, moment: datetime.datetime) -> None:
    assert SimpleDateFormat(pattern).parse(text) == moment


def test_simple_date_format_errors() -> None:
    with pytest.raises(ValueError, match="illegal pattern character 'b'"):
        SimpleDateFormat("yyyy-bb")
    with pytest.raises(ValueError, match="does not match the pattern"):
        SimpleDateFormat("yyyy-MM-dd").parse("April")


POINT = SchemaBuilder.struct().field("x", INT32_SCHEMA).field("f", FLOAT32_SCHEMA).build()


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain", "plain"),
        (12, "12"),
        (True, "true"),
        (2.5e7, "2.5E7"),
        (decimal.Decimal("1.50"), "1.50"),
        (b"\xff", "/w=="),
        ([1, "a", None, [2]], '[1,"a",null,[2]]'),
        ({"k": "v\\", "n": 1}, '{"k":"v\\\\","n":1}'),
        (Struct(POINT, {"x": 1, "f": 0.1}), '{"x":1,"f":0.1}'),
        (datetime.datetime(2019, 4, 25, tzinfo=UTC), "2019-04-25"),  # midnight: a date
        (datetime.datetime(1970, 1, 1, 1, tzinfo=UTC), "01:00:00.000Z"),  # first day: a time
        (MOMENT, "2019-04-25T14:02:16.123Z"),
        (None, None),
    ],
)
def test_connect_string(value: Any, text: str | None) -> None:
    assert connect_string(value) == text
