"""One large Parquet file through SparkSource, exactly once, with memory sampled: flat?

Writes ``--rows`` rows (default 10 million, about 200 bytes each as JSON) as ONE
Parquet file with Spark, then runs a worker with one SparkSource task (exactly-once,
``max.buffered.rows`` default) on it and samples, every ``--every`` seconds, the rows
committed, the resident memory of this Python process (the worker) and of Spark's
driver JVM. Prints one table (a row per tenth of the file) and the verdict: memory is
flat when the peak after the first tenth stays within ``--slack`` (default 1.25x) of
the resident size at the first tenth. Usage:

    python bench/spark_memory.py [--bootstrap 127.0.0.1:9092] [--rows 10000000]

Without --bootstrap it starts a local Kafka (eos dev-kafka) on free ports.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import anyio
from worker_run import (
    CACHE,
    Progress,
    bench_broker,
    bench_process,
    bench_settings,
    run_until_committed,
    spark_connector,
)

SPARK = {"spark.master": "local[2]", "spark.ui.enabled": "false", "spark.driver.memory": "1g"}


def write_file(rows: int) -> Path:
    """``rows`` sample-like rows as one Parquet file, written by Spark (cached)."""
    data = CACHE / "bench" / f"spark-one-file-{rows}"
    if (data / ".complete").exists():
        return data
    from pyspark.sql import SparkSession

    shutil.rmtree(data, ignore_errors=True)
    print(f"  writing {rows:,} rows as one Parquet file into {data}", flush=True)
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    try:
        spark.range(rows).selectExpr(
            "id",
            "format_string('customer-%05d', id % 9973) AS customer",
            "element_at(array('DE','FR','US','JP','BR','IN','CN','GB'), "
            "CAST(id % 8 AS INT) + 1) AS country",
            "CAST((id % 100000) / 100 AS DECIMAL(12,2)) AS amount",
            "CAST(1 + id % 17 AS INT) AS quantity",
            "timestamp_seconds(1704067200 + id * 7) AS created_at",
            "to_date(timestamp_seconds(1704067200 + id * 7)) AS day",
            "array('sample', concat('batch-', CAST(id DIV 1000 AS STRING))) AS tags",
            "concat('order ', CAST(id AS STRING), ' of the eos sample dataset') AS note",
        ).coalesce(1).write.parquet(str(data))
    finally:
        spark.stop()
    (data / ".complete").touch()
    return data


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def spark_jvm_pid() -> int | None:
    """The Spark driver JVM this process started (a ``pyspark-shell`` descendant)."""
    found = subprocess.run(["pgrep", "-f", "pyspark-shell"], capture_output=True, text=True)
    for pid in map(int, found.stdout.split()):
        ancestor = pid
        while ancestor > 1:
            ancestor = _parent(ancestor)
            if ancestor == os.getpid():
                return pid
    return None


@dataclass
class Sample:
    seconds: float
    rows: int
    python_mb: float
    jvm_mb: float


async def sample(progress: Progress, samples: list[Sample], every: float) -> None:
    start = time.monotonic()
    jvm: int | None = None
    while not progress.done.is_set():
        jvm = jvm or spark_jvm_pid()
        samples.append(
            Sample(
                time.monotonic() - start,
                progress.committed,
                rss_mb(os.getpid()),
                rss_mb(jvm) if jvm else 0.0,
            )
        )
        await anyio.sleep(every)


async def run(bootstrap: str, data: Path, rows: int, every: float) -> list[Sample]:
    settings = bench_settings(
        bootstrap, "bench-mem", {"exactly.once.source.support": "enabled", **SPARK}
    )
    connector = await spark_connector(settings, "memory", data)
    samples: list[Sample] = []
    progress = Progress(target=rows)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sample, progress, samples, every)
        done = await run_until_committed(
            settings, connector, rows, max(600, rows / 5000), progress=progress
        )
        tg.cancel_scope.cancel()
    if not done.done.is_set():
        raise SystemExit(f"only {done.committed:,} of {rows:,} rows were committed in time")
    return samples


def report(samples: list[Sample], rows: int, slack: float) -> None:
    print("| committed rows | seconds | worker (Python) RSS MB | Spark JVM RSS MB |")
    print("|---:|---:|---:|---:|")
    shown = -1
    for s in samples:
        tenth = s.rows * 10 // rows
        if tenth > shown:
            shown = tenth
            print(f"| {s.rows:,} | {s.seconds:.0f} | {s.python_mb:.0f} | {s.jvm_mb:.0f} |")
    after = [s for s in samples if s.rows >= rows // 10]
    if not after:
        return
    for name, values in (
        ("worker (Python)", [s.python_mb for s in after]),
        ("Spark JVM", [s.jvm_mb for s in after]),
    ):
        first, peak = values[0], max(values)
        verdict = "flat" if peak <= first * slack else "GROWS"
        print(f"{name}: {first:.0f} MB at 10%, peak {peak:.0f} MB ({peak / first:.2f}x): {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--every", type=float, default=2.0)
    parser.add_argument("--slack", type=float, default=1.25)
    args = parser.parse_args()
    bench_process()
    data = write_file(args.rows)
    with bench_broker(args.bootstrap) as (bootstrap, _):
        samples = anyio.run(run, bootstrap, data, args.rows, args.every)
    report(samples, args.rows, args.slack)


if __name__ == "__main__":
    main()
