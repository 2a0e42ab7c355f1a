"""Lakehouse changes into Kafka across SIGKILLs: an ``eos worker`` process (its own
local Spark with the Delta and Iceberg jars) reads a table's changes with
``transaction.boundary=connector`` while the test writes versions and kills it,
between versions and several times inside a 200 000-row version.

Judged with a read_committed reader on the one-partition output topic: every change
exactly once, in version order (so in version order per key), and the transactions
(runs of records between two transaction markers, which take one offset each) never
mix versions: one per version, or one per ``transaction.max.rows`` rows of a bigger one.
"""

from __future__ import annotations

import json
import random
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from eos.kafka import ClientConfig, read_to_end
from eos.kafka.read_to_end import TopicReader
from tests.conftest import TopicFactory
from tests.integration.test_spark_harness import session_of, spark_resources
from tests.integration.test_spark_worker import SPARK
from tests.integration.worker_harness import QUICK_REJOIN, WorkerProcess, worker_props

pytestmark = [pytest.mark.system, pytest.mark.integration, pytest.mark.timeout(1200)]

BIG = 200_000
MAX_ROWS = 5_000
KILLS_IN_BIG = 3
FIRST_THREE = 50 + 10 + 5
"""Changes of the first three versions: inserts, update postimages, deletes."""


class Lake:
    """The table under test, in one of the two formats, written by the test's Spark."""

    def __init__(self, fmt: str, spark: Any, home: Path) -> None:
        self.fmt, self.spark = fmt, spark
        if fmt == "delta":
            self.table = str(home / "orders")
            self.ident = f"delta.`{self.table}`"
            spark.sql(
                f"CREATE TABLE {self.ident} (id BIGINT, name STRING, amount BIGINT) USING delta "
                "TBLPROPERTIES (delta.enableChangeDataFeed = true)"
            )
        else:
            self.table = self.ident = f"iceberg.db.crash_{uuid.uuid4().hex[:8]}"
            spark.sql(
                f"CREATE TABLE {self.ident} (id BIGINT, name STRING, amount BIGINT) USING iceberg "
                "TBLPROPERTIES ('write.delete.mode'='copy-on-write', "
                "'write.update.mode'='copy-on-write', 'write.merge.mode'='copy-on-write')"
            )

    def insert(self, first: int, count: int) -> None:
        df = self.spark.range(first, first + count).selectExpr(
            "id", "concat('n-', id) AS name", "id * 10 AS amount"
        )
        if self.fmt == "delta":
            df.write.format("delta").mode("append").save(self.table)
        else:
            df.writeTo(self.table).append()

    def sql(self, statement: str) -> None:
        self.spark.sql(statement.format(t=self.ident))

    def connector(self, topic: str) -> dict[str, str]:
        config = {
            "name": "lake",
            "connector.class": "services.connectors.spark:SparkSource",
            "exactly.once.support": "required",
            "transaction.boundary": "connector",
            "transaction.max.rows": str(MAX_ROWS),
            "mode": f"{self.fmt}-changes",
            "table" if self.fmt == "iceberg" else "path": self.table,
            "topic": topic,
            "key.columns": "id",
            "batch.rows": "2500",
            "max.buffered.rows": "20000",
            "poll.interval.ms": "500",
        }
        if self.fmt == "iceberg":
            config["changelog"] = "true"
        return config

    def versions(self) -> list[int]:
        """The versions (snapshot ids) in commit order."""
        if self.fmt == "delta":
            rows = self.spark.sql(f"DESCRIBE HISTORY {self.ident}").select("version").collect()
            return sorted(int(r[0]) for r in rows)
        history = f"SELECT snapshot_id FROM {self.ident}.history ORDER BY made_current_at"
        return [int(r[0]) for r in self.spark.sql(history).collect()]


def writes(lake: Lake) -> list[Callable[[], None]]:
    """Ten versions: inserts, updates, deletes; the fourth has :data:`BIG` rows."""
    return [
        lambda: lake.insert(0, 50),
        lambda: lake.sql("UPDATE {t} SET amount = amount + 1 WHERE id < 10"),
        lambda: lake.sql("DELETE FROM {t} WHERE id >= 45 AND id < 50"),
        lambda: lake.insert(1000, BIG),
        lambda: lake.sql("UPDATE {t} SET name = 'renamed' WHERE id < 40 AND id % 7 = 0"),
        lambda: lake.insert(50, 10),
        lambda: lake.sql("DELETE FROM {t} WHERE id % 5 = 0 AND id < 60"),
        lambda: lake.sql("UPDATE {t} SET amount = -1 WHERE id = 1"),
        lambda: lake.insert(60, 3),
        lambda: lake.sql("DELETE FROM {t} WHERE id = 61"),
    ]


async def kill_after_progress(
    worker: WorkerProcess, config: ClientConfig, topic: str, records: int
) -> None:
    """SIGKILL the worker once ``records`` more records (committed or not) are in the
    topic than now, at a random moment shortly after."""
    reader = TopicReader(config, topic)
    await reader.start()
    try:
        end = sum((await reader.end_offsets()).values())
        target, moved = end + records, time.monotonic()
        while end < target:
            assert worker.alive(), worker.tail()
            assert time.monotonic() - moved < 300, "no progress: the big version was done?"
            await anyio.sleep(0.02)
            now = sum((await reader.end_offsets()).values())
            if now != end:
                end, moved = now, time.monotonic()
    finally:
        await reader.close()
    await anyio.sleep(random.uniform(0, 0.2))
    worker.kill(signal.SIGKILL)


