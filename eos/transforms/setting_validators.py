"""Validators of the settings Connect's transforms use (a Java regex, a non-empty list).
Errors name the setting without the ``transforms.<alias>.`` prefix; the chain adds it."""

from __future__ import annotations

from typing import Any

from eos.config.definition import ConfigDef, Importance, Type
from eos.errors import ConfigError
from eos.transforms.java import java_regex

WHOLE = "type"
"""The setting a problem of the transform as a whole is reported on (``transforms.a.type``)."""


def setting_error(key: str, value: object, reason: Exception | str) -> ConfigError:
    return ConfigError(key, value, str(reason))


class JavaRegex:
    """A regular expression in Java's syntax (see :mod:`eos.transforms.java`)."""

    allowed = "a valid regex"

    def __init__(self, *, non_empty: bool = False) -> None:
        self.non_empty = non_empty

    def __call__(self, key: str, value: Any) -> None:
        if value is None:
            return
        if self.non_empty and not value:
            raise ConfigError(key, value, "must not be empty")
        try:
            java_regex(value)
        except ValueError as exc:
            raise ConfigError(key, value, str(exc)) from None


class NonEmptyList:
    """A list with at least one entry."""

    allowed = "non-empty list"

    def __call__(self, key: str, value: Any) -> None:
        if value is not None and not value:
            raise ConfigError(key, value, "must list at least one entry")


REPLACE_NULL = "replace.null.with.default"


def with_replace_null(definition: ConfigDef) -> ConfigDef:
    """``definition`` with Connect's ``replace.null.with.default`` (true), the setting
    of every transform that reads a Struct's fields."""
    return definition.define(
        REPLACE_NULL,
        Type.BOOLEAN,
        True,
        None,
        Importance.MEDIUM,
        "Whether to replace fields that have a default value and that are null to the "
        "default value. When set to true, the default value is used, otherwise null is used.",
    )
