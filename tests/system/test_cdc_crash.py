"""PostgresCdcSource through crashes: while a writer runs multi-table database
transactions (a transfer inserted, two accounts updated) and deletes, an ``eos worker``
process snapshots 20 000 rows (``snapshot.reader=spark``: Spark's JDBC reader in key
ranges, resumed after the kill at a new exported snapshot) and then streams, and is
SIGKILLed 10 times — the first time during the snapshot, then mid-stream at random
points (the incremental snapshot's test below kills the one-connection reader). Judged
with a read_committed confluent-kafka consumer (a client the worker does not use):

- every row's events are, in order: its snapshot image (``r``) or its insert (``c``),
  then each later version exactly once (consecutive versions), a delete last, then its
  tombstone; nothing twice, nothing missing;
- every database transaction that began after the last snapshot read has all its
  changes there; one from before has those that came after its rows' reads (the others
  are in the rows' snapshot images), and none twice;
- ``pg_replication_slots`` never confirmed beyond the offset Kafka committed.
"""

from __future__ import annotations

import functools
import random
import signal
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from eos.kafka import ClientConfig
from eos.kafka.admin import ensure_topic
from services.connectors.postgres_cdc.pgoutput import parse_lsn
from tests.integration.jdbc_helpers import committed, end_offsets
from tests.integration.test_postgres_cdc import cdc_config
from tests.integration.worker_harness import (
    QUICK_REJOIN,
    SPARK_JDBC,
    WorkerProcess,
    worker_props,
)
from tests.postgres_server import PostgresServer, postgres

pytestmark = [pytest.mark.system, pytest.mark.timeout(900)]
__all__ = ["postgres"]

KILLS = 10
ACCOUNTS = 500
TRANSFERS = 20_000


class Writer(threading.Thread):
    """About 60 transactions a second: a transfer inserted and two accounts updated in
    one, or an old transfer deleted; records each transaction's id and change count."""

    def __init__(self, postgres: PostgresServer, database: str) -> None:
        super().__init__(daemon=True)
        self.postgres, self.database = postgres, database
        self.transactions: dict[int, int] = {}
        self.started_after: dict[int, int] = {}
        """Transaction id → the WAL position before it began (below its commit LSN)."""
        self.stop = threading.Event()
        self.failed: BaseException | None = None

    def run(self) -> None:
        rng = random.Random(11)
        try:
            with self.postgres.connect(self.database) as conn:
                while not self.stop.is_set():
                    start = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
                    assert start is not None
                    with conn.transaction():
                        row = conn.execute("SELECT txid_current()").fetchone()
                        assert row is not None
                        if rng.random() < 0.15:
                            victim = rng.randint(1, TRANSFERS)
                            done = conn.execute("DELETE FROM transfers WHERE id = %s", (victim,))
                            changes = done.rowcount
                        else:
                            a, b = rng.sample(range(1, ACCOUNTS + 1), 2)
                            conn.execute("INSERT INTO transfers (amount) VALUES (%s)", (a,))
                            for account in (a, b):
                                conn.execute(
                                    "UPDATE accounts SET balance = balance + 1, "
                                    "version = version + 1 WHERE id = %s",
                                    (account,),
                                )
                            changes = 3
                    if changes:
                        self.transactions[row[0]] = changes
                        self.started_after[row[0]] = parse_lsn(start[0])
                    time.sleep(0.015)
        except BaseException as exc:
            self.failed = exc


class SlotWatch(threading.Thread):
    """Samples the slot's confirmed position, then the offset Kafka committed (read
    after, so a later commit can only make the comparison easier): never ahead."""

    def __init__(self, postgres: PostgresServer, db: str, slot: str, bootstrap: str,
                 offsets_topic: str) -> None:  # fmt: skip
        super().__init__(daemon=True)
        self.args = postgres, db, slot, bootstrap, offsets_topic
        self.stop = threading.Event()
        self.ahead: list[tuple[int, int]] = []
        self.samples = 0

    def run(self) -> None:
        postgres, db, slot, bootstrap, offsets_topic = self.args
        while not self.stop.wait(1.5):
            with postgres.connect(db) as conn:
                row = conn.execute(
                    "SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                    "WHERE slot_name = %s", (slot,),
                ).fetchone()  # fmt: skip
            if row is None or row[0] is None:
                continue
            confirmed = parse_lsn(row[0])
            offsets = [v for _, _, v in committed(bootstrap, offsets_topic) if v]
            stored = max((int(v.get("lsn", 0)) for v in offsets), default=0)
            self.samples += 1
            if offsets and confirmed > stored:
                self.ahead.append((confirmed, stored))


