"""PostgresCdcSource next to Debezium 3.6.1 (in Kafka Connect's Java worker) on one
PostgreSQL, both on their defaults (JsonConverter with schemas, Debezium with
``exactly.once.support=required`` on an exactly-once Connect worker; eos with exactly-once,
its default). Each side runs alone, in its own worker process; every round runs all three
sides: ``eos`` (the snapshot read by the task's one connection, its default), ``eos-spark``
(``snapshot.reader=spark``: Spark's JDBC reader in ``local[2]``, the table in key ranges
across two Spark tasks; the snapshot row only, its stream is eos's) and ``debezium``.

Rows:

  snapshot      a table of ``--rows`` rows (8 columns of common types), read by a new
                connector (``snapshot.mode=initial``): rows/s from the connector's
                creation to its last record committed (read_committed, counted by a
                confluent-kafka consumer running alongside)
  stream        ``--changes`` updates, in database transactions of 10, written as fast as
                one connection can, to a connector that streams (``snapshot.mode=never``
                / ``no_data``): changes/s from the first change's commit to the last one
                committed in Kafka
  latency       100 single-row transactions a second for ``--seconds``: each change's
                time from its database commit (``source.ts_ms``) to when the consumer
                read it, p50 and p99 (ms)
  wal-idle      after the stream phase, ``--seconds`` of writes to a table no connector
                captures: the WAL the side's slot holds at the end
                (``pg_current_wal_lsn() - confirmed_flush_lsn``), on defaults (no
                heartbeat on either side) and with ``heartbeat.interval.ms=1000``

Usage: python bench/cdc.py [--rows 1000000] [--changes 200000] [--seconds 20] [--rounds 2]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from peers import create_topic, internal_topics, process, write_props
from worker_run import bench_broker, bench_process

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the tests' PostgreSQL and Debezium harnesses
from services.dev_kafka import free_ports  # noqa: E402
from tests.debezium_peer import CONNECTOR, connect_worker  # noqa: E402
from tests.postgres_server import PASSWORD, USER, PostgresServer, start_postgres  # noqa: E402

TABLE = (
    "CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL, qty int, "
    "price numeric(12,2), ok boolean, created timestamptz, note varchar(40), n float8)"
)
FILL = (
    "INSERT INTO items SELECT g, 'item ' || g, g % 1000, g / 100.0, g % 2 = 0, "
    "TIMESTAMPTZ '2024-01-01 00:00:00+00' + g * INTERVAL '1 s', 'note', g / 7.0 "
    "FROM generate_series(1, {rows}) g"
)


@dataclass
class Result:
    side: str
    snapshot: float = 0.0
    stream: float = 0.0
    p50: float = 0.0
    p99: float = 0.0
    wal_idle: dict[str, int] = field(default_factory=dict)


class Counter(threading.Thread):
    """Reads ``topic`` read_committed from the start; notes when ``target`` records were
    read, and each record's delay after its database commit (``source.ts_ms``)."""

    def __init__(self, bootstrap: str, topic: str, target: int, delays: bool = False) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.target, self.delays = bootstrap, topic, target, delays
        self.count = 0
        self.done_at = 0.0
        self.delay_ms: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": f"count-{uuid.uuid4().hex}",
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "allow.auto.create.topics": True,
        })  # fmt: skip
        consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        try:
            while self.count < self.target and not self.stop.is_set():
                for message in consumer.consume(10_000, timeout=0.2):
                    if message.error() is not None or message.value() is None:
                        continue
                    self.count += 1
                    if self.delays:
                        value = json.loads(message.value() or b"null")
                        payload = value.get("payload", value)
                        if payload.get("op") == "u":
                            self.delay_ms.append(time.time() * 1000 - payload["source"]["ts_ms"])
                self.done_at = time.perf_counter()
        finally:
            consumer.close()

    def wait(self, timeout: float) -> None:
        self.join(timeout)
        self.stop.set()
        if self.count < self.target:
            raise RuntimeError(f"{self.topic}: {self.count} of {self.target} records")


def connection_settings(postgres: PostgresServer, db: str, prefix: str) -> dict[str, str]:
    return {
        "database.hostname": "127.0.0.1", "database.port": str(postgres.port),
        "database.user": USER, "database.password": PASSWORD, "database.dbname": db,
        "topic.prefix": prefix, "slot.name": f"{prefix}_slot", "publication.name": f"{prefix}_pub",
        "publication.autocreate.mode": "filtered", "table.include.list": "public.items",
    }  # fmt: skip


