"""SparkSource ``mode=jdbc`` against a real PostgreSQL (tests/postgres_server.py), real
Spark (local[2], the test process's session) and, where offsets matter, a real broker."""

from __future__ import annotations

import functools
import itertools
import json
import os
import subprocess
import sys
from collections import Counter
from typing import Any

import anyio
import pytest

from eos.kafka import ClientConfig
from services.connectors.spark.jdbc_database import JdbcError
from services.connectors.spark.session import SparkUnavailable, create_session
from tests.conftest import REPO, TopicFactory
from tests.integration.jdbc_helpers import (
    failure_of,
    jdbc_config,
    read_all,
    running_task,
)
from tests.integration.test_spark_harness import (
    TaskRun,
    as_records,
    output,
    run_task,
    value_of,
)
from tests.postgres_server import PASSWORD, PostgresServer, postgres

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
__all__ = ["postgres"]

TYPES = """
CREATE TABLE types (
    id bigint PRIMARY KEY, i integer, s smallint, n numeric(12, 3), free numeric,
    r real, d double precision, b boolean, t text, v varchar(10), raw bytea, day date,
    ts timestamp(6), tstz timestamptz, u uuid, j json, jb jsonb, ints integer[],
    texts text[], clock time
)"""
ROW = """
INSERT INTO types VALUES (1, -2, 3, 12.300, 123456789012345678901234567890.123456789012345,
    1.25, -2.5e300, true, 'héllo "q"', 'v', '\\x00ff', '2024-02-29',
    '2024-02-29 12:00:00.123456', '2024-02-29 12:00:00.123456+02',
    'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2.50]}', '{"b": null}',
    '{1,NULL,3}', '{"x","y z"}', '12:34:56.5'), (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"""


async def test_every_mapped_type_round_trips(postgres: PostgresServer) -> None:
    db = postgres.database("types")
    with postgres.connect(db) as conn:
        conn.execute(TYPES)
        conn.execute(ROW)
    config = jdbc_config(postgres, db, jdbc_mode="incrementing", table_whitelist="types")
    async with running_task(config) as (task, offsets, background):
        records = await read_all(task, offsets, background)
    assert [json.loads(r.key or b"null") for r in records] == [1, 2]
    assert {r.topic for r in records} == {"t-types"}
    assert records[0].headers == (("eos.spark.table", b"public.types"),)
    assert value_of(records[0]) == {
        "id": 1,
        "i": -2,
        "s": 3,
        "n": "12.300",
        "free": "123456789012345678901234567890.123456789012345",
        "r": 1.25,
        "d": -2.5e300,
        "b": True,
        "t": 'héllo "q"',
        "v": "v",
        "raw": "AP8=",
        "day": "2024-02-29",
        "ts": "2024-02-29T12:00:00.123456",
        "tstz": "2024-02-29T10:00:00.123456+00:00",
        "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        "j": '{"a": [1, 2.50]}',
        "jb": '{"b": null}',
        "ints": [1, None, 3],
        "texts": ["x", "y z"],
        "clock": "12:34:56.5",
    }
    assert value_of(records[1]) == {"id": 2, **{k: None for k in value_of(records[0]) if k != "id"}}
    assert offsets.data == {json.dumps({"table": "public.types"}): {"incrementing": 2}}


def _at_least(run: TaskRun, records: int) -> bool:
    return run.records >= records


async def test_incrementing_and_bulk_exactly_once_through_kafka(
    postgres: PostgresServer, client_config: ClientConfig, topic_factory: TopicFactory
) -> None:
    """incrementing: rows inserted while the task runs arrive once each, in id order;
    bulk: a snapshot interrupted by a crash (an open transaction) goes on after the last
    committed key, and the next snapshot reads the table again."""
    db = postgres.database("modes")
    with postgres.connect(db) as conn:
        conn.execute("CREATE TABLE events (id bigserial PRIMARY KEY, what text)")
        conn.execute("CREATE TABLE dims (code text PRIMARY KEY, label text)")
        conn.execute("INSERT INTO events (what) SELECT 'e' || g FROM generate_series(1, 40) g")
        conn.execute("INSERT INTO dims SELECT 'k' || g, 'l' || g FROM generate_series(1, 25) g")
    events, dims = await topic_factory(), await topic_factory()
    offsets = await topic_factory(compacted=True)
    common: dict[str, Any] = {"client_config": client_config, "offsets_topic": offsets}
    incrementing = jdbc_config(
        postgres, db, jdbc_mode="incrementing", table_whitelist="events", topic=events,
        batch_rows="15",
    )  # fmt: skip
    run, stop = TaskRun(), anyio.Event()

    async def insert_more() -> None:
        await run.progress.wait_until(functools.partial(_at_least, run, 15))
        with postgres.connect(db) as conn:
            conn.execute("INSERT INTO events (what) SELECT 'f' || g FROM generate_series(1, 30) g")
        await run.progress.wait_until(functools.partial(_at_least, run, 70))
        stop.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(insert_more)
        await run_task(incrementing, stop=stop, run=run, connector="inc", **common)
    got = await output(client_config, events)
    assert [key for key, _, _ in got] == list(range(1, 71))

    bulk = jdbc_config(
        postgres, db, jdbc_mode="bulk", table_whitelist="dims", topic=dims, batch_rows="10",
        poll_interval_ms="5000",  # idle between snapshots: run_task returns
    )  # fmt: skip
    await run_task(bulk, crash_after=1, connector="bulk", **common)  # 10 committed, 10 open
    await run_task(bulk, connector="bulk", **common)  # the other 15, then idle
    first = [key for key, _, _ in await output(client_config, dims)]
    assert first == sorted(f"k{n}" for n in range(1, 26))  # Spark's order: k1, k10, k11, ...
    await run_task(bulk, connector="bulk", **common)  # a new snapshot: all 25 again
    keys = Counter(key for key, _, _ in await output(client_config, dims))
    assert keys == Counter({f"k{n}": 2 for n in range(1, 26)})


