"""Connector settings: :data:`CONNECTOR_CONFIG`, the parsed :class:`ConnectorConfig`,
and the checks that need only the settings (docs/configuration.md, "Connector settings").

A connector's settings are the framework's keys below, client overrides
(``producer.override.*``, ``consumer.override.*``, ``admin.override.*``) and the
connector's own settings, which its :meth:`~eos.api.SourceConnector.config_def`
defines. ``producer.override.transactional.id`` and
``consumer.override.isolation.level`` are ignored with a warning: eos sets them.

Checks come in two kinds. Those that need only the settings and the worker's
(every key valid; ``transaction.boundary.interval.ms`` only with
``transaction.boundary=interval``; an interval boundary well below the
producer's ``transaction.timeout.ms``) also run in
:meth:`ConnectorConfig.from_properties`. Those that ask the connector or depend
on the worker's exactly-once mode are the runtime's (:mod:`eos.runtime.validation`: this
package never imports the connector API), run when a configuration is submitted.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, cast

import structlog

from eos.config.auto_restart import AUTO_RESTART_CONNECTOR_CONFIG
from eos.config.converters import (
    CONVERTER_KINDS,
    CONVERTER_PREFIXES,
    ConverterSetting,
    converter_definition,
    converter_setting,
    converters_in_force,
    ignored_converter_settings,
)
from eos.config.definition import (
    NO_DEFAULT,
    ConfigDef,
    ConfigKey,
    Importance,
    NonEmpty,
    OneOf,
    Range,
    TopicName,
    Type,
    config_class,
    definition_of,
    fill,
    or_none,
    setting,
)
from eos.config.error_handling import ERRORS_CONFIG, ErrorHandling
from eos.config.worker import (
    PRODUCER_CLIENT,
    ProducerClientName,
    WorkerConfig,
    check_producer_client,
    exactly_once_producer_problems,
)
from eos.errors import ConfigError

if TYPE_CHECKING:
    from eos.kafka.clients import ClientConfig

log = structlog.get_logger(__name__)

TransactionBoundaryName = Literal["poll", "interval", "connector"]

DEFAULT_TRANSACTION_TIMEOUT_MS: Final = 60000
"""The Kafka producer's default ``transaction.timeout.ms``."""


class ConnectorName:
    """A non-empty name without control characters or ``/`` (it is part of REST paths)."""

    allowed = "a non-empty name without control characters or '/'"

    def __call__(self, key: str, value: Any) -> None:
        if value is None:
            return
        if not value or "/" in value or any(unicodedata.category(c) == "Cc" for c in value):
            raise ConfigError(key, value, f"must be {self.allowed}")


class UniqueAliases:
    """A list of aliases, none twice (``transforms``, ``predicates``)."""

    def __init__(self, kind: str) -> None:
        self.allowed = f"unique {kind} aliases"

    def __call__(self, key: str, value: Any) -> None:
        if value is not None and len(set(value)) < len(value):
            raise ConfigError(key, ",".join(value), "Duplicate alias provided.")


def _required(value: str) -> bool:
    return value.lower() == "required"


def _client_or_none(value: str | None) -> ProducerClientName | None:
    return check_producer_client(value) if value else None


PRODUCER_OVERRIDE: Final = "producer.override."
CONSUMER_OVERRIDE: Final = "consumer.override."
ADMIN_OVERRIDE: Final = "admin.override."
CONNECTOR_PREFIXES: Final = (PRODUCER_OVERRIDE, CONSUMER_OVERRIDE, ADMIN_OVERRIDE)
"""Prefixes of per-connector client settings."""

TRANSFORM_PREFIXES: Final = ("transforms.", "predicates.")
"""Prefixes of each transform's and predicate's settings (checked by eos.transforms)."""

IGNORED_OVERRIDES: Final = (
    f"{PRODUCER_OVERRIDE}transactional.id",
    f"{CONSUMER_OVERRIDE}isolation.level",
)
"""Overrides eos sets itself: refused with exactly-once enabled (as an ``acks`` or
``enable.idempotence`` its producer cannot have), ignored with a warning otherwise."""

