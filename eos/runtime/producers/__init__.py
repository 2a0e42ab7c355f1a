"""Task producers: the port a source task writes through (:mod:`.base`) and its two
implementations, chosen with ``producer.client`` (worker, overridable per connector)."""

from __future__ import annotations

from typing import Any

from eos.config.worker import check_producer_client
from eos.kafka.clients import ClientConfig
from eos.runtime.producers.base import (
    PRODUCER_CLIENTS as PRODUCER_CLIENTS,
)
from eos.runtime.producers.base import (
    ProducerClient as ProducerClient,
)
from eos.runtime.producers.base import (
    SegmentSent as SegmentSent,
)
from eos.runtime.producers.base import (
    SendFailed as SendFailed,
)
from eos.runtime.producers.base import (
    Sent as Sent,
)
from eos.runtime.producers.base import (
    TaskProducer as TaskProducer,
)


def make_task_producer(
    client: ProducerClient, config: ClientConfig, *, per_record: bool, **fixed: Any
) -> TaskProducer:
    """A task producer of ``client``; ``fixed`` are aiokafka keywords
    (``transactional_id``, ``transaction_timeout_ms``, ``enable_idempotence``)."""
    if client == "librdkafka":
        check_producer_client(client)
        from eos.runtime.producers import librdkafka

        return librdkafka.make(config, fixed, per_record)
    from eos.runtime.producers.aiokafka import AiokafkaTaskProducer

    return AiokafkaTaskProducer(config, **fixed)
