"""SparkSource ``mode=jdbc`` against a real MariaDB (tests/mariadb_server.py): one round
trip of the common types, inserts and an update in ``timestamp+incrementing``."""

from __future__ import annotations

import json

import pytest

from tests.integration.jdbc_helpers import read_all, running_task
from tests.integration.test_spark_harness import MemoryOffsets, value_of
from tests.mariadb_server import PASSWORD, USER, MariaDBServer, mariadb

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
__all__ = ["mariadb"]


async def test_mariadb_round_trip_with_an_update(mariadb: MariaDBServer) -> None:
    db = mariadb.database("shop")
    mariadb.sql(
        db,
        "CREATE TABLE orders (id bigint AUTO_INCREMENT PRIMARY KEY, "
        "updated_at datetime(6) NOT NULL DEFAULT current_timestamp(6) "
        "ON UPDATE current_timestamp(6), price decimal(10, 2), ratio double, paid boolean, "
        "note varchar(20), raw blob, day date, doc json, INDEX (updated_at, id)); "
        "INSERT INTO orders (price, ratio, paid, note, raw, day, doc) VALUES "
        "(12.30, 0.5, true, 'héllo', x'00ff', '2024-02-29', '{\"a\": 1}'), "
        "(NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    )
    config = {
        "mode": "jdbc",
        "connection.url": mariadb.url(db),
        "connection.user": USER,
        "connection.password": PASSWORD,
        "jdbc.mode": "timestamp+incrementing",
        "timestamp.column.name": "updated_at",
        "table.whitelist": "orders",
        "topic.prefix": "m-",
        "poll.interval.ms": "100",
    }
    offsets = MemoryOffsets()
    async with running_task(config, offsets) as (task, _, background):
        first = await read_all(task, offsets, background)
        mariadb.sql(db, "UPDATE orders SET note = 'changed' WHERE id = 2")
        again = await read_all(task, offsets, background)
    values = [value_of(r) for r in first]
    stamp = values[0].pop("updated_at")
    assert stamp.startswith("20")
    assert values[0] == {
        "id": 1,
        "price": "12.30",
        "ratio": 0.5,
        "paid": True,
        "note": "héllo",
        "raw": "AP8=",
        "day": "2024-02-29",
        "doc": '{"a": 1}',
    }
    assert values[1]["note"] is None
    keys = [(r.topic, json.loads(r.key or b"0")) for r in first]
    assert keys == [("m-orders", 1), ("m-orders", 2)]
    assert [value_of(r)["note"] for r in again] == ["changed"]
    (position,) = offsets.data.values()
    assert position["incrementing"] == 2
    assert position["timestamp"] == value_of(again[0])["updated_at"]