SIDES = ("eos", "eos-spark", "debezium")
SPARK = {"spark.master": "local[2]", "spark.jdbc.drivers": "postgresql"}
"""The eos-spark worker's settings besides the defaults: two Spark tasks, the JDBC driver."""


@contextmanager
def eos_worker(bootstrap: str, work: Path, spark: bool = False) -> Iterator[str]:
    (port,) = free_ports(1)
    group = f"eos-{uuid.uuid4().hex[:8]}"
    props = {"bootstrap.servers": bootstrap, **internal_topics(group),
             "listeners": f"http://127.0.0.1:{port}", **(SPARK if spark else {})}  # fmt: skip
    worker = write_props(work / f"{group}.properties", props)
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "services.cli", "worker", str(worker)]
    with process(cmd, work / "eos.log", f"{url}/connectors", {"EOS_LOG_LEVEL": "WARNING"}):
        yield url


@contextmanager
def debezium_worker(bootstrap: str, work: Path) -> Iterator[str]:
    with connect_worker(bootstrap, work) as (url, _):
        yield url


def side_config(side: str, postgres: PostgresServer, db: str, prefix: str, mode: str,
                heartbeat: bool) -> dict[str, str]:  # fmt: skip
    config = connection_settings(postgres, db, prefix)
    if side.startswith("eos"):
        config |= {"connector.class": "PostgresCdcSource", "snapshot.mode": mode}
        if side == "eos-spark":
            config["snapshot.reader"] = "spark"
    else:
        config |= {
            "connector.class": CONNECTOR, "plugin.name": "pgoutput",
            "exactly.once.support": "required",
            "snapshot.mode": "no_data" if mode == "never" else mode,
        }  # fmt: skip
    if heartbeat:
        config["heartbeat.interval.ms"] = "1000"
    return config


def create(url: str, name: str, config: dict[str, str]) -> None:
    while True:
        response = httpx.post(f"{url}/connectors", json={"name": name, "config": config},
                              timeout=60)  # fmt: skip
        if response.status_code not in (409, 503):
            response.raise_for_status()
            return
        time.sleep(0.5)


def delete(url: str, name: str) -> None:
    httpx.delete(f"{url}/connectors/{name}", timeout=60)


def slot_lag(postgres: PostgresServer, db: str, slot: str) -> int:
    with postgres.connect(db) as conn:
        row = conn.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint "
            "FROM pg_replication_slots WHERE slot_name = %s", (slot,),
        ).fetchone()  # fmt: skip
    return int(row[0]) if row and row[0] is not None else -1


def drop_slot(postgres: PostgresServer, db: str, slot: str) -> None:
    with postgres.connect(db, admin=True) as conn:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            row = conn.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s",
                               (slot,)).fetchone()  # fmt: skip
            if row is None:
                return
            if not row[0]:
                conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
                return
            time.sleep(0.5)


