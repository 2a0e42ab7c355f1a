"""Kafka client factories: settings in Kafka's own property names → aiokafka clients.

Users configure clients with the names they know from Kafka
(``bootstrap.servers``, ``security.protocol``, ``linger.ms`` …). A
:class:`ClientConfig` holds those properties in four layers — common, then the
producer, consumer and admin specifics — and the factories translate them into
aiokafka keyword arguments. Connector overrides (``producer.override.*`` and
friends) are applied with :meth:`ClientConfig.with_overrides`.

Security settings (``security.protocol``, ``sasl.*``, ``ssl.*``) are read as Kafka reads
them by :mod:`eos.kafka.client_security`. A property aiokafka cannot honour is dropped
with a warning naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import errors as kerrors
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.client import AIOKafkaClient

from eos.errors import ConfigError
from eos.kafka.aiokafka_private import close_what_a_cancelled_bootstrap_opened
from eos.kafka.client_security import Security, is_security_setting

log = structlog.get_logger(__name__)

FENCED_ERRORS: tuple[type[Exception], ...] = (
    kerrors.ProducerFenced,
    kerrors.InvalidProducerEpoch,
)
"""What aiokafka raises when a newer producer with our transactional id (or a
broker-side transaction timeout) fenced ours: never retried."""

Converter = Callable[[str], Any]


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError("expected true or false")
    return lowered == "true"


def _acks(value: str) -> int | str:
    return "all" if value.strip() in ("all", "-1") else int(value)


def _none_str(value: str) -> str | None:
    return None if value.strip().lower() in ("", "none") else value.strip()


# Kafka property name -> (aiokafka keyword, converter)
_COMMON: dict[str, tuple[str, Converter]] = {
    "bootstrap.servers": ("bootstrap_servers", lambda v: [s.strip() for s in v.split(",") if s]),
    "client.id": ("client_id", str),
    "request.timeout.ms": ("request_timeout_ms", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "metadata.max.age.ms": ("metadata_max_age_ms", int),
    "connections.max.idle.ms": ("connections_max_idle_ms", int),
}
_PRODUCER: dict[str, tuple[str, Converter]] = {
    "acks": ("acks", _acks),
    "compression.type": ("compression_type", _none_str),
    "batch.size": ("max_batch_size", int),
    "linger.ms": ("linger_ms", int),
    "max.request.size": ("max_request_size", int),
    "enable.idempotence": ("enable_idempotence", _bool),
    "transaction.timeout.ms": ("transaction_timeout_ms", int),
    "transactional.id": ("transactional_id", str),
}
_CONSUMER: dict[str, tuple[str, Converter]] = {
    "group.id": ("group_id", str),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", int),
    "fetch.min.bytes": ("fetch_min_bytes", int),
    "fetch.max.bytes": ("fetch_max_bytes", int),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", int),
    "max.poll.records": ("max_poll_records", int),
    "isolation.level": ("isolation_level", str),
    "auto.offset.reset": ("auto_offset_reset", str),
    "enable.auto.commit": ("enable_auto_commit", _bool),
    "session.timeout.ms": ("session_timeout_ms", int),
    "heartbeat.interval.ms": ("heartbeat_interval_ms", int),
    "client.rack": ("client_rack", str),
}
# Properties that only matter to the Java clients and are harmless to drop silently.
_IGNORED_SILENTLY = {"key.serializer", "value.serializer", "key.deserializer", "value.deserializer"}


@dataclass(frozen=True)
class ClientConfig:
    """Kafka client properties, by Kafka's names, in four layers."""

    common: Mapping[str, str]
    producer: Mapping[str, str] = field(default_factory=dict)
    consumer: Mapping[str, str] = field(default_factory=dict)
    admin: Mapping[str, str] = field(default_factory=dict)

    @property
    def bootstrap_servers(self) -> str:
        return self.common.get("bootstrap.servers", "localhost:9092")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientConfig:
        """Split flat worker-style properties: ``producer.*``, ``consumer.*`` and
        ``admin.*`` go to their layer; Kafka client names at the top level are common."""
        common = {k: v for k, v in props.items() if is_client_setting(k)}
        layers: dict[str, dict[str, str]] = {"producer": {}, "consumer": {}, "admin": {}}
        for key, value in props.items():
            prefix, _, rest = key.partition(".")
            if prefix in layers and rest and not rest.startswith("override."):
                layers[prefix][rest] = value
        return cls(common, layers["producer"], layers["consumer"], layers["admin"])

    def with_overrides(
        self,
        *,
        producer: Mapping[str, str] | None = None,
        consumer: Mapping[str, str] | None = None,
        admin: Mapping[str, str] | None = None,
    ) -> ClientConfig:
        """A copy with connector-level overrides laid over each layer."""
        return ClientConfig(
            self.common,
            {**self.producer, **(producer or {})},
            {**self.consumer, **(consumer or {})},
            {**self.admin, **(admin or {})},
        )

    def producer_kwargs(self, **fixed: Any) -> dict[str, Any]:
        return _translate({**self.common, **self.producer}, _PRODUCER, "producer", fixed)

    def consumer_kwargs(self, **fixed: Any) -> dict[str, Any]:
        return _translate({**self.common, **self.consumer}, _CONSUMER, "consumer", fixed)

    def admin_kwargs(self, **fixed: Any) -> dict[str, Any]:
        return _translate({**self.common, **self.admin}, {}, "admin", fixed)


