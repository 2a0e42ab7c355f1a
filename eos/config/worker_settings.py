"""Every worker setting, defined once: a field of :class:`WorkerSettings` that names
its setting (:func:`~eos.config.definition.setting`), in the order docs/configuration.md
lists them. :class:`~eos.config.worker.WorkerConfig` adds what no single setting gives
and parses a worker's file; :data:`~eos.config.worker.WORKER_CONFIG` is the definition.
"""

from __future__ import annotations

import importlib.util
import re
from typing import Any, Final, Literal, cast

from eos.config.converters import converter_definition
from eos.config.definition import (
    NO_DEFAULT,
    Definition,
    Importance,
    NonEmpty,
    OneOf,
    Range,
    TopicName,
    Type,
    config_class,
    or_none,
    setting,
)
from eos.errors import ConfigError

ExactlyOnceSourceSupport = Literal["disabled", "preparing", "enabled"]
RebalanceProtocol = Literal["eager", "compatible", "sessioned"]
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


LISTENER: Final = re.compile(
    r"(?P<scheme>[Hh][Tt][Tt][Pp][Ss]?)://"
    r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]*):(?P<port>[0-9]{1,5})/?"
)
"""One REST listener, ``http(s)://HOST:PORT`` (the scheme in any case, as Connect takes
``HTTP://:8083``)."""


def _lower_schemes(listeners: list[str]) -> list[str]:
    return [re.sub(r"^[A-Za-z]+", lambda m: m[0].lower(), x) for x in listeners]


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
            match = LISTENER.fullmatch(listener)
            if match is None or int(match["port"]) > 65535:
                raise ConfigError(key, listener, f"each listener must be {self.allowed}")


_TOPICS = "internal topics"


def _topic(name: str, what: str) -> Definition:
    doc = f"Compacted topic holding {what}."
    return name, Type.STRING, NO_DEFAULT, TopicName(), Importance.HIGH, doc, _TOPICS


def _replication(name: str, kind: str) -> Definition:
    doc = (
        f"Replication factor of the {kind} topic when the worker creates it; "
        "-1 means the broker's default."
    )
    return name, Type.INT, -1, ReplicationFactor(), Importance.LOW, doc, _TOPICS


def _protocol(value: str) -> RebalanceProtocol:
    lowered = value.lower()
    return cast(RebalanceProtocol, "sessioned" if lowered == "cooperative" else lowered)


