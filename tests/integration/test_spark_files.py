"""SparkSource files mode against real Spark (local[2]) and a real broker."""

from __future__ import annotations

import datetime
import decimal
import json
import logging
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup

from eos.api import SourceTaskContext
from eos.kafka import ClientConfig
from eos.runtime.task.producers import ProducerClient
from services.connectors.spark import generate_sample_dataset
from services.connectors.spark.files_mode import owner_of
from services.connectors.spark.task import SparkSourceTask
from tests.conftest import TopicFactory
from tests.integration.test_spark_harness import (
    LocalResources,
    MemoryOffsets,
    Progress,
    TaskRun,
    as_records,
    output,
    run_task,
    session_of,
    spark_resources,
    value_of,
)

pytestmark = pytest.mark.integration

UTC = datetime.UTC


@pytest.fixture(scope="module")
def spark() -> Any:
    return session_of(spark_resources())


def _config(path: Path | str, topic: str, **extra: str) -> dict[str, str]:
    return {
        "path": str(path), "topic": topic, "poll.interval.ms": "200", "lineage.headers": "true",
        **extra,
    }  # fmt: skip


TYPE_SCHEMA = (
    "id BIGINT, small SMALLINT, flag BOOLEAN, ratio DOUBLE, price DECIMAL(12,3), "
    "day DATE, ts TIMESTAMP, local_ts TIMESTAMP_NTZ, raw BINARY, note STRING, "
    "tags ARRAY<STRING>, point STRUCT<x: INT, y: DOUBLE>, attrs MAP<STRING, INT>, "
    "codes MAP<INT, DATE>, empty STRING"
)
TYPE_ROWS: list[tuple[Any, ...]] = [
    (
        1,
        7,
        True,
        0.5,
        decimal.Decimal("12.300"),
        datetime.date(2024, 2, 29),
        datetime.datetime(2024, 2, 29, 12, 30, 1, 123456, tzinfo=UTC),
        datetime.datetime(2024, 2, 29, 12, 30, 1),
        b"\x00\xffeos",
        "zoë",
        ["a", None],
        (1, 2.5),
        {"k": 1},
        {3: datetime.date(2000, 1, 1)},
        None,
    ),
    (
        2,
        None,
        False,
        float("nan"),
        decimal.Decimal("-0.001"),
        None,
        None,
        None,
        None,
        None,
        [],
        None,
        {},
        None,
        None,
    ),
]
TYPE_EXPECTED = [
    {
        "id": 1,
        "small": 7,
        "flag": True,
        "ratio": 0.5,
        "price": "12.300",
        "day": "2024-02-29",
        "ts": "2024-02-29T12:30:01.123456+00:00",
        "local_ts": "2024-02-29T12:30:01.000000",
        "raw": "AP9lb3M=",
        "note": "zoë",
        "tags": ["a", None],
        "point": {"x": 1, "y": 2.5},
        "attrs": {"k": 1},
        "codes": {"3": "2000-01-01"},
        "empty": None,
    },
    {
        "id": 2,
        "small": None,
        "flag": False,
        "ratio": "NaN",
        "price": "-0.001",
        "day": None,
        "ts": None,
        "local_ts": None,
        "raw": None,
        "note": None,
        "tags": [],
        "point": None,
        "attrs": {},
        "codes": None,
        "empty": None,
    },
]


