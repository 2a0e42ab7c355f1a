"""SparkSource changes modes against real Spark (local[2], Delta Lake and Iceberg jars),
real tables written by the tests and a real broker."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from eos.api import SourceTaskContext
from eos.kafka import ClientConfig
from services.connectors.spark import SparkSource
from services.connectors.spark.changes_mode import ChangesUnavailable
from services.connectors.spark.lakehouse import LakehouseUnavailable
from services.connectors.spark.task import SparkSourceTask
from tests.conftest import TopicFactory
from tests.integration.test_spark_harness import (
    MemoryOffsets,
    TaskRun,
    as_records,
    output,
    run_task,
    session_of,
    spark_resources,
    value_of,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def spark() -> Any:
    return session_of(spark_resources())


def delta_table(spark: Any, path: Path, *, cdf: bool = True) -> str:
    on = "true" if cdf else "false"
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, name STRING, amount BIGINT) USING delta "
        f"TBLPROPERTIES (delta.enableChangeDataFeed = {on})"
    )
    return str(path)


def insert(spark: Any, table: str, first: int, count: int) -> None:
    df = spark.range(first, first + count).selectExpr(
        "id", "concat('n-', id) AS name", "id * 10 AS amount"
    )
    df.write.format("delta").mode("append").save(table)


def write_delta_versions(spark: Any, table: str, big: int) -> None:
    """Versions 1-10: inserts, updates and deletes, version 4 with ``big`` rows."""
    insert(spark, table, 0, 50)  # 1
    spark.sql(f"UPDATE delta.`{table}` SET amount = amount + 1 WHERE id < 10")  # 2
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id >= 45")  # 3
    insert(spark, table, 1000, big)  # 4: the big one
    spark.sql(f"UPDATE delta.`{table}` SET name = 'renamed' WHERE id % 7 = 0")  # 5
    insert(spark, table, 50, 10)  # 6
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id % 5 = 0 AND id < 1000")  # 7
    spark.sql(f"UPDATE delta.`{table}` SET amount = -1 WHERE id = 1")  # 8
    insert(spark, table, 60, 3)  # 9
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id = 61")  # 10


def expected_changes(spark: Any, table: str) -> list[tuple[int, str, int]]:
    """(commit version, change type, id) of every change but update preimages, from
    Spark's own change feed read."""
    rows = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .load(table)
        .filter("_change_type != 'update_preimage'")
        .select("_commit_version", "_change_type", "id")
        .collect()
    )
    return sorted((int(r[0]), str(r[1]), int(r[2])) for r in rows)


def changes_of(got: list[tuple[Any, Any, dict[str, bytes]]]) -> list[tuple[int, str, int]]:
    return [(int(h["_commit_version"]), h["_change_type"].decode(), int(k)) for k, _, h in got]


def delta_config(table: str, topic: str, **extra: str) -> dict[str, str]:
    return {
        "mode": "delta-changes",
        "path": table,
        "topic": topic,
        "key.columns": "id",
        "poll.interval.ms": "200",
        **extra,
    }


