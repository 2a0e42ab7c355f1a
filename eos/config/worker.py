"""Worker settings: :data:`WORKER_CONFIG` and the parsed, frozen :class:`WorkerConfig`.

Names, types and meanings follow Kafka Connect's distributed worker; docs/configuration.md
lists them (generated from :data:`WORKER_CONFIG`).
Besides the defined keys a worker file may hold:

- Kafka client settings for every client (``security.protocol``, ``ssl.*``,
  ``sasl.*``, ``client.id`` …) and per client role (``producer.*``,
  ``consumer.*``, ``admin.*``), see :class:`~eos.kafka.clients.ClientConfig`;
- settings for creating the internal topics (``config.storage.<x>``,
  ``offset.storage.<x>``, ``status.storage.<x>``, see :meth:`WorkerConfig.topic_settings`);
- settings reserved by plugins and services (passed to :meth:`WorkerConfig.from_properties`
  as ``reserved`` prefixes), read by whoever reserved them;
- the settings of a ``rest.auth`` provider of one's own (``rest.auth.*``).

REST security settings (``listeners.https.ssl.*``, ``rest.auth*``) are defined in
:mod:`eos.config.rest_security`.

Anything else is logged as unknown and ignored. ``producer.transactional.id`` and
``consumer.isolation.level`` are ignored with a warning: eos sets them itself.
"""

from __future__ import annotations

import importlib.util
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, cast

import structlog

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
)
from eos.config.rest_security import REST_SECURITY_CONFIG, RestAuth, RestTls
from eos.errors import ConfigError

if TYPE_CHECKING:
    from eos.kafka.clients import ClientConfig

log = structlog.get_logger(__name__)

ExactlyOnceSourceSupport = Literal["disabled", "preparing", "enabled"]
RebalanceProtocol = Literal["eager", "compatible", "sessioned"]
TopicKind = Literal["config", "offset", "status"]
ProducerClientName = Literal["aiokafka", "librdkafka"]

PRODUCER_CLIENT: Final = "producer.client"
LIBRDKAFKA_MISSING: Final = (
    "producer.client=librdkafka needs the confluent-kafka package: "
    "pip install 'eos[librdkafka]' (or pip install confluent-kafka)"
)


def check_producer_client(value: str, key: str = PRODUCER_CLIENT) -> ProducerClientName:
    """``value`` as a producer client name; :class:`ConfigError` if its package is missing."""
    client = cast(ProducerClientName, value.lower())
    if client == "librdkafka" and importlib.util.find_spec("confluent_kafka") is None:
        raise ConfigError(key, value, LIBRDKAFKA_MISSING)
    return client


class ReplicationFactor:
    """-1 (the broker's ``default.replication.factor``) or at least 1."""

    allowed = "-1 (the broker's default) or at least 1"

    def __call__(self, key: str, value: Any) -> None:
        if value is not None and value != -1 and value < 1:
            raise ConfigError(key, value, f"must be {self.allowed}")


_LISTENER = re.compile(
    r"(?P<scheme>https?)://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]*):(?P<port>[0-9]{1,5})/?"
)


class Listeners:
    """A non-empty list of ``http://HOST:PORT`` or ``https://HOST:PORT`` (an empty host
    binds every interface)."""

    allowed = (
        "a comma-separated list of http://HOST:PORT or https://HOST:PORT, e.g. http://0.0.0.0:8083"
    )

    def __call__(self, key: str, value: Any) -> None:
        if not value:
            raise ConfigError(key, value, f"must be {self.allowed}")
        for listener in value:
            match = _LISTENER.fullmatch(listener)
            if match is None or int(match["port"]) > 65535:
                raise ConfigError(key, listener, f"each listener must be {self.allowed}")


def _topic(what: str) -> dict[str, Any]:
    return {
        "type": Type.STRING,
        "default": NO_DEFAULT,
        "validator": TopicName(),
        "importance": Importance.HIGH,
        "doc": f"Compacted topic holding {what}.",
        "group": "internal topics",
    }


def _replication(kind: str) -> dict[str, Any]:
    return {
        "type": Type.INT,
        "default": -1,
        "validator": ReplicationFactor(),
        "importance": Importance.LOW,
        "doc": f"Replication factor of the {kind} topic when the worker creates it; "
        "-1 means the broker's default.",
        "group": "internal topics",
    }