def _translate(
    props: Mapping[str, str],
    specific: Mapping[str, tuple[str, Converter]],
    role: str,
    fixed: Mapping[str, Any],
) -> dict[str, Any]:
    kwargs: dict[str, Any] = Security(props).aiokafka()
    table = {**_COMMON, **specific}
    for key, value in props.items():
        if key in table:
            name, convert = table[key]
            try:
                kwargs[name] = convert(value)
            except ValueError as exc:
                raise ConfigError(key, value, str(exc)) from exc
        elif not is_security_setting(key) and key not in _IGNORED_SILENTLY:
            log.warning(
                "client setting not supported, ignored",
                setting=key,
                client=role,
                library="aiokafka",
            )
    kwargs.update(fixed)
    return kwargs


def is_client_setting(key: str) -> bool:
    """Whether ``key`` is a Kafka client setting every client role shares."""
    return key in _COMMON or is_security_setting(key)


def make_producer(config: ClientConfig, **fixed: Any) -> AIOKafkaProducer:
    """A producer; ``fixed`` keywords (e.g. ``transactional_id``) win over settings."""
    return AIOKafkaProducer(**config.producer_kwargs(**fixed))


def make_consumer(config: ClientConfig, **fixed: Any) -> AIOKafkaConsumer:
    """A consumer; ``fixed`` keywords (e.g. ``isolation_level``) win over settings."""
    return AIOKafkaConsumer(**config.consumer_kwargs(**fixed))


def make_admin(config: ClientConfig, **fixed: Any) -> AIOKafkaAdminClient:
    return AIOKafkaAdminClient(**config.admin_kwargs(**fixed))


def make_client(config: ClientConfig, **fixed: Any) -> AIOKafkaClient:
    """A bare protocol client (for requests aiokafka has no API for, e.g. fencing)."""
    return AIOKafkaClient(**config.admin_kwargs(**fixed))


close_what_a_cancelled_bootstrap_opened()

C = TypeVar("C", AIOKafkaProducer, AIOKafkaConsumer, AIOKafkaAdminClient, AIOKafkaClient)

STOP_SECONDS = 10.0
"""The most a client's stop may take once its start failed."""


async def started(client: C) -> C:
    """``client`` started (bootstrapped, for a bare client). A start that fails half-way or
    is cancelled leaves aiokafka's connections and metadata task behind: they are stopped
    here before the error goes on, so a caller only stops what it got back."""
    try:
        if isinstance(client, AIOKafkaClient):
            await client.bootstrap()
        else:
            await client.start()
    except BaseException:
        with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_SECONDS):
            await stopped(client)
        raise
    return client


async def stopped(
    client: AIOKafkaProducer | AIOKafkaConsumer | AIOKafkaAdminClient | AIOKafkaClient,
) -> None:
    """Stop or close ``client``, whichever its kind calls it."""
    if isinstance(client, AIOKafkaProducer | AIOKafkaConsumer):
        await client.stop()
    else:
        await client.close()
