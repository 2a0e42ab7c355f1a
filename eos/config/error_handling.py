"""A connector's ``errors.*`` settings (docs/transforms.md, "Errors and dead letters"):
what a task does when a record cannot be transformed or converted.

Kafka Connect's names and meanings: ``errors.tolerance`` (``none``: the first failure
fails the task; ``all``: the record is skipped), ``errors.retry.timeout`` and
``errors.retry.delay.max.ms`` (retriable failures, e.g. a schema registry that cannot be
reached, are retried with a growing delay for so long), ``errors.log.enable`` and
``errors.log.include.messages``. Beyond Connect, whose dead-letter queue serves sink
connectors only, ``errors.deadletterqueue.topic.name`` names a topic that receives each
skipped source record, in the transaction of the task's output and offsets.

The settings are part of :data:`~eos.config.connector.CONNECTOR_CONFIG` (merged there);
:class:`ErrorHandling` holds them parsed, :func:`error_problems` checks what needs the
worker's settings too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

from eos.config.definition import (
    Importance,
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
from eos.errors import ConfigError

Tolerance = Literal["none", "all"]

DLQ_TOPIC: Final = "errors.deadletterqueue.topic.name"
_GROUP = "errors"


@config_class
class ErrorHandling:
    """The parsed ``errors.*`` settings of a connector (:meth:`of` a connector's props)."""

    tolerance: Tolerance = setting(
        "errors.tolerance",
        Type.STRING,
        "none",
        OneOf("none", "all"),
        Importance.MEDIUM,
        "none: a record that cannot be transformed or converted fails the task (its "
        "transaction is aborted); all: the record is skipped (and written to the dead-letter "
        "topic, if one is set) and the task goes on.",
        _GROUP,
        convert=str.lower,
    )
    retry_timeout_ms: int = setting(
        "errors.retry.timeout",
        Type.LONG,
        0,
        Range(at_least=-1),
        Importance.MEDIUM,
        "How long a retriable failure (a schema registry that cannot be reached) is retried "
        "before the task fails naming it: 0 (the default) no retries, -1 without end.",
        _GROUP,
    )
    retry_delay_max_ms: int = setting(
        "errors.retry.delay.max.ms",
        Type.LONG,
        60000,
        Range(at_least=1),
        Importance.MEDIUM,
        "The longest wait between two attempts (the waits start at 300 ms and double).",
        _GROUP,
    )
    log_enable: bool = setting(
        "errors.log.enable",
        Type.BOOLEAN,
        False,
        None,
        Importance.MEDIUM,
        "Log each failed record (its step, source partition and offset, the error).",
        _GROUP,
    )
    log_include_messages: bool = setting(
        "errors.log.include.messages",
        Type.BOOLEAN,
        False,
        None,
        Importance.MEDIUM,
        "Include the record's key and value in the log lines of errors.log.enable.",
        _GROUP,
    )
    dlq_topic: str | None = setting(
        DLQ_TOPIC,
        Type.STRING,
        None,
        TopicName(),
        Importance.MEDIUM,
        "A topic for the records errors.tolerance=all skips (created if missing, one "
        "partition), written in the same transaction as the task's output and offsets.",
        _GROUP,
        convert=or_none,
    )
    dlq_replication_factor: int = setting(
        "errors.deadletterqueue.topic.replication.factor",
        Type.INT,
        -1,
        Range(at_least=-1),
        Importance.LOW,
        "Replication factor of the dead-letter topic when eos creates it (-1: the broker's "
        "default.replication.factor; Connect's default is 3).",
        _GROUP,
    )
    dlq_context_headers: bool = setting(
        "errors.deadletterqueue.context.headers.enable",
        Type.BOOLEAN,
        False,
        None,
        Importance.MEDIUM,
        "Add Connect's __connect.errors.* headers (the failed step, the error and its "
        "trace) and eos's __eos.errors.source.* headers to each dead letter.",
        _GROUP,
    )

    @classmethod
    def of(cls, props: Mapping[str, str]) -> ErrorHandling:
        """The settings in ``props`` (a connector's); :class:`ConfigError` for a bad one."""
        return fill(cls, ERRORS_CONFIG.parse(props))

    @property
    def tolerates(self) -> bool:
        return self.tolerance == "all"


ERRORS_CONFIG: Final = definition_of(ErrorHandling)
"""The ``errors.*`` settings (part of the framework's connector settings)."""

DEFAULTS: Final = ErrorHandling.of({})
"""Kafka Connect's defaults: no tolerance, no retries, no log, no dead letters."""


def error_problems(props: Mapping[str, str], offsets_topics: tuple[str, ...]) -> list[ConfigError]:
    """What the definition alone cannot see: a dead-letter topic that is one of the
    offsets topics the connector's tasks write (reading those back would block), or the
    topic the connector writes its records to (as Connect refuses a sink's dead-letter topic
    among the topics it consumes: good records and dead letters would mix)."""
    topic = str(props.get(DLQ_TOPIC) or "").strip()
    if not topic:
        return []
    if topic in offsets_topics:
        why = "is an offsets topic of this connector: name another topic for dead letters"
    elif topic == str(props.get("topic") or "").strip():
        why = (
            "is the topic this connector writes its records to ('topic'): name another topic "
            "for dead letters"
        )
    else:
        return []
    return [ConfigError(DLQ_TOPIC, topic, why)]
