"""The librdkafka task producer: its blocking calls (init, commit) run off the event
loop, which keeps ticking meanwhile; a cluster it cannot reach ends its start-up within
the bound, with an error naming ``bootstrap.servers``."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import anyio
import pytest

from eos.api import RecordBlock, SourceRecord
from eos.errors import TaskError
from eos.kafka import ClientConfig
from eos.runtime.task.producers import librdkafka
from eos.runtime.task.producers.librdkafka import LibrdkafkaTaskProducer
from services.dev_kafka import free_ports
from tests.conftest import TopicFactory
from tests.integration.helpers import committed_values

pytestmark = pytest.mark.integration

TICK_S = 0.01
WORST_LAG_S = 0.25
"""The longest a 10 ms tick of the event loop may be late while a blocking call runs."""
START_BOUND_S = 2.0
"""START_TIMEOUT_S in these tests (30 s in production)."""


class Ticker:
    """Sleeps 10 ms at a time on the event loop while blocking calls run (each inside
    :meth:`blocking`): how many ticks began and ended inside one, and how late the worst
    of those woke up. A call that blocked the loop would let no tick end inside it."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.during = 0
        self._call = 0
        """Which blocking call is in flight (odd) or none (even)."""

    async def run(self) -> None:
        while True:
            before, call = time.perf_counter(), self._call
            await anyio.sleep(TICK_S)
            if call % 2 and self._call == call:  # began and ended in the same call
                self.during += 1
                self.worst = max(self.worst, time.perf_counter() - before - TICK_S)

    @contextmanager
    def blocking(self) -> Iterator[None]:
        self._call += 1
        try:
            yield
        finally:
            self._call += 1


def _no_records(record: SourceRecord) -> tuple[bytes | None, bytes | None]:
    raise AssertionError("these tests send blocks only")


@contextmanager
def silent_broker() -> Iterator[str]:
    """An address that accepts connections and never answers (a broker that hangs):
    the kernel completes the handshakes of a socket that listens and never accepts."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield f"127.0.0.1:{listener.getsockname()[1]}"


async def test_event_loop_runs_while_init_waits_for_a_silent_broker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(librdkafka, "START_TIMEOUT_S", START_BOUND_S)
    ticker = Ticker()
    with silent_broker() as address:
        producer = LibrdkafkaTaskProducer(
            ClientConfig({"bootstrap.servers": address}), transactional_id="silent-0"
        )
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(ticker.run)
                with ticker.blocking(), pytest.raises(TaskError) as caught:
                    await producer.start()
                tg.cancel_scope.cancel()
        finally:
            await producer.close()
    assert f"bootstrap.servers={address}" in str(caught.value)
    assert ticker.during >= START_BOUND_S / TICK_S / 4  # the loop ran through the init
    assert ticker.worst < WORST_LAG_S


async def test_event_loop_runs_while_commits_deliver(
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    transactional_id: Callable[[], str],
) -> None:
    """Each commit first delivers its transaction's records, held back by a long linger
    and sent in many small requests one at a time, so that it takes a while: the loop
    keeps ticking meanwhile."""
    topic = await topic_factory(partitions=2)
    rows = 20_000
    slow = {"linger.ms": "5000", "batch.num.messages": "20", "max.in.flight": "1"}
    producer = LibrdkafkaTaskProducer(
        client_config.with_overrides(producer=slow), transactional_id=transactional_id()
    )
    ticker = Ticker()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker.run)
            await producer.start()
            for cycle in range(3):
                values = [b"%d-%06d" % (cycle, n) + b"x" * 90 for n in range(rows)]
                keys = [b"%d" % (n % 7) for n in range(rows)]
                block = RecordBlock({"p": 0}, {"cycle": cycle}, topic, values, keys)
                await producer.begin()
                await producer.send([block], _no_records, per_record=False)
                with ticker.blocking():
                    await producer.commit()
            tg.cancel_scope.cancel()
    finally:
        await producer.close()
    assert ticker.during >= 10  # the commits overlapped this many ticks
    assert ticker.worst < WORST_LAG_S
    assert len(await committed_values(client_config, topic)) == 3 * rows


@pytest.mark.parametrize(
    ("transactional", "override"),
    [(True, False), (False, False), (True, True)],
    ids=["exactly-once", "at-least-once", "producer-override"],
)
async def test_unreachable_broker_fails_start_within_the_bound_naming_bootstrap_servers(
    transactional: bool, override: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing listens at the address: start-up gives up after START_TIMEOUT_S with an
    error naming the servers the producer used (a producer override's, when set)."""
    monkeypatch.setattr(librdkafka, "START_TIMEOUT_S", START_BOUND_S)
    common, own = (f"127.0.0.1:{port}" for port in free_ports(2))
    config = ClientConfig({"bootstrap.servers": common})
    if override:
        config = config.with_overrides(producer={"bootstrap.servers": own})
    producer = LibrdkafkaTaskProducer(config, transactional_id="t-0" if transactional else None)
    started = time.monotonic()
    try:
        with pytest.raises(TaskError) as caught:
            await producer.start()
    finally:
        await producer.close()
    assert time.monotonic() - started < START_BOUND_S + 2
    assert f"bootstrap.servers={own if override else common}" in str(caught.value)