async def test_a_query_in_the_databases_sql(postgres: PostgresServer) -> None:
    db = postgres.database("query")
    with postgres.connect(db) as conn:
        conn.execute("CREATE TABLE sales (id serial PRIMARY KEY, region text, amount int)")
        conn.execute("INSERT INTO sales (region, amount) VALUES ('n', 5), ('s', 7), ('n', 9)")
    query = "SELECT id, upper(region) AS region, amount * 2 AS doubled FROM sales WHERE amount > 6"
    config = jdbc_config(
        postgres, db, jdbc_mode="incrementing", query=query, incrementing_column_name="id",
        key_columns="id",
    )  # fmt: skip
    async with running_task(config) as (task, offsets, background):
        records = await read_all(task, offsets, background)
    assert [value_of(r) for r in records] == [
        {"id": 2, "region": "S", "doubled": 14},
        {"id": 3, "region": "N", "doubled": 18},
    ]
    assert {r.topic for r in records} == {"t-"}
    assert offsets.data == {json.dumps({"query": query}): {"incrementing": 3}}


async def test_twenty_tables_over_three_tasks_and_a_table_added_while_running(
    postgres: PostgresServer, client_config: ClientConfig, topic_factory: TopicFactory
) -> None:
    db = postgres.database("many")
    with postgres.connect(db) as conn:
        for n in range(20):
            conn.execute(f"CREATE TABLE tab{n} (id serial PRIMARY KEY, n int)")
            conn.execute(f"INSERT INTO tab{n} (n) SELECT g FROM generate_series(1, {n + 1}) g")
    topic = await topic_factory(partitions=3)
    offsets = await topic_factory(compacted=True)
    runs, stop = [TaskRun() for _ in range(3)], anyio.Event()

    def total() -> int:
        return sum(r.records for r in runs)

    async def task(index: int) -> None:
        config = jdbc_config(
            postgres, db, jdbc_mode="incrementing", topic=topic, table_poll_interval_ms="300",
            task_index=str(index), task_count="3",
        )  # fmt: skip
        await run_task(
            config, client_config=client_config, offsets_topic=offsets, connector="many",
            task_id=index, stop=stop, run=runs[index],
        )  # fmt: skip

    async def add_table() -> None:
        await runs[0].progress.wait_until(lambda: total() >= 210, timeout=90)
        with postgres.connect(db) as conn:
            conn.execute("CREATE TABLE late (id serial PRIMARY KEY, n int)")
            conn.execute("INSERT INTO late (n) SELECT g FROM generate_series(1, 7) g")
        await runs[0].progress.wait_until(lambda: total() >= 217)  # any task's progress
        stop.set()

    async with anyio.create_task_group() as tg:
        for index in range(3):
            tg.start_soon(task, index)
        tg.start_soon(add_table)
    got = await output(client_config, topic)
    tables = Counter(headers["eos.spark.table"].decode() for _, _, headers in got)
    assert tables == Counter({f"public.tab{n}": n + 1 for n in range(20)} | {"public.late": 7})
    assert len({(h["eos.spark.table"], k) for k, _, h in got}) == len(got)  # none twice
    owners = [r.partitions for r in runs]
    assert all(owners)
    assert sum(len(o) for o in owners) == 21  # every table one task's