async def wait_committed(
    config: ClientConfig, topic: str, count: int, worker: WorkerProcess, timeout: float = 300
) -> list[Any]:
    deadline = time.monotonic() + timeout
    while True:
        records = await read_to_end(config, topic, timeout=60)
        if len(records) >= count or time.monotonic() > deadline:
            return records
        assert worker.alive(), f"worker exited\n{worker.tail()}"
        await anyio.sleep(1)


def change(record: Any) -> tuple[int, str, int]:
    headers = dict(record.headers)
    return (
        int(headers["_commit_version"]),
        headers["_change_type"].decode(),
        int(json.loads(record.key)),
    )


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
async def test_changes_exactly_once_across_sigkills(
    fmt: str,
    bootstrap: str,
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    spark = session_of(spark_resources())
    warehouse = spark.conf.get("spark.sql.catalog.iceberg.warehouse")
    lake = Lake(fmt, spark, tmp_path)
    steps = writes(lake)
    topic = await topic_factory()
    props = {
        **worker_props(bootstrap, unique_name("g")),
        **QUICK_REJOIN,
        **SPARK,
        "spark.lakehouse": "delta,iceberg",
        "spark.lakehouse.iceberg.warehouse": warehouse,
    }
    worker = WorkerProcess(tmp_path, props, [lake.connector(topic)])
    rng = random.Random(f"lake-{topic}")
    try:
        for step in steps[:3]:
            await anyio.to_thread.run_sync(step)
        worker.start()
        await anyio.to_thread.run_sync(worker.wait_running, "lake", 1, 180)
        small = await wait_committed(client_config, topic, FIRST_THREE, worker)
        assert len(small) == FIRST_THREE
        worker.kill(signal.SIGKILL)  # between versions: 1-3 delivered, nothing more to read
        await anyio.to_thread.run_sync(steps[3])  # the big version
        for _ in range(KILLS_IN_BIG):
            worker.start()
            await anyio.to_thread.run_sync(worker.wait_running, "lake", 1, 180)
            await kill_after_progress(worker, client_config, topic, rng.randint(3_000, 15_000))
        worker.start()
        # committed before the last kill: the killed worker's open transaction holds
        # read_committed readers back until the new task's producer fences it
        await anyio.to_thread.run_sync(worker.wait_running, "lake", 1, 180)
        committed = len(await read_to_end(client_config, topic, timeout=60))
        assert committed < FIRST_THREE + BIG, "the big version was done before the last kill"
        for step in steps[4:]:  # written while the connector runs
            await anyio.to_thread.run_sync(step)
        versions = await anyio.to_thread.run_sync(lake.versions)
        expected = await anyio.to_thread.run_sync(expected_changes, lake, versions)
        records = await wait_committed(client_config, topic, len(expected), worker)
    finally:
        worker.stop()
    assert worker.starts == KILLS_IN_BIG + 2
    changes = [change(r) for r in records]
    assert len(changes) == len(set(changes)), "duplicates"
    assert sorted(changes) == sorted(expected), worker.tail()
    order = [versions.index(v) for v, _, _ in changes]
    assert order == sorted(order), "not in version order"
    # transactions: runs of consecutive offsets (a marker takes an offset between two)
    runs: list[list[Any]] = []
    for record in records:
        if runs and record.offset == runs[-1][-1].offset + 1:
            runs[-1].append(record)
        else:
            runs.append([record])
    by_version: dict[int, list[int]] = {}
    for run in runs:
        run_versions = {change(r)[0] for r in run}
        assert len(run_versions) == 1, "a transaction mixes versions"
        by_version.setdefault(run_versions.pop(), []).append(len(run))
    for version, sizes in by_version.items():
        assert max(sizes) <= MAX_ROWS
        if sum(sizes) <= MAX_ROWS:
            assert len(sizes) == 1, f"version {version}: {sizes} transactions"
    big_version = max(by_version, key=lambda v: sum(by_version[v]))
    assert sum(by_version[big_version]) == BIG
    assert len(by_version[big_version]) >= BIG // MAX_ROWS


def expected_changes(lake: Lake, versions: list[int]) -> list[tuple[int, str, int]]:
    """(version, change type, id) of every change but update preimages, read by Spark."""
    spark = lake.spark
    if lake.fmt == "delta":
        df = (
            spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", 0)
            .load(lake.table)
        )
        rows = df.select("_commit_version", "_change_type", "id").collect()
        return [(int(v), str(t), int(i)) for v, t, i in rows if t != "update_preimage"]
    catalog, name = lake.table.split(".", 1)
    view = f"expected_{uuid.uuid4().hex[:8]}"
    spark.sql(
        f"CALL {catalog}.system.create_changelog_view(table => '{name}', "
        f"changelog_view => '{view}', compute_updates => true, "
        "identifier_columns => array('id'))"
    )
    kinds = {"INSERT": "insert", "DELETE": "delete", "UPDATE_AFTER": "update_postimage"}
    rows = spark.table(view).select("_commit_snapshot_id", "_change_type", "id").collect()
    return [(int(v), kinds[t], int(i)) for v, t, i in rows if t in kinds]
