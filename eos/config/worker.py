"""Worker settings: :data:`WORKER_CONFIG` and the parsed, frozen :class:`WorkerConfig`.

Names, types and meanings follow Kafka Connect's distributed worker; docs/configuration.md
lists them (generated from :data:`WORKER_CONFIG`). Each is defined once, as a field of
:class:`~eos.config.worker_settings.WorkerSettings`.
Besides the defined keys a worker file may hold:

- Kafka client settings for every client (``security.protocol``, ``ssl.*``,
  ``sasl.*``, ``client.id`` …) and per client role (``producer.*``,
  ``consumer.*``, ``admin.*``), see :class:`~eos.kafka.clients.ClientConfig`;
- settings for creating the internal topics (``config.storage.<x>``,
  ``offset.storage.<x>``, ``status.storage.<x>``, see :meth:`WorkerConfig.topic_settings`);
- settings reserved by plugins and services (passed to :meth:`WorkerConfig.from_properties`
  as ``reserved`` prefixes), read by whoever reserved them;
- the settings of a ``rest.auth`` provider of one's own (``rest.auth.*``);
- the converters' own settings (``key.converter.*``, ``value.converter.*``,
  ``header.converter.*``), the defaults of every connector
  (:mod:`eos.config.converters`).

REST security settings (``listeners.https.ssl.*``, ``rest.auth*``) are defined in
:mod:`eos.config.rest_security`.

Anything else is logged as unknown and ignored. ``producer.transactional.id`` and
``consumer.isolation.level`` are ignored with a warning: eos sets them itself.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

import structlog

from eos.config.auto_restart import AUTO_RESTART_WORKER_CONFIG
from eos.config.converters import CONVERTER_PREFIXES
from eos.config.definition import (
    ConfigDef,
    ConfigKey,
    Range,
    Type,
    config_class,
    definition_of,
    fill,
)
from eos.config.rest_security import REST_SECURITY_CONFIG, RestAuth, RestTls
from eos.config.worker_settings import LISTENER, WorkerSettings
from eos.config.worker_settings import PRODUCER_CLIENT as PRODUCER_CLIENT
from eos.config.worker_settings import ExactlyOnceSourceSupport as ExactlyOnceSourceSupport
from eos.config.worker_settings import ProducerClientName as ProducerClientName
from eos.config.worker_settings import RebalanceProtocol as RebalanceProtocol
from eos.config.worker_settings import check_producer_client as check_producer_client
from eos.errors import ConfigError

if TYPE_CHECKING:
    from eos.kafka.clients import ClientConfig

log = structlog.get_logger(__name__)

TopicKind = Literal["config", "offset", "status"]

WORKER_CONFIG: Final = definition_of(WorkerSettings).merged(
    REST_SECURITY_CONFIG.merged(AUTO_RESTART_WORKER_CONFIG)
)
"""Every defined worker setting (the table in docs/configuration.md is generated from it)."""

WORKER_PREFIXES: Final = (
    "producer.",
    "consumer.",
    "admin.",
    "config.storage.",
    "offset.storage.",
    "status.storage.",
    "ssl.",
    "sasl.",
    "rest.auth.",  # a rest.auth provider's own settings
    *CONVERTER_PREFIXES,  # checked by eos.runtime.validation at start
)
"""Prefixes of settings that are not :data:`WORKER_CONFIG` keys but are not unknown either."""

IGNORED_WORKER_SETTINGS: Final = ("producer.transactional.id", "consumer.isolation.level")
"""Client settings eos sets itself; a value given for them is ignored with a warning."""

CONNECT_ONLY_SETTINGS: Final = {
    "plugin.path": "eos finds connectors, transforms and converters by entry point or "
    "class path (docs/connectors.md)",
    "plugin.discovery": "eos finds plugins by entry point or class path",
    "topic.creation.enable": "eos does not create a connector's output topics: create them "
    "first (Kafka's auto.create.topics.enable also works)",
    "metric.reporters": "eos exports its metrics to Prometheus (docs/monitoring.md)",
    "offset.flush.timeout.ms": "an at-least-once flush waits for every record it covers, "
    "each bounded by the producer's delivery.timeout.ms",
    "admin.listeners": "eos serves /admin/loggers on its REST listeners",
}
"""Kafka Connect worker settings that mean nothing to eos: each ignored with one warning
saying what eos does instead."""

OVERRIDE_POLICY: Final = "connector.client.config.override.policy"
"""Connect's client override policy: eos allows every override (``All``, Connect's
default since 3.0); ``None`` or ``Principal`` would be a promise eos does not keep."""

# Settings of an internal topic's own that are not passed through as topic configs.
_TOPIC_OWN = ("topic", "replication.factor", "partitions", "cleanup.policy")
_INTERNAL_TOPICS = ("config.storage.topic", "offset.storage.topic", "status.storage.topic")


@config_class
class WorkerConfig(WorkerSettings):
    """A worker's parsed settings; build with :meth:`from_properties`."""

    rest_tls: RestTls
    """TLS of https listeners and of calls to other workers (docs/security.md)."""
    rest_auth: RestAuth
    """Who authenticates REST requests (docs/security.md)."""
    raw: Mapping[str, str]
    """The settings as given, every key included."""

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], *, reserved: tuple[str, ...] = ()
    ) -> WorkerConfig:
        """Parse ``props``; the first invalid setting raises :class:`ConfigError`.
        Unknown and ignored settings are logged as warnings; settings under the
        ``reserved`` prefixes (declared by plugins and services) are not unknown."""
        v = WORKER_CONFIG.parse(props)
        _check_consistency(v, props)
        _warn_about_ignored(props, reserved)
        https = any(url.startswith("https:") for url in v["listeners"])
        return fill(
            cls,
            v,
            rest_tls=RestTls.from_values(v, https=https),
            rest_auth=RestAuth.from_values(v),
            raw=dict(props),
        )

    @property
    def client_config(self) -> ClientConfig:
        """Kafka client settings (common and per role), without the ignored ones."""
        from eos.kafka.clients import ClientConfig

        props = {
            k: v
            for k, v in self.raw.items()
            if k not in IGNORED_WORKER_SETTINGS and k != PRODUCER_CLIENT
        }
        props["bootstrap.servers"] = ",".join(self.bootstrap_servers)
        return ClientConfig.from_properties(props)

    def topic_settings(self, kind: TopicKind) -> dict[str, str]:
        """Topic configs for creating an internal topic: ``<kind>.storage.<x>`` settings
        other than topic, replication.factor, partitions and cleanup.policy (always compact)."""
        prefix = f"{kind}.storage."
        return {
            key.removeprefix(prefix): value
            for key, value in self.raw.items()
            if key.startswith(prefix) and key.removeprefix(prefix) not in _TOPIC_OWN
        }

    @property
    def assignor_names(self) -> list[str]:
        """``assignor``: one name, or several in order of preference."""
        return [name.strip() for name in self.assignor.split(",") if name.strip()]

    @property
    def exactly_once_enabled(self) -> bool:
        """Tasks run exactly-once (``exactly.once.source.support=enabled``)."""
        return self.exactly_once == "enabled"

    @property
    def transactional_config_writes(self) -> bool:
        """The leader writes the config topic transactionally and serves fencing
        (``enabled`` or ``preparing``)."""
        return self.exactly_once in ("enabled", "preparing")

    @property
    def rest_url(self) -> str:
        """The URL other workers reach this one at, e.g. ``http://host:8083`` (no slash);
        https if the first listener is."""
        host, port = self._advertised()
        scheme = "https" if self.listeners[0].startswith("https:") else "http"
        return f"{scheme}://{host}:{port}"

    @property
    def worker_id(self) -> str:
        """``host:port`` of :attr:`rest_url`, as Kafka Connect names workers."""
        host, port = self._advertised()
        return f"{host}:{port}"

    def _advertised(self) -> tuple[str, int]:
        match = LISTENER.fullmatch(self.listeners[0])
        assert match is not None  # checked when parsed
        host = self.advertised_host or match["host"]
        if host in ("", "0.0.0.0", "[::]"):
            host = socket.gethostname()
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        port = self.advertised_port if self.advertised_port is not None else int(match["port"])
        return host, port