async def test_late_commit_missed_without_delay_and_read_with_it(postgres: PostgresServer) -> None:
    """The hazard of the timestamp modes: a row written in a transaction that commits
    after rows with later timestamps were read is skipped; ``timestamp.delay.interval.ms``
    longer than the transaction reads it."""
    db = postgres.database("late")
    with postgres.connect(db) as conn:
        conn.execute(
            "CREATE TABLE orders (id bigserial PRIMARY KEY, "
            "updated_at timestamp(6) NOT NULL DEFAULT clock_timestamp(), what text)"
        )
        conn.execute("CREATE INDEX ON orders (updated_at, id)")
    results = {}
    for delay in (0, 1500):
        with postgres.connect(db) as conn:
            conn.execute("TRUNCATE orders RESTART IDENTITY")
        config = jdbc_config(
            postgres, db, jdbc_mode="timestamp+incrementing", table_whitelist="orders",
            timestamp_column_name="updated_at", timestamp_delay_interval_ms=str(delay),
        )  # fmt: skip
        async with running_task(config) as (task, offsets, background):
            long = postgres.connect(db)
            long.autocommit = False
            long.execute("INSERT INTO orders (what) VALUES ('long transaction')")
            with postgres.connect(db) as conn:
                conn.execute("INSERT INTO orders (what) VALUES ('quick')")
            seen = [value_of(r)["what"] for r in await read_all(task, offsets, background)]
            await anyio.sleep(0.3)  # polls pass while the long transaction is open
            long.commit()
            long.close()
            await anyio.sleep(1.8 if delay else 0.3)
            seen += [value_of(r)["what"] for r in await read_all(task, offsets, background)]
        results[delay] = seen
    assert results[0] == ["quick"]  # the hazard: the late row is behind the position
    assert results[1500] == ["long transaction", "quick"]  # in timestamp order, none lost


async def test_timestamp_mode_never_splits_equal_timestamps(postgres: PostgresServer) -> None:
    db = postgres.database("ties")
    with postgres.connect(db) as conn:
        conn.execute("CREATE TABLE logs (at timestamp(6) NOT NULL, what text)")
        conn.execute(
            "INSERT INTO logs SELECT TIMESTAMP '2024-01-01' + (g / 4) * INTERVAL '1 second', "
            "'w' || g FROM generate_series(0, 21) g"
        )
    config = jdbc_config(
        postgres, db, jdbc_mode="timestamp", table_whitelist="logs", timestamp_column_name="at",
        batch_rows="6",
    )  # fmt: skip
    batches: list[list[str]] = []
    async with running_task(config) as (task, offsets, _):
        with anyio.fail_after(60):
            while sum(len(b) for b in batches) < 22 or not task.idle:
                records = as_records(await task.poll())
                offsets.commit(records)
                if records:
                    batches.append([value_of(r)["at"] for r in records])
    assert sum(len(b) for b in batches) == 22
    assert len(batches) > 2
    for earlier, later in itertools.pairwise(batches):
        assert earlier[-1] < later[0]  # a run of equal timestamps is never split
    assert offsets.data == {json.dumps({"table": "public.logs"}): {"timestamp": batches[-1][-1]}}


async def test_bad_input_names_the_setting(postgres: PostgresServer) -> None:
    db = postgres.database("bad")
    with postgres.connect(db) as conn:
        conn.execute("CREATE TABLE nokey (id int, at timestamp)")
    wrong_password = {**jdbc_config(postgres, db, jdbc_mode="bulk"), "connection.password": "nope1"}
    with pytest.raises(JdbcError) as refused:
        async with running_task(wrong_password):
            pass
    message = str(refused.value)
    assert "connection.user" in message
    assert "connection.password" in message
    assert "nope1" not in message
    assert PASSWORD not in message
    wrong_url = jdbc_config(postgres, db, jdbc_mode="bulk")
    wrong_url["connection.url"] = f"jdbc:postgresql://127.0.0.1:1/{db}?password={PASSWORD}"
    with pytest.raises(JdbcError, match=r"connection\.url") as unreachable:
        async with running_task(wrong_url):
            pass
    assert PASSWORD not in str(unreachable.value)
    no_driver = {
        **jdbc_config(postgres, db, jdbc_mode="bulk"),
        "connection.url": "jdbc:mysql://x/y",
    }
    with pytest.raises(JdbcError, match=r"spark\.jdbc\.drivers=mysql"):
        async with running_task(no_driver):
            pass
    cases = {
        "bulk": ("nokey has no primary key", {}),
        "timestamp": (
            "'timestamp.column.name' names column 'nope'", {"timestamp.column.name": "nope"}
        ),
        "incrementing": ("needs incrementing.column.name", {}),
    }  # fmt: skip
    for mode, (message, extra) in cases.items():
        config = jdbc_config(postgres, db, jdbc_mode=mode, table_whitelist="nokey", **extra)
        async with running_task(config) as (task, _, background):
            assert message in await failure_of(background, task)
    with pytest.raises(SparkUnavailable, match=r"spark\.master=spark://127\.0\.0\.1:1 cannot be"):
        create_session({"spark.master": "spark://127.0.0.1:1"})


def test_a_driver_that_cannot_be_resolved_fails_spark_with_a_hint() -> None:
    code = (
        "from services.connectors.spark.session import create_session\n"
        "create_session({'spark.master': 'local[1]', 'spark.ui.enabled': 'false',"
        " 'spark.jdbc.drivers': 'postgresql:0.0.0-nowhere'})"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
        env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO,
    )  # fmt: skip
    assert done.returncode != 0
    assert "unresolved dependency: org.postgresql#postgresql;0.0.0-nowhere" in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "SparkUnavailable" in last, last
    assert "spark.jdbc.drivers" in last, last
