"""Declaring and parsing settings: :class:`ConfigDef`, the shared machinery behind
worker settings, connector settings and every connector's own settings.

A definition lists keys with a type, a default (or none: required), a
validator, an importance and documentation. :meth:`ConfigDef.parse` turns raw
values (strings from ``.properties`` files and REST bodies, or native values
from YAML) into typed values and raises :class:`~eos.errors.ConfigError` naming
the key, the value and what is allowed. :meth:`ConfigDef.validate` collects every
problem per key instead (for ``PUT /connector-plugins/{type}/config/validate``).

Settings that fill a typed object are defined once, as the fields of a
:func:`config_class`: each field names its setting with :func:`setting`,
:func:`definition_of` collects them into a :class:`ConfigDef` and :func:`fill`
makes the object from the parsed values::

    @config_class
    class Settings:
        topic: str = setting("topic", Type.STRING, NO_DEFAULT, NonEmpty(), doc="Topic.")
        poll_seconds: float = setting("poll.ms", Type.LONG, 1000, convert=lambda ms: ms / 1000)

    CONFIG_DEF = definition_of(Settings)
    settings = fill(Settings, CONFIG_DEF.parse(props))
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar, dataclass_transform

from eos.errors import ConfigError


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Final = _NoDefault()
"""Marks a required key."""


class Type(enum.Enum):
    STRING = "string"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    LIST = "list"
    PASSWORD = "password"
    CLASS = "class"


class Importance(enum.Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


Validator = Callable[[str, Any], None]
"""Called with (key, parsed value); raises :class:`ConfigError` if the value is not allowed."""


def _to_bool(key: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigError(key, raw, "expected true or false")


def _to_int(key: str, raw: Any) -> int:
    if isinstance(raw, bool):
        raise ConfigError(key, raw, "expected an integer")
    if isinstance(raw, int):
        return raw
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ConfigError(key, raw, "expected an integer") from None


def _to_float(key: str, raw: Any) -> float:
    try:
        return float(str(raw).strip())
    except ValueError:
        raise ConfigError(key, raw, "expected a number") from None


def _to_list(key: str, raw: Any) -> list[str]:
    if isinstance(raw, list | tuple):
        return [str(v).strip() for v in raw]
    text = str(raw).strip()
    return [part.strip() for part in text.split(",") if part.strip()] if text else []


def _to_str(key: str, raw: Any) -> str:
    if isinstance(raw, Mapping | list):
        raise ConfigError(key, raw, "expected a string")
    return str(raw).strip()


_PARSERS: dict[Type, Callable[[str, Any], Any]] = {
    Type.STRING: _to_str,
    Type.PASSWORD: _to_str,
    Type.CLASS: _to_str,
    Type.INT: _to_int,
    Type.LONG: _to_int,
    Type.DOUBLE: _to_float,
    Type.BOOLEAN: _to_bool,
    Type.LIST: _to_list,
}


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: Type
    default: Any = NO_DEFAULT
    doc: str = ""
    validator: Validator | None = None
    importance: Importance = Importance.MEDIUM
    group: str = ""

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT

    def parse(self, raw: Any) -> Any:
        """Typed value of ``raw`` (or of the default when ``raw`` is None)."""
        if raw is None:
            if self.required:
                raise ConfigError(self.name, None, f"required setting is missing. {self.doc}")
            raw = self.default
            if raw is None:
                return None
        value = _PARSERS[self.type](self.name, raw)
        if self.validator is not None:
            self.validator(self.name, value)
        return value

    def describe(self) -> dict[str, Any]:
        """The key as Kafka Connect's validate endpoint shows a definition."""
        return {
            "name": self.name,
            "type": self.type.name,
            "required": self.required,
            "default_value": None if self.required else _render(self.default),
            "importance": self.importance.name,
            "documentation": self.doc,
            "group": self.group or None,
            "allowed": getattr(self.validator, "allowed", None),
        }