def exactly_once_producer_problems(
    props: Mapping[str, str], prefix: str
) -> list[tuple[str, str, str]]:
    """(setting, value, why) for each producer setting under ``prefix`` (``producer.`` of a
    worker, ``producer.override.`` of a connector) that a transactional producer cannot
    have: ``acks`` other than all/-1, ``enable.idempotence=false``,
    ``max.in.flight.requests.per.connection`` above 5."""
    found = []
    acks = props.get(prefix + "acks")
    if acks is not None and acks.strip().lower() not in ("all", "-1"):
        found.append((prefix + "acks", acks, "exactly-once needs acks=all (or -1): remove it"))
    idempotence = props.get(prefix + "enable.idempotence")
    if idempotence is not None and idempotence.strip().lower() == "false":
        found.append((prefix + "enable.idempotence", idempotence,
                      "exactly-once needs an idempotent producer: remove it"))  # fmt: skip
    in_flight = props.get(prefix + "max.in.flight.requests.per.connection")
    if in_flight is not None and (not in_flight.strip().isdigit() or int(in_flight) > 5):
        why = "exactly-once needs at most 5 requests in flight per connection"
        found.append((prefix + "max.in.flight.requests.per.connection", in_flight, why))
    return found


def _check_consistency(values: Mapping[str, Any], props: Mapping[str, str]) -> None:
    """Rules across settings that single keys cannot express."""
    if values["exactly.once.source.support"] == "enabled":
        for key, value, why in exactly_once_producer_problems(props, "producer."):
            raise ConfigError(key, value, why + " (exactly.once.source.support=enabled)")
    seen: dict[str, str] = {}
    for key in _INTERNAL_TOPICS:
        topic = values[key]
        if topic in seen:
            raise ConfigError(key, topic, f"must differ from {seen[topic]} (they are both used)")
        seen[topic] = key
    session, heartbeat = values["session.timeout.ms"], values["heartbeat.interval.ms"]
    if heartbeat >= session:
        raise ConfigError(
            "heartbeat.interval.ms", heartbeat, f"must be below session.timeout.ms={session}"
        )
    policy = props.get(OVERRIDE_POLICY)
    if policy is not None and policy.strip().lower() != "all":
        raise ConfigError(
            OVERRIDE_POLICY,
            policy,
            "eos allows every client override a connector sets (All, Connect's default): "
            "remove the setting or set it to All",
        )
    timeout = "producer.transaction.timeout.ms"
    if timeout in props:
        ConfigKey(timeout, Type.INT, validator=Range(at_least=1)).parse(props[timeout])


