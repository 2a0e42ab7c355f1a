"""``eos verify`` against a real broker: aborted transactions, duplicates, waiting."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable
from pathlib import Path

import anyio
import pytest
from aiokafka import AIOKafkaProducer

from eos.api import SourceRecord, SourceTaskContext
from eos.kafka import ClientConfig
from services.connectors.verifiable import VerifiableSource, VerifiableSourceTask, record_value
from services.verify import AbortedPattern, add_arguments, run, verify
from tests.conftest import TopicFactory
from tests.integration.helpers import producer
from tests.unit.test_verifiable import InlineResources, MemoryOffsets, RecordingTransactions

pytestmark = pytest.mark.integration


async def send(p: AIOKafkaProducer, topic: str, partition: str, seqnos: Iterable[int]) -> None:
    for n in seqnos:
        value = json.dumps(record_value(partition, n, 0)).encode()
        await p.send(topic, value, key=partition.encode())


async def write(p: AIOKafkaProducer, topic: str, *, duplicate: bool = False) -> None:
    """0-0: 0..9 with 4, 5 aborted; 0-1: 0..9; 1-0: 0..5 (and 3 twice if ``duplicate``)."""
    async with p.transaction():
        await send(p, topic, "0-0", range(4))
        await send(p, topic, "0-1", range(5))
        await send(p, topic, "1-0", range(3))
    await p.begin_transaction()
    await send(p, topic, "0-0", [4, 5])
    await p.abort_transaction()
    async with p.transaction():
        await send(p, topic, "0-0", range(6, 10))
        await send(p, topic, "0-1", range(5, 10))
        await send(p, topic, "1-0", [3, 3, 4, 5] if duplicate else [3, 4, 5])


def cli(bootstrap: str, topic: str, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--bootstrap-server", bootstrap, "--topic", topic, *extra])


async def test_aborted_records_are_skipped_exactly(
    client_config: ClientConfig,
    bootstrap: str,
    topic_factory: TopicFactory,
    transactional_id: Callable[[], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = await topic_factory(partitions=3)
    async with producer(client_config, transactional_id=transactional_id()) as p:
        await write(p, topic)

    result = await verify(client_config, topic, aborted={"0-0": {4, 5}}, timeout=30)
    assert result.summary() == "records=24 partitions=3 duplicates=0 gaps=0 unexpected=0"
    assert result.ok(expect=24)

    unexplained = await verify(client_config, topic, timeout=30)
    assert (unexplained.gaps, unexplained.records) == (2, 24)

    aborted = tmp_path / "aborted.json"
    aborted.write_text(json.dumps({"0-0": [4, 5]}))
    args = cli(bootstrap, topic, "--aborted", str(aborted), "--expect", "24", "--timeout", "30")
    capsys.readouterr()  # drop what came before (structlog prints to stdout unconfigured)
    assert await anyio.to_thread.run_sync(run, args) == 0
    out = capsys.readouterr().out
    assert out == "records=24 partitions=3 duplicates=0 gaps=0 unexpected=0\n"


async def test_duplicate_fails(
    client_config: ClientConfig,
    bootstrap: str,
    topic_factory: TopicFactory,
    transactional_id: Callable[[], str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = await topic_factory(partitions=2)
    async with producer(client_config, transactional_id=transactional_id()) as p:
        await write(p, topic, duplicate=True)

    args = cli(bootstrap, topic, "--aborted-pattern", "2,1,1,2,0", "--timeout", "30")
    capsys.readouterr()  # drop what came before (structlog prints to stdout unconfigured)
    assert await anyio.to_thread.run_sync(run, args) == 1  # aborts every record: all unexpected
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "records=25 partitions=3 duplicates=0 gaps=0 unexpected=25"

    args = cli(bootstrap, topic, "--timeout", "30")
    capsys.readouterr()  # drop what came before (structlog prints to stdout unconfigured)
    assert await anyio.to_thread.run_sync(run, args) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "records=25 partitions=3 duplicates=1 gaps=2 unexpected=0"
    assert "  partition 1-0: duplicated seqnos: 3" in out
    assert "  partition 0-0: missing seqnos: 4..5" in out


async def test_open_transaction_does_not_hold_the_verifier(
    client_config: ClientConfig, topic_factory: TopicFactory, transactional_id: Callable[[], str]
) -> None:
    topic = await topic_factory(partitions=1)
    async with producer(client_config, transactional_id=transactional_id()) as p:
        async with p.transaction():
            await send(p, topic, "0-0", range(3))
        await p.begin_transaction()
        await send(p, topic, "0-0", range(3, 6))
        await p.flush()
        with anyio.fail_after(20):
            result = await verify(client_config, topic, timeout=15)
        assert result.ok(expect=3)
        assert result.records == 3
        await p.abort_transaction()


async def test_expect_waits_for_records_then_gives_up(
    client_config: ClientConfig,
    bootstrap: str,
    topic_factory: TopicFactory,
    transactional_id: Callable[[], str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = await topic_factory(partitions=2)

    async def produce_later() -> None:
        await anyio.sleep(1.5)
        async with (
            producer(client_config, transactional_id=transactional_id()) as p,
            p.transaction(),
        ):
            await send(p, topic, "0-0", range(50))

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce_later)
        result = await verify(client_config, topic, expect=50, timeout=30)
    assert result.ok(expect=50)

    args = cli(bootstrap, topic, "--expect", "51", "--timeout", "2")
    capsys.readouterr()  # drop what came before (structlog prints to stdout unconfigured)
    assert await anyio.to_thread.run_sync(run, args) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "records=50 partitions=1 duplicates=0 gaps=0 unexpected=0",
        "  expected at least 51 records, read 50",
    ]


async def test_verifiable_source_transactions_verify_clean(
    client_config: ClientConfig, topic_factory: TopicFactory, transactional_id: Callable[[], str]
) -> None:
    """Two VerifiableSource tasks, driven like the framework drives connector-defined
    boundaries, write through real transactions; the verifier expects their aborts."""
    topic = await topic_factory(partitions=4)
    config = {
        "topic": topic,
        "partitions.per.task": "2",
        "records.per.partition": "20",
        "commit.every.records": "6",
        "abort.every.transactions": "3",
        "batch.size": "7",
    }
    connector = VerifiableSource()
    await connector.start(config)
    for task_id, task_config in enumerate(connector.task_configs(2)):
        txn = RecordingTransactions()
        task = VerifiableSourceTask()
        context = SourceTaskContext(
            connector="verifiable",
            task_id=task_id,
            offset_reader=MemoryOffsets(),
            resources=InlineResources(),
            transaction_context=txn,
        )
        await task.start(task_config, context)
        async with producer(client_config, transactional_id=transactional_id()) as p:
            await p.begin_transaction()
            while records := await task.poll():
                for record in records:
                    assert isinstance(record, SourceRecord)  # output=records
                    await p.send(topic, json.dumps(record.value).encode(), key=record.key.encode())
                    for kind, asked in txn.requests:
                        if asked is record:
                            end = p.commit_transaction if kind == "commit" else p.abort_transaction
                            await end()
                            await p.begin_transaction()
            await p.abort_transaction()  # the empty one opened after the last boundary

    result = await verify(client_config, topic, aborted=AbortedPattern.parse("2,6,3,2,20"))
    assert result.ok()
    # 80 records in transactions of 6 per task (k = 0..39): transactions 2 and 5 aborted
    assert result.summary() == "records=56 partitions=4 duplicates=0 gaps=0 unexpected=0"