def run_side(side: str, args: argparse.Namespace, bootstrap: str, postgres: PostgresServer,
             work: Path) -> Result:  # fmt: skip
    result = Result(side)
    runner: Callable[[str, Path], Any] = (
        functools.partial(eos_worker, spark=side == "eos-spark")
        if side.startswith("eos")
        else debezium_worker
    )
    with runner(bootstrap, work) as url:
        # snapshot
        db = postgres.database(f"bench_{side.replace('-', '_')}")
        with postgres.connect(db) as conn:
            conn.execute(TABLE)
            conn.execute(FILL.format(rows=int(args.rows)))
            conn.execute("VACUUM ANALYZE items")
        prefix = f"{side.replace('-', '')}{uuid.uuid4().hex[:6]}"  # a slot name: no "-"
        topic = f"{prefix}.public.items"
        create_topic(bootstrap, topic)
        counter = Counter(bootstrap, topic, args.rows)
        counter.start()
        started = time.perf_counter()
        create(url, prefix, side_config(side, postgres, db, prefix, "initial", False))
        counter.wait(1800)
        result.snapshot = args.rows / (counter.done_at - started)
        delete(url, prefix)
        drop_slot(postgres, db, f"{prefix}_slot")
        if side == "eos-spark":
            return result  # its stream is eos's
        # stream and latency, then WAL while idle, on defaults and with heartbeats
        for heartbeat in (False, True):
            prefix = f"{side.replace('-', '')}{uuid.uuid4().hex[:6]}"  # a slot name: no "-"
            topic = f"{prefix}.public.items"
            create_topic(bootstrap, topic)
            create(url, prefix, side_config(side, postgres, db, prefix, "never", heartbeat))
            time.sleep(10)  # the slot created, streaming
            if not heartbeat:
                counter = Counter(bootstrap, topic, args.changes)
                counter.start()
                first = time.perf_counter()
                with postgres.connect(db) as conn:
                    for start in range(1, args.changes + 1, 10):
                        conn.execute("UPDATE items SET qty = qty + 1 WHERE id BETWEEN %s AND %s",
                                     (start, start + 9))  # fmt: skip
                counter.wait(1800)
                result.stream = args.changes / (counter.done_at - first)
                target = int(args.seconds * 100)
                counter = Counter(bootstrap, topic, args.changes + target, delays=True)
                counter.start()
                with postgres.connect(db) as conn:
                    for i in range(target):
                        conn.execute("UPDATE items SET qty = qty + 1 WHERE id = %s", (i + 1,))
                        time.sleep(0.01)
                counter.wait(600)
                delays = sorted(counter.delay_ms[-target:])
                result.p50 = statistics.median(delays)
                result.p99 = delays[int(len(delays) * 0.99) - 1]
            with postgres.connect(db) as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS other (id serial, filler text)")
                deadline = time.monotonic() + args.seconds
                while time.monotonic() < deadline:
                    conn.execute("INSERT INTO other (filler) SELECT repeat('x', 2000)")
                    time.sleep(0.01)
            time.sleep(3)
            result.wal_idle["heartbeat" if heartbeat else "default"] = slot_lag(
                postgres, db, f"{prefix}_slot"
            )
            delete(url, prefix)
            drop_slot(postgres, db, f"{prefix}_slot")
    return result


def table(rounds: list[list[Result]]) -> str:
    lines = [
        "| side | snapshot rows/s | stream changes/s | latency p50 / p99 ms "
        "| WAL held idle, default / heartbeat |",
        "|---|---|---|---|---|",
    ]
    for n, results in enumerate(rounds, 1):
        for r in results:
            if r.side == "eos-spark":
                lines.append(f"| {r.side} (round {n}) | {r.snapshot:,.0f} | — | — | — |")
                continue
            wal = " / ".join(
                f"{r.wal_idle.get(k, -1) / 1e6:.1f} MB" for k in ("default", "heartbeat")
            )
            lines.append(f"| {r.side} (round {n}) | {r.snapshot:,.0f} | {r.stream:,.0f} | "
                         f"{r.p50:.0f} / {r.p99:.0f} | {wal} |")  # fmt: skip
    by_side = [{r.side: r for r in results} for results in rounds]
    complete = [sides for sides in by_side if set(sides) == set(SIDES)]
    if complete:

        def ratios(side: str, measure: str) -> str:
            return ", ".join(
                f"{getattr(s[side], measure) / getattr(s['debezium'], measure):.2f}x"
                for s in complete
            )

        lines.append("")
        lines.append(
            f"against Debezium, each round: snapshot eos {ratios('eos', 'snapshot')}, "
            f"eos-spark {ratios('eos-spark', 'snapshot')}; stream eos {ratios('eos', 'stream')}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    bench_process()
    postgres = start_postgres()
    work = Path(tempfile.mkdtemp(prefix="eos-cdc-bench-"))
    rounds: list[list[Result]] = []
    try:
        with bench_broker(args.bootstrap, heap="1g") as (bootstrap, _):
            for n in range(args.rounds):
                sides = list(SIDES) if n % 2 == 0 else list(reversed(SIDES))
                results = []
                for side in sides:
                    print(f"round {n + 1}: {side}", flush=True)
                    results.append(run_side(side, args, bootstrap, postgres, work))
                    print(table([*rounds, results]), flush=True)
                rounds.append(sorted(results, key=lambda r: SIDES.index(r.side)))
    finally:
        postgres.stop()
    print(f"\nmachine: {os.cpu_count()} cores, load average {os.getloadavg()}")
    print(table(rounds))


if __name__ == "__main__":
    main()