async def test_delta_changes_exactly_once_across_crashes_in_version_order(
    spark: Any, client_config: ClientConfig, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic, offsets = await topic_factory(), await topic_factory(compacted=True)
    table = delta_table(spark, tmp_path / "orders")
    write_delta_versions(spark, table, big=20_000)
    config = delta_config(table, topic, **{"batch.rows": "3000", "max.buffered.rows": "8000"})
    common: dict[str, Any] = {
        "client_config": client_config,
        "offsets_topic": offsets,
        "connector": "delta",
    }
    for crash_after in (2, 5, 9):  # inside the big version, and around it
        await run_task(config, crash_after=crash_after, **common)
    await run_task(config, **common)
    got = await output(client_config, topic)
    changes = changes_of(got)
    assert sorted(changes) == expected_changes(spark, table)
    assert len(set(changes)) == len(changes)
    versions = [v for v, _, _ in changes]
    assert versions == sorted(versions)  # version order, so per key too
    header = got[0][2]
    assert set(header) == {"_change_type", "_commit_version", "_commit_timestamp"}
    assert header["_commit_timestamp"].decode()[:4] == time.strftime("%Y", time.gmtime())
    updated = [v for k, v, h in got if h["_change_type"] == b"update_postimage" and k == 1]
    assert [u["amount"] for u in updated] == [11, -1]


async def read_all(config: dict[str, str], offsets: MemoryOffsets | None = None) -> list[Any]:
    """Every record a fresh task reads until it is caught up (polls committed in memory)."""
    offsets = offsets or MemoryOffsets()
    task = SparkSourceTask()
    await task.start(config, SourceTaskContext("c", 0, offsets, spark_resources()))
    records: list[Any] = []
    try:
        while True:
            batch = as_records(await task.poll())
            offsets.commit(batch)
            records += batch
            if not batch and task.idle:
                return records
    finally:
        await task.stop()


async def test_delta_record_shape_settings_and_schema_evolution(spark: Any, tmp_path: Path) -> None:
    table = delta_table(spark, tmp_path / "evolving")
    insert(spark, table, 0, 3)  # 1
    spark.sql(f"UPDATE delta.`{table}` SET amount = 0 WHERE id = 0")  # 2
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id = 1")  # 3
    insert(spark, table, 3, 1)  # 4
    spark.sql(f"ALTER TABLE delta.`{table}` ADD COLUMNS (country STRING)")  # 5
    spark.sql(f"INSERT INTO delta.`{table}` VALUES (9, 'n-9', 90, 'DE')")  # 6
    records = await read_all(
        delta_config(
            table,
            "t",
            **{"change.metadata": "fields", "update.preimages": "true", "deletes": "tombstone"},
        )
    )
    values = [value_of(r) for r in records]
    assert [json.loads(r.key) for r in records] == [0, 1, 2, 0, 0, 1, 3, 9]
    kinds = [None if v is None else v["_change_type"] for v in values]
    assert kinds == [
        "insert", "insert", "insert", "update_preimage", "update_postimage", None,
        "insert", "insert",
    ]  # fmt: skip
    assert values[5] is None  # the delete: a tombstone for key 1
    assert set(values[0]) == {"id", "name", "amount", *_METADATA}
    assert values[7] == {
        "id": 9, "name": "n-9", "amount": 90, "country": "DE",
        "_change_type": "insert", "_commit_version": 6,
        "_commit_timestamp": values[7]["_commit_timestamp"],
    }  # fmt: skip
    assert all(r.headers == () for r in records)


_METADATA = ("_change_type", "_commit_version", "_commit_timestamp")


async def test_new_versions_are_picked_up_within_the_poll_interval(
    spark: Any, client_config: ClientConfig, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic, offsets = await topic_factory(), await topic_factory(compacted=True)
    table = delta_table(spark, tmp_path / "live")
    insert(spark, table, 0, 5)
    config = delta_config(table, topic, **{"poll.interval.ms": "1000"})
    run, stop = TaskRun(), anyio.Event()
    delays: list[float] = []

    async def write_while_running() -> None:
        await run.progress.wait_until(lambda: run.records >= 5)
        for first in (100, 200):
            await anyio.to_thread.run_sync(insert, spark, table, first, 3)
            written = time.monotonic()
            wanted = run.records + 3
            await run.progress.wait_until(lambda: run.records >= wanted)  # noqa: B023
            delays.append(time.monotonic() - written)
        stop.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(write_while_running)
        await run_task(
            config, client_config=client_config, offsets_topic=offsets, connector="live",
            stop=stop, run=run,
        )  # fmt: skip
    ids = sorted(int(k) for k, _, _ in await output(client_config, topic))
    assert ids == [0, 1, 2, 3, 4, 100, 101, 102, 200, 201, 202]
    assert max(delays) < 1.0 + 3.0  # the poll interval, plus reading one small version


async def test_starting_version_latest_and_number(spark: Any, tmp_path: Path) -> None:
    table = delta_table(spark, tmp_path / "start")
    insert(spark, table, 0, 2)  # 1
    insert(spark, table, 2, 2)  # 2
    from_two = await read_all(delta_config(table, "t", **{"starting.version": "2"}))
    assert [json.loads(r.key) for r in from_two] == [2, 3]
    config = delta_config(table, "t", **{"starting.version": "latest", "poll.interval.ms": "1"})
    task = SparkSourceTask()
    await task.start(config, SourceTaskContext("c", 0, MemoryOffsets(), spark_resources()))
    try:
        assert as_records(await task.poll()) == []  # only what comes after the start
        insert(spark, table, 4, 1)  # 3
        later: list[Any] = []
        while not later:
            later = as_records(await task.poll())
    finally:
        await task.stop()
    assert [json.loads(r.key) for r in later] == [4]


async def _start_failure(config: dict[str, str], offsets: MemoryOffsets | None = None) -> str:
    task = SparkSourceTask()
    context = SourceTaskContext("lake", 0, offsets or MemoryOffsets(), spark_resources())
    try:
        with pytest.raises(ChangesUnavailable) as failure:
            await task.start(config, context)
            await task.poll()
    finally:
        await task.stop()
    return str(failure.value)


async def test_change_feed_off_says_how_to_turn_it_on(spark: Any, tmp_path: Path) -> None:
    table = delta_table(spark, tmp_path / "plain", cdf=False)
    insert(spark, table, 0, 2)
    message = await _start_failure(delta_config(table, "t"))
    assert "does not have the change data feed enabled" in message
    assert "delta.enableChangeDataFeed = true" in message


def _fix_steps(message: str) -> None:
    assert "PUT /connectors/lake/stop" in message
    assert "DELETE /connectors/lake/offsets" in message
    assert "PATCH /connectors/lake/offsets" in message
    assert "PUT /connectors/lake/resume" in message


async def test_vacuumed_versions_fail_with_the_way_out(spark: Any, tmp_path: Path) -> None:
    table = delta_table(spark, tmp_path / "vacuumed")
    insert(spark, table, 0, 4)  # 1
    spark.sql(f"UPDATE delta.`{table}` SET amount = 0 WHERE id = 0")  # 2: change files
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id = 1")  # 3
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"VACUUM delta.`{table}` RETAIN 0 HOURS")
    finally:
        spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "true")
    offsets = MemoryOffsets({json.dumps({"delta": table}): {"version": 1, "row": 4, "done": True}})
    message = await _start_failure(delta_config(table, "t"), offsets)
    assert "version 2" in message
    assert "VACUUM" in message
    _fix_steps(message)