_TIMEOUT = "transaction.timeout.ms"
_INTERVAL = "transaction.boundary.interval.ms"


@config_class
class ConnectorConfig:
    """A connector's parsed framework settings; build with :meth:`from_properties`.
    Each framework setting is defined once, as the field it fills (in the order
    docs/configuration.md lists them)."""

    name: str = setting(
        "name",
        Type.STRING,
        NO_DEFAULT,
        ConnectorName(),
        Importance.HIGH,
        "Unique name of the connector; part of its tasks' transactional ids and REST paths.",
        "common",
    )
    connector_class: str = setting(
        "connector.class",
        Type.STRING,
        NO_DEFAULT,
        NonEmpty(),
        Importance.HIGH,
        "The connector: an entry-point name (alias) or a class path (module:Class).",
        "common",
    )
    tasks_max: int = setting(
        "tasks.max",
        Type.INT,
        1,
        Range(at_least=1),
        Importance.HIGH,
        "At most this many tasks run the connector's work.",
        "common",
    )
    key_converter: ConverterSetting = setting(*converter_definition("key", worker=False))
    value_converter: ConverterSetting = setting(*converter_definition("value", worker=False))
    header_converter: ConverterSetting = setting(*converter_definition("header", worker=False))
    """The three filled by :func:`~eos.config.converters.converter_setting` from the
    settings :func:`in force <eos.config.converters.converters_in_force>`."""
    exactly_once_required: bool = setting(
        "exactly.once.support",
        Type.STRING,
        "requested",
        OneOf("requested", "required"),
        Importance.MEDIUM,
        "required: creation fails unless the connector declares exactly-once SUPPORTED for "
        "this configuration; requested: exactly-once whenever the worker has it enabled.",
        "exactly-once",
        convert=_required,
    )
    transaction_boundary: TransactionBoundaryName = setting(
        "transaction.boundary",
        Type.STRING,
        "poll",
        OneOf("poll", "interval", "connector"),
        Importance.MEDIUM,
        "poll: one transaction per non-empty poll batch; interval: one per commit interval; "
        "connector: the task decides through its TransactionContext.",
        "exactly-once",
        convert=str.lower,
    )
    transaction_boundary_interval_ms: int | None = setting(
        _INTERVAL,
        Type.LONG,
        None,
        Range(at_least=1),
        Importance.LOW,
        "Commit interval with transaction.boundary=interval (default: the worker's "
        "offset.flush.interval.ms); must be at most half the producer's transaction.timeout.ms.",
        "exactly-once",
    )
    producer_client: ProducerClientName | None = setting(
        PRODUCER_CLIENT,
        Type.STRING,
        None,
        OneOf("aiokafka", "librdkafka"),
        Importance.LOW,
        "The Kafka client of this connector's task producers (default: the worker's "
        "producer.client): aiokafka or librdkafka (the eos[librdkafka] extra).",
        "common",
        convert=_client_or_none,
    )
    """``producer.client`` of this connector (None: the worker's)."""
    transforms: list[str] = setting(
        "transforms",
        Type.LIST,
        [],
        UniqueAliases("transformation"),
        Importance.LOW,
        "Aliases for the transformations to be applied to records, in order; each alias "
        "needs transforms.<alias>.type (docs/transforms.md).",
        "transforms",
    )
    predicates: list[str] = setting(
        "predicates",
        Type.LIST,
        [],
        UniqueAliases("predicate"),
        Importance.LOW,
        "Aliases for the predicates used by transformations (transforms.<alias>.predicate); "
        "each alias needs predicates.<alias>.type.",
        "transforms",
    )
    offsets_topic: str | None = setting(
        "offsets.storage.topic",
        Type.STRING,
        None,
        TopicName(),
        Importance.LOW,
        "A separate offsets topic for this connector (default: the worker's offsets topic).",
        "exactly-once",
        convert=or_none,
    )
    declared_restart: int = setting(
        "declared.restart",
        Type.INT,
        0,
        Range(at_least=0),
        Importance.LOW,
        "The last restart asked for by the connector's file (its restart field; "
        "connectors.dir and eos connectors apply keep it here): a file whose restart differs "
        "has the connector and its tasks restarted once, as Strimzi's strimzi.io/restart "
        "annotation does. Not set by hand.",
        "common",
    )
    producer_overrides: dict[str, str]
    """``producer.override.*`` without the prefix (and without ``transactional.id``)."""
    consumer_overrides: dict[str, str]
    """``consumer.override.*`` without the prefix (and without ``isolation.level``)."""
    admin_overrides: dict[str, str]
    """``admin.override.*`` without the prefix."""
    raw: dict[str, str]
    """Every setting in force: the connector's own as given, with the converters it takes
    from the worker (:func:`~eos.config.converters.converters_in_force`)."""
    errors: ErrorHandling
    """The ``errors.*`` settings (:mod:`eos.config.error_handling`)."""

    @classmethod
    def from_properties(
        cls,
        props: Mapping[str, str],
        worker: WorkerConfig,
        connector_def: ConfigDef | None = None,
    ) -> ConnectorConfig:
        """Parse ``props``; the first problem that needs no connector raises
        :class:`ConfigError`. Ignored overrides are logged, and, if the connector's own
        ``connector_def`` is given, settings neither the framework nor it defines."""
        given = props
        props = converters_in_force(given, worker.raw)
        problems = settings_problems(props, worker)
        if problems:
            raise problems[0].error
        v = CONNECTOR_CONFIG.parse(props)
        for which in CONVERTER_KINDS:
            key = f"{which}.converter"
            v[key] = converter_setting(props, which, v[key])
            for ignored in ignored_converter_settings(given, worker.raw, which):
                log.warning(
                    "setting ignored: the connector uses the worker's converter with the "
                    "worker's settings; set the converter on the connector to use its own",
                    setting=ignored,
                    converter=key,
                    connector=v["name"],
                )
        for key in IGNORED_OVERRIDES:
            if key in props:
                log.warning(
                    "setting ignored: eos sets it itself",
                    setting=key,
                    value=props[key],
                    connector=v["name"],
                )
        if connector_def is not None:
            for key in unknown_settings(props, connector_def):
                log.warning("unknown connector setting", setting=key, connector=v["name"])
        return fill(
            cls,
            v,
            producer_overrides=_overrides(props, PRODUCER_OVERRIDE),
            consumer_overrides=_overrides(props, CONSUMER_OVERRIDE),
            admin_overrides=_overrides(props, ADMIN_OVERRIDE),
            raw=dict(props),
            errors=fill(ErrorHandling, v),
        )

    def boundary_interval_ms(self, worker: WorkerConfig) -> int:
        """The commit interval of ``transaction.boundary=interval``: the connector's
        own, else the worker's ``offset.flush.interval.ms``."""
        if self.transaction_boundary_interval_ms is not None:
            return self.transaction_boundary_interval_ms
        return worker.offset_flush_interval_ms

    def task_producer_client(self, worker: WorkerConfig) -> ProducerClientName:
        """The client of the task producers: the connector's, else the worker's."""
        return self.producer_client or worker.producer_client

    def producer_transaction_timeout_ms(self, worker: WorkerConfig) -> int:
        """The task producer's ``transaction.timeout.ms``: the connector's override,
        else the worker's ``producer.transaction.timeout.ms``, else Kafka's 60000."""
        return _transaction_timeout(self.raw, worker)[0]

    def client_config(self, worker: WorkerConfig) -> ClientConfig:
        """The worker's client settings with this connector's overrides laid over them."""
        return worker.client_config.with_overrides(
            producer=self.producer_overrides,
            consumer=self.consumer_overrides,
            admin=self.admin_overrides,
        )

    def output_cluster_config(self, worker: WorkerConfig) -> ClientConfig:
        """:meth:`client_config` for the clients that reach the cluster the tasks'
        producers write to (another one with ``producer.override.bootstrap.servers``, whose
        consumer and admin layers then connect there too): the connector's offsets topic,
        and the leader's fencing of its old task generations (as Connect fences with the
        connector's admin settings)."""
        config = self.client_config(worker)
        servers = self.producer_overrides.get("bootstrap.servers")
        if servers is None:
            return config
        return config.with_overrides(
            consumer={"bootstrap.servers": servers}, admin={"bootstrap.servers": servers}
        )

    def offsets_topic_for(self, worker: WorkerConfig) -> str | None:
        """The connector's own offsets topic, or None when it uses the worker's global one.

        ``offsets.storage.topic`` names it; without it, a producer bootstrap override
        for another cluster implies a topic named like the worker's on that cluster.
        """
        other_cluster = writes_elsewhere(self.raw, worker)
        topic = self.offsets_topic or (worker.offsets_topic if other_cluster else None)
        if topic == worker.offsets_topic and not other_cluster:
            return None
        return topic


