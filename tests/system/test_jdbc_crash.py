"""SparkSource ``mode=jdbc`` through crashes: a PostgreSQL table receives inserts and
updates while an ``eos worker`` process reads it (``timestamp+incrementing``) and is
SIGKILLed five times. Judged with a read_committed confluent-kafka consumer (a client
the worker does not use): every (id, updated_at) version at most once, only versions
that were written, each row's last version present, and each row's versions in order."""

from __future__ import annotations

import functools
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from eos.kafka import ClientConfig
from eos.kafka.admin import ensure_topic
from tests.integration.jdbc_helpers import committed, end_offsets
from tests.integration.worker_harness import (
    QUICK_REJOIN,
    SPARK_JDBC,
    WorkerProcess,
    worker_props,
)
from tests.postgres_server import PASSWORD, USER, PostgresServer, postgres

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]
__all__ = ["postgres"]

KILLS = 5


class Writer(threading.Thread):
    """Inserts about 100 rows/s and updates about 40 rows/s (each a short transaction
    stamping ``updated_at`` with clock_timestamp()), recording every version written."""

    def __init__(self, postgres: PostgresServer, database: str) -> None:
        super().__init__(daemon=True)
        self.postgres, self.database = postgres, database
        self.versions: dict[int, list[str]] = {}
        self.stop = threading.Event()
        self.failed: BaseException | None = None

    def run(self) -> None:
        rng = random.Random(7)
        try:
            with self.postgres.connect(self.database) as conn:
                while not self.stop.is_set():
                    if self.versions and rng.random() < 0.3:
                        row = conn.execute(
                            "UPDATE orders SET updated_at = clock_timestamp(), "
                            "version = version + 1 WHERE id = %s RETURNING id, updated_at",
                            (rng.choice(list(self.versions)),),
                        ).fetchone()
                    else:
                        row = conn.execute(
                            "INSERT INTO orders (item) VALUES ('x') RETURNING id, updated_at"
                        ).fetchone()
                    assert row is not None
                    self.versions.setdefault(row[0], []).append(
                        row[1].isoformat(timespec="microseconds")
                    )
                    time.sleep(0.007)
        except BaseException as exc:
            self.failed = exc


def test_inserts_and_updates_exactly_once_through_sigkills(
    postgres: PostgresServer,
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    db = postgres.database("crash")
    with postgres.connect(db) as conn:
        conn.execute(
            "CREATE TABLE orders (id bigserial PRIMARY KEY, updated_at timestamp(6) NOT NULL "
            "DEFAULT clock_timestamp(), item text, version int NOT NULL DEFAULT 1)"
        )
        conn.execute("CREATE INDEX orders_cursor ON orders (updated_at, id)")
    topic = unique_name("orders")
    anyio.run(functools.partial(ensure_topic, client_config, topic, partitions=2))
    props = {**worker_props(bootstrap, unique_name("g")), **QUICK_REJOIN, **SPARK_JDBC}
    connector = {
        "name": "db",
        "connector.class": "SparkSource",
        "exactly.once.support": "required",
        "mode": "jdbc",
        "connection.url": postgres.url(db),
        "connection.user": USER,
        "connection.password": PASSWORD,
        "jdbc.mode": "timestamp+incrementing",
        "timestamp.column.name": "updated_at",
        "timestamp.delay.interval.ms": "200",
        "table.whitelist": "orders",
        "topic": topic,
        "poll.interval.ms": "200",
        "batch.rows": "200",
    }
    writer = Writer(postgres, db)
    worker = WorkerProcess(tmp_path, props, [connector])
    rng = random.Random(f"jdbc-{topic}")
    writer.start()
    try:
        for _ in range(KILLS):
            worker.start()
            worker.wait_running("db", 1, 120)
            target = end_offsets(bootstrap, topic) + rng.randint(100, 600)
            while end_offsets(bootstrap, topic) < target:
                assert worker.alive(), worker.tail()
                assert writer.failed is None, writer.failed
                time.sleep(0.05)
            time.sleep(rng.uniform(0, 0.5))
            worker.kill(signal.SIGKILL)
        worker.start()
        worker.wait_running("db", 1, 120)
        time.sleep(2)
        writer.stop.set()
        writer.join(10)
        assert writer.failed is None, writer.failed
        last = {row: versions[-1] for row, versions in writer.versions.items()}
        deadline = time.monotonic() + 120
        while True:
            got = committed(bootstrap, topic)
            seen = {(value["id"], value["updated_at"]) for _, _, value in got}
            if all((row, stamp) in seen for row, stamp in last.items()):
                break
            assert time.monotonic() < deadline, f"last versions missing\n{worker.tail()}"
            time.sleep(1)
    finally:
        writer.stop.set()
        worker.stop()
    assert worker.starts == KILLS + 1
    versions = Counter((value["id"], value["updated_at"]) for _, _, value in got)
    assert max(versions.values()) == 1, [v for v, n in versions.items() if n > 1][:5]
    written = {(row, stamp) for row, stamps in writer.versions.items() for stamp in stamps}
    assert set(versions) <= written
    by_row: dict[int, list[str]] = {}
    for _, key, value in got:
        assert key == value["id"]  # the key is the primary key
        by_row.setdefault(key, []).append(value["updated_at"])
    assert all(stamps == sorted(stamps) for stamps in by_row.values())
    updates = sum(len(v) - 1 for v in writer.versions.values())
    assert len(writer.versions) > 500
    assert updates > 100
