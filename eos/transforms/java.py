"""Java's regular expressions and replacement strings, read as Kafka Connect reads them
(``java.util.regex``), for settings that move over from a Connect configuration.

:func:`java_regex` compiles a Java pattern with Python's :mod:`re` after translating
what differs: named groups ``(?<name>…)`` and ``\\k<name>``, quoting ``\\Q…\\E``, the
POSIX classes ``\\p{Alpha}`` and friends, and ``\\z``. Java's nested classes and class
intersections (``[a-z&&[^e]]``) have no Python counterpart and are refused.
:func:`java_replacement` turns ``Matcher.replaceFirst``'s replacement (``$1``,
``${name}``, ``\\$``) into a Python template. Both raise :class:`ValueError` with the
reason, which the caller turns into a ``ConfigError`` naming the setting.
"""

from __future__ import annotations

import decimal
import math
import re
import struct
import warnings
from functools import lru_cache

_POSIX = {
    "Lower": "a-z",
    "Upper": "A-Z",
    "ASCII": "\\x00-\\x7f",
    "Alpha": "a-zA-Z",
    "Digit": "0-9",
    "Alnum": "a-zA-Z0-9",
    "Punct": "!-/:-@\\[-`{-~",
    "Graph": "!-~",
    "Print": " -~",
    "Blank": " \\t",
    "Cntrl": "\\x00-\\x1f\\x7f",
    "XDigit": "0-9a-fA-F",
    "Space": " \\t\\n\\x0b\\f\\r",
}
"""``\\p{…}`` classes, as the body of a Python character class."""


@lru_cache(maxsize=256)
def java_regex(pattern: str) -> re.Pattern[str]:
    """``pattern`` (``java.util.regex`` syntax) compiled by Python's :mod:`re`."""
    translated = _translate(pattern)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)  # "possible nested set"
            return re.compile(translated)
    except FutureWarning:
        raise ValueError(
            "nested character classes and class intersections (&&) are not supported"
        ) from None
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, n, depth = 0, len(pattern), 0
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            piece, i = _escape(pattern, i, inside=depth > 0)
            out.append(piece)
            continue
        if c == "[":
            depth += 1
        elif c == "]" and depth:
            depth -= 1
        elif c == "(" and pattern.startswith("(?<", i) and pattern[i + 3 : i + 4].isalpha():
            out.append("(?P<")
            i += 3
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _escape(pattern: str, i: int, *, inside: bool) -> tuple[str, int]:
    """The Python text for the escape at ``pattern[i]`` and the index after it."""
    c = pattern[i + 1]
    if c == "Q":
        end = pattern.find("\\E", i + 2)
        stop = len(pattern) if end < 0 else end
        quoted = re.escape(pattern[i + 2 : stop])
        return quoted, stop if end < 0 else end + 2
    if c == "k" and pattern.startswith("<", i + 2):
        end = pattern.find(">", i + 3)
        if end < 0:
            raise ValueError("not a valid regular expression: unterminated \\k<name>")
        return f"(?P={pattern[i + 3 : end]})", end + 1
    if c in "pP" and pattern.startswith("{", i + 2):
        end = pattern.find("}", i + 3)
        name = pattern[i + 3 : end] if end > 0 else ""
        body = _POSIX.get(name, _POSIX.get(name.removeprefix("Is")))
        if end < 0 or body is None:
            raise ValueError(f"not a valid regular expression: unsupported class \\{c}{{{name}}}")
        if inside:
            if c == "P":
                raise ValueError(f"\\P{{{name}}} inside [...] is not supported")
            return body, end + 1
        return f"[{'^' if c == 'P' else ''}{body}]", end + 1
    if c == "z":
        return "\\Z", i + 2
    if c == "Z":
        return "(?=\\n?\\Z)", i + 2
    return pattern[i : i + 2], i + 2


@lru_cache(maxsize=256)
def java_replacement(replacement: str, pattern: re.Pattern[str]) -> str:
    """``replacement`` in ``Matcher.replaceFirst``'s syntax as a template for
    ``pattern.sub``: ``$n`` and ``${name}`` refer to groups, ``\\x`` is a literal x."""
    out: list[str] = []
    i, n = 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\":
            if i + 1 >= n:
                raise ValueError("character to be escaped is missing at the end")
            out.append(_literal(replacement[i + 1]))
            i += 2
        elif c == "$":
            ref, i = _group_ref(replacement, i + 1, pattern)
            out.append(f"\\g<{ref}>")
        else:
            out.append(_literal(c))
            i += 1
    return "".join(out)


def _literal(c: str) -> str:
    return "\\\\" if c == "\\" else c


def _group_ref(text: str, i: int, pattern: re.Pattern[str]) -> tuple[str, int]:
    if i < len(text) and text[i] == "{":
        end = text.find("}", i)
        name = text[i + 1 : end] if end > 0 else ""
        if end < 0 or not name:
            raise ValueError("named capturing group is missing its closing '}'")
        if name not in pattern.groupindex:
            raise ValueError(f"no group with name {{{name}}} in the regex")
        return name, end + 1
    if i >= len(text) or not text[i].isdigit():
        raise ValueError(
            "illegal group reference: '$' must be followed by a group number or {name}"
        )
    number, i = int(text[i]), i + 1
    if number > pattern.groups:
        raise ValueError(f"no group {number}: the regex has {pattern.groups}")
    while i < len(text) and text[i].isdigit() and number * 10 + int(text[i]) <= pattern.groups:
        number, i = number * 10 + int(text[i]), i + 1
    return str(number), i


def java_double(value: float) -> str:
    """``Double.toString``: plain notation within [1e-3, 1e7), else ``d.dddE±n``, with
    the fewest digits that read back as ``value``."""
    return _java_number(value, repr(value))


def java_float(value: float) -> str:
    """``Float.toString`` of ``value`` rounded to 32 bits (a FLOAT32 field)."""
    text = float32_text(value)
    return _java_number(float(text), text)


def float32_text(value: float) -> str:
    """The shortest decimal text that reads back as the same 32-bit float."""
    if not math.isfinite(value):
        return repr(value)
    packed = struct.pack("<f", value)
    rounded = struct.unpack("<f", packed)[0]
    for digits in range(1, 10):
        text = f"{rounded:.{digits}g}"
        if struct.pack("<f", float(text)) == packed:
            return text
    return repr(rounded)


def _java_number(value: float, text: str) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    number = decimal.Decimal(text)
    if 1e-3 <= abs(value) < 1e7:
        plain = format(number, "f")
        return plain if "." in plain else plain + ".0"
    sign, digits, _ = number.as_tuple()
    shown = "".join(map(str, digits)).rstrip("0") or "0"
    return f"{'-' if sign else ''}{shown[0]}.{shown[1:] or '0'}E{number.adjusted()}"
