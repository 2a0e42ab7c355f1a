"""PostgreSQL → Kafka: Spark's own JDBC reader and Kafka writer next to SparkSource
``mode=jdbc``, in one run, on the same tables; then the cost of polling an idle table.

Tables (written once into a PostgreSQL started by the bench, from Debian as the tests
start it): ``one`` with ``--rows`` rows, and ``part_0 .. part_{K-1}`` with ``--rows / K``
rows each (``--tables K``, default 4). A row: id, updated_at, customer, amount
numeric(12,2), quantity, note (about 150 bytes as JSON).

  spark-writer   ``spark.read.jdbc(url, table)`` (Spark's defaults: one partition per
                 table; several tables: the union) → ``df.write.format("kafka")``,
                 at-least-once, Spark on local[2]
  eos            SparkSource ``mode=jdbc``, ``jdbc.mode=incrementing``, exactly-once
                 (poll boundary), the worker's Spark on local[2]; one task for ``one``,
                 ``--tasks`` tasks for the K tables

Rates are rows/s from the start of the write (Spark) or the task's first poll
(SparkSource: its session is up and the database connected; the first records come once
Spark has read and sorted the first partition) to the last committed row. The target
is eos >= 0.8 x spark-writer. Every round is printed
(``--rounds``, default 2).

Then the idle poll: ``one``'s probe after its last row (what a task runs every
``poll.interval.ms`` on a table with nothing new), its ``EXPLAIN ANALYZE`` plan with and
without an index on the cursor columns, and its latency over 200 runs.

    python bench/jdbc.py [--rows 1000000] [--tables 4] [--tasks 2] [--rounds 2]
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import statistics
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from cpu_meter import PARTS, CpuMeter
from spark_to_kafka import resolve_writer_jars, timed_kafka_write, writer_session
from worker_run import (
    CACHE,
    Progress,
    bench_broker,
    bench_process,
    bench_settings,
    run_until_committed,
)

from eos.kafka import ClientConfig
from eos.kafka.admin import ensure_topic
from services.connectors.spark.jdbc_drivers import DRIVERS
from services.connectors.spark.jdbc_sql import CursorColumn, after, now_expression, probe_sql
from tests.postgres_server import PASSWORD, USER, PostgresServer, start_postgres

SPARK = {"spark.ui.enabled": "false", "spark.driver.memory": "2g"}
"""The worker's Spark settings (Spark's writer uses spark_to_kafka's, the same)."""
ROW_SQL = (
    "SELECT g, TIMESTAMP '2026-01-01' + g * INTERVAL '1 millisecond', "
    "'customer-' || (g % 10000), (g % 100000) / 100.0, g % 17, "
    "'note ' || md5(g::text) FROM generate_series({first}, {last}) g"
)
TABLE = (
    "CREATE TABLE {name} (id bigint PRIMARY KEY, updated_at timestamp(6) NOT NULL, "
    "customer text, amount numeric(12, 2), quantity int, note text)"
)


def make_tables(postgres: PostgresServer, rows: int, tables: int) -> str:
    """A database with ``one`` and ``part_*`` (see the module docstring); its name."""
    db = postgres.database("bench")
    with postgres.connect(db) as conn:
        conn.execute(TABLE.format(name="one"))
        conn.execute(f"INSERT INTO one {ROW_SQL.format(first=1, last=rows)}")
        each = rows // tables
        for n in range(tables):
            conn.execute(TABLE.format(name=f"part_{n}"))
            conn.execute(f"INSERT INTO part_{n} {ROW_SQL.format(first=1, last=each)}")
        conn.execute("VACUUM ANALYZE")
    return db


# ------------------------------------------------------------------ Spark's own writer


def spark_writer(
    url: str, tables: list[str], bootstrap: str, topic: str, jars: list[str], cpu: CpuMeter
) -> float:
    driver = DRIVERS["postgresql"]
    extra = {"spark.jars.packages": driver.coordinates(), "spark.jars.ivy": str(CACHE / "ivy")}
    spark = writer_session(2, jars, extra)
    properties = {"user": USER, "password": PASSWORD, "driver": driver.driver_class}
    try:
        frames = [spark.read.jdbc(url, table, properties=properties) for table in tables]
        df = frames[0]
        for other in frames[1:]:
            df = df.unionByName(other)
        return timed_kafka_write(df, bootstrap, topic, cpu)
    finally:
        spark.stop()