@pytest.mark.parametrize(
    "converter",
    ["json", "eos.converters:JsonConverter"],
    ids=["spark-writes-json", "python-maps-rows"],
)
async def test_parquet_types_mapped_faithfully(
    converter: str,
    spark: Any,
    tmp_path: Path,
    client_config: ClientConfig,
    topic_factory: TopicFactory,
) -> None:
    """The same JSON whether Spark writes it (both converters ``json``) or Python maps
    the rows (any other converter, here the JSON converter named by class path)."""
    topic, offsets = await topic_factory(), await topic_factory(compacted=True)
    spark.createDataFrame(TYPE_ROWS, TYPE_SCHEMA).coalesce(1).write.parquet(str(tmp_path / "t"))
    config = _config(
        tmp_path / "t",
        topic,
        **{"key.columns": "id", "timestamp.column": "day", "value.converter": converter},
    )
    run = await run_task(config, client_config=client_config, offsets_topic=offsets, connector="p")
    got = await output(client_config, topic)
    assert [value for _, value, _ in got] == TYPE_EXPECTED
    assert [key for key, _, _ in got] == [1, 2]
    headers = got[0][2]
    assert headers["eos.spark.file"].decode().endswith(".parquet")
    assert headers["eos.spark.row"] == b"0"
    assert run.records == 2


CSV_TEXT = (
    "id,name,amount,at\n"
    '1,"Smith, Jo",10.50,2024-01-01T00:00:00Z\n'
    "2,,0.01,2024-06-30T23:59:59.5Z\n"
    "3,Ann,,\n"
)
JSON_TEXT = (
    '{"id": 1, "user": {"name": "a", "roles": ["x", "y"]}, "score": 1.5}\n'
    '{"id": 2, "user": null, "score": null}\n'
    '{"id": 3, "user": {"name": "c", "roles": []}, "score": -2}\n'
)


@pytest.mark.parametrize(
    ("fmt", "text", "extra", "expected"),
    [
        (
            "csv",
            CSV_TEXT,
            {
                "options.header": "true",
                "schema": "id INT, name STRING, amount DECIMAL(10,2), at TIMESTAMP",
            },
            [
                {
                    "id": 1,
                    "name": "Smith, Jo",
                    "amount": "10.50",
                    "at": "2024-01-01T00:00:00.000000+00:00",
                },
                {"id": 2, "name": None, "amount": "0.01", "at": "2024-06-30T23:59:59.500000+00:00"},
                {"id": 3, "name": "Ann", "amount": None, "at": None},
            ],
        ),
        (
            "json",
            JSON_TEXT,
            {"schema": "id INT, user STRUCT<name: STRING, roles: ARRAY<STRING>>, score DOUBLE"},
            [
                {"id": 1, "user": {"name": "a", "roles": ["x", "y"]}, "score": 1.5},
                {"id": 2, "user": None, "score": None},
                {"id": 3, "user": {"name": "c", "roles": []}, "score": -2.0},
            ],
        ),
    ],
    ids=["csv", "json"],
)
async def test_text_formats_mapped(
    fmt: str,
    text: str,
    extra: dict[str, str],
    expected: list[dict[str, Any]],
    tmp_path: Path,
    client_config: ClientConfig,
    topic_factory: TopicFactory,
) -> None:
    topic, offsets = await topic_factory(), await topic_factory(compacted=True)
    (tmp_path / f"data.{fmt}").write_text(text)
    config = _config(tmp_path, topic, format=fmt, **{"key.columns": "id,name"} | extra)
    if fmt == "json":
        config["key.columns"] = "id"
    await run_task(config, client_config=client_config, offsets_topic=offsets, connector=fmt)
    got = await output(client_config, topic)
    assert [value for _, value, _ in got] == expected
    if fmt == "csv":
        assert got[0][0] == {"id": 1, "name": "Smith, Jo"}


def _ids(got: list[tuple[Any, Any, dict[str, bytes]]]) -> Counter[int]:
    return Counter(value["id"] for _, value, _ in got)