def test_cdc_exactly_once_through_sigkills(
    postgres: PostgresServer,
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    db = postgres.database("cdc_crash")
    with postgres.connect(db) as conn:
        conn.execute(
            "CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL, "
            "version int NOT NULL)"
        )
        conn.execute(
            "CREATE TABLE transfers (id bigserial PRIMARY KEY, amount int NOT NULL, "
            "version int NOT NULL DEFAULT 1)"
        )
        conn.execute(
            "INSERT INTO accounts SELECT g, 0, 1 FROM generate_series(1, %s) g", (ACCOUNTS,)
        )
        conn.execute(
            "INSERT INTO transfers (amount) SELECT g FROM generate_series(1, %s) g",
            (TRANSFERS,),
        )
    name = unique_name("cdc")
    topics = {t: f"{name}.public.{t}" for t in ("accounts", "transfers")}
    for topic in topics.values():
        anyio.run(functools.partial(ensure_topic, client_config, topic, partitions=1))
    group = unique_name("g")
    props = {**worker_props(bootstrap, group), **QUICK_REJOIN, **SPARK_JDBC}
    config = cdc_config(postgres, db, name, snapshot_fetch_size="500", snapshot_reader="spark")
    worker = WorkerProcess(tmp_path, props, [config])
    writer = Writer(postgres, db)
    watch = SlotWatch(postgres, db, config["slot.name"], bootstrap, f"{group}-offsets")
    rng = random.Random(f"cdc-{name}")
    writer.start()
    try:
        worker.start()
        # the first kill: during the snapshot (transfers is read after accounts)
        deadline = time.monotonic() + 120
        while end_offsets_or_zero(bootstrap, topics["transfers"]) < 2000:
            assert time.monotonic() < deadline, worker.tail()
            assert worker.alive(), worker.tail()
            time.sleep(0.02)
        worker.kill(signal.SIGKILL)
        assert end_offsets_or_zero(bootstrap, topics["transfers"]) < TRANSFERS, (
            "the snapshot ended before the kill"
        )
        watch.start()
        for _ in range(KILLS - 1):
            worker.start()
            worker.wait_running(name, 1, 120)
            target = end_offsets(bootstrap, topics["accounts"]) + rng.randint(50, 400)
            while end_offsets(bootstrap, topics["accounts"]) < target:
                assert worker.alive(), worker.tail()
                assert writer.failed is None, writer.failed
                time.sleep(0.05)
            time.sleep(rng.uniform(0, 0.3))
            worker.kill(signal.SIGKILL)
        worker.start()
        worker.wait_running(name, 1, 120)
        time.sleep(2)
        writer.stop.set()
        writer.join(10)
        assert writer.failed is None, writer.failed
        expected = sum(writer.transactions.values())
        deadline = time.monotonic() + 120
        while True:
            events = {t: committed(bootstrap, topic) for t, topic in topics.items()}
            per_tx = _changes_per_transaction(events)
            if sum(per_tx.values()) >= expected or time.monotonic() > deadline:
                break
            time.sleep(1)
    finally:
        writer.stop.set()
        watch.stop.set()
        worker.stop()
    assert worker.starts == KILLS + 1
    last_read = max(
        value["source"]["lsn"] for got in events.values() for _, _, value in got
        if value is not None and value["op"] == "r"
    )  # fmt: skip
    after = {tx for tx, lsn in writer.started_after.items() if lsn > last_read}
    assert len(after) > 1000
    assert set(per_tx) <= set(writer.transactions)
    assert {tx: per_tx.get(tx) for tx in after} == {tx: writer.transactions[tx] for tx in after}, (
        _diff(per_tx, writer.transactions)
    )
    assert all(n <= writer.transactions[tx] for tx, n in per_tx.items())
    for table, got in events.items():
        _check_row_histories(table, got)
    assert watch.samples > 5
    assert not watch.ahead, f"slot confirmed beyond Kafka's offsets: {watch.ahead[:3]}"


def end_offsets_or_zero(bootstrap: str, topic: str) -> int:
    try:
        return end_offsets(bootstrap, topic)
    except Exception:
        return 0


def _changes_per_transaction(events: dict[str, list[tuple[int, Any, Any]]]) -> dict[int, int]:
    counts: Counter[int] = Counter()
    for got in events.values():
        for _, _, value in got:
            if value is not None and value["op"] in "cud":
                counts[value["source"]["txId"]] += 1
    return dict(counts)


def _diff(got: dict[int, int], wanted: dict[int, int]) -> str:
    wrong = {tx: (got.get(tx), n) for tx, n in wanted.items() if got.get(tx) != n}
    extra = {tx: n for tx, n in got.items() if tx not in wanted}
    return f"(got, wanted) per transaction: {list(wrong.items())[:10]}; extra: {extra}"


def _check_row_histories(table: str, got: list[tuple[int, Any, Any]]) -> None:
    history: dict[int, list[tuple[str, int | None]]] = defaultdict(list)
    for _, key, value in got:
        if value is None:
            history[key["id"]].append(("tombstone", None))
        else:
            image = value["after"] if value["after"] is not None else value["before"]
            history[key["id"]].append((value["op"], image.get("version")))
    for row, events in history.items():
        ops = [op for op, _ in events]
        assert ops[0] in ("r", "c"), (table, row, events)
        if "d" in ops:
            assert ops[-2:] == ["d", "tombstone"], (table, row, events)
            events = events[:-2]
        versions = [version for _, version in events]
        first = versions[0]
        assert first is not None, (table, row, events)
        assert versions == list(range(first, first + len(versions))), (table, row, events)


ROWS = 20_000


def test_an_incremental_snapshot_resumes_after_a_sigkill(
    postgres: PostgresServer,
    bootstrap: str,
    client_config: ClientConfig,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    """A signal's incremental snapshot of 20 000 rows while a writer updates them; the
    worker SIGKILLed mid-snapshot and started again: the snapshot goes on from its offset
    (each row's image once), and every update appears once: before the signal, in or
    after its row's image, never before the image it is already in."""
    db = postgres.database("cdc_incremental")
    with postgres.connect(db) as conn:
        conn.execute("CREATE TABLE rows (id int PRIMARY KEY, version int NOT NULL)")
        conn.execute("CREATE TABLE signals (id text PRIMARY KEY, type text, data text)")
        conn.execute("INSERT INTO rows SELECT g, 1 FROM generate_series(1, %s) g", (ROWS,))
    name = unique_name("cdc")
    topic = f"{name}.public.rows"
    anyio.run(functools.partial(ensure_topic, client_config, topic, partitions=1))
    props = {**worker_props(bootstrap, unique_name("g")), **QUICK_REJOIN}
    config = cdc_config(
        postgres, db, name, snapshot_mode="never", snapshot_fetch_size="250",
        table_include_list="public.rows", signal_data_collection="public.signals",
    )  # fmt: skip
    worker = WorkerProcess(tmp_path, props, [config])
    stop, failed = threading.Event(), []

    def updates() -> None:
        rng = random.Random(7)
        try:
            with postgres.connect(db) as conn:
                while not stop.is_set():
                    conn.execute(
                        "UPDATE rows SET version = version + 1 WHERE id = %s",
                        (rng.randint(1, ROWS),),
                    )
                    time.sleep(0.005)
        except BaseException as exc:
            failed.append(exc)

    writer = threading.Thread(target=updates, daemon=True)
    try:
        worker.start()
        worker.wait_running(name, 1, 120)
        writer.start()
        time.sleep(1)  # some updates streamed before the signal
        streamed = end_offsets_or_zero(bootstrap, topic)
        with postgres.connect(db) as conn:
            conn.execute(
                "INSERT INTO signals VALUES ('s', 'execute-snapshot', %s)",
                ('{"data-collections": ["public.rows"]}',),
            )
        deadline = time.monotonic() + 120
        while end_offsets_or_zero(bootstrap, topic) < streamed + 2000:
            assert time.monotonic() < deadline, worker.tail()
            assert worker.alive(), worker.tail()
            time.sleep(0.02)
        worker.kill(signal.SIGKILL)
        assert _images(bootstrap, topic) < ROWS, "the snapshot ended before the kill"
        worker.start()
        worker.wait_running(name, 1, 120)
        deadline = time.monotonic() + 180
        while _images(bootstrap, topic) < ROWS:
            assert time.monotonic() < deadline, worker.tail()
            assert worker.alive(), worker.tail()
            time.sleep(0.5)
        stop.set()
        writer.join(10)
        assert not failed, failed
        with postgres.connect(db) as conn:
            final = dict(conn.execute("SELECT id, version FROM rows").fetchall())
        deadline = time.monotonic() + 60
        while True:  # the stream catches up with the last updates
            got = committed(bootstrap, topic)
            replayed = {key["id"]: value["after"]["version"] for _, key, value in got}
            if replayed == final or time.monotonic() > deadline:
                break
            time.sleep(1)
    finally:
        stop.set()
        worker.stop()
    assert worker.starts == 2
    assert replayed == final
    history: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for _, key, value in got:
        history[key["id"]].append((value["op"], value["after"]["version"]))
    for row, events in history.items():
        ops = [op for op, _ in events]
        assert ops.count("r") == 1, (row, events)  # its image once
        image = ops.index("r")
        assert set(ops) - {"r"} <= {"u"}, (row, events)
        versions = [version for _, version in events]
        before, since = versions[:image], versions[image:]
        assert before == list(range(2, 2 + len(before))), (row, events)  # streamed, in order
        assert since == list(range(since[0], since[0] + len(since))), (row, events)
        assert not before or since[0] >= before[-1], (row, events)  # the image holds them
    assert len(history) == ROWS


def _images(bootstrap: str, topic: str) -> int:
    """The incremental snapshot's images committed so far."""
    got = committed(bootstrap, topic) if end_offsets_or_zero(bootstrap, topic) else []
    return sum(1 for _, _, v in got if v is not None and v["op"] == "r")
