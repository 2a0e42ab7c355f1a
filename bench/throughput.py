"""Throughput of the eos runtime next to a raw aiokafka producer, in one run.

For 100-byte and 1 KB records, 1 and 4 tasks, it measures records/s and MB/s of:
  raw      aiokafka producers (idempotent, no transactions), one per "task"
  alos     the runtime, exactly.once.source.support=disabled (at-least-once)
  eos-poll the runtime, exactly-once, transaction.boundary=poll
  eos-1s   the runtime, exactly-once, transaction.boundary=interval, 1 s

The runtime runs VerifiableSource (no throttling) in a worker in this process;
the clock runs from the first poll to the commit that covers the last record,
as reported by the worker's observer port. Usage:

    python bench/throughput.py [--bootstrap 127.0.0.1:9092] [--records 200000]

Without --bootstrap it starts a local Kafka (eos dev-kafka) on free ports;
``EOS_BENCH_SECURITY=sasl-ssl`` makes it a secured one (bench/worker_run.py).
"""

from __future__ import annotations

import argparse
import time
import uuid

import anyio
from worker_run import (
    Progress,
    bench_broker,
    bench_client_settings,
    bench_process,
    bench_settings,
    run_until_committed,
)

from eos.kafka import ClientConfig, make_producer
from eos.kafka.admin import ensure_topic

MODES = ("raw", "alos", "eos-poll", "eos-1s")


async def run_runtime(bootstrap: str, mode: str, size: int, tasks: int, records: int) -> Progress:
    settings = bench_settings(
        bootstrap,
        "bench",
        {
            "offset.flush.interval.ms": "1000",
            "exactly.once.source.support": "disabled" if mode == "alos" else "enabled",
        },
    )
    topic = f"{settings.group_id}-out"
    await ensure_topic(settings.client_config, topic, partitions=max(tasks, 1))
    connector = {
        "name": "bench",
        "connector.class": "VerifiableSource",
        "tasks.max": str(tasks),
        "topic": topic,
        "partitions.per.task": "1",
        "records.per.partition": str(records // tasks),
        "record.bytes": str(size),
        "batch.size": "1000",
        "transaction.boundary": "interval" if mode == "eos-1s" else "poll",
    }
    if mode == "eos-1s":
        connector["transaction.boundary.interval.ms"] = "1000"
    progress = await run_until_committed(settings, connector, (records // tasks) * tasks, 600)
    if not progress.done.is_set():
        raise TimeoutError(f"{mode}: not every record was committed in time")
    return progress


async def run_raw(bootstrap: str, size: int, tasks: int, records: int) -> Progress:
    config = ClientConfig({"bootstrap.servers": bootstrap, **bench_client_settings()})
    topic = f"bench-raw-{uuid.uuid4().hex[:8]}"
    await ensure_topic(config, topic, partitions=max(tasks, 1))
    per_task = records // tasks
    progress = Progress(target=per_task * tasks)
    payload = b"x" * size

    async def one(task: int) -> None:
        # The same producer settings and key partitioning as the runtime's task producers.
        producer = make_producer(config, enable_idempotence=True, linger_ms=5, max_batch_size=65536)
        await producer.start()
        try:
            futures = [
                await producer.send(topic, payload, key=f'"{task}-0"'.encode())
                for _ in range(per_task)
            ]
            for f in futures:
                await f
        finally:
            await producer.stop()
        progress.nbytes += per_task * (size + 3)

    progress.first_poll = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for task in range(tasks):
            tg.start_soon(one, task)
    progress.last_commit = time.perf_counter()
    progress.committed = progress.target
    return progress


async def measure(bootstrap: str, records: int) -> list[tuple[int, int, str, float, float]]:
    rows = []
    for size in (100, 1000):
        count = records if size == 100 else records // 2
        for tasks in (1, 4):
            for mode in MODES:
                if mode == "raw":
                    p = await run_raw(bootstrap, size, tasks, count)
                else:
                    p = await run_runtime(bootstrap, mode, size, tasks, count)
                assert p.first_poll is not None
                seconds = p.seconds
                rows.append((size, tasks, mode, p.committed / seconds, p.nbytes / seconds / 1e6))
                print(f"  measured size={size} tasks={tasks} {mode}: {rows[-1][3]:,.0f} rec/s")
    return rows


def table(rows: list[tuple[int, int, str, float, float]]) -> str:
    rate = {(s, t, m): r for s, t, m, r, _ in rows}
    lines = [
        "| record | tasks | mode | records/s | MB/s | vs raw | vs alos |",
        "|---:|---:|---|---:|---:|---:|---:|",
    ]
    for size, tasks, mode, r, mb in rows:
        raw, alos = rate[(size, tasks, "raw")], rate[(size, tasks, "alos")]
        ratios = f"{r / raw:.2f} | {r / alos:.2f}"
        lines.append(f"| {size} B | {tasks} | {mode} | {r:,.0f} | {mb:.1f} | {ratios} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--records", type=int, default=200_000)
    args = parser.parse_args()
    bench_process()
    with bench_broker(args.bootstrap, heap="512m") as (bootstrap, _):
        rows = anyio.run(measure, bootstrap, args.records)
    print(table(rows))


if __name__ == "__main__":
    main()