# ------------------------------------------------------------------ SparkSource


async def spark_source(
    url: str, tables: list[str], rows: int, tasks: int, bootstrap: str, cpu: CpuMeter
) -> float | None:
    settings = bench_settings(
        bootstrap,
        "bench-jdbc",
        {"spark.master": "local[2]", "spark.jdbc.drivers": "postgresql", **SPARK},
    )
    topic = f"{settings.group_id}-out"
    await ensure_topic(settings.client_config, topic, partitions=2)
    connector = {
        "name": "bench",
        "connector.class": "services.connectors.spark:SparkSource",
        "mode": "jdbc",
        "connection.url": url,
        "connection.user": USER,
        "connection.password": PASSWORD,
        "jdbc.mode": "incrementing",
        "table.whitelist": ",".join(tables),
        "topic": topic,
        "tasks.max": str(tasks),
    }
    progress = await run_until_committed(
        settings, connector, rows, max(180, rows / 2000),
        progress=Progress(rows, cpu=cpu, from_any_poll=True),
    )  # fmt: skip
    if not progress.done.is_set() or progress.first_poll is None:
        return None
    return progress.seconds


# ------------------------------------------------------------------ idle polls


def idle_poll(postgres: PostgresServer, db: str, rows: int) -> list[str]:
    """The probe of a timestamp+incrementing task on ``one`` after its last row: plan and
    latency without and with an index on (updated_at, id)."""
    cursor = [
        CursorColumn("updated_at", "timestamp", '"updated_at"'),
        CursorColumn("id", "integer", '"id"'),
    ]
    last = (datetime.datetime(2026, 1, 1) + datetime.timedelta(milliseconds=rows)).isoformat()
    where = after(cursor, [last, rows])
    probe = probe_sql('"public"."one"', cursor[0], where, now_expression("PostgreSQL", "timestamp"))
    lines = [f"probe: {probe}", ""]
    with postgres.connect(db) as conn:
        for label, ddl in (
            ("without an index on the cursor", "DROP INDEX IF EXISTS one_cursor"),
            ("with CREATE INDEX ON one (updated_at, id)",
             "CREATE INDEX one_cursor ON one (updated_at, id)"),
        ):  # fmt: skip
            conn.execute(ddl)
            conn.execute("ANALYZE one")
            plan = [r[0] for r in conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF) {probe}")]
            times = []
            for _ in range(200):
                start = time.perf_counter()
                conn.execute(probe).fetchall()
                times.append(time.perf_counter() - start)
            lines += [
                f"{label}: median {statistics.median(times) * 1000:.3f} ms, "
                f"p95 {sorted(times)[189] * 1000:.3f} ms per probe",
                *(f"    {line}" for line in plan),
                "",
            ]
    return lines


# ------------------------------------------------------------------ the run


