"""``eos run`` (``make run``): the main job on embedded defaults.

On first run it writes a sample Parquet dataset (100 000 rows with a unique ``id``)
into ``$EOS_CACHE_DIR/run/orders``. It starts a local Kafka if none runs, then a
worker (REST on 127.0.0.1:8083) whose SparkSource connector reads the dataset with
PySpark into topic ``eos-demo-orders`` exactly once. When the rows are in, it
reads the topic back with ``read_committed``, checks that every id arrived exactly
once, prints where to look, and keeps the worker running: Parquet files dropped
into the directory flow in, until Ctrl-C.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from functools import partial
from pathlib import Path

import anyio

from eos.config.worker import WorkerConfig
from eos.kafka import ClientConfig, read_to_end
from eos.kafka.admin import ensure_topic
from services.worker_service import run_worker, worker_settings

GROUP = "eos-demo"
CONNECTOR = "spark-orders"
TOPIC = "eos-demo-orders"
ROWS = 100_000


def demo_settings(bootstrap: str, rest_port: int) -> WorkerConfig:
    return worker_settings(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "config.storage.topic": f"{GROUP}-configs",
            "offset.storage.topic": f"{GROUP}-offsets",
            "status.storage.topic": f"{GROUP}-status",
            "listeners": f"http://127.0.0.1:{rest_port}",
            "spark.master": "local[2]",
            "spark.app.name": "eos-make-run",
            "thread.pool.size": "4",
        }
    )


def connector_config(data: Path) -> dict[str, str]:
    return {
        "name": CONNECTOR,
        "connector.class": "SparkSource",
        "tasks.max": "2",
        "exactly.once.support": "required",
        "mode": "files",
        "path": str(data),
        "format": "parquet",
        "topic": TOPIC,
        "key.columns": "id",
        "poll.interval.ms": "2000",
    }


def ensure_dataset(data: Path) -> bool:
    """Write the sample dataset unless the directory already holds Parquet files."""
    if any(data.glob("*.parquet")):
        return False
    from services.connectors.spark import generate_sample_dataset

    generate_sample_dataset(data, ROWS)
    return True


async def count_ids(config: ClientConfig) -> Counter[int]:
    """How often each id appears in the topic, read with read_committed."""
    ids: Counter[int] = Counter()
    for record in await read_to_end(config, TOPIC, timeout=60):
        ids[json.loads(record.value)["id"]] += 1
    return ids


async def demo_run(bootstrap: str, data: Path, rest_port: int = 8083) -> bool:
    settings = demo_settings(bootstrap, rest_port)
    if ensure_dataset(data):
        print(f"wrote the sample dataset: {ROWS:,} rows with a unique id, Parquet, in {data}")
    await ensure_topic(settings.client_config, TOPIC, partitions=2)
    async with anyio.create_task_group() as tg:
        await tg.start(partial(run_worker, settings, [connector_config(data)]))
        print(f"eos worker running: REST {settings.rest_url}, group {GROUP}, Kafka {bootstrap}")
        print(
            f"connector {CONNECTOR!r}: SparkSource (PySpark {settings.raw['spark.master']}), "
            f"2 tasks, exactly-once required, reading {data} into topic {TOPIC!r}"
        )
        print(f"waiting for the {ROWS:,} sample rows ...", flush=True)
        started = time.monotonic()
        ids: Counter[int] = Counter()
        with anyio.move_on_after(900):
            while sum(1 for i in ids if i < ROWS) < ROWS:
                await anyio.sleep(2)
                ids = await count_ids(settings.client_config)
        took = time.monotonic() - started
        sample = [ids[i] for i in range(ROWS)]
        duplicates = sum(n - 1 for n in ids.values() if n > 1)
        missing = sample.count(0)
        ok = missing == 0 and duplicates == 0
        print(
            f"read back with isolation.level=read_committed after {took:.1f}s: "
            f"records={sum(ids.values())} distinct ids={len(ids)} "
            f"missing={missing} duplicates={duplicates}"
        )
        print("  -> every id exactly once" if ok else "  -> PROBLEM: see the line above")
        print("where to look:")
        print(f"  curl -s {settings.rest_url}/connectors/{CONNECTOR}/status")
        print(f"  curl -s {settings.rest_url}/metrics | grep eos_task_transactions")
        print(f"  new Parquet files dropped into {data} flow into {TOPIC!r}")
        print("the worker keeps running: Ctrl-C stops it; `make stop` stops Kafka", flush=True)
    return ok