# ---------------------------------------------------------------- Iceberg


def iceberg_table(spark: Any) -> str:
    name = f"iceberg.db.t_{uuid.uuid4().hex[:8]}"
    spark.sql(
        f"CREATE TABLE {name} (id BIGINT, name STRING, amount BIGINT) USING iceberg "
        "TBLPROPERTIES ('write.delete.mode'='copy-on-write', "
        "'write.update.mode'='copy-on-write', 'write.merge.mode'='copy-on-write')"
    )
    return name


def ice_insert(spark: Any, table: str, first: int, count: int) -> None:
    df = spark.range(first, first + count).selectExpr(
        "id", "concat('n-', id) AS name", "id * 10 AS amount"
    )
    df.writeTo(table).append()


def iceberg_config(table: str, topic: str, **extra: str) -> dict[str, str]:
    return {
        "mode": "iceberg-changes",
        "table": table,
        "topic": topic,
        "key.columns": "id",
        "poll.interval.ms": "200",
        **extra,
    }


def snapshots(spark: Any, table: str) -> list[int]:
    rows = spark.sql(f"SELECT snapshot_id FROM {table}.history ORDER BY made_current_at")
    return [int(r[0]) for r in rows.collect()]


@pytest.fixture
def iceberg_versions(spark: Any) -> Iterator[tuple[str, list[int]]]:
    table = iceberg_table(spark)
    ice_insert(spark, table, 0, 20)  # s1
    ice_insert(spark, table, 100, 6_000)  # s2: big
    spark.sql(f"UPDATE {table} SET amount = -1 WHERE id < 3")  # s3
    spark.sql(f"DELETE FROM {table} WHERE id >= 15 AND id < 20")  # s4
    ice_insert(spark, table, 20, 5)  # s5
    yield table, snapshots(spark, table)
    spark.sql(f"DROP TABLE {table}")


@pytest.mark.parametrize("changelog", [False, True])
async def test_iceberg_changes_exactly_once_across_crashes(
    changelog: bool,
    spark: Any,
    iceberg_versions: tuple[str, list[int]],
    client_config: ClientConfig,
    topic_factory: TopicFactory,
) -> None:
    table, ids = iceberg_versions
    topic, offsets = await topic_factory(), await topic_factory(compacted=True)
    config = iceberg_config(
        table,
        topic,
        **{"changelog": str(changelog).lower(), "batch.rows": "1000", "max.buffered.rows": "4000"},
    )
    common: dict[str, Any] = {
        "client_config": client_config,
        "offsets_topic": offsets,
        "connector": "ice",
    }
    for crash_after in (1, 3):
        await run_task(config, crash_after=crash_after, **common)
    await run_task(config, **common)
    got = await output(client_config, topic)
    changes = [(int(h["_commit_version"]), h["_change_type"].decode(), int(k)) for k, _, h in got]
    assert len(set(changes)) == len(changes)
    order = [ids.index(v) for v, _, _ in changes]
    assert order == sorted(order)
    expected = [(ids[0], "insert", i) for i in range(20)]
    expected += [(ids[1], "insert", i) for i in range(100, 6_100)]
    if changelog:
        expected += [(ids[2], "update_postimage", i) for i in range(3)]
        expected += [(ids[3], "delete", i) for i in range(15, 20)]
    expected += [(ids[4], "insert", i) for i in range(20, 25)]
    assert sorted(changes) == sorted(expected)


async def test_expired_snapshot_fails_with_the_way_out(
    spark: Any, iceberg_versions: tuple[str, list[int]]
) -> None:
    table, ids = iceberg_versions
    spark.sql(
        f"CALL iceberg.system.expire_snapshots(table => '{table.split('.', 1)[1]}', "
        "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)"
    )
    offsets = MemoryOffsets(
        {json.dumps({"iceberg": table}): {"version": ids[1], "row": 6000, "done": True}}
    )
    message = await _start_failure(iceberg_config(table, "t"), offsets)
    assert f"snapshot {ids[1]}" in message
    assert "expired" in message
    _fix_steps(message)


# ---------------------------------------------------------------- without the extras


def test_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def no_delta(name: str, *args: Any) -> Any:
        return None if name == "delta" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", no_delta)
    errors = SparkSource().validate(delta_config("/tables/x", "t"))
    assert any("pip install 'eos[delta]'" in e for e in errors["mode"])
    from services.connectors.spark.lakehouse import require

    with pytest.raises(LakehouseUnavailable, match=r"pip install 'eos\[delta\]'"):
        require("delta", {"spark.lakehouse": "delta"})
    with pytest.raises(LakehouseUnavailable, match=r"spark\.lakehouse=iceberg"):
        require("iceberg", {"spark.lakehouse": "delta"})
