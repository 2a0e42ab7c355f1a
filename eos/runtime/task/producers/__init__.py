"""Task producers: the port a source task writes through (:mod:`.base`) and its two
implementations, chosen with ``producer.client`` (worker, overridable per connector)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eos.runtime.task.producers.base import (
    PRODUCER_CLIENTS as PRODUCER_CLIENTS,
)
from eos.runtime.task.producers.base import (
    ProducerClient as ProducerClient,
)
from eos.runtime.task.producers.base import (
    ProducerFactory as ProducerFactory,
)
from eos.runtime.task.producers.base import (
    ProducerStats as ProducerStats,
)
from eos.runtime.task.producers.base import (
    SegmentSent as SegmentSent,
)
from eos.runtime.task.producers.base import (
    SendFailed as SendFailed,
)
from eos.runtime.task.producers.base import (
    Sent as Sent,
)
from eos.runtime.task.producers.base import (
    TaskProducer as TaskProducer,
)

if TYPE_CHECKING:
    from eos.kafka.clients import ClientConfig


def make_task_producer(
    client: ProducerClient, config: ClientConfig, *, per_record: bool, **fixed: Any
) -> TaskProducer:
    """A task producer of ``client``; ``fixed`` are aiokafka keywords
    (``transactional_id``, ``transaction_timeout_ms``, ``enable_idempotence``). The
    implementation is imported here, on first use: the task loop imports no client."""
    if client == "librdkafka":
        from eos.config.worker import check_producer_client

        check_producer_client(client)
        from eos.runtime.task.producers import librdkafka

        return librdkafka.make(config, fixed, per_record)
    from eos.runtime.task.producers.aiokafka import AiokafkaTaskProducer

    return AiokafkaTaskProducer(config, **fixed)