def _render(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


class ConfigDef:
    """An ordered set of :class:`ConfigKey`; build with :meth:`define` (chainable)."""

    def __init__(self, keys: Iterable[ConfigKey] = ()) -> None:
        self._keys: dict[str, ConfigKey] = {}
        for key in keys:
            self._add(key)

    def _add(self, key: ConfigKey) -> None:
        if key.name in self._keys:
            raise ValueError(f"setting {key.name!r} is defined twice")
        self._keys[key.name] = key

    def define(
        self,
        name: str,
        type: Type,
        default: Any = NO_DEFAULT,
        validator: Validator | None = None,
        importance: Importance = Importance.MEDIUM,
        doc: str = "",
        group: str = "",
    ) -> ConfigDef:
        self._add(ConfigKey(name, type, default, doc, validator, importance, group))
        return self

    @property
    def keys(self) -> Mapping[str, ConfigKey]:
        return self._keys

    def merged(self, other: ConfigDef) -> ConfigDef:
        """A new definition with ``other``'s keys after this one's (other wins on clashes)."""
        combined = dict(self._keys)
        combined.update(other.keys)
        return ConfigDef(combined.values())

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Typed values of every defined key; the first invalid one raises ConfigError.
        Keys that are not defined are left out (see :meth:`unknown`)."""
        return {name: key.parse(props.get(name)) for name, key in self._keys.items()}

    def validate(self, props: Mapping[str, Any]) -> dict[str, list[str]]:
        """Every problem, per defined key (empty lists for valid keys)."""
        errors: dict[str, list[str]] = {}
        for name, key in self._keys.items():
            try:
                key.parse(props.get(name))
                errors[name] = []
            except ConfigError as exc:
                errors[name] = [str(exc)]
        return errors

    def unknown(self, props: Mapping[str, Any], prefixes: Sequence[str] = ()) -> list[str]:
        """Keys in ``props`` that are neither defined nor start with an allowed prefix."""
        return sorted(
            k for k in props if k not in self._keys and not any(k.startswith(p) for p in prefixes)
        )


# ------------------------------------------------------------ config classes

T = TypeVar("T")
_SETTING: Final = "eos.config.setting"

Definition = tuple[str, Type, Any, Validator | None, Importance, str, str]
"""A setting's definition as positional arguments (name, type, default, validator,
importance, doc, group), for helpers that define several alike: ``setting(*d)``."""


@dataclass(frozen=True)
class _FieldSetting:
    key: ConfigKey
    convert: Callable[[Any], Any] | None


def setting(
    name: str,
    type: Type,
    default: Any = NO_DEFAULT,
    /,
    validator: Validator | None = None,
    importance: Importance = Importance.MEDIUM,
    doc: str = "",
    group: str = "",
    *,
    convert: Callable[[Any], Any] | None = None,
) -> Any:
    """A field of a :func:`config_class` that the setting ``name`` fills. The setting
    is defined as by :meth:`ConfigDef.define`; ``convert`` turns its parsed value into
    the field's (default: the parsed value as it is). The field itself has no default:
    :func:`fill` always gives it a value."""
    key = ConfigKey(name, type, default, doc, validator, importance, group)
    return dataclasses.field(metadata={_SETTING: _FieldSetting(key, convert)})


@dataclass_transform(frozen_default=True, field_specifiers=(setting, dataclasses.field))
def config_class(cls: type[T]) -> type[T]:
    """A frozen dataclass whose :func:`setting` fields define the settings it holds."""
    return dataclasses.dataclass(frozen=True)(cls)


@functools.cache
def _setting_fields(cls: type) -> tuple[tuple[str, _FieldSetting], ...]:
    return tuple(
        (f.name, f.metadata[_SETTING]) for f in dataclasses.fields(cls) if _SETTING in f.metadata
    )


def definition_of(cls: type) -> ConfigDef:
    """The settings of a :func:`config_class`'s fields, in field order."""
    return ConfigDef(s.key for _, s in _setting_fields(cls))


def fill(cls: Callable[..., T], values: Mapping[str, Any], **others: Any) -> T:
    """A :func:`config_class` ``cls`` made from ``values`` (parsed by a definition
    holding its settings, see :meth:`ConfigDef.parse`): each setting field gets its
    setting's value, converted; ``others`` are the fields no setting fills."""
    filled = {
        name: s.convert(values[s.key.name]) if s.convert else values[s.key.name]
        for name, s in _setting_fields(cls)
    }
    return cls(**filled, **others)


def or_none(value: Any) -> Any:
    """``convert`` for an optional setting: an empty value is None."""
    return value or None


# ---------------------------------------------------------------- validators


class Range:
    """``Range(at_least=1)``, ``Range(0, 100)``: a number within bounds (inclusive)."""

    def __init__(self, at_least: float | None = None, at_most: float | None = None) -> None:
        self.at_least, self.at_most = at_least, at_most
        low = "" if at_least is None else f"at least {at_least:g}"
        high = "" if at_most is None else f"at most {at_most:g}"
        self.allowed = " and ".join(p for p in (low, high) if p) or "any number"

    def __call__(self, key: str, value: Any) -> None:
        if value is None:
            return
        if (self.at_least is not None and value < self.at_least) or (
            self.at_most is not None and value > self.at_most
        ):
            raise ConfigError(key, value, f"must be {self.allowed}")


class OneOf:
    """One of the given strings (case-insensitive unless ``case_sensitive``)."""

    def __init__(self, *choices: str, case_sensitive: bool = False) -> None:
        self.choices = choices
        self.case_sensitive = case_sensitive
        self.allowed = ", ".join(choices)

    def __call__(self, key: str, value: Any) -> None:
        if value is None:
            return
        options = self.choices if self.case_sensitive else [c.lower() for c in self.choices]
        probe = value if self.case_sensitive else str(value).lower()
        if probe not in options:
            raise ConfigError(key, value, f"must be one of: {self.allowed}")


class NonEmpty:
    """A non-empty string or list."""

    allowed = "a non-empty value"

    def __call__(self, key: str, value: Any) -> None:
        if value is not None and len(value) == 0:
            raise ConfigError(key, value, "must not be empty")


class TopicName:
    """A legal Kafka topic name: 1 to 249 of ``a-z A-Z 0-9 . _ -``, not ``.`` or ``..``."""

    allowed = "a Kafka topic name: 1 to 249 characters from a-z, A-Z, 0-9, '.', '_' and '-'"

    def __call__(self, key: str, value: Any) -> None:
        if value is None:
            return
        legal = _TOPIC_CHARS.fullmatch(value) is not None and value not in (".", "..")
        if not legal:
            raise ConfigError(key, value, f"must be {self.allowed}, other than '.' and '..'")


_TOPIC_CHARS = re.compile(r"[A-Za-z0-9._-]{1,249}")