def _warn_about_ignored(props: Mapping[str, str], reserved: tuple[str, ...]) -> None:
    from eos.kafka.clients import is_client_setting

    for key in IGNORED_WORKER_SETTINGS:
        if key in props:
            log.warning("setting ignored: eos sets it itself", setting=key, value=props[key])
    for kind in ("config", "offset", "status"):
        if f"{kind}.storage.cleanup.policy" in props:
            log.warning(
                "setting ignored: internal topics are always compacted",
                setting=f"{kind}.storage.cleanup.policy",
            )
    if "config.storage.partitions" in props:
        log.warning(
            "setting ignored: the config topic always has one partition",
            setting="config.storage.partitions",
        )
    for key in WORKER_CONFIG.unknown(props, WORKER_PREFIXES + reserved):
        if key in CONNECT_ONLY_SETTINGS:
            log.warning(
                "Kafka Connect setting, ignored", setting=key, instead=CONNECT_ONLY_SETTINGS[key]
            )
        elif key != OVERRIDE_POLICY and not is_client_setting(key):
            log.warning("unknown worker setting, ignored", setting=key)


def docs_table(definition: ConfigDef = WORKER_CONFIG) -> str:
    """A Markdown table (name | type | default | meaning) of ``definition``'s keys."""
    rows = ["| name | type | default | meaning |", "|---|---|---|---|"]
    for key in definition.keys.values():
        default = "*required*" if key.required else _render_default(key.default)
        doc = key.doc.replace("|", "\\|")
        rows.append(f"| `{key.name}` | {key.type.value} | {default} | {doc} |")
    return "\n".join(rows) + "\n"


def _render_default(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list | tuple):
        value = ",".join(str(v) for v in value)
    return f"`{value}`"
