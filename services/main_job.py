"""``eos run`` (``make run``): the main job on embedded defaults.

Starts a local Kafka if none runs, then a worker (REST on 127.0.0.1:8083) with
a VerifiableSource connector writing 100 000 numbered records exactly once;
checks the topic with read_committed (every seqno once, no gaps), prints where
to look, and keeps the worker running until Ctrl-C.
"""

from __future__ import annotations

import time
from functools import partial

import anyio

from eos.config.worker import WorkerConfig
from services.verify import verify
from services.worker_service import run_worker

GROUP = "eos-demo"
CONNECTOR = "verifiable-demo"
TOPIC = "eos-demo-out"
TASKS, PARTITIONS_PER_TASK, RECORDS_PER_PARTITION = 2, 2, 25_000


def worker_settings(bootstrap: str, rest_port: int) -> WorkerConfig:
    return WorkerConfig.from_properties(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "config.storage.topic": f"{GROUP}-configs",
            "offset.storage.topic": f"{GROUP}-offsets",
            "status.storage.topic": f"{GROUP}-status",
            "listeners": f"http://127.0.0.1:{rest_port}",
        }
    )


CONNECTOR_CONFIG = {
    "name": CONNECTOR,
    "connector.class": "VerifiableSource",
    "tasks.max": str(TASKS),
    "topic": TOPIC,
    "partitions.per.task": str(PARTITIONS_PER_TASK),
    "records.per.partition": str(RECORDS_PER_PARTITION),
    "throughput": "10000",
    "transaction.boundary": "poll",
}


async def main_job(bootstrap: str, rest_port: int = 8083) -> bool:
    settings = worker_settings(bootstrap, rest_port)
    expected = TASKS * PARTITIONS_PER_TASK * RECORDS_PER_PARTITION
    async with anyio.create_task_group() as tg:
        await tg.start(partial(run_worker, settings, [CONNECTOR_CONFIG]))
        print(f"eos worker running: REST {settings.rest_url}, group {GROUP}, Kafka {bootstrap}")
        print(
            f"connector {CONNECTOR!r}: VerifiableSource, {TASKS} tasks x {PARTITIONS_PER_TASK} "
            "source partitions, exactly-once, one transaction per poll batch"
        )
        print(f"waiting for {expected:,} records in topic {TOPIC!r} ...", flush=True)
        started = time.monotonic()
        result = await verify(settings.client_config, TOPIC, expected, 600.0, {})
        took = time.monotonic() - started
        ok = result.ok(expected)
        print(f"read back with isolation.level=read_committed in {took:.1f}s: {result.summary()}")
        print("  -> every record exactly once" if ok else "  -> PROBLEM: see the line above")
        print("where to look:")
        print(f"  curl -s {settings.rest_url}/connectors/{CONNECTOR}/status")
        print(f"  curl -s {settings.rest_url}/metrics")
        print(f"  .venv/bin/eos verify --bootstrap-server {bootstrap} --topic {TOPIC}")
        print("the worker keeps running: Ctrl-C stops it; `make stop` stops Kafka", flush=True)
    return ok
