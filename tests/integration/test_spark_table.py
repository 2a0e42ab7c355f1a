"""SparkSource table mode against real Spark (local[2]) and a real broker."""

from __future__ import annotations

import functools
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from eos.api import SourceTaskContext
from eos.kafka import ClientConfig
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

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def spark() -> Any:
    return session_of(spark_resources())


def _table(spark: Any, rows: list[tuple[int, str]], name: str = "", mode: str = "error") -> str:
    name = name or f"orders_{uuid.uuid4().hex[:8]}"
    spark.createDataFrame(rows, "id BIGINT, item STRING").write.mode(mode).saveAsTable(name)
    return name


def _at_least(run: TaskRun, records: int) -> bool:
    return run.records >= records


async def test_rows_appended_between_polls_exactly_once_in_order(
    spark: Any, client_config: ClientConfig, topic_factory: TopicFactory
) -> None:
    topic, offsets = await topic_factory(), await topic_factory(compacted=True)
    table = _table(spark, [(i, f"item-{i}") for i in (3, 1, 2)])
    config = {
        "mode": "table",
        "table": table,
        "incrementing.column": "id",
        "incrementing.column.unique": "true",
        "topic": topic,
        "key.columns": "id",
        "batch.rows": "4",
        "poll.interval.ms": "100",
        "lineage.headers": "true",
    }
    common: dict[str, Any] = {
        "client_config": client_config,
        "offsets_topic": offsets,
        "connector": "tbl",
    }
    run, stop = TaskRun(), anyio.Event()

    async def append() -> None:
        for first, wanted in ((4, 3), (10, 8)):
            await run.progress.wait_until(functools.partial(_at_least, run, wanted))
            rows = [(i, f"item-{i}") for i in range(first, first + 5)]
            await anyio.to_thread.run_sync(_table, spark, rows, table, "append")
        await run.progress.wait_until(lambda: run.records >= 13)
        stop.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(append)
        await run_task(config, stop=stop, run=run, **common)
    # a restarted task resumes after the last committed value: nothing new, nothing twice
    await anyio.to_thread.run_sync(lambda: _table(spark, [(20, "item-20")], table, "append"))
    await run_task(config, **common)
    got = await output(client_config, topic)
    ids = [value["id"] for _, value, _ in got]
    assert ids == [1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 20]
    assert got[0][2]["eos.spark.table"] == table.encode()


async def test_ties_never_split_without_unique(spark: Any) -> None:
    rows = [(v, f"r{n}") for n, v in enumerate([1, 1, 1, 2, 2, 3])]
    table = _table(spark, rows)
    config = {
        "mode": "table",
        "table": table,
        "incrementing.column": "id",
        "topic": "t",
        "batch.rows": "2",
        "poll.interval.ms": "1",
    }
    offsets = MemoryOffsets()
    task = SparkSourceTask()
    await task.start(config, SourceTaskContext("c", 0, offsets, spark_resources()))
    batches: list[list[int]] = []
    try:
        for _ in range(4):
            records = as_records(await task.poll())
            offsets.commit(records)
            batches.append([value_of(r)["id"] for r in records])
    finally:
        await task.stop()
    assert batches == [[1, 1, 1], [2, 2], [3], []]
    assert await offsets.offset({"table": table}) == {"value": 3}


async def test_query_and_path_sources(spark: Any, tmp_path: Path) -> None:
    table = _table(spark, [(i, f"item-{i}") for i in range(6)])
    path = tmp_path / "p"
    spark.createDataFrame(
        [(d, "x") for d in ("2024-01-02", "2024-01-01")], "day STRING, v STRING"
    ).selectExpr("CAST(day AS DATE) AS day", "v").write.parquet(str(path))
    cases = [
        (
            {"query": f"SELECT id, id * 2 AS twice FROM {table} WHERE id % 2 = 0"},
            "id",
            [{"id": 0, "twice": 0}, {"id": 2, "twice": 4}, {"id": 4, "twice": 8}],
        ),
        (
            {"path": str(path), "format": "parquet", "timestamp.column": "day"},
            "day",
            [{"day": "2024-01-01", "v": "x"}, {"day": "2024-01-02", "v": "x"}],
        ),
    ]
    for source, column, expected in cases:
        offsets = MemoryOffsets()
        config = {
            "mode": "table",
            "incrementing.column": column,
            "incrementing.column.unique": "true",
            "topic": "t",
            "batch.rows": "2",
            "poll.interval.ms": "1",
            **source,
        }
        got: list[Any] = []
        stamps: list[int | None] = []
        for _ in range(2):  # a new task per batch: resumes from the committed value
            task = SparkSourceTask()
            await task.start(config, SourceTaskContext("c", 0, offsets, spark_resources()))
            try:
                records = as_records(await task.poll())
            finally:
                await task.stop()
            offsets.commit(records)
            got.extend(value_of(r) for r in records)
            stamps.extend(r.timestamp for r in records)
        assert got == expected
    assert stamps == [1704067200000, 1704153600000]  # the days at 00:00 UTC


async def test_missing_incrementing_column_names_the_setting(spark: Any) -> None:
    table = _table(spark, [(1, "a")])
    config = {"mode": "table", "table": table, "incrementing.column": "nope", "topic": "t"}
    task = SparkSourceTask()
    await task.start(config, SourceTaskContext("c", 0, MemoryOffsets(), spark_resources()))
    try:
        with pytest.raises(ValueError, match=r"'incrementing\.column' names column 'nope'"):
            await task.poll()
    finally:
        await task.stop()
