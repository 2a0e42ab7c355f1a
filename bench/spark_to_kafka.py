"""Parquet → Kafka: Spark's own Kafka writer next to SparkSource, in one run, one table.

The same dataset (``--rows`` rows of about 200 bytes as JSON, Parquet files written by
``services.connectors.spark.generate_sample_dataset``) is written to a fresh topic by:

  spark-writer  ``df.write.format("kafka")`` (at-least-once), Spark with local[N]
  alos          SparkSource in a worker, exactly.once.source.support=disabled
  eos           SparkSource in a worker, exactly-once, transaction.boundary=poll

for N = 1 and 2 tasks (Spark: local[1] / local[2]). Rates are rows/s from the start of
the write (Spark) or the first poll (SparkSource; the Spark session is already up)
to the last committed row. The target is eos >= 0.8 x spark-writer (issue 22, at 5 M rows).

Spark's writer needs ``spark-sql-kafka-0-10`` from Maven Central; it is resolved with
``mvn`` (bench/spark-kafka-pom.xml) into .cache/spark-kafka/. When Maven Central has
no build for the installed pyspark version, the newest older release that resolves
is used, and the table says which. Usage:

    python bench/spark_to_kafka.py [--bootstrap 127.0.0.1:9092] [--rows 1000000]

Without --bootstrap it starts a local Kafka (eos dev-kafka) on free ports.

``--modes delta,iceberg`` (or adding them to the default list) measures the lakehouse
changes modes instead: the sample rows written as ONE version of a Delta table (change
data feed on) and ONE snapshot of an Iceberg table, then read exactly-once by
``mode=delta-changes`` / ``mode=iceberg-changes`` and, for reference, by ``mode=table``
on the same table (``incrementing.column=id``). Target: changes >= 0.8 x table.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from cpu_meter import PARTS, CpuMeter
from worker_run import (
    CACHE,
    REPO,
    Progress,
    bench_broker,
    bench_process,
    bench_settings,
    run_until_committed,
    spark_connector,
)

from eos.kafka import ClientConfig
from eos.kafka.admin import ensure_topic
from services.connectors.spark import generate_sample_dataset

FALLBACK_VERSIONS = ("4.2.0", "4.1.1", "4.1.0", "4.0.1", "4.0.0")
"""Older Spark releases tried for spark-sql-kafka when the installed one is not on Central."""
TOKEN_PROVIDER_VERSIONS = (None, "4.0.0")
"""spark-token-provider-kafka versions tried with each (None: the same version)."""
WRITER_JARS = (
    "spark-sql-kafka-0-10",
    "spark-token-provider-kafka-0-10",
    "kafka-clients",
    "commons-pool2",
)
SPARK = {"spark.ui.enabled": "false", "spark.driver.memory": "2g"}


# ------------------------------------------------------------------ Spark's own writer


def resolve_writer_jars(version: str) -> tuple[list[str], str]:
    """Jars of Spark's Kafka writer (and the version found), resolved with Maven."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("mvn not found: install Apache Maven (Debian: apt-get install maven)")
    tried = []
    for candidate in (version, *[v for v in FALLBACK_VERSIONS if v < version]):
        for token in TOKEN_PROVIDER_VERSIONS:
            target = CACHE / "spark-kafka" / f"{candidate}-{token or candidate}"
            if not (target / ".complete").exists():
                cmd = [
                    mvn, "-q", "-B", "-U",
                    "-s", str(REPO / "bench" / "spark-kafka-settings.xml"),
                    "-f", str(REPO / "bench" / "spark-kafka-pom.xml"),
                    f"-Dmaven.repo.local={CACHE / 'm2'}",
                    f"-Dspark.version={candidate}",
                    f"-Dtoken.provider.version={token or candidate}",
                    "dependency:copy-dependencies", "-DincludeScope=runtime",
                    f"-DoutputDirectory={target}",
                ]  # fmt: skip
                done = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    tried.append(f"{candidate}/{token or candidate}")
                    continue
                (target / ".complete").touch()
            jars = sorted(str(p) for p in target.glob("*.jar") if p.name.startswith(WRITER_JARS))
            label = candidate if token is None else f"{candidate} (token provider {token})"
            return jars, label
    raise RuntimeError(f"spark-sql-kafka not resolvable from Maven Central (tried {tried})")