CONNECTOR_CONFIG: Final = definition_of(ConnectorConfig).merged(
    ERRORS_CONFIG.merged(AUTO_RESTART_CONNECTOR_CONFIG)
)
"""The framework's connector settings, ``errors.*`` and ``auto.restart.*`` included (the
table in docs/configuration.md is generated from it)."""


def _overrides(props: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {
        key.removeprefix(prefix): value
        for key, value in props.items()
        if key.startswith(prefix) and key not in IGNORED_OVERRIDES
    }


def writes_elsewhere(props: Mapping[str, str], worker: WorkerConfig) -> bool:
    """Whether a connector's tasks write to a cluster other than the workers'
    (``producer.override.bootstrap.servers`` naming other servers)."""
    override = props.get("producer.override.bootstrap.servers")
    return override is not None and _servers(override) != set(worker.bootstrap_servers)


def _servers(value: str) -> set[str]:
    return {s.strip() for s in value.split(",") if s.strip()}


def _transaction_timeout(props: Mapping[str, str], worker: WorkerConfig) -> tuple[int, str]:
    """(the task producer's transaction.timeout.ms, the setting it comes from)."""
    for source, key in (
        (props, f"{PRODUCER_OVERRIDE}{_TIMEOUT}"),
        (worker.raw, f"producer.{_TIMEOUT}"),
    ):
        if key in source:
            value: int = ConfigKey(key, Type.INT, validator=Range(at_least=1)).parse(source[key])
            return value, key
    return DEFAULT_TRANSACTION_TIMEOUT_MS, f"producer.{_TIMEOUT}"


# ----------------------------------------------------------------- validation


@dataclass(frozen=True)
class Problem:
    key: str
    message: str
    error: ConfigError

    @classmethod
    def of(cls, key: str, value: object, message: str) -> Problem:
        return cls(key, message, ConfigError(key, value, message))

    @classmethod
    def named(cls, key: str, value: object, message: str) -> Problem:
        """A problem whose message names the setting and its value, as Connect's
        ``Invalid value … for configuration …`` do (for lists that show no key)."""
        error = ConfigError(key, value, message)
        return cls(key, str(error), error)


def settings_problems(props: Mapping[str, str], worker: WorkerConfig) -> list[Problem]:
    """Invalid framework keys, the client overrides exactly-once cannot work with, then the
    interval-boundary rules."""
    problems = _exactly_once_override_problems(props) if worker.exactly_once_enabled else []
    values: dict[str, Any] = {}
    for name, key in CONNECTOR_CONFIG.keys.items():
        try:
            values[name] = key.parse(props.get(name))
        except ConfigError as exc:
            problems.append(Problem(name, str(exc), exc))
    client = values.get(PRODUCER_CLIENT)
    if client:
        try:
            check_producer_client(client)
        except ConfigError as exc:
            problems.append(Problem(PRODUCER_CLIENT, str(exc), exc))
    try:
        timeout, timeout_key = _transaction_timeout(props, worker)
    except ConfigError as exc:
        return [*problems, Problem(exc.key, str(exc), exc)]
    boundary, interval = values.get("transaction.boundary"), values.get(_INTERVAL)
    if boundary is None:
        return problems
    if boundary.lower() != "interval":
        if interval is not None:
            problems.append(
                Problem.of(
                    _INTERVAL,
                    props[_INTERVAL],
                    f"{_INTERVAL} only applies with transaction.boundary=interval "
                    f"(it is {boundary}); remove it or use transaction.boundary=interval",
                )
            )
        return problems
    if _INTERVAL in props and interval is None:
        return problems  # invalid itself, already reported
    effective = interval if interval is not None else worker.offset_flush_interval_ms
    if 2 * effective > timeout:
        message = (
            f"the commit interval {effective} ms is not well below the producer's "
            f"{_TIMEOUT}={timeout} ms: transactions would time out; lower the interval or "
            f"raise {PRODUCER_OVERRIDE}{_TIMEOUT} (the interval must be at most half of it)"
        )
        if interval is None:
            message += (
                f"; the interval is the worker's offset.flush.interval.ms ({_INTERVAL} is not set)"
            )
        if timeout_key in worker.raw:
            message += f"; the timeout is the worker's {timeout_key}"
        problems.append(Problem.of(_INTERVAL, effective, message))
    return problems


def transaction_timeout_problems(
    props: Mapping[str, str], worker: WorkerConfig, broker_max_ms: int | None
) -> list[Problem]:
    """The task producer's ``transaction.timeout.ms`` above the brokers'
    ``transaction.max.timeout.ms`` (``broker_max_ms``, None: not known), for a connector
    writing to the worker's cluster with exactly-once enabled."""
    if broker_max_ms is None or not worker.exactly_once_enabled:
        return []
    if f"{PRODUCER_OVERRIDE}bootstrap.servers" in props:
        return []  # another cluster, another limit: its producer's start says
    try:
        timeout, key = _transaction_timeout(props, worker)
    except ConfigError:
        return []  # named by settings_problems
    if timeout <= broker_max_ms:
        return []
    whose = "" if key in props else " (the worker's)"
    return [Problem.named(key, timeout, (
        f"is above the brokers' transaction.max.timeout.ms ({broker_max_ms}){whose}: a "
        "task's producer could not start; lower it, or raise the brokers' limit"
    ))]  # fmt: skip


def _exactly_once_override_problems(props: Mapping[str, str]) -> list[Problem]:
    """With exactly-once enabled: overrides of what eos sets for it, or that its
    transactional producer cannot have, each refused naming it."""
    problems = [
        Problem.named(key, value, why)
        for key, value, why in exactly_once_producer_problems(props, PRODUCER_OVERRIDE)
    ]
    key = f"{PRODUCER_OVERRIDE}transactional.id"
    if key in props:
        problems.append(Problem.named(key, props[key], (
            "eos gives each task its own transactional.id for exactly-once delivery "
            "(exactly.once.source.support=enabled): remove it"
        )))  # fmt: skip
    key = f"{CONSUMER_OVERRIDE}isolation.level"
    if props.get(key, "read_committed").strip().lower() != "read_committed":
        problems.append(Problem.named(key, props[key], (
            "exactly-once reads the offsets topic read_committed "
            "(exactly.once.source.support=enabled): remove it"
        )))  # fmt: skip
    return problems


def valid_choice(props: Mapping[str, str], name: str) -> str | None:
    """The lower-cased value of a valid string setting, or None if it is invalid."""
    try:
        value = CONNECTOR_CONFIG.keys[name].parse(props.get(name))
    except ConfigError:
        return None
    return cast(str, value).lower()


def unknown_settings(props: Mapping[str, str], connector_def: ConfigDef) -> list[str]:
    """Settings neither :data:`CONNECTOR_CONFIG`, the overrides, the converters', the
    transforms' and predicates' nor the connector's own definition (``config_def()``)
    defines."""
    prefixes = (*CONNECTOR_PREFIXES, *TRANSFORM_PREFIXES, *CONVERTER_PREFIXES)
    return CONNECTOR_CONFIG.merged(connector_def).unknown(props, prefixes)