@pytest.mark.parametrize(
    "block_size",
    [256 * 1024, 64 * 1024 * 1024],
    ids=["small-row-groups-scan-order", "one-row-group-sorted-pieces"],
)
async def test_resume_after_crashes_mid_file_exactly_once(
    block_size: int,
    producer_client: ProducerClient,
    spark: Any,
    tmp_path: Path,
    client_config: ClientConfig,
    topic_factory: TopicFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A 60 000-row file with max.buffered.rows 8 000: row groups of a few thousand rows
    are streamed in scan order, one row group of 60 000 is read in sorted pieces of
    8 000. The task dies in the middle of a transaction four times (twice with the
    librdkafka producer, to keep the suite short) and resumes from the committed row
    each time."""
    topic, offsets = await topic_factory(), await topic_factory(compacted=True)
    spark.range(60_000).selectExpr("id", "uuid() AS u").coalesce(1).write.option(
        "parquet.block.size", block_size
    ).parquet(str(tmp_path / "big"))
    config = _config(tmp_path / "big", topic, **{"max.buffered.rows": "8000", "batch.rows": "3000"})
    common: dict[str, Any] = {
        "client_config": client_config,
        "offsets_topic": offsets,
        "connector": "big",
        "producer_client": producer_client,
    }
    caplog.set_level(logging.INFO, "services.connectors.spark.files_mode")
    for crash_after in (1, 0, 3, 2) if producer_client == "aiokafka" else (1, 2):
        run = await run_task(config, crash_after=crash_after, **common)
        assert run.batches == crash_after
    await run_task(config, **common)
    plan = "in scan order" if block_size < 1 << 20 else "in sorted pieces of 8000 rows"
    assert plan in caplog.text
    ids = _ids(await output(client_config, topic))
    assert sorted(ids) == list(range(60_000))
    assert max(ids.values()) == 1


async def test_files_spread_over_tasks_and_new_files_picked_up(
    tmp_path: Path, client_config: ClientConfig, topic_factory: TopicFactory
) -> None:
    topic, offsets = await topic_factory(partitions=2), await topic_factory(compacted=True)
    data = tmp_path / "landing"
    generate_sample_dataset(data, 4_000, files=4)
    uri = f"{data.as_uri()}/*.parquet"  # a Hadoop URI with a glob, as for s3a:// or hdfs://
    configs = [_config(uri, topic, **{"task.index": str(i), "task.count": "2"}) for i in range(2)]
    common: dict[str, Any] = {"client_config": client_config, "offsets_topic": offsets}
    progress = Progress()
    runs = [TaskRun(progress=progress), TaskRun(progress=progress)]
    stop = anyio.Event()

    async def task(i: int) -> None:
        await run_task(configs[i], connector="spread", task_id=i, stop=stop, run=runs[i], **common)

    async def drop_files_then_stop() -> None:
        await progress.wait_until(lambda: sum(r.records for r in runs) >= 4_000)
        await anyio.to_thread.run_sync(
            lambda: generate_sample_dataset(data, 3_000, files=3, first_id=4_000)
        )
        await progress.wait_until(lambda: sum(r.records for r in runs) >= 7_000)
        stop.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(task, 0)
        tg.start_soon(task, 1)
        tg.start_soon(drop_files_then_stop)
    assert not runs[0].partitions & runs[1].partitions
    got = await output(client_config, topic)
    ids = _ids(got)
    assert sorted(ids) == list(range(7_000))
    assert max(ids.values()) == 1
    files = sorted(str(p) for p in data.glob("*.parquet"))
    assert len(files) == 7
    by_file: dict[str, set[int]] = {}
    for _, _, headers in got:
        path = headers["eos.spark.file"].decode()
        by_file.setdefault(path, set()).add(owner_of(path, 2))
    assert len(by_file) == 7
    assert all(len(owners) == 1 for owners in by_file.values())


async def test_changed_file_reported_not_reread(tmp_path: Path) -> None:
    resources = spark_resources()
    data = tmp_path / "d"
    (data).mkdir()
    (data / "a.json").write_text('{"id": 1}\n{"id": 2}\n')
    offsets = MemoryOffsets()
    config = _config(data, "t", format="json", **{"poll.interval.ms": "1"})
    events: list[Counter[str]] = [Counter(), Counter()]  # what each task run counted

    def context(run: int, background: TaskGroup) -> SourceTaskContext:
        def count(event: str, amount: int) -> None:
            events[run][event] += amount

        return SourceTaskContext("c", 0, offsets, resources, None, background, count)

    async def drain() -> list[Any]:
        async with anyio.create_task_group() as background:
            try:
                out = await read(background)
            finally:
                background.cancel_scope.cancel()
        return out

    async def read(background: TaskGroup) -> list[Any]:
        task = SparkSourceTask()
        await task.start(config, context(0, background))
        out: list[Any] = []
        try:
            with anyio.fail_after(60):
                while True:
                    records = as_records(await task.poll())
                    offsets.commit(records)
                    out.extend(value_of(r) for r in records)
                    if not records and task.idle:
                        break
            # the file changes after it was read; the running task reports it once
            (data / "a.json").write_text('{"id": 1}\n{"id": 2}\n{"id": 3}\n')
            os.utime(data / "a.json", (time.time() + 5, time.time() + 5))
            for _ in range(3):
                out.extend(value_of(r) for r in as_records(await task.poll()))
            assert events[0] == {"changed_files": 1}
        finally:
            await task.stop()
        return out

    assert await drain() == [{"id": 1}, {"id": 2}]
    # a restarted task sees the committed size/mtime differ: reported, not re-read
    async with anyio.create_task_group() as background:
        task = SparkSourceTask()
        await task.start(config, context(1, background))
        try:
            assert await task.poll() is None
            assert events[1] == {"changed_files": 1}
        finally:
            await task.stop()
            background.cancel_scope.cancel()


async def test_python_holds_bounded_rows_and_loop_stays_responsive(
    spark: Any, tmp_path: Path
) -> None:
    """Reading 150 000 rows: polls return at most batch.rows, Arrow batches at most a quarter
    of max.buffered.rows, and the event loop never stalls while Spark works in threads.

    A stall is the loop's own thread kept busy (its CPU time across a 10 ms sleep): the
    wall-clock lag also counts waiting for a core on a shared machine (0.65 s was seen with
    two test workers and their JVMs on two cores), which says nothing about eos."""
    from services.connectors.spark import arrow_stream

    spark.range(150_000).selectExpr("id", "repeat('x', 100) AS pad").coalesce(1).write.parquet(
        str(tmp_path / "p")
    )
    seen: list[int] = []
    original = arrow_stream._ArrowRowStream._next_batch

    def spy(self: Any, limit: int) -> Any:
        """Rows of the Arrow batch Python holds: the chunk handed over plus the rest."""
        batch = original(self, limit)
        pending = 0 if self._pending is None else self._pending.num_rows
        seen.append(pending + (0 if batch is None else batch.num_rows))
        return batch

    resources = LocalResources(spark_resources().settings, threads=2)
    resources._objects = spark_resources()._objects  # the same worker session
    config = _config(tmp_path / "p", "t", **{"max.buffered.rows": "40000", "batch.rows": "20000"})
    task = SparkSourceTask()
    lags: list[float] = []
    busy: list[float] = []
    total = 0

    async def probe() -> None:
        while True:
            before, cpu = time.perf_counter(), time.thread_time()
            await anyio.sleep(0.01)
            lags.append(time.perf_counter() - before - 0.01)
            busy.append(time.thread_time() - cpu)

    arrow_stream._ArrowRowStream._next_batch = spy  # type: ignore[method-assign]
    try:
        async with anyio.create_task_group() as tg:
            context = SourceTaskContext("c", 0, MemoryOffsets(), resources, None, tg)
            await task.start(config, context)
            tg.start_soon(probe)
            while total < 150_000:
                records = as_records(await task.poll())
                assert len(records) <= 10_000
                total += len(records)
            tg.cancel_scope.cancel()
    finally:
        arrow_stream._ArrowRowStream._next_batch = original  # type: ignore[method-assign]
        await task.stop()
    assert total == 150_000
    assert max(seen) <= 10_000
    assert resources.blocking_calls >= 15
    assert max(busy) < 0.5, (
        f"event loop busy {max(busy):.3f}s in one sleep (wall-clock lag {max(lags):.3f}s)"
    )
    json.dumps(lags)  # plain floats