def measure(
    postgres: PostgresServer,
    db: str,
    bootstrap: str,
    rows: int,
    tables: int,
    tasks: int,
    rounds: int,
    broker_pids: list[int],
    only: str | None = None,
) -> list[dict[str, Any]]:
    import pyspark

    url = postgres.url(db)
    jars, version = resolve_writer_jars(pyspark.__version__)
    config = ClientConfig({"bootstrap.servers": bootstrap})
    cases = [
        ("one table", ["one"], 1),
        (f"{tables} tables", [f"part_{n}" for n in range(tables)], tasks),
    ]
    if only is not None:
        cases = cases[:1] if only == "one" else cases[1:]
    results = []
    for round_ in range(1, rounds + 1):
        for label, names, task_count in cases:
            total = rows if names == ["one"] else rows // tables * tables
            topic = f"bench-jdbc-writer-{uuid.uuid4().hex[:8]}"
            anyio.run(partial(ensure_topic, config, topic, partitions=2))
            cpu, pg = CpuMeter(broker_pids), PostgresCpu(postgres)
            before = pg.now()
            took = spark_writer(url, names, bootstrap, topic, jars, cpu)
            used = {**cpu.used(), "postgres": pg.now() - before}
            results.append(
                {"round": round_, "case": label, "writer": f"spark-writer ({version})",
                 "tasks": len(names), "rate": total / took, "cpu": used, "rows": total}
            )  # fmt: skip
            print(f"  round {round_} {label} spark-writer: {total / took:,.0f} rows/s", flush=True)
            cpu = CpuMeter(broker_pids)
            before = pg.now()
            seconds = anyio.run(spark_source, url, names, total, task_count, bootstrap, cpu)
            rate = None if seconds is None else total / seconds
            eos_cpu = {**cpu.used(), "postgres": pg.now() - before} if seconds else None
            results.append(
                {"round": round_, "case": label, "writer": "eos mode=jdbc", "tasks": task_count,
                 "rate": rate, "cpu": eos_cpu, "rows": total}
            )  # fmt: skip
            print(f"  round {round_} {label} eos: {rate or 0:,.0f} rows/s", flush=True)
    return results


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| round | tables | writer | tasks/partitions | rows/s | eos ÷ spark-writer "
        "| CPU µs/row: Python | Spark JVM | broker | PostgreSQL |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    reference = {
        (r["round"], r["case"]): r["rate"] for r in results if r["writer"].startswith("spark")
    }
    for r in results:
        ref = reference.get((r["round"], r["case"]))
        ratio = (
            f"{r['rate'] / ref:.2f}" if r["rate"] and ref and r["writer"].startswith("eos") else ""
        )
        rate = "failed" if r["rate"] is None else f"{r['rate']:,.0f}"
        cpu = ["-"] * (len(PARTS) + 1)
        if r["cpu"] is not None:
            cpu = [f"{r['cpu'][part] / r['rows'] * 1e6:.1f}" for part in (*PARTS, "postgres")]
        lines.append(
            f"| {r['round']} | {r['case']} | {r['writer']} | {r['tasks']} | {rate} | {ratio} "
            f"| {' | '.join(cpu)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", choices=("one", "tables"), help="one case only")
    parser.add_argument("--log-reads", action="store_true", help="log each read (INFO)")
    args = parser.parse_args()
    bench_process()
    if args.log_reads:
        for module in ("jdbc_read", "jdbc_mode"):
            logging.getLogger(f"services.connectors.spark.{module}").setLevel(logging.INFO)
    postgres = start_postgres()
    try:
        each = args.rows // args.tables
        print(f"  writing {args.rows:,} rows (and {args.tables} tables of {each:,})", flush=True)
        db = make_tables(postgres, args.rows, args.tables)
        with bench_broker(None) as (bootstrap, broker_pids):
            results = measure(
                postgres, db, bootstrap, args.rows, args.tables, args.tasks, args.rounds,
                broker_pids, args.only,
            )  # fmt: skip
        idle = idle_poll(postgres, db, args.rows)
    finally:
        postgres.stop()
    print(table(results))
    for r in results:
        if r["writer"].startswith("eos") and r["rate"]:
            ref = next(x["rate"] for x in results if x["round"] == r["round"]
                       and x["case"] == r["case"] and x["writer"].startswith("spark"))  # fmt: skip
            verdict = "met" if r["rate"] >= 0.8 * ref else "NOT met"
            print(f"target eos >= 0.8 x spark-writer, round {r['round']}, {r['case']}: {verdict}")
    print()
    print("\n".join(idle))


def _ticks(pid: int, children: bool) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    used = int(fields[11]) + int(fields[12])
    if children:  # backends that exited and were reaped
        used += int(fields[13]) + int(fields[14])
    return used / os.sysconf("SC_CLK_TCK")


class PostgresCpu:
    """CPU seconds of the PostgreSQL server: the postmaster, its reaped backends, its
    live ones."""

    def __init__(self, postgres: PostgresServer) -> None:
        pid_file = Path(postgres.data) / "postmaster.pid"
        self.pid = int(pid_file.read_text().split()[0])

    def now(self) -> float:
        live = [
            int(entry.name)
            for entry in Path("/proc").iterdir()
            if entry.name.isdigit() and _parent(int(entry.name)) == self.pid
        ]
        return _ticks(self.pid, True) + sum(_ticks(pid, False) for pid in live)


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


if __name__ == "__main__":
    main()
