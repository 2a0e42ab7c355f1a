"""A producer dies inside a long transaction (``transaction.timeout.ms=900000``, SIGKILLed):
read_committed consumers of its partition stall behind it while a worker's task keeps
committing there; the worker's metric shows the last stable offset stuck; ``eos
transactions`` lists, describes and finds it, and ``abort`` frees it: the consumer reads
everything committed after it, the metric clears, and the task's output is exactly once."""

from __future__ import annotations

import signal
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

import anyio
import pytest
from aiokafka import TopicPartition

from eos.kafka import make_consumer
from metrics import PrometheusObserver
from services.verify import verify
from services.worker_service import run_worker, worker_settings
from tests.integration.secured import REPO, Secured, eos
from tests.integration.worker_harness import worker_props

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

NEVER_COMMITTED = b"never committed"  # the hanger's one record
HANGER = """
import sys, anyio
from eos.config.files import load_properties
from eos.kafka import ClientConfig, make_producer

async def main(bootstrap, settings, topic, tid):
    config = ClientConfig({"bootstrap.servers": bootstrap, **load_properties(settings)})
    producer = make_producer(config, transactional_id=tid, transaction_timeout_ms=900000)
    await producer.start()
    await producer.begin_transaction()
    sent = await producer.send_and_wait(topic, b"never committed", partition=0)
    print(sent.offset, flush=True)
    await anyio.sleep(3600)

anyio.run(main, *sys.argv[1:])
"""


async def offsets(secured: Secured, topic: str) -> tuple[int, int]:
    """(last stable offset, high watermark) of partition 0."""
    found = []
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = make_consumer(secured.admin, group_id=None, isolation_level=isolation)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            found.append((await consumer.end_offsets([tp]))[tp])
        finally:
            await consumer.stop()
    return found[0], found[1]


async def worker_records_below(secured: Secured, topic: str, high: int) -> int:
    """How many of partition 0's records below offset ``high`` are the worker's (read
    read_uncommitted: the hanger's open one shows too, and is not counted)."""
    tp = TopicPartition(topic, 0)
    consumer = make_consumer(secured.admin, group_id=None, isolation_level="read_uncommitted")
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        count = 0
        with anyio.fail_after(60):
            while await consumer.position(tp) < high:
                for record in (await consumer.getmany(tp, timeout_ms=500)).get(tp, []):
                    count += record.offset < high and record.value != NEVER_COMMITTED
        return count
    finally:
        await consumer.stop()


def stuck(observer: PrometheusObserver, topic: str) -> float:
    value = observer.registry.get_sample_value(
        "eos_worker_output_lso_stuck_seconds", {"topic": topic, "partition": "0"}
    )
    return -1.0 if value is None else value


async def until(
    ok: Callable[[], bool],
    read: Callable[[], Awaitable[tuple[int, int]]] | None = None,
    past: int = 0,
) -> None:
    """Until ``ok()`` (and, with ``read``, the last stable offset it reads is past ``past``)."""
    with anyio.fail_after(60):
        while True:
            if ok() and (read is None or (await read())[0] > past):
                return
            await anyio.sleep(0.2)


def transactions(secured: Secured, *args: str) -> list[list[str]]:
    done = eos("transactions", "--bootstrap-server", secured.bootstrap, "--command-config",
               str(secured.admin_file), *args)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return [[c.strip() for c in line.rstrip("\t").split("\t")] for line in done.stdout.splitlines()]


async def test_a_hanging_transaction_is_found_and_aborted(
    secured_kafka: Callable[[str], Secured],
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    secured = secured_kafka("sasl-scram")
    topic = await secured.topic(unique_name("out"))
    tid = unique_name("hanger")
    props = {
        **worker_props(secured.bootstrap, unique_name("lso"), **{"lso.check.interval.ms": "300"}),
        **secured.client_properties("admin"),
    }
    connector = {
        "name": "vs", "connector.class": "VerifiableSource", "tasks.max": "1", "topic": topic,
        "partitions.per.task": "1", "records.per.partition": "0", "throughput": "50",
    }  # fmt: skip
    observer = PrometheusObserver(process_metrics=False)
    command = [sys.executable, "-c", HANGER, secured.bootstrap, str(secured.admin_file), topic, tid]
    async with await anyio.open_process(command, cwd=REPO) as hanger:
        assert hanger.stdout is not None
        start = int((await hanger.stdout.receive()).decode())
        hanger.send_signal(signal.SIGKILL)  # dead inside its transaction
    async with anyio.create_task_group() as tg:
        run = partial(run_worker, observer=observer)
        worker = await tg.start(run, worker_settings(props), [connector])
        await until(lambda: stuck(observer, topic) >= 2)
        stable, high = await offsets(secured, topic)
        assert stable == start < high  # read_committed stalls behind the open transaction
        behind = await worker_records_below(secured, topic, high)

        listed = {row[0]: row for row in transactions(secured, "list")[1:]}
        assert listed[tid][3] == "Ongoing"
        described = transactions(secured, "describe", "--transactional-id", tid)
        assert described[1][4] == "Ongoing"
        assert described[1][8] == f"{topic}-0"
        producers = transactions(
            secured, "describe-producers", "--topic", topic, "--partition", "0"
        )
        assert str(start) in [row[5] for row in producers[1:]]
        # Kafka's meaning: the coordinator still tracks it (it ends at its timeout), so it is
        # not "hanging"; --include-ongoing shows it all the same.
        plain = ["find-hanging", "--topic", topic, "--max-transaction-timeout", "0"]
        assert transactions(secured, *plain)[1:] == []
        found = transactions(secured, *plain, "--include-ongoing")[1:]
        rows = [(row[0], row[1], row[5], row[8]) for row in found]
        # the hanger's, and maybe the worker's own task in the middle of a transaction
        assert (topic, "0", str(start), "Ongoing") in rows
        assert all(int(row[2]) > start for row in rows if row[2] != str(start)), rows
        assert transactions(secured, "abort", "--topic", topic, "--partition", "0",
                            "--start-offset", str(start)) == []  # fmt: skip

        await until(lambda: stuck(observer, topic) == 0)  # the metric clears
        await until(lambda: True, lambda: offsets(secured, topic), past=high)
        worker.stop()
    result = await verify(secured.admin, topic, None, 30, {})
    assert (result.duplicates, result.gaps, result.unexpected) == (0, 0, 0)
    # committed after the open transaction, behind it until the abort: readable now (the
    # offsets between hold the worker's transaction markers too, one a commit)
    assert result.records >= behind > 0, (result, behind, high)