WORKER_CONFIG: Final = (
    ConfigDef()
    .define(
        "bootstrap.servers",
        Type.LIST,
        "localhost:9092",
        NonEmpty(),
        Importance.HIGH,
        "Kafka brokers to connect to first, as comma-separated host:port.",
        "cluster",
    )
    .define(
        "group.id",
        Type.STRING,
        NO_DEFAULT,
        NonEmpty(),
        Importance.HIGH,
        "Name of the worker cluster: workers with the same group.id share connectors "
        "and tasks; it also prefixes every task's transactional.id.",
        "cluster",
    )
    .define(
        "client.id",
        Type.STRING,
        None,
        None,
        Importance.LOW,
        "client.id of this worker's Kafka clients (optional).",
        "cluster",
    )
    .define(
        "config.storage.topic",
        **_topic(
            "connector and task configurations (one partition; only the "
            "leader writes it, transactionally)"
        ),
    )
    .define(
        "offset.storage.topic",
        **_topic("the source offsets of connectors without an offsets topic of their own"),
    )
    .define("status.storage.topic", **_topic("connector and task status"))
    .define("config.storage.replication.factor", **_replication("config"))
    .define("offset.storage.replication.factor", **_replication("offsets"))
    .define("status.storage.replication.factor", **_replication("status"))
    .define(
        "offset.storage.partitions",
        Type.INT,
        25,
        Range(at_least=1),
        Importance.LOW,
        "Partitions of the offsets topic when the worker creates it.",
        "internal topics",
    )
    .define(
        "status.storage.partitions",
        Type.INT,
        5,
        Range(at_least=1),
        Importance.LOW,
        "Partitions of the status topic when the worker creates it.",
        "internal topics",
    )
    .define(
        "exactly.once.source.support",
        Type.STRING,
        "enabled",
        OneOf("disabled", "preparing", "enabled"),
        Importance.HIGH,
        "enabled: tasks write records and offsets in one transaction and the leader fences "
        "old task generations; preparing: fencing and transactional config writes only, "
        "tasks run at-least-once (first step of a rolling upgrade); disabled: "
        "at-least-once. Must be the same on every worker.",
        "exactly-once",
    )
    .define(
        "offset.flush.interval.ms",
        Type.LONG,
        10000,
        Range(at_least=1),
        Importance.MEDIUM,
        "Interval of offset flushes of at-least-once tasks, and the commit interval of "
        "transaction.boundary=interval connectors that set none. 10000, not Connect's "
        "60000: that equals the producer's default transaction.timeout.ms, so interval "
        "transactions would time out.",
        "tasks",
    )
    .define(
        "offset.flush.timeout.ms",
        Type.LONG,
        5000,
        Range(at_least=1),
        Importance.LOW,
        "How long an at-least-once offset flush may wait for outstanding records before it "
        "is given up; exactly-once commits are not bounded by it.",
        "tasks",
    )
    .define(
        PRODUCER_CLIENT,
        Type.STRING,
        "aiokafka",
        OneOf("aiokafka", "librdkafka"),
        Importance.MEDIUM,
        "The Kafka client of the tasks' producers: aiokafka (pure Python, the default) or "
        "librdkafka (confluent-kafka, the eos[librdkafka] extra: more records per second and "
        "less CPU per record, see docs/performance.md). A connector may choose its own with "
        "producer.client. The worker's other clients always use aiokafka.",
        "tasks",
    )
    .define(
        "task.shutdown.graceful.timeout.ms",
        Type.LONG,
        5000,
        Range(at_least=0),
        Importance.LOW,
        "How long tasks get to stop and make their final commit on shutdown before they "
        "are cancelled.",
        "tasks",
    )
    .define(
        "session.timeout.ms",
        Type.INT,
        10000,
        Range(at_least=1),
        Importance.MEDIUM,
        "A worker that sends no heartbeat for this long is removed from the group. A "
        "fencing round that takes longer than half of it starts another rebalance when it "
        "is done (the tasks that waited for it start then).",
        "group protocol",
    )
    .define(
        "heartbeat.interval.ms",
        Type.INT,
        3000,
        Range(at_least=1),
        Importance.LOW,
        "Interval of heartbeats to the group coordinator; must be below session.timeout.ms.",
        "group protocol",
    )
    .define(
        "rebalance.timeout.ms",
        Type.INT,
        60000,
        Range(at_least=1),
        Importance.LOW,
        "How long a rebalance waits for every member to rejoin the group.",
        "group protocol",
    )
    .define(
        "connect.protocol",
        Type.STRING,
        "sessioned",
        OneOf("eager", "compatible", "sessioned", "cooperative"),
        Importance.LOW,
        "Rebalance protocol, with Kafka Connect's names: eager (every member drops all its "
        "work before rejoining), compatible or sessioned (incremental cooperative: only work "
        "that moves is revoked; the two differ only in name, since eos signs internal requests "
        "under every protocol). cooperative is accepted as sessioned. A member offers its "
        "protocol and the ones below it, so a mixed cluster rebalances in the best style "
        "every member offers.",
        "group protocol",
    )
    .define(
        "scheduled.rebalance.max.delay.ms",
        Type.INT,
        300000,
        Range(at_least=0),
        Importance.LOW,
        "With assignor=cooperative: how long the work of a member that left is held for it "
        "to come back before it is given to others.",
        "group protocol",
    )
    .define(
        "assignor",
        Type.STRING,
        "sticky",
        NonEmpty(),
        Importance.MEDIUM,
        "Who runs which connector and task: round-robin, sticky (balanced, moves the least), "
        "cooperative (sticky, holding a lost member's work for "
        "scheduled.rebalance.max.delay.ms) or failover (everything on the member with the "
        "highest worker.priority); or the name of an installed eos.assignors plugin, or a "
        "class path. Must be the same on every worker.",
        "group protocol",
    )
    .define(
        "worker.priority",
        Type.INT,
        0,
        None,
        Importance.LOW,
        "This worker's priority for assignor=failover: the live worker with the highest "
        "priority runs everything.",
        "group protocol",
    )
    .define(
        "failover.settle.ms",
        Type.INT,
        10000,
        Range(at_least=0),
        Importance.LOW,
        "With assignor=failover: how long a returning higher-priority worker must have been "
        "in the group before the work moves back to it.",
        "group protocol",
    )
    .define(
        "retry.backoff.ms",
        Type.INT,
        100,
        Range(at_least=0),
        Importance.LOW,
        "Pause before retrying a failed request to the group coordinator or the leader "
        "(doubling up to a few seconds where repeated); also the Kafka clients' setting.",
        "group protocol",
    )
    .define(
        "inter.worker.key.ttl.ms",
        Type.INT,
        3600000,
        Range(at_least=1000),
        Importance.LOW,
        "How long the leader keeps a session key for signing internal requests before it "
        "writes a new one.",
        "internal requests",
    )
    .define(
        "inter.worker.signature.algorithm",
        Type.STRING,
        "HmacSHA256",
        OneOf("HmacSHA256", "HmacSHA384", "HmacSHA512", case_sensitive=True),
        Importance.LOW,
        "The HMAC that signs internal requests between workers.",
        "internal requests",
    )
    .define(
        "inter.worker.signature.window.ms",
        Type.INT,
        60000,
        Range(at_least=1000),
        Importance.LOW,
        "How far a signed internal request's timestamp may be from the receiver's clock "
        "before the request is refused as stale (keep the workers' clocks in sync).",
        "internal requests",
    )
    .define(
        "worker.sync.timeout.ms",
        Type.LONG,
        30000,
        Range(at_least=1),
        Importance.LOW,
        "How long the worker waits to read the config topic to its end (after joining, "
        "before starting a task, on a manual restart) before giving up.",
        "group protocol",
    )
    .define(
        "task.startup.concurrency",
        Type.INT,
        64,
        Range(at_least=1),
        Importance.LOW,
        "How many tasks of this worker go through start-up at once (fencing request, "
        "config read, producer initialisation); the rest wait their turn. Bounds the "
        "connections and requests a burst of hundreds of task starts opens together.",
    )
    .define(
        "thread.pool.size",
        Type.INT,
        8,
        Range(at_least=1),
        Importance.LOW,
        "Threads for the blocking calls of tasks (e.g. Spark reads); calls beyond it wait.",
    )
    .define(
        "listeners",
        Type.LIST,
        "http://127.0.0.1:8083",
        Listeners(),
        Importance.MEDIUM,
        "REST API listeners as comma-separated http://HOST:PORT or https://HOST:PORT (TLS: "
        "listeners.https.ssl.*); the first one is advertised.",
        "rest",
    )
    .define(
        "rest.advertised.host.name",
        Type.STRING,
        None,
        None,
        Importance.LOW,
        "Host name other workers and clients use to reach this worker's REST API "
        "(default: the first listener's host).",
        "rest",
    )
    .define(
        "rest.advertised.port",
        Type.INT,
        None,
        Range(at_least=1, at_most=65535),
        Importance.LOW,
        "Port other workers and clients use to reach this worker's REST API "
        "(default: the first listener's port).",
        "rest",
    )
    .define(
        "rest.max.request.bytes",
        Type.INT,
        4 * 1024 * 1024,
        Range(at_least=1024),
        Importance.LOW,
        "Largest request body the REST API accepts (internal requests included); a larger "
        "one is refused with 413 before it is read.",
        "rest",
    )
    .define(
        "lso.check.interval.ms",
        Type.LONG,
        10000,
        Range(at_least=100),
        Importance.LOW,
        "How often the worker reads the high watermark and last stable offset of the "
        "partitions its tasks write, for eos_worker_output_lso_* (docs/transactions.md).",
        "metrics",
    )
    .define(
        "topic.tracking.enable",
        Type.BOOLEAN,
        True,
        None,
        Importance.LOW,
        "Record the topics each connector writes to (GET /connectors/{name}/topics); "
        "false answers that endpoint with 403.",
        "topic tracking",
    )
    .define(
        "topic.tracking.allow.reset",
        Type.BOOLEAN,
        True,
        None,
        Importance.LOW,
        "Allow PUT /connectors/{name}/topics/reset (403 otherwise).",
        "topic tracking",
    )
    .define(
        "topic.tracking.refresh.interval.ms",
        Type.LONG,
        30000,
        Range(at_least=100),
        Importance.LOW,
        "How often a worker running tasks reads the status topic to learn of topic resets "
        "made through other workers (its tasks then report those topics again).",
        "topic tracking",
    )
).merged(REST_SECURITY_CONFIG)
"""Every defined worker setting (the table in docs/configuration.md is generated from it)."""

