"""``snapshot.reader=spark`` against a real PostgreSQL and a real Spark session
(``local[2]``): Spark's JDBC reader, joined to an exported snapshot, hands over the very
rows, texts and order the task's one connection reads, for every type the Debezium
comparison covers, in key ranges across Spark tasks, resumed after any key."""

from __future__ import annotations

import anyio
import pytest

from services.connectors.postgres_cdc import catalog
from services.connectors.postgres_cdc.envelope import TableShape
from services.connectors.postgres_cdc.replication import ReplicationStream
from services.connectors.postgres_cdc.settings import VERSION, CdcSettings
from services.connectors.postgres_cdc.snapshot import SnapshotReader
from services.connectors.postgres_cdc.spark_snapshot import SparkSnapshotReader
from tests.integration.test_postgres_cdc import cdc_config
from tests.integration.test_spark_harness import spark_resources
from tests.postgres_server import PostgresServer, postgres
from tests.system.test_cdc_debezium import COLUMNS, VALUES

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
__all__ = ["postgres"]
ROWS = 3000
CHUNK = 700


def _read_all(reader: SnapshotReader | SparkSnapshotReader, shape: TableShape) -> list[dict]:
    rows: list[dict] = []
    after = None
    while True:
        chunk = reader.chunk(shape, after, CHUNK)
        rows += chunk
        if len(chunk) < CHUNK or not shape.key_names:
            return rows
        after = shape.key_texts(chunk[-1])


def _compare(postgres: PostgresServer) -> None:
    db = postgres.database("cdc_spark")
    with postgres.connect(db) as conn:
        conn.execute("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
        conn.execute(f"CREATE TABLE items ({COLUMNS})")
        conn.execute(f"INSERT INTO items SELECT {VALUES} FROM generate_series(1, {ROWS}) g")
        conn.execute("CREATE TABLE named (code text PRIMARY KEY, n int)")
        conn.execute("INSERT INTO named SELECT 'k' || g, g FROM generate_series(1, 50) g")
    settings = CdcSettings.parse(cdc_config(postgres, db, "spark-snap"))
    exporter = ReplicationStream(settings)
    exporter.open()
    try:
        new = exporter.create_slot("spark_snap", True, True)
        assert new.snapshot is not None
        with postgres.connect(db) as conn:  # after the snapshot: neither reader sees these
            conn.execute("UPDATE items SET t = 'later' WHERE id <= 100")
            conn.execute("DELETE FROM items WHERE id > 2900")
            conn.execute(f"INSERT INTO items SELECT {VALUES} FROM generate_series(5001, 5010) g")
        conn_ = catalog.connect(settings)
        shapes = [
            TableShape("p", db, name, catalog.table_columns(conn_, name), VERSION)
            for name in ("public.items", "public.named")
        ]
        conn_.close()
        own = SnapshotReader(settings, new.snapshot)
        spark = SparkSnapshotReader(
            settings, new.snapshot, SnapshotReader(settings, new.snapshot), spark_resources()
        )
        try:
            for shape in shapes:
                expected = _read_all(own, shape)
                assert _read_all(spark, shape) == expected
            items = _read_all(spark, shapes[0])
            assert len(items) == ROWS
            assert {r["t"] for r in items[:100]} == {f"text {g}" for g in range(1, 101)}
            assert items[-1]["id"] == str(ROWS)
            assert items[0]["c"] == "c1  "  # char(4)'s padding, as the stream sends it
            # resumed after a key that is not where the open stream stands
            rest = spark.chunk(shapes[0], ("1234",), CHUNK)
            assert rest == own.chunk(shapes[0], ("1234",), CHUNK)
            assert rest[0]["id"] == "1235"
        finally:
            own.close()
            spark.close()
    finally:
        exporter.close()


async def test_spark_reads_the_rows_the_connection_reads(postgres: PostgresServer) -> None:
    await anyio.to_thread.run_sync(_compare, postgres)
