"""A batch the broker rejects (here: larger than the topic's max.message.bytes) fails the
commit: the transaction's offsets never become visible without the records."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from aiokafka.admin import NewTopic

from eos.api import SourceRecord
from eos.kafka import ClientConfig
from eos.kafka.clients import make_admin
from eos.runtime.task.producers import make_task_producer
from eos.runtime.task.producers.base import PRODUCER_CLIENTS, ProducerClient, SendFailed
from tests.conftest import TopicFactory
from tests.integration.helpers import committed_values

pytestmark = pytest.mark.integration


def _raw(record: SourceRecord) -> tuple[bytes | None, bytes | None]:
    assert isinstance(record.value, bytes)
    return None, record.value


@pytest.mark.parametrize("before", [0, 200], ids=["alone", "after-full-batches"])
@pytest.mark.parametrize("client", PRODUCER_CLIENTS)
async def test_a_rejected_batch_fails_the_commit_and_commits_no_offsets(
    client: ProducerClient,
    before: int,
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    unique_name: Callable[[str], str],
    transactional_id: Callable[[], str],
) -> None:
    small = unique_name("small")
    admin = make_admin(client_config)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(small, 1, 1, topic_configs={"max.message.bytes": "1000"})]
        )
    finally:
        await admin.close()
    offsets = await topic_factory()
    producer = make_task_producer(
        client,
        client_config,
        per_record=False,
        transactional_id=transactional_id(),
        enable_idempotence=True,
        transaction_timeout_ms=60000,
    )
    other = await topic_factory()
    # 200 records of 500 bytes fill batches first (a transaction larger than one batch
    # per partition goes through aiokafka's background sender)
    records = [SourceRecord({"p": 1}, {"o": n}, other, b"y" * 500) for n in range(before)]
    record = SourceRecord({"p": 1}, {"o": before}, small, b"x" * 5000)
    await producer.start()
    try:
        await producer.begin()
        await producer.send([*records, record], _raw, per_record=False)
        await producer.send_offsets(offsets, [(b"k", b"v")])
        with pytest.raises(SendFailed, match=r"(?i)too.?large"):
            await producer.commit()
        await producer.abort()  # what the task does next
    finally:
        await producer.close()
    assert await committed_values(client_config, offsets, timeout=5) == []
    assert await committed_values(client_config, small, timeout=5) == []
    assert await committed_values(client_config, other, timeout=5) == []
