"""Reading settings files: Java ``.properties``, YAML and JSON, all to flat string maps.

Whatever the format, the result maps Kafka-style dotted names to strings, so one
parser (:class:`~eos.config.definition.ConfigDef`) handles every source:

- ``.properties`` / ``.conf``: Java's format (``key=value``, ``key: value`` or
  ``key value``; ``#`` and ``!`` comments; a line ending in an odd number of
  backslashes continues on the next one; escapes ``\\t \\n \\r \\f \\uXXXX`` and
  ``\\<any>`` for the character itself). Whitespace around keys and values is trimmed.
- ``.yaml`` / ``.yml`` / ``.json``: a mapping; nested mappings are flattened with
  dots (``producer: {linger.ms: 5}`` is ``producer.linger.ms=5``), booleans become
  ``true``/``false``, null becomes the empty string, lists are joined by commas.

Every problem raises :class:`~eos.errors.ConfigError` with key ``<file>``, the path
as value, and what went wrong (with the line number for ``.properties`` files).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from eos.errors import ConfigError

FILE_KEY = "<file>"
"""The key :class:`ConfigError` names for problems with a settings file as a whole."""

_PROPERTIES = (".properties", ".conf")
_YAML = (".yaml", ".yml")
_JSON = (".json",)
_SEPARATORS = "=:"
_BLANKS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def load_config_file(path: str | Path) -> dict[str, str]:
    """Settings from ``path``, the format chosen by its extension."""
    suffix = Path(path).suffix.lower()
    if suffix in _PROPERTIES:
        return load_properties(path)
    if suffix in _YAML:
        return load_yaml(path)
    if suffix in _JSON:
        return load_json(path)
    allowed = ", ".join((*_PROPERTIES, *_YAML, *_JSON))
    raise ConfigError(FILE_KEY, str(path), f"a settings file's name must end in one of {allowed}")


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(FILE_KEY, str(path), "an existing readable file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(FILE_KEY, str(path), f"an existing readable file ({exc})") from None


# ------------------------------------------------------------------ properties


def load_properties(path: str | Path) -> dict[str, str]:
    """Settings from a Java ``.properties`` file (UTF-8); a later key wins."""
    return parse_properties(_read(path), source=str(path))


def parse_properties(text: str, *, source: str = "<string>") -> dict[str, str]:
    """Settings from the text of a ``.properties`` file (see the module docstring)."""
    result: dict[str, str] = {}
    for number, line in _logical_lines(text):
        try:
            key, value = _key_value(line)
        except ValueError as exc:
            raise ConfigError(FILE_KEY, source, f"line {number}: {exc}") from None
        result[key] = value
    return result


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(number of the first natural line, logical line) for every non-comment line."""
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        number, line = index + 1, lines[index].lstrip(_BLANKS)
        index += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and index < len(lines):
            line = line[:-1] + lines[index].lstrip(_BLANKS)
            index += 1
        if _continues(line):  # a continuation on the last line continues into nothing
            line = line[:-1]
        yield number, line


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _key_value(line: str) -> tuple[str, str]:
    key, end = _unescape(line, 0, stop_at_separator=True)
    while end < len(line) and line[end] in _BLANKS:
        end += 1
    if end < len(line) and line[end] in _SEPARATORS:
        end += 1
    value, _ = _unescape(line, end, stop_at_separator=False)
    return key, value


def _unescape(line: str, start: int, *, stop_at_separator: bool) -> tuple[str, int]:
    """Unescaped text from ``start`` and where it stopped; blanks around it are
    trimmed unless escaped."""
    chars: list[tuple[str, bool]] = []  # (character, was escaped)
    index = start
    while index < len(line):
        char = line[index]
        if char == "\\":
            char, index = _escape(line, index + 1)
            chars.append((char, True))
            continue
        if stop_at_separator and (char in _SEPARATORS or char in _BLANKS):
            break
        chars.append((char, False))
        index += 1
    first = next((i for i, (c, esc) in enumerate(chars) if esc or c not in _BLANKS), len(chars))
    last = len(chars)
    while last > first and not chars[last - 1][1] and chars[last - 1][0] in _BLANKS:
        last -= 1
    return "".join(c for c, _ in chars[first:last]), index


def _escape(line: str, index: int) -> tuple[str, int]:
    """The character escaped at ``line[index]`` (just after a backslash) and the next index."""
    if index >= len(line):
        return "", index
    char = line[index]
    if char != "u":
        return _ESCAPES.get(char, char), index + 1
    digits = line[index + 1 : index + 5]
    if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
        raise ValueError(f"malformed \\uXXXX escape: \\u{digits}")
    return chr(int(digits, 16)), index + 5


# ------------------------------------------------------------------ YAML / JSON


def load_yaml(path: str | Path) -> dict[str, str]:
    """Settings from a YAML mapping, flattened (see the module docstring)."""
    try:
        data = yaml.safe_load(_read(path))
    except yaml.YAMLError as exc:
        raise ConfigError(FILE_KEY, str(path), f"valid YAML ({exc})") from None
    return flatten(data, source=str(path))


def load_json(path: str | Path) -> dict[str, str]:
    """Settings from a JSON object, flattened (see the module docstring)."""
    try:
        data = json.loads(_read(path))
    except json.JSONDecodeError as exc:
        raise ConfigError(FILE_KEY, str(path), f"valid JSON ({exc})") from None
    return flatten(data, source=str(path))


def flatten(data: Any, *, source: str = "<data>") -> dict[str, str]:
    """A nested mapping as flat dotted names → strings; ``None`` is an empty file."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(FILE_KEY, source, "a mapping of setting names to values at the top")
    result: dict[str, str] = {}
    _flatten_into(result, "", data, source)
    return result


def _flatten_into(
    result: dict[str, str], prefix: str, data: Mapping[Any, Any], source: str
) -> None:
    for raw_key, value in data.items():
        key = f"{prefix}{_scalar(raw_key, source, prefix)}"
        if isinstance(value, Mapping):
            _flatten_into(result, f"{key}.", value, source)
            continue
        if key in result:
            raise ConfigError(FILE_KEY, source, f"setting {key!r} is given twice")
        if isinstance(value, list | tuple):
            result[key] = ",".join(_scalar(item, source, key) for item in value)
        else:
            result[key] = _scalar(value, source, key)


def _scalar(value: Any, source: str, where: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping | list | tuple):
        raise ConfigError(FILE_KEY, source, f"setting {where!r}: a list may hold only plain values")
    return str(value)
