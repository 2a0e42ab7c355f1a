"""Kafka producer settings (Kafka's own names) for librdkafka.

Most Kafka producer names are librdkafka's too; a few differ (``ssl.cafile`` is
``ssl.ca.location``, ``max.request.size`` is ``message.max.bytes``). A setting
librdkafka does not know is dropped with a warning naming it and the client, as
:mod:`eos.kafka.clients` does for aiokafka, so one worker file serves both clients.
"""

from __future__ import annotations

import re
from typing import Final

import structlog

from eos.kafka.clients import ClientConfig

log = structlog.get_logger(__name__)

RENAMED: Final = {
    "ssl.cafile": "ssl.ca.location",
    "ssl.truststore.location": "ssl.ca.location",
    "ssl.certfile": "ssl.certificate.location",
    "ssl.keystore.location": "ssl.certificate.location",
    "ssl.keyfile": "ssl.key.location",
    "ssl.password": "ssl.key.password",
    "max.request.size": "message.max.bytes",
    "sasl.mechanism": "sasl.mechanisms",
}
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
_JAAS = re.compile(r'(username|password)\s*=\s*"([^"]*)"')


def librdkafka_settings(config: ClientConfig) -> dict[str, str]:
    """The common and producer layers of ``config`` in librdkafka's names."""
    settings: dict[str, str] = {}
    for key, value in {**config.common, **config.producer}.items():
        name = RENAMED.get(key, key)
        if name in PASSED:
            settings[name] = value
        elif key == "sasl.jaas.config":
            for field, found in _JAAS.findall(value):
                settings.setdefault(f"sasl.{field}", found)
        elif key not in _IGNORED_SILENTLY:
            log.warning(
                "client setting not supported, ignored",
                setting=key,
                client="producer",
                library="librdkafka",
            )
    return settings