@config_class
class WorkerSettings:
    """A worker's settings, parsed (see :class:`~eos.config.worker.WorkerConfig`)."""

    bootstrap_servers: list[str] = setting(
        "bootstrap.servers",
        Type.LIST,
        "localhost:9092",
        NonEmpty(),
        Importance.HIGH,
        "Kafka brokers to connect to first, as comma-separated host:port.",
        "cluster",
    )
    group_id: str = setting(
        "group.id",
        Type.STRING,
        NO_DEFAULT,
        NonEmpty(),
        Importance.HIGH,
        "Name of the worker cluster: workers with the same group.id share connectors "
        "and tasks; it also prefixes every task's transactional.id.",
        "cluster",
    )
    client_id: str | None = setting(
        "client.id",
        Type.STRING,
        None,
        None,
        Importance.LOW,
        "client.id of this worker's Kafka clients (optional).",
        "cluster",
    )
    config_topic: str = setting(
        *_topic(
            "config.storage.topic",
            "connector and task configurations (one partition; only the "
            "leader writes it, transactionally)",
        )
    )
    offsets_topic: str = setting(
        *_topic(
            "offset.storage.topic",
            "the source offsets of connectors without an offsets topic of their own",
        )
    )
    status_topic: str = setting(*_topic("status.storage.topic", "connector and task status"))
    config_replication_factor: int = setting(
        *_replication("config.storage.replication.factor", "config")
    )
    offsets_replication_factor: int = setting(
        *_replication("offset.storage.replication.factor", "offsets")
    )
    status_replication_factor: int = setting(
        *_replication("status.storage.replication.factor", "status")
    )
    offsets_partitions: int = setting(
        "offset.storage.partitions",
        Type.INT,
        25,
        Range(at_least=1),
        Importance.LOW,
        "Partitions of the offsets topic when the worker creates it.",
        _TOPICS,
    )
    status_partitions: int = setting(
        "status.storage.partitions",
        Type.INT,
        5,
        Range(at_least=1),
        Importance.LOW,
        "Partitions of the status topic when the worker creates it.",
        _TOPICS,
    )
    log_format: Literal["text", "json"] = setting(
        "log.format",
        Type.STRING,
        "text",
        OneOf("text", "json"),
        Importance.LOW,
        "How eos worker logs: text (key=value) or json (one object per line: time, level, "
        "logger, message, connector, task, generation, exception). --log-format and "
        "EOS_LOG_FORMAT win over it.",
        "worker",
        convert=str.lower,
    )
    key_converter: str = setting(*converter_definition("key", worker=True))
    value_converter: str = setting(*converter_definition("value", worker=True))
    header_converter: str = setting(*converter_definition("header", worker=True))
    exactly_once: ExactlyOnceSourceSupport = setting(
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
        convert=str.lower,
    )
    offset_flush_interval_ms: int = setting(
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
    producer_client: ProducerClientName = setting(
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
        convert=check_producer_client,
    )
    graceful_shutdown_ms: int = setting(
        "task.shutdown.graceful.timeout.ms",
        Type.LONG,
        5000,
        Range(at_least=0),
        Importance.LOW,
        "How long tasks get to stop and make their final commit on shutdown before they "
        "are cancelled.",
        "tasks",
    )
    session_timeout_ms: int = setting(
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
    heartbeat_interval_ms: int = setting(
        "heartbeat.interval.ms",
        Type.INT,
        3000,
        Range(at_least=1),
        Importance.LOW,
        "Interval of heartbeats to the group coordinator; must be below session.timeout.ms.",
        "group protocol",
    )
    rebalance_timeout_ms: int = setting(
        "rebalance.timeout.ms",
        Type.INT,
        60000,
        Range(at_least=1),
        Importance.LOW,
        "How long a rebalance waits for every member to rejoin the group.",
        "group protocol",
    )
    rebalance_protocol: RebalanceProtocol = setting(
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
        convert=_protocol,
    )
    scheduled_rebalance_max_delay_ms: int = setting(
        "scheduled.rebalance.max.delay.ms",
        Type.INT,
        300000,
        Range(at_least=0),
        Importance.LOW,
        "With assignor=cooperative: how long the work of a member that left is held for it "
        "to come back before it is given to others.",
        "group protocol",
    )
    assignor: str = setting(
        "assignor",
        Type.STRING,
        "sticky",
        NonEmpty(),
        Importance.MEDIUM,
        "Who runs which connector and task: round-robin, sticky (balanced, moves the least), "
        "cooperative (sticky, holding a lost member's work for "
        "scheduled.rebalance.max.delay.ms), failover (everything on the member with the "
        "highest worker.priority) or zone (each connector's tasks spread over the "
        "worker.rack values present, sticky otherwise); or the name of an installed "
        "eos.assignors plugin, or a "
        "class path. Several, comma-separated, in order of preference: the group uses the "
        "first that every worker lists, so a cluster changes assignor one worker at a time "
        "(sticky, then sticky,failover on each, then failover).",
        "group protocol",
    )
    worker_priority: int = setting(
        "worker.priority",
        Type.INT,
        0,
        None,
        Importance.LOW,
        "This worker's priority for assignor=failover: the live worker with the highest "
        "priority runs everything.",
        "group protocol",
    )
    worker_rack: str = setting(
        "worker.rack",
        Type.STRING,
        "",
        None,
        Importance.LOW,
        "This worker's rack or zone, for assignor=zone: each connector's tasks are spread "
        "over the racks present (on Kubernetes, the node's topology.kubernetes.io/zone).",
        "group protocol",
    )
    failover_settle_ms: int = setting(
        "failover.settle.ms",
        Type.INT,
        10000,
        Range(at_least=0),
        Importance.LOW,
        "With assignor=failover: how long a returning higher-priority worker must have been "
        "in the group before the work moves back to it.",
        "group protocol",
    )
    retry_backoff_ms: int = setting(
        "retry.backoff.ms",
        Type.INT,
        100,
        Range(at_least=0),
        Importance.LOW,
        "Pause before retrying a failed request to the group coordinator or the leader "
        "(doubling up to a few seconds where repeated); also the Kafka clients' setting.",
        "group protocol",
    )
    key_ttl_ms: int = setting(
        "inter.worker.key.ttl.ms",
        Type.INT,
        3600000,
        Range(at_least=1000),
        Importance.LOW,
        "How long the leader keeps a session key for signing internal requests before it "
        "writes a new one.",
        "internal requests",
    )
    signature_algorithm: str = setting(
        "inter.worker.signature.algorithm",
        Type.STRING,
        "HmacSHA256",
        OneOf("HmacSHA256", "HmacSHA384", "HmacSHA512", case_sensitive=True),
        Importance.LOW,
        "The HMAC that signs internal requests between workers.",
        "internal requests",
    )
    signature_window_ms: int = setting(
        "inter.worker.signature.window.ms",
        Type.INT,
        60000,
        Range(at_least=1000),
        Importance.LOW,
        "How far a signed internal request's timestamp may be from the receiver's clock "
        "before the request is refused as stale (keep the workers' clocks in sync).",
        "internal requests",
    )
    worker_sync_timeout_ms: int = setting(
        "worker.sync.timeout.ms",
        Type.LONG,
        30000,
        Range(at_least=1),
        Importance.LOW,
        "How long the worker waits to read the config topic to its end (after joining, "
        "before starting a task, on a manual restart) before giving up.",
        "group protocol",
    )
    task_startup_concurrency: int = setting(
        "task.startup.concurrency",
        Type.INT,
        64,
        Range(at_least=1),
        Importance.LOW,
        "How many tasks of this worker go through start-up at once (fencing request, "
        "config read, producer initialisation); the rest wait their turn. Bounds the "
        "connections and requests a burst of hundreds of task starts opens together.",
    )
    thread_pool_size: int = setting(
        "thread.pool.size",
        Type.INT,
        8,
        Range(at_least=1),
        Importance.LOW,
        "Threads for the blocking calls of tasks (e.g. Spark reads); calls beyond it wait.",
    )
    listeners: list[str] = setting(
        "listeners",
        Type.LIST,
        "http://127.0.0.1:8083",
        Listeners(),
        Importance.MEDIUM,
        "REST API listeners as comma-separated http://HOST:PORT or https://HOST:PORT (TLS: "
        "listeners.https.ssl.*); the first one is advertised.",
        "rest",
        convert=_lower_schemes,
    )
    advertised_host: str | None = setting(
        "rest.advertised.host.name",
        Type.STRING,
        None,
        None,
        Importance.LOW,
        "Host name other workers and clients use to reach this worker's REST API "
        "(default: the first listener's host).",
        "rest",
        convert=or_none,
    )
    advertised_port: int | None = setting(
        "rest.advertised.port",
        Type.INT,
        None,
        Range(at_least=1, at_most=65535),
        Importance.LOW,
        "Port other workers and clients use to reach this worker's REST API "
        "(default: the first listener's port).",
        "rest",
    )
    max_request_bytes: int = setting(
        "rest.max.request.bytes",
        Type.INT,
        4 * 1024 * 1024,
        Range(at_least=1024),
        Importance.LOW,
        "Largest request body the REST API accepts (internal requests included); a larger "
        "one is refused with 413 before it is read.",
        "rest",
    )
    lso_check_interval_ms: int = setting(
        "lso.check.interval.ms",
        Type.LONG,
        10000,
        Range(at_least=100),
        Importance.LOW,
        "How often the worker reads the high watermark and last stable offset of the "
        "partitions its tasks write, for eos_worker_output_lso_* (docs/transactions.md).",
        "metrics",
    )
    connectors_dir: str | None = setting(
        "connectors.dir",
        Type.STRING,
        None,
        None,
        Importance.MEDIUM,
        "A directory of connector files (one connector each: .properties, .json, .yaml; a "
        "structured file may give state RUNNING, PAUSED or STOPPED) that the leader keeps "
        "the cluster in line with: it creates, updates and moves states to match, on "
        "change and every connectors.dir.poll.interval.ms (docs/deploy.md, GitOps).",
        "declared connectors",
        convert=or_none,
    )
    connectors_dir_poll_interval_ms: int = setting(
        "connectors.dir.poll.interval.ms",
        Type.LONG,
        10000,
        Range(at_least=100),
        Importance.LOW,
        "How often the leader reads connectors.dir again, changed or not.",
        "declared connectors",
    )
    connectors_dir_prune: bool = setting(
        "connectors.dir.prune",
        Type.BOOLEAN,
        False,
        None,
        Importance.MEDIUM,
        "Delete the connectors no file in connectors.dir declares (never while a file there "
        "does not parse).",
        "declared connectors",
    )
    topic_tracking: bool = setting(
        "topic.tracking.enable",
        Type.BOOLEAN,
        True,
        None,
        Importance.LOW,
        "Record the topics each connector writes to (GET /connectors/{name}/topics); "
        "false answers that endpoint with 403.",
        "topic tracking",
    )
    topic_tracking_reset: bool = setting(
        "topic.tracking.allow.reset",
        Type.BOOLEAN,
        True,
        None,
        Importance.LOW,
        "Allow PUT /connectors/{name}/topics/reset (403 otherwise).",
        "topic tracking",
    )
    topic_tracking_refresh_ms: int = setting(
        "topic.tracking.refresh.interval.ms",
        Type.LONG,
        30000,
        Range(at_least=100),
        Importance.LOW,
        "How often a worker running tasks reads the status topic to learn of topic resets "
        "made through other workers (its tasks then report those topics again).",
        "topic tracking",
    )
