"""Validating a connector config against its plugin: the checks of
:mod:`eos.config.connector` that need only the settings, the connector's own
``validate()`` and ``config_def()``, its ``transforms`` and ``predicates``
(:mod:`eos.transforms.chain_validation`), its converters' own settings (``key.converter.*``,
``value.converter.*``: eos's converters configured as a task would, nothing contacted; a
class path's converter only loaded), its ``errors.*`` (a dead-letter topic that is an
offsets topic), and the pre-flight checks of
``exactly.once.support`` and ``transaction.boundary`` (docs/exactly-once.md).
Run on create, config update and validate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from eos.api.connector import ConnectorTransactionBoundaries, ExactlyOnceSupport, SourceConnector
from eos.config.connector import (
    CONNECTOR_CONFIG,
    Problem,
    settings_problems,
    transaction_timeout_problems,
    unknown_settings,
    valid_choice,
)
from eos.config.converters import CONVERTER_KINDS, converters_in_force
from eos.config.error_handling import error_problems
from eos.config.worker import WorkerConfig
from eos.converters import (
    CONVERTERS,
    converter_class,
    decodable,
    make_converter,
    make_header_converter,
)
from eos.converters.settings import refused as refused_setting
from eos.converters.settings import unknown as unknown_settings_of
from eos.errors import ConfigError, PluginError
from eos.transforms import chain_validation as transforms

log = structlog.get_logger(__name__)

CONVERTER_NAMES = tuple(f"{which}.converter" for which in CONVERTER_KINDS)


def unknown_connector_settings(props: Mapping[str, str], connector: SourceConnector) -> list[str]:
    """Settings neither the framework, the overrides nor the connector defines."""
    return unknown_settings(props, connector.config_def())


def _connector_problems(props: Mapping[str, str], connector: SourceConnector) -> list[Problem]:
    """What the connector's own validate() finds."""
    try:
        found = connector.validate(props)
    except Exception as exc:
        message = f"the connector's validate() failed: {exc!r}"
        return [Problem.of("connector.class", props.get("connector.class"), message)]
    # Messages from config_def() already name key and value: keep those errors as they are.
    originals: dict[tuple[str, str], ConfigError] = {}
    for name, key in connector.config_def().keys.items():
        try:
            key.parse(props.get(name))
        except ConfigError as exc:
            originals[name, str(exc)] = exc
    problems = []
    for name, messages in found.items():
        for message in messages:
            original = originals.get((name, message))
            problem = Problem(name, message, original) if original else None
            problems.append(problem or Problem.of(name, props.get(name), message))
    return problems


def _support_problems(
    props: Mapping[str, str], worker: WorkerConfig, connector: SourceConnector | None
) -> list[Problem]:
    """The pre-flight checks of exactly.once.support and transaction.boundary."""
    problems = []
    support = valid_choice(props, "exactly.once.support")
    if support == "required":
        if not worker.exactly_once_enabled:
            problems.append(
                Problem.of(
                    "exactly.once.support",
                    props["exactly.once.support"],
                    "exactly.once.support=required needs exactly.once.source.support=enabled "
                    f"on the worker (it is {worker.exactly_once})",
                )
            )
        if connector is not None:
            answer = _ask(connector.exactly_once_support, props)
            if answer is not ExactlyOnceSupport.SUPPORTED:
                problems.append(
                    Problem.of("exactly.once.support", props["exactly.once.support"], _why(answer))
                )
    if valid_choice(props, "transaction.boundary") == "connector" and connector is not None:
        answer = _ask(connector.can_define_transaction_boundaries, props)
        if answer is not ConnectorTransactionBoundaries.SUPPORTED:
            message = (
                "the connector does not support connector-defined transaction boundaries "
                "with this configuration"
            )
            if isinstance(answer, Exception):
                message += f" (asking it failed: {answer!r})"
            problems.append(
                Problem.of("transaction.boundary", props["transaction.boundary"], message)
            )
    return problems


def _ask(question: Any, props: Mapping[str, str]) -> Any:
    try:
        return question(props)
    except Exception as exc:
        return exc


def _why(answer: Any) -> str:
    if answer is ExactlyOnceSupport.UNSUPPORTED:
        return "the connector cannot provide exactly-once delivery with this configuration"
    message = (
        "the connector could not determine whether it supports exactly-once delivery with "
        "this configuration; consult its documentation, or use exactly.once.support=requested"
    )
    if isinstance(answer, Exception):
        message += f" (asking it failed: {answer!r})"
    return message