LSO_CHECK_INTERVAL: Final = WORKER_CONFIG.keys["lso.check.interval.ms"]

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
)
"""Prefixes of settings that are not :data:`WORKER_CONFIG` keys but are not unknown either."""

IGNORED_WORKER_SETTINGS: Final = ("producer.transactional.id", "consumer.isolation.level")
"""Client settings eos sets itself; a value given for them is ignored with a warning."""

# Settings of an internal topic's own that are not passed through as topic configs.
_TOPIC_OWN = ("topic", "replication.factor", "partitions", "cleanup.policy")
_INTERNAL_TOPICS = ("config.storage.topic", "offset.storage.topic", "status.storage.topic")


@dataclass(frozen=True)
class WorkerConfig:
    """A worker's parsed settings; build with :meth:`from_properties`."""

    bootstrap_servers: list[str]
    group_id: str
    client_id: str | None
    config_topic: str
    offsets_topic: str
    status_topic: str
    config_replication_factor: int
    offsets_replication_factor: int
    status_replication_factor: int
    offsets_partitions: int
    status_partitions: int
    exactly_once: ExactlyOnceSourceSupport
    offset_flush_interval_ms: int
    offset_flush_timeout_ms: int
    producer_client: ProducerClientName
    """The tasks' producer client (``producer.client``), unless a connector picks its own."""
    graceful_shutdown_ms: int
    session_timeout_ms: int
    heartbeat_interval_ms: int
    rebalance_timeout_ms: int
    rebalance_protocol: RebalanceProtocol
    scheduled_rebalance_max_delay_ms: int
    assignor: str
    worker_priority: int
    failover_settle_ms: int
    retry_backoff_ms: int
    key_ttl_ms: int
    signature_algorithm: str
    signature_window_ms: int
    worker_sync_timeout_ms: int
    task_startup_concurrency: int
    thread_pool_size: int
    listeners: list[str]
    advertised_host: str | None
    advertised_port: int | None
    max_request_bytes: int
    topic_tracking: bool
    topic_tracking_reset: bool
    topic_tracking_refresh_ms: int
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
        return cls(
            bootstrap_servers=v["bootstrap.servers"],
            group_id=v["group.id"],
            client_id=v["client.id"],
            config_topic=v["config.storage.topic"],
            offsets_topic=v["offset.storage.topic"],
            status_topic=v["status.storage.topic"],
            config_replication_factor=v["config.storage.replication.factor"],
            offsets_replication_factor=v["offset.storage.replication.factor"],
            status_replication_factor=v["status.storage.replication.factor"],
            offsets_partitions=v["offset.storage.partitions"],
            status_partitions=v["status.storage.partitions"],
            exactly_once=cast(ExactlyOnceSourceSupport, v["exactly.once.source.support"].lower()),
            offset_flush_interval_ms=v["offset.flush.interval.ms"],
            offset_flush_timeout_ms=v["offset.flush.timeout.ms"],
            producer_client=check_producer_client(v[PRODUCER_CLIENT]),
            graceful_shutdown_ms=v["task.shutdown.graceful.timeout.ms"],
            session_timeout_ms=v["session.timeout.ms"],
            heartbeat_interval_ms=v["heartbeat.interval.ms"],
            rebalance_timeout_ms=v["rebalance.timeout.ms"],
            rebalance_protocol=_protocol(v["connect.protocol"]),
            scheduled_rebalance_max_delay_ms=v["scheduled.rebalance.max.delay.ms"],
            assignor=v["assignor"],
            worker_priority=v["worker.priority"],
            failover_settle_ms=v["failover.settle.ms"],
            retry_backoff_ms=v["retry.backoff.ms"],
            key_ttl_ms=v["inter.worker.key.ttl.ms"],
            signature_algorithm=v["inter.worker.signature.algorithm"],
            signature_window_ms=v["inter.worker.signature.window.ms"],
            worker_sync_timeout_ms=v["worker.sync.timeout.ms"],
            task_startup_concurrency=v["task.startup.concurrency"],
            thread_pool_size=v["thread.pool.size"],
            listeners=v["listeners"],
            advertised_host=v["rest.advertised.host.name"] or None,
            advertised_port=v["rest.advertised.port"],
            max_request_bytes=v["rest.max.request.bytes"],
            topic_tracking=v["topic.tracking.enable"],
            topic_tracking_reset=v["topic.tracking.allow.reset"],
            topic_tracking_refresh_ms=v["topic.tracking.refresh.interval.ms"],
            rest_tls=RestTls.from_values(
                v, https=any(url.startswith("https:") for url in v["listeners"])
            ),
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
        match = _LISTENER.fullmatch(self.listeners[0])
        assert match is not None  # checked when parsed
        host = self.advertised_host or match["host"]
        if host in ("", "0.0.0.0", "[::]"):
            host = socket.gethostname()
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        port = self.advertised_port if self.advertised_port is not None else int(match["port"])
        return host, port


def _protocol(value: str) -> RebalanceProtocol:
    lowered = value.lower()
    return cast(RebalanceProtocol, "sessioned" if lowered == "cooperative" else lowered)


def _check_consistency(values: Mapping[str, Any], props: Mapping[str, str]) -> None:
    """Rules across settings that single keys cannot express."""
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
    timeout = "producer.transaction.timeout.ms"
    if timeout in props:
        ConfigKey(timeout, Type.INT, validator=Range(at_least=1)).parse(props[timeout])


def _warn_about_ignored(props: Mapping[str, str], reserved: tuple[str, ...]) -> None:
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
        if not _is_client_setting(key):
            log.warning("unknown worker setting, ignored", setting=key)


def _is_client_setting(key: str) -> bool:
    from eos.kafka.clients import is_client_setting

    return is_client_setting(key)


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
