"""SparkSource end to end: ``eos worker`` processes (each with its own local Spark) and
the real broker; the output is judged with a read_committed reader, by id."""

from __future__ import annotations

import json
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx
import pytest

from eos.kafka import ClientConfig, read_to_end
from eos.kafka.read_to_end import TopicReader
from services.connectors.spark import generate_sample_dataset
from tests import spark_cds
from tests.conftest import TopicFactory
from tests.integration.worker_harness import QUICK_REJOIN, WorkerProcess, worker_props

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SPARK = {
    "spark.master": "local[2]",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "1g",
    # Workers the tests start again and again: with C1 alone Spark's JVM is ready about
    # 9 s sooner (a session with both lakehouse jars, then a Delta write and read: 22 s
    # against 31 s on 2 cores); a long-running worker keeps the JVM's default. The tests'
    # class-data-sharing archive (tests/spark_cds.py) saves some seconds more.
    "spark.driver.extraJavaOptions": f"-XX:TieredStopAtLevel=1 {spark_cds.JAVA_OPTIONS}",
    "thread.pool.size": "4",
}


def spark_connector(name: str, topic: str, path: Path, **extra: str) -> dict[str, str]:
    return {
        "name": name,
        "connector.class": "services.connectors.spark:SparkSource",
        "exactly.once.support": "required",
        "path": str(path),
        "topic": topic,
        "key.columns": "id",
        "poll.interval.ms": "500",
        **extra,
    }


async def committed_ids(config: ClientConfig, topic: str) -> Counter[int]:
    records = await read_to_end(config, topic, timeout=60)
    return Counter(json.loads(r.value)["id"] for r in records if r.value is not None)


async def log_end(config: ClientConfig, topic: str) -> int:
    """The end offset of ``topic``'s partitions together (committed or not: progress)."""
    reader = TopicReader(config, topic)
    await reader.start()
    try:
        return await reader_end(reader)
    finally:
        await reader.close()


async def reader_end(reader: TopicReader) -> int:
    """:func:`log_end` through a reader already open (a wait that asks many times)."""
    return sum((await reader.end_offsets()).values())


async def wait_for_ids(
    config: ClientConfig, topic: str, count: int, worker: WorkerProcess, timeout: float = 180
) -> Counter[int]:
    deadline = time.monotonic() + timeout
    while True:
        ids = await committed_ids(config, topic)
        if sum(ids.values()) >= count or time.monotonic() > deadline:
            return ids
        assert worker.proc is not None
        assert worker.proc.poll() is None, f"worker exited\n{worker.tail()}"
        await anyio.sleep(1)


async def test_worker_delivers_files_exactly_once_and_picks_up_new_ones(
    bootstrap: str,
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    topic = await topic_factory(partitions=2)
    data = tmp_path / "landing"
    generate_sample_dataset(data, 20_000, files=4)
    props = {**worker_props(bootstrap, unique_name("g")), **SPARK}
    connector = spark_connector("spark", topic, data, **{"tasks.max": "2"})
    worker = WorkerProcess(tmp_path, props, [connector])
    try:
        worker.start()
        await anyio.to_thread.run_sync(worker.wait_running, "spark", 2, 120)
        ids = await wait_for_ids(client_config, topic, 20_000, worker)
        assert sorted(ids) == list(range(20_000)), worker.tail()
        generate_sample_dataset(data, 5_000, files=2, first_id=20_000)
        ids = await wait_for_ids(client_config, topic, 25_000, worker)
        async with httpx.AsyncClient(base_url=worker.rest_url, timeout=10) as http:
            status = (await http.get("/connectors/spark/status")).json()
    finally:
        worker.stop()
    assert sorted(ids) == list(range(25_000)), worker.tail()
    assert max(ids.values()) == 1
    assert [t["state"] for t in status["tasks"]] == ["RUNNING", "RUNNING"]


@pytest.mark.system
async def test_sigkill_in_the_middle_of_a_large_file(
    bootstrap: str,
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    """One 600 000-row Parquet file; the worker is SIGKILLed three times while it is in the
    middle of the file and restarted: every id arrives exactly once."""
    rows, kills = 600_000, 3
    topic = await topic_factory()
    data = tmp_path / "big"
    generate_sample_dataset(data, rows, files=1)
    props = {**worker_props(bootstrap, unique_name("g")), **QUICK_REJOIN, **SPARK}
    connector = spark_connector(
        "spark", topic, data, **{"max.buffered.rows": "50000", "batch.rows": "5000"}
    )
    worker = WorkerProcess(tmp_path, props, [connector])
    rng = random.Random(f"spark-{topic}")
    try:
        for _ in range(kills):
            worker.start()
            await anyio.to_thread.run_sync(worker.wait_running, "spark", 1, 120)
            # let this run write a fresh part of the file, then kill it at a random moment
            target = await log_end(client_config, topic) + rng.randint(5_000, 30_000)
            while await log_end(client_config, topic) < target:
                assert worker.proc is not None
                assert worker.proc.poll() is None, worker.tail()
                await anyio.sleep(0.05)
            await anyio.sleep(rng.uniform(0, 0.5))
            # records (committed or not) and markers so far: an upper bound of the rows
            written = await log_end(client_config, topic)
            worker.kill(signal.SIGKILL)
            assert written < rows, "the file was finished before the kill; use more rows"
        worker.start()
        ids = await wait_for_ids(client_config, topic, rows, worker, timeout=300)
    finally:
        worker.stop()
    assert worker.starts == kills + 1
    assert sorted(ids) == list(range(rows)), worker.tail()
    assert max(ids.values()) == 1, [i for i, n in ids.items() if n > 1][:10]
