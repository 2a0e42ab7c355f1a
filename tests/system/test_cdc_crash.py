"""PostgresCdcSource through crashes: while a writer runs multi-table database
transactions (a transfer inserted, two accounts updated) and deletes, an ``eos worker``
process snapshots 20 000 rows and then streams, and is SIGKILLed 10 times — the first
time during the snapshot, then mid-stream at random points. Judged with a read_committed
confluent-kafka consumer (a client the worker does not use):

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
from tests.integration.worker_harness import QUICK_REJOIN, WorkerProcess, worker_props
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
    props = {**worker_props(bootstrap, group), **QUICK_REJOIN}
    config = cdc_config(postgres, db, name, snapshot_fetch_size="500")
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