def _transform_problems(
    props: Mapping[str, str], connector: SourceConnector | None
) -> list[Problem]:
    """The transforms' and predicates' (docs/transforms.md), and those that cannot run on
    the rows of a connector that hands them over encoded."""
    encoded = connector is not None and _ask(connector.encodes_rows, props) is True
    if encoded and decodable(
        props.get("key.converter", "json"), props.get("value.converter", "json"), props
    ):
        encoded = False  # the task reads such rows back for those steps
    encoded_by = type(connector).__name__ if encoded else None
    return [Problem(e.key, str(e), e) for e in transforms.problems(props, encoded_by=encoded_by)]


def converter_problems(props: Mapping[str, str]) -> list[Problem]:
    """What a task would find configuring its key, value and header converters (``props``:
    the settings in force, a connector's or the worker's): a class that does not load, or
    (eos's own converters) a setting of theirs missing or bad, under the setting's full
    name (``value.converter.schema.registry.url``)."""
    problems = []
    for which in CONVERTER_KINDS:
        setting = f"{which}.converter"
        name = str(props.get(setting) or CONNECTOR_CONFIG.keys[setting].default)
        prefix = setting + "."
        own = {k.removeprefix(prefix): v for k, v in props.items() if k.startswith(prefix)}
        for key, value in own.items():
            why = refused_setting(key, value)
            if why is not None:
                problems.append(Problem.of(prefix + key, value, why))
        try:
            if name not in CONVERTERS and name.lower() not in CONVERTERS:
                found = converter_class(name)  # a user's: loaded only, never configured here
                if which == "header" and not callable(getattr(found, "from_connect_header", None)):
                    problems.append(Problem.of(setting, name, "it cannot convert headers"))
                continue
            if which == "header":
                converter: Any = make_header_converter(name, own)
            else:
                converter = make_converter(name, own, which == "key")
        except PluginError as exc:
            problems.append(Problem.of(setting, name, str(exc)))
            continue
        except ConfigError as exc:
            key = exc.key if exc.key.startswith(setting) else prefix + exc.key
            error = ConfigError(key, exc.value, exc.allowed.replace("<key|value>", which))
            problems.append(Problem(key, str(error), error))
            continue
        except Exception as exc:  # a setting the converter's own parsing tripped over
            problems.append(Problem.of(setting, name, f"its settings cannot be used: {exc}"))
            continue
        close = getattr(converter, "close", None)
        if callable(close):
            close()
        for key in unknown_settings_of(type(converter), own):
            log.warning(
                "unknown converter setting, ignored: not a setting of this converter",
                setting=prefix + key,
                converter=name,
            )
    return problems


def _all_problems(
    props: Mapping[str, str],
    worker: WorkerConfig,
    connector: SourceConnector | None,
    broker_max_ms: int | None = None,
) -> list[Problem]:
    problems = settings_problems(props, worker)
    problems += transaction_timeout_problems(props, worker, broker_max_ms)
    if connector is not None:
        problems += _connector_problems(props, connector)
    if not any(p.key in CONVERTER_NAMES for p in problems):
        problems += converter_problems(props)
    problems += _transform_problems(props, connector)
    offsets_topics = (str(props.get("offsets.storage.topic") or worker.offsets_topic),)
    problems += [Problem(e.key, str(e), e) for e in error_problems(props, offsets_topics)]
    return problems + _support_problems(props, worker, connector)


def validate_connector(
    props: Mapping[str, str],
    worker: WorkerConfig,
    connector: SourceConnector | None,
    broker_max_ms: int | None = None,
) -> dict[str, list[str]]:
    """Every problem per setting (empty lists for valid ones), for the REST API's
    create, config update and validate: the framework's keys, the connector's own
    validate(), and the pre-flight checks (docs/exactly-once.md). Without a connector (its
    class could not be loaded) only the checks that need none run. ``broker_max_ms``: the
    brokers' ``transaction.max.timeout.ms``, if the worker could read it."""
    props = converters_in_force(props, worker.raw)
    result: dict[str, list[str]] = {name: [] for name in CONNECTOR_CONFIG.keys}
    if connector is not None:
        for name in connector.config_def().keys:
            result.setdefault(name, [])
    for name in transforms.definitions(props).keys:
        result.setdefault(name, [])
    for problem in _all_problems(props, worker, connector, broker_max_ms):
        result.setdefault(problem.key, []).append(problem.message)
    return result


def check_connector(
    props: Mapping[str, str], worker: WorkerConfig, connector: SourceConnector | None
) -> None:
    """Raise :class:`ConfigError` for the first problem :func:`validate_connector` finds."""
    problems = _all_problems(converters_in_force(props, worker.raw), worker, connector)
    if problems:
        raise problems[0].error
