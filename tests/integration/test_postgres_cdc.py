"""PostgresCdcSource against a real PostgreSQL (``wal_level=logical``) and a real Kafka:
the snapshot then the stream, Debezium's record shape, read back read_committed by
confluent-kafka; the slot confirmed only as far as Kafka holds; bad set-ups as one
FAILED reason."""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from eos.kafka import ClientConfig
from eos.kafka.admin import ensure_topic
from services.cli import parser
from services.connectors.postgres_cdc.pgoutput import parse_lsn
from services.dev_registry import RegistryState
from tests.integration.jdbc_helpers import committed
from tests.integration.registry_readers import read_avro, schema_id
from tests.integration.worker_harness import running_worker, worker_props
from tests.postgres_server import PASSWORD, USER, PostgresServer, postgres, start_postgres

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
AVRO = "io.confluent.connect.avro.AvroConverter"
__all__ = ["postgres"]


def cdc_config(postgres: PostgresServer, db: str, name: str, **extra: str) -> dict[str, str]:
    """A PostgresCdcSource config (``extra``: ``snapshot_mode="never"`` is
    ``snapshot.mode=never``); JSON without schemas unless ``extra`` names converters."""
    settings = {k.replace("_", "."): v for k, v in extra.items()}
    json_converters = {
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
    }
    return {
        "name": name,
        "connector.class": "PostgresCdcSource",
        "database.hostname": "127.0.0.1",
        "database.port": str(postgres.port),
        "database.user": USER,
        "database.password": PASSWORD,
        "database.dbname": db,
        "topic.prefix": name,
        "slot.name": f"{name}_slot".replace("-", "_"),
        "publication.name": f"{name}_pub".replace("-", "_"),
        "publication.autocreate.mode": "filtered",
        "poll.interval.ms": "100",
        **({} if "value.converter" in settings else json_converters),
        **settings,
    }


