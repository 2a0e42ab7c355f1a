"""SparkSource on a real Spark standalone cluster (tests/spark_cluster.py: a master and two
workers from PySpark's own ``spark-class``), the eos worker's Spark driver in client mode.

Files mode and the database mode read through the cluster's executors; an executor
SIGKILLed in the middle of the database read makes Spark rerun its task; the eos worker
SIGKILLed comes back against the same cluster. Judged with a read_committed
confluent-kafka consumer: every id exactly once in each topic."""

from __future__ import annotations

import functools
import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from eos.kafka import ClientConfig
from eos.kafka.admin import ensure_topic
from services.connectors.spark import generate_sample_dataset
from tests.integration.jdbc_helpers import committed, end_offsets
from tests.integration.worker_harness import QUICK_REJOIN, WorkerProcess, worker_props
from tests.postgres_server import PASSWORD, USER, PostgresServer, postgres
from tests.spark_cluster import CLUSTER_DRIVER, SparkCluster, spark_cluster

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]
__all__ = ["postgres", "spark_cluster"]

FILE_ROWS, TABLE_ROWS, MORE_ROWS = 20_000, 60_000, 2_000


def _ids(bootstrap: str, topic: str) -> Counter[int]:
    return Counter(value["id"] for _, _, value in committed(bootstrap, topic))


def _wait_for(bootstrap: str, topic: str, count: int, worker: WorkerProcess) -> Counter[int]:
    deadline = time.monotonic() + 180
    while True:
        ids = _ids(bootstrap, topic)
        if sum(ids.values()) >= count or time.monotonic() > deadline:
            return ids
        assert worker.alive(), worker.tail()
        time.sleep(1)


def test_files_and_a_database_through_a_standalone_cluster_survive_kills(
    spark_cluster: SparkCluster,
    postgres: PostgresServer,
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    db = postgres.database("cluster")
    with postgres.connect(db) as conn:
        conn.execute("CREATE TABLE big (id bigint PRIMARY KEY, payload text)")
        conn.execute(
            "INSERT INTO big SELECT g, 'payload ' || g FROM generate_series(1, %s) g",
            (TABLE_ROWS,),
        )
    files, rows = unique_name("files"), unique_name("rows")
    for topic in (files, rows):
        anyio.run(functools.partial(ensure_topic, client_config, topic, partitions=2))
    data = tmp_path / "landing"
    generate_sample_dataset(data, FILE_ROWS, files=2)
    props = {
        **worker_props(bootstrap, unique_name("g")),
        **QUICK_REJOIN,
        **CLUSTER_DRIVER,
        "spark.master": spark_cluster.master,
        "spark.jdbc.drivers": "postgresql",
    }
    common = {"connector.class": "SparkSource", "exactly.once.support": "required"}
    connectors = [
        {**common, "name": "files", "path": str(data), "topic": files, "key.columns": "id"},
        {
            **common,
            "name": "db",
            "mode": "jdbc",
            "connection.url": postgres.url(db),
            "connection.user": USER,
            "connection.password": PASSWORD,
            "jdbc.mode": "incrementing",
            "table.whitelist": "big",
            "topic": rows,
            "max.buffered.rows": "6000",  # the table in 10 partitions, read one by one
            "batch.rows": "5000",
            "poll.interval.ms": "500",
        },
    ]
    worker = WorkerProcess(tmp_path, props, connectors)
    try:
        worker.start()
        worker.wait_running("db", 1, 180)
        while end_offsets(bootstrap, rows) < 10_000:
            assert worker.alive(), worker.tail()
            time.sleep(0.1)
        killed = spark_cluster.kill_executor()  # in the middle of the table's read
        assert end_offsets(bootstrap, rows) < TABLE_ROWS, "the read ended before the kill"
        while end_offsets(bootstrap, rows) < 35_000:
            assert worker.alive(), worker.tail()
            time.sleep(0.1)
        worker.kill(signal.SIGKILL)
        worker.start()
        worker.wait_running("db", 1, 180)
        with postgres.connect(db) as conn:
            conn.execute(
                "INSERT INTO big SELECT g, 'more' FROM generate_series(%s, %s) g",
                (TABLE_ROWS + 1, TABLE_ROWS + MORE_ROWS),
            )
        table_ids = _wait_for(bootstrap, rows, TABLE_ROWS + MORE_ROWS, worker)
        file_ids = _wait_for(bootstrap, files, FILE_ROWS, worker)
    finally:
        worker.stop()
    assert killed not in spark_cluster.executors()
    assert sorted(table_ids) == list(range(1, TABLE_ROWS + MORE_ROWS + 1)), worker.tail()
    assert max(table_ids.values()) == 1
    assert sorted(file_ids) == list(range(FILE_ROWS))
    assert max(file_ids.values()) == 1
    log = worker.log.read_text(errors="replace")
    assert "Lost executor" in log or "lost" in log.lower(), "Spark did not see the executor go"
