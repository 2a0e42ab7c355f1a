"""SIGTERM and SIGINT stop a worker process cleanly, sent to the worker alone or to its
whole process group (with Spark running): it exits 0 after committing what its tasks
polled, and a restart continues without duplicates or gaps."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from eos.kafka import ClientConfig
from eos.kafka.read_to_end import TopicReader
from services.connectors.spark import generate_sample_dataset
from tests.conftest import TopicFactory
from tests.integration.test_spark_worker import (
    SPARK,
    log_end,
    reader_end,
    spark_connector,
    wait_for_ids,
)
from tests.integration.worker_harness import WorkerProcess, wait_gone, worker_props
from tests.system.test_crash import run_verify

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


def test_sigterm_and_sigint_stop_cleanly(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    group, topic = unique_name("stop"), unique_name("out")
    connector = {
        "name": "vs",
        "connector.class": "VerifiableSource",
        "tasks.max": "2",
        "topic": topic,
        "records.per.partition": "0",
        "throughput": "2000",
        "transaction.boundary": "interval",
        "transaction.boundary.interval.ms": "3000",
    }
    worker = WorkerProcess(tmp_path, worker_props(bootstrap, group), [connector])
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            worker.start()
            worker.wait_running("vs", 2)
            time.sleep(2)
            assert worker.proc is not None
            started = time.monotonic()
            worker.proc.send_signal(sig)
            assert worker.proc.wait(timeout=30) == 0, worker.tail()
            assert time.monotonic() - started < 15
    finally:
        worker.stop()
    log = worker.log.read_text()
    assert log.count("worker stopped") == 2
    assert "Traceback" not in log
    code, output = run_verify(bootstrap, topic, 1)
    summary = re.search(r"records=(\d+) partitions=2 duplicates=0 gaps=0", output)
    assert summary, output
    # The final commits (interval 3 s, stopped after ~2 s) made it: about 2 x 2 x 2000 records.
    assert int(summary.group(1)) >= 4000, output
    assert code == 0


SPARK_ROWS = 80_000


@pytest.mark.timeout(400)
async def test_group_sigterm_and_sigint_stop_a_spark_worker_cleanly(
    bootstrap: str,
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    """SIGTERM, then SIGINT, to the whole process group of a worker whose SparkSource
    task is in the middle of a large file (as systemd, ``timeout`` and a terminal's
    Ctrl-C send them): it exits 0 within task.shutdown.graceful.timeout.ms + 5 s, no
    task fails, nothing prints a traceback, the Spark JVM (which the group signal must
    not reach) is gone with it, and the next start resumes: every row exactly once."""
    topic = await topic_factory()
    data = tmp_path / "big"
    generate_sample_dataset(data, SPARK_ROWS, files=1)
    props = {**worker_props(bootstrap, unique_name("g")), **SPARK}
    graceful = int(props["task.shutdown.graceful.timeout.ms"]) / 1000
    connector = spark_connector(
        "spark", topic, data, **{"max.buffered.rows": "20000", "batch.rows": "2000"}
    )
    worker = WorkerProcess(tmp_path, props, [connector])
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            worker.start(own_group=True)
            assert worker.proc is not None
            await anyio.to_thread.run_sync(worker.wait_running, "spark", 1, 120)
            # In the middle of the file, whatever the machine's speed: 8 000 rows on, the
            # worker is frozen (SIGSTOP) where it is, gets the group signal while frozen
            # and reads it the moment it goes on (SIGCONT).
            reader = TopicReader(client_config, topic)
            await reader.start()
            try:
                target = await reader_end(reader) + 8_000
                while await reader_end(reader) < target:
                    assert worker.alive(), worker.tail()
                    await anyio.sleep(0.02)
                os.kill(worker.proc.pid, signal.SIGSTOP)
                await anyio.sleep(0.5)  # Produce requests on the wire land meanwhile
                frozen = await reader_end(reader)
            finally:
                await reader.close()
            assert frozen < SPARK_ROWS - 20_000, ("too near the end to test a stop", frozen)
            jvms = worker.children()
            assert jvms, "no Spark JVM under the worker"
            started = time.monotonic()
            worker.signal_group(sig)
            os.kill(worker.proc.pid, signal.SIGCONT)
            code = await anyio.to_thread.run_sync(worker.proc.wait, graceful + 30)
            took = time.monotonic() - started
            assert code == 0, worker.tail()
            assert took < graceful + 5, (sig, took)
            assert await log_end(client_config, topic) < SPARK_ROWS, "finished before the signal"
            await anyio.to_thread.run_sync(wait_gone, jvms, 5, "Spark JVM")
        worker.start()
        ids = await wait_for_ids(client_config, topic, SPARK_ROWS, worker, timeout=300)
    finally:
        worker.stop()
    log = worker.log.read_text()
    assert log.count("worker stopped") == 3, worker.tail()
    for bad in ("Traceback", "task failed", "connector failed", "FAILED"):
        assert bad not in log, worker.tail()
    assert sorted(ids) == list(range(SPARK_ROWS))
    assert max(ids.values()) == 1
