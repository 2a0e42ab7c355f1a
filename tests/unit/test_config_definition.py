"""Settings defined once, as the fields of a config class: the definition collected
from the fields, and the generic fill of the class from parsed values."""

from __future__ import annotations

import dataclasses

import pytest

from eos.config import CONNECTOR_CONFIG, WORKER_CONFIG, ConnectorConfig, WorkerConfig
from eos.config.auto_restart import (
    AUTO_RESTART_WORKER_CONFIG,
    AutoRestartOverrides,
    AutoRestartSettings,
)
from eos.config.definition import (
    NO_DEFAULT,
    Importance,
    NonEmpty,
    OneOf,
    Range,
    Type,
    config_class,
    definition_of,
    fill,
    or_none,
    setting,
)
from eos.config.error_handling import ErrorHandling
from eos.config.rest_security import REST_SECURITY_CONFIG
from eos.errors import ConfigError


@config_class
class Example:
    topic: str = setting("topic", Type.STRING, NO_DEFAULT, NonEmpty(), Importance.HIGH, "Topic.")
    seconds: float = setting(
        "poll.interval.ms", Type.LONG, 1000, Range(at_least=1), convert=lambda ms: ms / 1000
    )
    mode: str = setting("mode", Type.STRING, "Fast", OneOf("fast", "slow"), convert=str.lower)
    label: str | None = setting("label", Type.STRING, "", doc="Optional.", convert=or_none)
    extra: int
    """No setting fills it."""


def test_the_definition_lists_the_setting_fields_in_order() -> None:
    definition = definition_of(Example)
    assert list(definition.keys) == ["topic", "poll.interval.ms", "mode", "label"]
    topic = definition.keys["topic"]
    assert (topic.type, topic.required, topic.importance, topic.doc) == (
        Type.STRING,
        True,
        Importance.HIGH,
        "Topic.",
    )
    assert definition.keys["poll.interval.ms"].default == 1000


def test_fill_converts_each_setting_and_takes_the_other_fields() -> None:
    definition = definition_of(Example)
    got = fill(Example, definition.parse({"topic": "t", "poll.interval.ms": "250"}), extra=7)
    assert got == Example(topic="t", seconds=0.25, mode="fast", label=None, extra=7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.topic = "u"  # type: ignore[misc]


def test_validation_is_the_definitions() -> None:
    with pytest.raises(ConfigError, match="must be one of: fast, slow"):
        definition_of(Example).parse({"topic": "t", "mode": "medium"})
    assert definition_of(Example).validate({})["topic"] == [
        "invalid value None for setting 'topic': required setting is missing. Topic."
    ]


def test_a_field_without_its_value_is_an_error() -> None:
    with pytest.raises(TypeError, match="extra"):
        fill(Example, definition_of(Example).parse({"topic": "t"}))


def test_every_worker_setting_but_rest_security_fills_a_field() -> None:
    filled = {f.name for f in dataclasses.fields(WorkerConfig)} - {"rest_tls", "rest_auth", "raw"}
    # auto.restart.*: fields of AutoRestartSettings (one setting, one field there too)
    restarts = {f.name for f in dataclasses.fields(AutoRestartSettings)}
    assert len(filled) == len(WORKER_CONFIG.keys) - len(REST_SECURITY_CONFIG.keys) - len(restarts)
    assert len(restarts) == len(AUTO_RESTART_WORKER_CONFIG.keys)


def test_every_connector_setting_fills_a_field() -> None:
    others = {"producer_overrides", "consumer_overrides", "admin_overrides", "raw", "errors"}
    filled = {f.name for f in dataclasses.fields(ConnectorConfig)} - others
    errors = {f.name for f in dataclasses.fields(ErrorHandling)}
    # auto.restart.*: fields of AutoRestartOverrides, read where a restart is decided
    overrides = {f.name for f in dataclasses.fields(AutoRestartOverrides)}
    assert len(filled) + len(errors) == len(CONNECTOR_CONFIG.keys) - len(overrides)