def wait_for(
    bootstrap: str, topic: str, count: int, timeout: float = 90
) -> list[tuple[int, Any, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        got = committed(bootstrap, topic, timeout=10) if _exists(bootstrap, topic) else []
        if len(got) >= count or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def _exists(bootstrap: str, topic: str) -> bool:
    from confluent_kafka.admin import AdminClient

    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    return topic in topics


def slot_confirmed(postgres: PostgresServer, db: str, slot: str) -> int:
    with postgres.connect(db) as conn:
        row = conn.execute(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
            (slot,),
        ).fetchone()
    assert row is not None
    return parse_lsn(row[0])


async def test_snapshot_then_changes_in_debezium_shape(
    postgres: PostgresServer,
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
) -> None:
    db = postgres.database("cdc")
    with postgres.connect(db) as conn:
        conn.execute(
            "CREATE TABLE orders (id bigserial PRIMARY KEY, item text NOT NULL, qty int, "
            "price numeric(10,2), tags text[], created timestamptz(3), doc jsonb, "
            "due date, big numeric)"
        )
        conn.execute("CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL)")
        for i in range(25):
            conn.execute(
                "INSERT INTO orders (item, qty, price, tags, created, doc, due, big) VALUES "
                "(%s, %s, 12.5, '{a,\"b c\"}', '2024-02-29 12:00:00.5+01', '{\"k\": 1}', "
                "'2024-03-01', 1.25)",
                (f"item-{i}", i),
            )
        conn.execute("INSERT INTO customers VALUES (1, 'ada'), (2, 'bob')")
    name = unique_name("cdc")
    topic = f"{name}.public.orders"
    for t in (topic, f"{name}.public.customers"):
        await ensure_topic(client_config, t, partitions=1)
    config = cdc_config(postgres, db, name, snapshot_fetch_size="10")
    async with running_worker(worker_props(bootstrap, unique_name("g")), [config]) as worker:
        await worker.wait_for_tasks(name, "RUNNING", 1)
        got = await anyio.to_thread.run_sync(wait_for, bootstrap, topic, 25)
        assert [v["op"] for _, _, v in got] == ["r"] * 25, [k for _, k, _ in got]
        first = got[0][2]
        assert got[0][1] == {"id": 1}
        assert first["before"] is None
        assert first["after"] == {
            "id": 1, "item": "item-0", "qty": 0, "price": "BOI=", "tags": ["a", "b c"],
            "created": "2024-02-29T11:00:00.500Z", "doc": '{"k": 1}', "due": 19783,
            "big": {"scale": 2, "value": "fQ=="},
        }  # fmt: skip
        assert first["source"]["snapshot"] == "true"
        assert got[-1][2]["source"]["snapshot"] == "last"
        assert first["source"]["table"] == "orders"
        assert first["source"]["schema"] == "public"
        assert first["source"]["connector"] == "postgresql"
        with postgres.connect(db) as conn:
            conn.execute("INSERT INTO orders (item, qty) VALUES ('new', 7)")
            conn.execute("UPDATE orders SET qty = 70 WHERE item = 'new'")
            conn.execute("DELETE FROM orders WHERE id = 1")
            with conn.transaction():
                conn.execute("UPDATE orders SET qty = qty + 1 WHERE id = 2")
                conn.execute("INSERT INTO customers VALUES (3, 'cy')")
        got = await anyio.to_thread.run_sync(wait_for, bootstrap, topic, 30)
        changes = [(key, None if v is None else v["op"]) for _, key, v in got[25:]]
        assert changes == [
            ({"id": 26}, "c"), ({"id": 26}, "u"), ({"id": 1}, "d"), ({"id": 1}, None),
            ({"id": 2}, "u"),
        ], changes  # fmt: skip
        deleted = got[27][2]
        assert deleted["before"]["id"] == 1
        assert deleted["after"] is None
        assert got[26][2]["after"]["qty"] == 70
        assert got[26][2]["source"]["txId"] > 0
        assert got[26][2]["source"]["lsn"] > 0
        customers = await anyio.to_thread.run_sync(
            wait_for, bootstrap, f"{name}.public.customers", 3
        )
        assert [v["after"]["name"] for _, _, v in customers] == ["ada", "bob", "cy"]
        # the last change and the multi-table transaction share one commit's offset: the
        # slot is confirmed up to it, never beyond what Kafka holds
        status = await worker.status(name)
        assert status["tasks"][0]["state"] == "RUNNING"
        progress = status["tasks"][0]["progress"]  # the task's own figures, live
        assert progress["snapshot_rows"] == 27  # 25 orders, 2 customers
        assert progress["snapshot_chunks"] == 4  # 10 + 10 + 5 orders, 2 customers
        assert progress["snapshot_tables"] == progress["snapshot_tables_done"] == 2
        assert progress["changes"] >= 5
    slot = config["slot.name"]
    lsn = got[-1][2]["source"]["lsn"]
    assert slot_confirmed(postgres, db, slot) >= lsn


async def test_restart_resumes_without_duplicates(
    postgres: PostgresServer,
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
) -> None:
    db = postgres.database("cdc")
    with postgres.connect(db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO t SELECT g, 'x' FROM generate_series(1, 50) g")
    name = unique_name("cdc")
    topic = f"{name}.public.t"
    await ensure_topic(client_config, topic, partitions=2)
    config = cdc_config(postgres, db, name, snapshot_fetch_size="20")
    props = worker_props(bootstrap, unique_name("g"))
    async with running_worker(props, [config]) as worker:
        await worker.wait_for_tasks(name, "RUNNING", 1)
        await anyio.to_thread.run_sync(wait_for, bootstrap, topic, 50)
        with postgres.connect(db) as conn:
            conn.execute("UPDATE t SET v = 'y' WHERE id <= 10")
        await anyio.to_thread.run_sync(wait_for, bootstrap, topic, 60)
    with postgres.connect(db) as conn:
        conn.execute("UPDATE t SET v = 'z' WHERE id <= 5")
    async with running_worker(props, [config]) as worker:
        await worker.wait_for_tasks(name, "RUNNING", 1)
        got = await anyio.to_thread.run_sync(wait_for, bootstrap, topic, 65)
        await anyio.sleep(2)
        got = await anyio.to_thread.run_sync(wait_for, bootstrap, topic, 65)
    versions = [(v["after"]["id"], v["after"]["v"]) for _, _, v in got]
    assert len(versions) == 65
    assert len(set(versions)) == 65


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("missing-publication", "publication.autocreate.mode=disabled"),
        ("no-replication", "lacks 4 privilege(s)"),
        ("wrong-password", "wrong database.user or database.password"),
        (
            "unpublished-signals",
            "lacks the signal table public.signals (signal.data.collection): ALTER PUBLICATION",
        ),
    ],
)
async def test_bad_setups_fail_with_one_reason(
    postgres: PostgresServer,
    bootstrap: str,
    unique_name: Callable[[str], str],
    setup: str,
    expected: str,
) -> None:
    db = postgres.database("cdc")
    with postgres.connect(db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
    name = unique_name("cdc")
    extra: dict[str, str] = {}
    if setup == "missing-publication":
        extra["publication_autocreate_mode"] = "disabled"
    elif setup == "unpublished-signals":  # the publication exists without it
        publication = f"{name}_pub".replace("-", "_")
        with postgres.connect(db) as conn:
            conn.execute("CREATE TABLE signals (id text PRIMARY KEY, type text, data text)")
            conn.execute(f"CREATE PUBLICATION {publication} FOR TABLE t")
        extra["signal_data_collection"] = "public.signals"
    elif setup == "no-replication":
        with postgres.connect(admin=True) as conn:
            conn.execute(f"CREATE ROLE {name.replace('-', '_')} LOGIN PASSWORD 'pw'")
        extra["database_user"] = name.replace("-", "_")
        extra["database_password"] = "pw"
    else:
        extra["database_password"] = "not-the-password"
    config = cdc_config(postgres, db, name, **extra)
    async with running_worker(worker_props(bootstrap, unique_name("g")), [config]) as worker:
        status = await worker.wait_for_tasks(name, "FAILED", 1)
    trace = status["tasks"][0]["trace"]
    assert expected in trace, trace
    if setup == "no-replication":  # every missing privilege at once, each with its fix
        user = extra["database_user"]
        for fix in (
            f'ALTER ROLE "{user}" REPLICATION;',
            f'GRANT CREATE ON DATABASE "{db}" TO "{user}";',
            f'GRANT SELECT ON "public"."t" TO "{user}";',
            f'ALTER TABLE "public"."t" OWNER TO "{user}";',
        ):
            assert fix in trace, trace
    assert "not-the-password" not in trace
    assert PASSWORD not in trace


def eos(*argv: str) -> int:
    """The command as ``eos`` runs it, without ``services.cli.main``'s logging set-up (which
    would cache loggers for the rest of this test process, out of ``capture_logs``' reach)."""
    args = parser().parse_args(list(argv))
    return int(args.func(args))


def test_the_privileges_command_names_what_the_user_lacks(
    postgres: PostgresServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``eos cdc privileges FILE``: each privilege of the plan granted or missing with the
    statement that grants it (exit 1), then, once an administrator ran those, all granted."""
    db = postgres.database("cdc")
    with postgres.connect(db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
    name = unique_name("cdc")
    user = name.replace("-", "_")
    with postgres.connect(admin=True) as conn:
        conn.execute(f"CREATE ROLE {user} LOGIN PASSWORD 'pw'")
    config = cdc_config(postgres, db, name, database_user=user, database_password="pw")
    file = tmp_path / "cdc.json"
    file.write_text(json.dumps({"name": name, "config": config}))

    assert eos("cdc", "privileges", str(file)) == 1
    lines = capsys.readouterr().out.splitlines()
    missing = sorted(line.split(":", 2)[-1].strip() for line in lines if line.startswith("missing"))
    assert missing == sorted([
        f'ALTER ROLE "{user}" REPLICATION;',
        f'ALTER TABLE "public"."t" OWNER TO "{user}"; -- or create the publication as its owner',
        f'GRANT CREATE ON DATABASE "{db}" TO "{user}";',
        f'GRANT SELECT ON "public"."t" TO "{user}";',
    ])  # fmt: skip
    assert any(line.startswith(f"granted: CONNECT on database {db}") for line in lines)
    assert "pw" not in "\n".join(lines)

    with postgres.connect(db, admin=True) as conn:
        for statement in missing:
            conn.execute(statement.split(" -- ")[0])
    assert eos("cdc", "privileges", str(file)) == 0
    assert not [line for line in capsys.readouterr().out.splitlines() if line.startswith("missing")]
    # and they are enough: the user creates the publication itself
    import psycopg

    dsn = f"host=127.0.0.1 port={postgres.port} user={user} password=pw dbname={db}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE PUBLICATION "{config["publication.name"]}" FOR TABLE public.t')

    wrong = {**config, "database.password": "not-the-password"}
    file.write_text(json.dumps({"name": name, "config": wrong}))
    assert eos("cdc", "privileges", str(file)) == 2
    said = capsys.readouterr().err
    assert said.startswith("error: cannot log in to PostgreSQL")
    assert "wrong database.user or database.password" in said
    assert "not-the-password" not in said


async def test_a_server_without_logical_wal_is_one_reason(
    bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    server = await anyio.to_thread.run_sync(functools.partial(start_postgres, logical=False))
    try:
        db = server.database("cdc")
        name = unique_name("cdc")
        config = cdc_config(server, db, name)
        async with running_worker(worker_props(bootstrap, unique_name("g")), [config]) as worker:
            status = await worker.wait_for_tasks(name, "FAILED", 1)
    finally:
        server.stop()
    trace = status["tasks"][0]["trace"]
    assert "wal_level=replica: change data capture needs wal_level=logical" in trace


async def test_a_slot_in_use_is_one_reason(
    postgres: PostgresServer, bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    db = postgres.database("cdc")
    with postgres.connect(db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
    first, second = unique_name("cdc"), unique_name("cdc")
    one = cdc_config(postgres, db, first)
    two = {**cdc_config(postgres, db, second), "slot.name": one["slot.name"],
           "publication.name": one["publication.name"], "slot.max.retries": "1",
           "slot.retry.delay.ms": "200"}  # fmt: skip
    async with running_worker(worker_props(bootstrap, unique_name("g")), [one]) as worker:
        await worker.wait_for_tasks(first, "RUNNING", 1)
        await worker.http.post("/connectors", json={"name": second, "config": two})
        status = await worker.wait_for_tasks(second, "FAILED", 1)
        assert (await worker.status(first))["tasks"][0]["state"] == "RUNNING"
    trace = status["tasks"][0]["trace"]
    assert f"another connection streams from replication slot {one['slot.name']}" in trace


async def test_a_table_without_primary_key_has_null_keys(
    postgres: PostgresServer,
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
) -> None:
    db = postgres.database("cdc")
    with postgres.connect(db) as conn:
        conn.execute("CREATE TABLE log (line text)")
        conn.execute("INSERT INTO log SELECT 'line ' || g FROM generate_series(1, 30) g")
    name = unique_name("cdc")
    topic = f"{name}.public.log"
    await ensure_topic(client_config, topic, partitions=1)
    config = cdc_config(postgres, db, name, snapshot_fetch_size="7")
    async with running_worker(worker_props(bootstrap, unique_name("g")), [config]) as worker:
        await worker.wait_for_tasks(name, "RUNNING", 1)
        with postgres.connect(db) as conn:
            conn.execute("INSERT INTO log VALUES ('after')")
        got = await anyio.to_thread.run_sync(wait_for, bootstrap, topic, 31)
    assert [key for _, key, _ in got] == [None] * 31
    assert [v["op"] for _, _, v in got] == ["r"] * 30 + ["c"]
    assert got[-1][2]["after"] == {"line": "after"}


def _raw(bootstrap: str, topic: str, count: int, timeout: float = 60) -> list[tuple[bytes, bytes]]:
    """(key, value) bytes of ``topic``'s first ``count`` committed records."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"raw-{topic}",
        "isolation.level": "read_committed", "enable.auto.commit": False,
    })  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            for message in consumer.consume(100, timeout=0.5):
                if message.error() is None:
                    got.append((message.key() or b"", message.value() or b""))
        return got
    finally:
        consumer.close()


async def test_a_column_added_mid_stream_is_a_new_avro_version(
    postgres: PostgresServer,
    bootstrap: str,
    client_config: ClientConfig,
    dev_registry: RegistryState,
    unique_name: Callable[[str], str],
) -> None:
    db = postgres.database("cdc")
    with postgres.connect(db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, a text NOT NULL)")
        conn.execute("INSERT INTO t VALUES (1, 'one')")
    name = unique_name("cdc")
    topic = f"{name}.public.t"
    await ensure_topic(client_config, topic, partitions=1)
    avro = {
        "key_converter": AVRO, "value_converter": AVRO,
        "key_converter_schema_registry_url": dev_registry.url,
        "value_converter_schema_registry_url": dev_registry.url,
    }  # fmt: skip
    config = cdc_config(postgres, db, name, schema_name_adjustment_mode="avro", **avro)
    async with running_worker(worker_props(bootstrap, unique_name("g")), [config]) as worker:
        await worker.wait_for_tasks(name, "RUNNING", 1)
        await anyio.to_thread.run_sync(_raw, bootstrap, topic, 1)
        with postgres.connect(db) as conn:
            conn.execute("INSERT INTO t VALUES (2, 'two')")
            conn.execute("ALTER TABLE t ADD COLUMN b int")
            conn.execute("INSERT INTO t VALUES (3, 'three', 5)")
            conn.execute("UPDATE t SET b = 7 WHERE id = 1")
            # NOT NULL: BACKWARD-compatible only through its default (Debezium's too)
            conn.execute("ALTER TABLE t ADD COLUMN c text NOT NULL DEFAULT 'none'")
            conn.execute("INSERT INTO t VALUES (4, 'four', 9, 'set')")
        got = await anyio.to_thread.run_sync(_raw, bootstrap, topic, 5)
    assert len(got) == 5
    values = [read_avro(dev_registry.url, topic, value) for _, value in got]
    keys = [read_avro(dev_registry.url, topic, key, key=True) for key, _ in got]
    assert keys == [{"id": 1}, {"id": 2}, {"id": 3}, {"id": 1}, {"id": 4}]
    assert [v["op"] for v in values] == ["r", "c", "c", "u", "c"]
    assert values[1]["after"] == {"id": 2, "a": "two"}
    assert values[2]["after"] == {"id": 3, "a": "three", "b": 5}
    assert values[3]["after"] == {"id": 1, "a": "one", "b": 7}
    assert values[4]["after"] == {"id": 4, "a": "four", "b": 9, "c": "set"}
    assert schema_id(got[1][1]) != schema_id(got[2][1])
    assert schema_id(got[2][1]) == schema_id(got[3][1])
    url = f"{dev_registry.url}/schemas/ids/{schema_id(got[4][1])}"
    latest = (await anyio.to_thread.run_sync(httpx.get, url)).json()
    before = next(f for f in json.loads(latest["schema"])["fields"] if f["name"] == "before")
    row = next(t for t in before["type"] if isinstance(t, dict))  # "after" names it
    column = next(f for f in row["fields"] if f["name"] == "c")
    assert column["default"] == "none"
    assert column["type"] == {"type": "string", "connect.default": "none"}  # as Connect's


async def test_heartbeats_move_the_slot_while_the_tables_are_quiet(
    postgres: PostgresServer,
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
) -> None:
    db = postgres.database("cdc")
    with postgres.connect(db) as conn:
        conn.execute("CREATE TABLE captured (id int PRIMARY KEY)")
        conn.execute("CREATE TABLE busy (id serial PRIMARY KEY, filler text)")
    name = unique_name("cdc")
    await ensure_topic(client_config, f"{name}.public.captured", partitions=1)
    config = cdc_config(
        postgres, db, name, table_include_list="public.captured", heartbeat_interval_ms="300"
    )
    slot = config["slot.name"]
    async with running_worker(worker_props(bootstrap, unique_name("g")), [config]) as worker:
        await worker.wait_for_tasks(name, "RUNNING", 1)
        await anyio.sleep(1)
        before = slot_confirmed(postgres, db, slot)
        with postgres.connect(db) as conn:
            for _ in range(20):
                conn.execute("INSERT INTO busy (filler) SELECT repeat('x', 1000)")
            written = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        assert written is not None
        deadline = time.monotonic() + 30
        while slot_confirmed(postgres, db, slot) < parse_lsn(written[0]):
            assert time.monotonic() < deadline, "the slot did not move"
            await anyio.sleep(0.2)
    assert slot_confirmed(postgres, db, slot) > before
    beats = committed(bootstrap, f"__debezium-heartbeat.{name}")
    assert beats
    assert beats[-1][1] == {"serverName": name}


async def test_the_slots_lag_is_a_metric(
    postgres: PostgresServer,
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
) -> None:
    """Without heartbeats, writes to a table the connector does not capture leave WAL the
    slot must keep: eos_task_value{gauge="slot_lag_bytes"} and "slot_lag_seconds" grow;
    the snapshot's chunks are counted."""
    db = postgres.database("cdc")
    with postgres.connect(db) as conn:
        conn.execute("CREATE TABLE captured (id int PRIMARY KEY)")
        conn.execute("INSERT INTO captured SELECT generate_series(1, 10)")
        conn.execute("CREATE TABLE busy (id serial PRIMARY KEY, filler text)")
    name = unique_name("cdc")
    await ensure_topic(client_config, f"{name}.public.captured", partitions=1)
    config = cdc_config(postgres, db, name, table_include_list="public.captured")

    def gauge(metrics: str, which: str) -> float:
        found = re.search(rf'eos_task_value{{[^}}]*gauge="{which}"[^}}]*}} (\S+)', metrics)
        return float(found.group(1)) if found else -1.0

    async with running_worker(worker_props(bootstrap, unique_name("g")), [config]) as worker:
        await worker.wait_for_tasks(name, "RUNNING", 1)
        with postgres.connect(db) as conn:
            for _ in range(20):
                conn.execute("INSERT INTO busy (filler) SELECT repeat('x', 1000)")
        deadline = time.monotonic() + 30
        while True:
            metrics = (await worker.http.get("/metrics")).text
            if gauge(metrics, "slot_lag_bytes") > 20_000 and gauge(metrics, "slot_lag_seconds") > 0:
                break
            assert time.monotonic() < deadline, [
                line for line in metrics.splitlines() if "eos_task_value" in line
            ]
            await anyio.sleep(0.5)
        assert re.search(r'eos_task_events_total{[^}]*event="snapshot_chunks"[^}]*} 1\.0', metrics)
        assert gauge(metrics, "snapshot_tables") == gauge(metrics, "snapshot_tables_done") > 0


async def test_the_slot_stays_unless_dropped_on_stop(
    postgres: PostgresServer, bootstrap: str, unique_name: Callable[[str], str]
) -> None:
    db = postgres.database("cdc")
    with postgres.connect(db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
    kept, dropped = unique_name("cdc"), unique_name("cdc")
    configs = [cdc_config(postgres, db, kept),
               cdc_config(postgres, db, dropped, slot_drop_on_stop="true")]  # fmt: skip
    async with running_worker(worker_props(bootstrap, unique_name("g")), configs) as worker:
        for name in (kept, dropped):
            await worker.wait_for_tasks(name, "RUNNING", 1)
    with postgres.connect(db) as conn:
        slots = {row[0] for row in conn.execute("SELECT slot_name FROM pg_replication_slots")}
    assert configs[0]["slot.name"] in slots
    assert configs[1]["slot.name"] not in slots


async def test_a_signal_snapshots_a_table_again_while_streaming_goes_on(
    postgres: PostgresServer,
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
) -> None:
    """Debezium's signal table: an execute-snapshot row makes the connector read the
    table again (op r, snapshot=incremental, several chunks) while updates, inserts and
    deletes go on; every row's r image appears once, and replaying the topic in order
    gives the table's final rows: no change lost, none doubled, none before its row's
    image that the image already holds."""
    db = postgres.database("cdc")
    rows = 60
    with postgres.connect(db) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text NOT NULL)")
        conn.execute("CREATE TABLE signals (id text PRIMARY KEY, type text, data text)")
        conn.execute(f"INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, {rows}) i")
    name = unique_name("cdc")
    topic = f"{name}.public.t"
    await ensure_topic(client_config, topic, partitions=1)
    config = cdc_config(
        postgres, db, name, snapshot_mode="never", snapshot_fetch_size="7",
        table_include_list="public.t", signal_data_collection="public.signals",
    )  # fmt: skip
    async with running_worker(worker_props(bootstrap, unique_name("g")), [config]) as worker:
        await worker.wait_for_tasks(name, "RUNNING", 1)
        with postgres.connect(db) as conn:
            conn.execute("UPDATE t SET v = 'before' WHERE id = 1")
        assert len(await anyio.to_thread.run_sync(wait_for, bootstrap, topic, 1)) == 1

        def traffic() -> None:
            with postgres.connect(db) as conn:
                data = '{"data-collections": ["public.t"], "type": "incremental"}'
                conn.execute("INSERT INTO signals VALUES ('s1', 'execute-snapshot', %s)", (data,))
                for i in range(1, rows + 1, 3):
                    conn.execute("UPDATE t SET v = v || '+' WHERE id = %s", (i,))
                conn.execute("DELETE FROM t WHERE id = 2")
                conn.execute(f"INSERT INTO t VALUES ({rows + 1}, 'late')")

        await anyio.to_thread.run_sync(traffic)
        with anyio.fail_after(90):
            while True:
                got = await anyio.to_thread.run_sync(wait_for, bootstrap, topic, 1, 5)
                images = [v for _, _, v in got if v is not None and v["op"] == "r"]
                if len(images) >= rows and any(
                    v is not None and v["after"] and v["after"]["id"] == rows + 1 for _, _, v in got
                ):
                    break
                await anyio.sleep(0.5)
        status = await worker.status(name)
        assert status["tasks"][0]["state"] == "RUNNING"
    images = [v for _, _, v in got if v is not None and v["op"] == "r"]
    read_ids = sorted(v["after"]["id"] for v in images)
    assert len(read_ids) == len(set(read_ids))  # each row's image once
    assert set(read_ids) >= set(range(1, rows + 1)) - {2}  # 2 may be deleted before its read
    assert {v["source"]["snapshot"] for v in images} == {"incremental"}
    replayed: dict[int, str] = {}
    for _, key, value in got:
        if value is None:
            continue
        if value["op"] == "d":
            replayed.pop(key["id"], None)
        else:
            replayed[key["id"]] = value["after"]["v"]
    with postgres.connect(db) as conn:
        table = dict(conn.execute("SELECT id, v FROM t").fetchall())
    assert replayed == table
    for i in range(4, rows + 1, 3):  # updated once after the signal: in its image or after it
        mine = [v for _, k, v in got if k == {"id": i} and v is not None]
        ops = [v["op"] for v in mine]
        if mine[0]["after"]["v"].endswith("+"):
            assert ops == ["r"], (i, mine)  # committed before its chunk was read
        else:
            assert ops == ["r", "u"], (i, mine)  # after: written once, after the image
