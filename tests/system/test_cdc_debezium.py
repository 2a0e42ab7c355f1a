"""PostgresCdcSource next to Debezium's PostgreSQL connector (3.6.1 from Maven Central, in
Kafka Connect's Java worker) on the same tables: the same keys, the same ``after``
images for every row of the snapshot and for every change after it, and the same key and
row schemas (names, types, optional-ness, parameters), both through Connect's
JsonConverter. The eos side reads its snapshot with ``snapshot.reader=spark``: Spark's JDBC
reader in ``local[2]``, the table in key ranges across two Spark tasks, each connection
joined to the slot's exported snapshot."""

from __future__ import annotations

import functools
import itertools
import json
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from eos.kafka import ClientConfig
from eos.kafka.admin import ensure_topic
from tests.debezium_peer import CONNECTOR, connect_worker
from tests.integration.jdbc_helpers import end_offsets
from tests.integration.test_postgres_cdc import cdc_config
from tests.integration.worker_harness import SPARK_JDBC, WorkerProcess, worker_props
from tests.postgres_server import PASSWORD, USER, PostgresServer, postgres

__all__ = ["postgres"]

ROWS = int(os.environ.get("EOS_CDC_PEER_ROWS", "20000"))
"""Rows of the compared table: 20 000 in the suite (every type and change kind; more rows
add time, not cases, and two JVMs converting them starve the suite's other worker); the
issue's 1 000 000 with ``EOS_CDC_PEER_ROWS=1000000`` (the time limit grows with it)."""
pytestmark = [pytest.mark.system, pytest.mark.timeout(600 + ROWS // 100)]
SPARK = {**SPARK_JDBC, "spark.driver.memory": "1g"}
"""Two Spark tasks; two partitions of 100 000 rows at a time in the driver."""

COLUMNS = """
    id bigint PRIMARY KEY, i2 smallint, i4 int NOT NULL, f8 float8, f4 real, b boolean,
    n numeric(12,3), nv numeric, t text, vc varchar(20), c char(4), d date,
    ts timestamp, ts3 timestamp(3), tstz timestamptz, tm time, js jsonb, j json, u uuid,
    by bytea, ia int[], ta text[], m mood, iv interval
"""
VALUES = """
    g, (g % 30000)::smallint, g::int, g / 7.0, (g / 3.0)::real, g % 2 = 0,
    (g / 8.0)::numeric(12,3), (g / 16.0)::numeric, 'text ' || g, 'v' || g, 'c' || (g % 10),
    DATE '2024-01-01' + (g % 1000), TIMESTAMP '2024-01-01 00:00:00' + g * INTERVAL '1.001 s',
    TIMESTAMP '2024-01-01 00:00:00' + g * INTERVAL '1.5 ms',
    TIMESTAMPTZ '2024-01-01 00:00:00+02' + g * INTERVAL '1.000001 s',
    TIME '00:00:00' + (g % 86400) * INTERVAL '1.25 s', jsonb_build_object('g', g, 'a', 'x'),
    json_build_object('g', g), md5(g::text)::uuid, decode(md5(g::text), 'hex'),
    ARRAY[g, g + 1], ARRAY['a' || g, NULL, 'b c'],
    (ARRAY['sad', 'ok', 'happy'])[g % 3 + 1]::mood, g * INTERVAL '1 day 2 hours 3.5 s'
"""


def _table(postgres: PostgresServer, db: str, rows: int) -> None:
    with postgres.connect(db) as conn:
        conn.execute("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
        conn.execute(f"CREATE TABLE items ({COLUMNS})")
        conn.execute(f"INSERT INTO items SELECT {VALUES} FROM generate_series(1, {int(rows)}) g")


def _changes(postgres: PostgresServer, db: str) -> None:
    with postgres.connect(db) as conn:
        conn.execute(
            f"INSERT INTO items SELECT {VALUES} FROM generate_series(10000001, 10000020) g"
        )
        conn.execute("UPDATE items SET t = 'changed', tstz = now() WHERE id % 50 = 0")
        conn.execute("DELETE FROM items WHERE id % 70 = 0 AND id < 1000")


def _debezium_config(postgres: PostgresServer, db: str, name: str) -> dict[str, str]:
    return {
        "connector.class": CONNECTOR,
        "database.hostname": "127.0.0.1",
        "database.port": str(postgres.port),
        "database.user": USER,
        "database.password": PASSWORD,
        "database.dbname": db,
        "topic.prefix": name,
        "plugin.name": "pgoutput",
        "slot.name": f"{name}_slot".replace("-", "_"),
        "publication.name": f"{name}_pub".replace("-", "_"),
        "publication.autocreate.mode": "filtered",
        "table.include.list": "public.items",
        "exactly.once.support": "required",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true",
    }


class Lockstep:
    """Both topics read side by side (read_committed, by confluent-kafka), record by
    record, holding only what one side is ahead by."""

    def __init__(self, bootstrap: str, topics: tuple[str, str]) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.consumers = []
        for topic in topics:
            consumer = Consumer({
                "bootstrap.servers": bootstrap, "group.id": f"lockstep-{topic}",
                "isolation.level": "read_committed", "enable.auto.commit": False,
            })  # fmt: skip
            consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            self.consumers.append(consumer)
        self.queues: tuple[deque[tuple[Any, Any]], ...] = (deque(), deque())

    def pairs(self, count: int, timeout: float) -> Iterator[tuple[Any, Any]]:
        deadline = time.monotonic() + timeout
        for _ in range(count):
            for consumer, queue in zip(self.consumers, self.queues, strict=True):
                while not queue:
                    assert time.monotonic() < deadline, "a side stopped short"
                    for message in consumer.consume(5000, timeout=0.5):
                        if message.error() is None:
                            queue.append((_json(message.key()), _json(message.value())))
            yield self.queues[0].popleft(), self.queues[1].popleft()

    def close(self) -> None:
        for consumer in self.consumers:
            consumer.close()


def _json(data: bytes | None) -> Any:
    return None if data is None else json.loads(data)


def _holds(bootstrap: str, topic: str, rows: int) -> bool:
    """Whether ``topic`` holds ``rows`` committed records: its end offset (which counts
    transaction markers too) first, then the records a read_committed consumer sees,
    counted, not kept (a million JSON envelopes with their schemas decoded would fill
    the machine's memory)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    try:
        end = end_offsets(bootstrap, topic)
    except Exception:  # not created yet
        return False
    if end < rows:
        return False
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"count-{topic}",
        "isolation.level": "read_committed", "enable.auto.commit": False,
    })  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        count, deadline = 0, time.monotonic() + 300
        while time.monotonic() < deadline:
            count += sum(m.error() is None for m in consumer.consume(10_000, timeout=0.5))
            (position,) = consumer.position([TopicPartition(topic, 0)])
            if position.offset >= end:
                return count >= rows
        return False
    finally:
        consumer.close()


def _changes_count(rows: int) -> int:
    return 20 + rows // 50 + 2 * len(range(70, min(rows, 1000), 70))


@contextmanager
def _both_running(
    postgres: PostgresServer, db: str, bootstrap: str, client_config: ClientConfig,
    unique_name: Callable[[str], str], tmp_path: Path, rows: int,
) -> Iterator[tuple[str, str]]:  # fmt: skip
    """Debezium's connector and PostgresCdcSource on ``items``, both snapshotting, then
    the changes of :func:`_changes` once both have their slot: the topics (Debezium's,
    eos's) until the block ends."""
    dbz, eos = unique_name("dbz"), unique_name("eos")
    topics = f"{dbz}.public.items", f"{eos}.public.items"
    for topic in topics:
        anyio.run(functools.partial(ensure_topic, client_config, topic, partitions=1))
    config = cdc_config(
        postgres, db, eos, table_include_list="public.items", snapshot_reader="spark",
        key_converter_schemas_enable="true", value_converter_schemas_enable="true",
    )  # fmt: skip
    (tmp_path / "eos").mkdir()
    props = {**worker_props(bootstrap, unique_name("g")), **SPARK}
    worker = WorkerProcess(tmp_path / "eos", props, [config])
    with connect_worker(bootstrap, tmp_path) as (url, _):
        # eos first: creating a logical slot waits for the transactions running then, and
        # Debezium's snapshot transaction (which takes a transaction id) runs for minutes
        worker.start()
        try:
            worker.wait_running(eos, 1, 120)
            body = {"name": dbz, "config": _debezium_config(postgres, db, dbz)}
            httpx.post(f"{url}/connectors", json=body, timeout=60).raise_for_status()
            # the changes once both snapshots are complete: a task restarted mid-snapshot
            # (a worker dropped from its group on a loaded machine) reads the rest at a
            # later point, legitimately other rows than Debezium's snapshot saw
            deadline = time.monotonic() + 300 + rows // 200  # Debezium: ~1 500 rows/s here
            while not all(_holds(bootstrap, t, rows) for t in topics):
                assert time.monotonic() < deadline, "a snapshot did not finish"
                time.sleep(2)
            assert f"{rows} rows read by Spark in" in worker.log.read_text()
            _changes(postgres, db)
            yield topics
        finally:
            worker.stop()


def test_snapshot_changes_and_schemas_match_debezium(
    postgres: PostgresServer,
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    db = postgres.database("cdc_peer")
    _table(postgres, db, ROWS)
    count = ROWS + _changes_count(ROWS)
    args = postgres, db, bootstrap, client_config, unique_name, tmp_path
    with _both_running(*args, ROWS) as topics:
        lockstep = Lockstep(bootstrap, topics)
        try:
            pairs = lockstep.pairs(count, 900)
            first = next(pairs)
            (dbz_key, dbz_value), (eos_key, eos_value) = (
                _unprefixed(pair, topic) for pair, topic in zip(first, topics, strict=True)
            )
            assert eos_key["schema"] == dbz_key["schema"]
            dbz_fields = {f["field"]: f for f in dbz_value["schema"]["fields"]}
            eos_fields = {f["field"]: f for f in eos_value["schema"]["fields"]}
            assert eos_fields["after"] == dbz_fields["after"]
            assert eos_fields["before"] == dbz_fields["before"]
            assert eos_value["schema"]["name"] == dbz_value["schema"]["name"]
            for (dbz_key, dbz_value), (eos_key, eos_value) in itertools.chain([first], pairs):
                assert eos_key["payload"] == dbz_key["payload"]
                if dbz_value is None:
                    assert eos_value is None, eos_key
                    continue
                dbz, eos = dbz_value["payload"], eos_value["payload"]
                assert eos["op"] == dbz["op"], (eos_key, eos, dbz)
                assert eos["after"] == dbz["after"], eos_key
                assert eos["before"] == dbz["before"], eos_key
        finally:
            lockstep.close()


def _unprefixed(pair: tuple[Any, Any], topic: str) -> Any:
    """A record with its schema names' topic prefix as ``P``."""
    prefix = topic.removesuffix(".public.items")
    return json.loads(json.dumps(pair).replace(f'"{prefix}.', '"P.'))