def writer_session(cores: int, jars: list[str], extra: Mapping[str, str] | None = None) -> Any:
    """A Spark session on local[``cores``] with Spark's Kafka writer (``jars``) loaded."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(f"local[{cores}]").appName("bench-spark-writer")
    for key, value in {
        **SPARK,
        "spark.jars": ",".join(jars),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        **(extra or {}),
    }.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def timed_kafka_write(df: Any, bootstrap: str, topic: str, cpu: CpuMeter) -> float:
    """Seconds Spark's Kafka writer takes for ``df``'s rows (key ``id``, value the row as
    JSON); ``cpu`` measures the same span."""
    from pyspark.sql import functions as F

    out = df.select(
        F.col("id").cast("string").alias("key"), F.to_json(F.struct("*")).alias("value")
    )
    cpu.start()
    start = time.perf_counter()
    out.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option(
        "topic", topic
    ).save()
    took = time.perf_counter() - start
    cpu.mark()
    return took


def spark_writer(
    data: Path, bootstrap: str, topic: str, cores: int, jars: list[str], cpu: CpuMeter
) -> float:
    """Seconds Spark's own Kafka writer takes for the dataset (session start excluded);
    ``cpu`` measures the same span."""
    spark = writer_session(cores, jars)
    try:
        return timed_kafka_write(spark.read.parquet(str(data)), bootstrap, topic, cpu)
    finally:
        spark.stop()


# ------------------------------------------------------------------ SparkSource


async def spark_source(
    data: Path,
    bootstrap: str,
    rows: int,
    tasks: int,
    eos: bool,
    extra: Mapping[str, str],
    cpu: CpuMeter,
) -> float | None:
    """Seconds SparkSource takes from the first poll to the last committed row (None if
    the commits did not cover every row in time); ``cpu`` measures the same span."""
    settings = bench_settings(
        bootstrap,
        "bench-spark",
        {
            "exactly.once.source.support": "enabled" if eos else "disabled",
            # at-least-once is timed to the offset flush covering the last row
            "offset.flush.interval.ms": "1000",
            "spark.master": "local[2]",
            **SPARK,
        },
    )
    connector = await spark_connector(settings, "bench", data, **{"tasks.max": str(tasks), **extra})
    progress = await run_until_committed(
        settings, connector, rows, max(180, rows / 2000), progress=Progress(rows, cpu=cpu)
    )
    if not progress.done.is_set() or progress.first_poll is None:
        return None
    return progress.seconds


# ------------------------------------------------------------------ lakehouse changes

LAKEHOUSE = {"spark.lakehouse": "delta,iceberg"}


def write_lake_tables(data: Path, home: Path) -> tuple[str, str]:
    """The Parquet sample as one Delta version and one Iceberg snapshot (kept in the
    cache: written once per row count)."""
    from services.connectors.spark.session import create_session

    delta, iceberg = str(home / "delta"), "iceberg.db.bench"
    settings = {
        **SPARK,
        **LAKEHOUSE,
        "spark.master": "local[2]",
        "spark.lakehouse.iceberg.warehouse": str(home / "iceberg"),
    }
    if (home / ".complete").exists():
        return delta, iceberg
    shutil.rmtree(home, ignore_errors=True)
    spark = create_session(settings)
    df = spark.read.parquet(str(data))
    df.write.format("delta").option("delta.enableChangeDataFeed", "true").save(delta)
    df.writeTo(iceberg).using("iceberg").create()
    home.joinpath(".complete").touch()
    return delta, iceberg


async def lake_source(
    bootstrap: str, rows: int, warehouse: Path, extra: Mapping[str, str], cpu: CpuMeter
) -> float | None:
    settings = bench_settings(
        bootstrap,
        "bench-lake",
        {
            "spark.master": "local[2]",
            **SPARK,
            **LAKEHOUSE,
            "spark.lakehouse.iceberg.warehouse": str(warehouse),
        },
    )
    connector = await spark_connector(settings, "bench", Path("/unused"), **extra)
    progress = await run_until_committed(
        settings, connector, rows, max(180, rows / 2000), progress=Progress(rows, cpu=cpu)
    )
    if not progress.done.is_set() or progress.first_poll is None:
        return None
    return progress.seconds


def measure_lakehouse(
    data: Path, bootstrap: str, rows: int, formats: list[str], broker_pids: list[int]
) -> list[tuple[str, str, float | None, Any]]:
    """(format, mode, rows/s, CPU) for each format: table mode, then changes mode."""
    home = CACHE / "bench" / f"lake-{rows}"
    delta, iceberg = write_lake_tables(data, home)
    sources = {
        "delta": ({"path": delta, "format": "delta"}, {"path": delta}),
        "iceberg": ({"table": iceberg, "path": ""}, {"table": iceberg, "path": ""}),
    }
    results = []
    for fmt in formats:
        table_source, changes_source = sources[fmt]
        runs = {
            "table": {
                "mode": "table",
                "incrementing.column": "id",
                "incrementing.column.unique": "true",
                **table_source,
            },
            f"{fmt}-changes": {"mode": f"{fmt}-changes", **changes_source},
            f"{fmt}-changes, boundary=connector": {
                "mode": f"{fmt}-changes",
                "transaction.boundary": "connector",
                **changes_source,
            },
        }
        for mode, extra in runs.items():
            cpu = CpuMeter(broker_pids)
            took = anyio.run(lake_source, bootstrap, rows, home / "iceberg", extra, cpu)
            rate = None if took is None else rows / took
            results.append((fmt, mode, rate, cpu.used() if took is not None else None))
            print(f"  measured {fmt} {mode}: {rate or 0:,.0f} rows/s", flush=True)
    return results


def lake_table(rows: int, results: list[tuple[str, str, float | None, Any]]) -> str:
    lines = [
        f"| table ({rows:,} rows, one version) | mode | rows/s exactly-once | vs table mode "
        "| CPU µs/row: Python | Spark JVM | broker |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    reference = {fmt: rate for fmt, mode, rate, _ in results if mode == "table"}
    for fmt, mode, rate, cpu in results:
        ref = reference.get(fmt)
        ratio = f"{rate / ref:.2f}" if rate and ref else "-"
        shown = "failed" if rate is None else f"{rate:,.0f}"
        per_row = ["-"] * len(PARTS) if cpu is None else [
            f"{cpu[part] / rows * 1e6:.1f}" for part in PARTS
        ]  # fmt: skip
        lines.append(f"| {fmt} | {mode} | {shown} | {ratio} | {' | '.join(per_row)} |")
    return "\n".join(lines)


# ------------------------------------------------------------------ the table


@dataclass
class Row:
    writer: str
    tasks: int
    seconds: float | None
    rows: int
    note: str = ""
    cpu: dict[str, float] | None = None
    """CPU seconds per part over the measured span."""

    @property
    def rate(self) -> float | None:
        return None if self.seconds is None else self.rows / self.seconds


def table(rows: list[Row]) -> str:
    reference = {r.tasks: r.rate for r in rows if r.writer == "spark-writer"}
    lines = [
        "| writer | tasks | guarantee | rows/s | vs spark-writer "
        "| CPU µs/row: Python | Spark JVM | broker | all | note |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    guarantee = {"spark-writer": "at-least-once", "alos": "at-least-once", "eos": "exactly-once"}
    for r in rows:
        ref = reference.get(r.tasks)
        rate = "pending" if r.rate is None else f"{r.rate:,.0f}"
        ratio = f"{r.rate / ref:.2f}" if r.rate and ref else "-"
        if r.cpu is None or r.seconds is None:
            cpu = ["-"] * (len(PARTS) + 1)
        else:
            per_row = [r.cpu[part] / r.rows * 1e6 for part in PARTS]
            cpu = [f"{us:.1f}" for us in (*per_row, sum(per_row))]
        lines.append(
            f"| {r.writer} | {r.tasks} | {guarantee[r.writer]} | {rate} | {ratio} "
            f"| {' | '.join(cpu)} | {r.note} |"
        )
    return "\n".join(lines)


def sample_data(rows: int, files: int) -> Path:
    data = CACHE / "bench" / f"spark-sample-{rows}-{files}"
    if not (data / ".complete").exists():
        shutil.rmtree(data, ignore_errors=True)
        print(f"  writing {rows:,} sample rows as {files} Parquet files into {data}", flush=True)
        generate_sample_dataset(data, rows, files=files)
        (data / ".complete").touch()
    return data


def measure(
    bootstrap: str,
    rows: int,
    files: int,
    modes: list[str],
    task_counts: list[int],
    extra: Mapping[str, str],
    broker_pids: list[int],
) -> list[Row]:
    import pyspark

    data = sample_data(rows, files)
    config = ClientConfig({"bootstrap.servers": bootstrap})
    results: list[Row] = []
    for tasks in task_counts:
        if "spark" in modes:
            try:
                jars, version = resolve_writer_jars(pyspark.__version__)
                topic = f"bench-spark-writer-{uuid.uuid4().hex[:8]}"
                anyio.run(partial(ensure_topic, config, topic, partitions=2))
                cpu = CpuMeter(broker_pids)
                seconds = spark_writer(data, bootstrap, topic, tasks, jars, cpu)
                note = f"local[{tasks}], spark-sql-kafka {version}"
                results.append(Row("spark-writer", tasks, seconds, rows, note, cpu.used()))
            except Exception as exc:  # the table still shows the others
                results.append(Row("spark-writer", tasks, None, rows, f"failed: {exc}"[:120]))
            print(f"  measured spark-writer tasks={tasks}: {results[-1].rate or 0:,.0f} rows/s")
        for mode in ("alos", "eos"):
            if mode in modes:
                cpu = CpuMeter(broker_pids)
                took = anyio.run(
                    spark_source, data, bootstrap, rows, tasks, mode == "eos", extra, cpu
                )
                note = " ".join(["worker with local[2]", *(f"{k}={v}" for k, v in extra.items())])
                if took is None:
                    note = "no commit covered every row in time (at-least-once offset flush)"
                used = cpu.used() if took is not None else None
                results.append(Row(mode, tasks, took, rows, note, used))
                print(f"  measured {mode} tasks={tasks}: {results[-1].rate or 0:,.0f} rows/s")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--modes", default="spark,alos,eos", help="comma-separated subset")
    parser.add_argument("--tasks", default="1,2", help="comma-separated task counts")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a SparkSource setting for the eos/alos runs (repeatable)",
    )
    args = parser.parse_args()
    bench_process()
    # the broker's CPU is measured only when the bench starts it (no --bootstrap)
    modes = args.modes.split(",")
    lake = [m for m in modes if m in ("delta", "iceberg")]
    with bench_broker(args.bootstrap) as (bootstrap, broker_pids):
        rows = measure(
            bootstrap,
            args.rows,
            args.files,
            [m for m in modes if m not in lake],
            [int(n) for n in args.tasks.split(",")],
            dict(item.split("=", 1) for item in args.set),
            broker_pids,
        )
        lake_rows = []
        if lake:
            data = sample_data(args.rows, args.files)
            lake_rows = measure_lakehouse(data, bootstrap, args.rows, lake, broker_pids)
    if lake_rows:
        print(lake_table(args.rows, lake_rows))
        for fmt, mode, rate, _ in lake_rows:
            by_table = next((r for f, m, r, _ in lake_rows if f == fmt and m == "table"), None)
            if mode != "table" and rate and by_table:
                verdict = "met" if rate >= 0.8 * by_table else "NOT met"
                print(f"target {mode} >= 0.8 x table mode: {verdict}")
    if not any(m not in lake for m in modes):
        return
    print(table(rows))
    eos = {r.tasks: r.rate for r in rows if r.writer == "eos" and r.rate}
    ref = {r.tasks: r.rate for r in rows if r.writer == "spark-writer" and r.rate}
    for tasks in sorted(set(eos) & set(ref)):
        verdict = "met" if eos[tasks] >= 0.8 * ref[tasks] else "NOT met"
        print(f"target eos >= 0.8 x spark-writer, {tasks} task(s): {verdict}")


if __name__ == "__main__":
    main()
