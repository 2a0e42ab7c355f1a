"""Kafka producer settings (Kafka's own names) for librdkafka.

Most Kafka producer names are librdkafka's too; a few differ (``ssl.cafile`` is
``ssl.ca.location``, ``max.request.size`` is ``message.max.bytes``). A setting
librdkafka does not know is dropped with a warning naming it and the client, as
:mod:`eos.kafka.clients` does for aiokafka, so one worker file serves both clients.
"""

from __future__ import annotations

from typing import Final

import structlog

from eos.kafka.client_security import Security, is_security_setting
from eos.kafka.clients import ClientConfig

log = structlog.get_logger(__name__)

RENAMED: Final = {"max.request.size": "message.max.bytes"}
"""Kafka (and eos) names whose librdkafka name differs."""

PASSED: Final = frozenset(
    {
        "bootstrap.servers", "client.id", "request.timeout.ms", "retry.backoff.ms",
        "retry.backoff.max.ms", "metadata.max.age.ms", "connections.max.idle.ms",
        "security.protocol", "sasl.mechanisms", "sasl.username", "sasl.password",
        "sasl.kerberos.service.name", "ssl.key.password", "ssl.ca.location",
        "ssl.certificate.location", "ssl.key.location", "ssl.endpoint.identification.algorithm",
        "enable.ssl.certificate.verification", "acks", "compression.type", "compression.codec",
        "compression.level", "batch.size", "batch.num.messages", "linger.ms",
        "queue.buffering.max.ms", "queue.buffering.max.messages", "queue.buffering.max.kbytes",
        "message.max.bytes", "message.timeout.ms", "delivery.timeout.ms",
        "transaction.timeout.ms", "enable.idempotence", "retries", "max.in.flight",
        "max.in.flight.requests.per.connection", "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes", "socket.timeout.ms", "socket.keepalive.enable",
        "sticky.partitioning.linger.ms", "statistics.interval.ms", "debug", "client.rack",
        "reconnect.backoff.ms", "reconnect.backoff.max.ms", "topic.metadata.refresh.interval.ms",
        "broker.address.family", "partitioner",
    }
)  # fmt: skip
"""librdkafka producer settings eos passes through as given."""

_IGNORED_SILENTLY: Final = frozenset(
    {"key.serializer", "value.serializer", "key.deserializer", "value.deserializer"}
)


def librdkafka_settings(config: ClientConfig) -> dict[str, str]:
    """The common and producer layers of ``config`` in librdkafka's names."""
    props = {**config.common, **config.producer}
    settings = Security(props).librdkafka()  # security.protocol, sasl.*, ssl.* as Kafka reads them
    for key, value in props.items():
        name = RENAMED.get(key, key)
        if is_security_setting(key):
            continue
        if name in PASSED:
            settings[name] = value
        elif key not in _IGNORED_SILENTLY:
            log.warning(
                "client setting not supported, ignored",
                setting=key,
                client="producer",
                library="librdkafka",
            )
    return settings
