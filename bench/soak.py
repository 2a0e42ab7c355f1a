"""A long run at full speed: is the worker's memory flat, and how long do commits take?

A worker in this process runs VerifiableSource exactly-once (1 task, 100-byte records,
``transaction.boundary=interval`` 1 s, no throttling, endless) with the chosen producer
for ``--minutes``. Every ``--every`` seconds it prints the process's RSS and the records
committed so far; after the run, RSS after warm-up (first and last sample, growth) and
the commit latency p50 / p99 / max, from the commit durations the task reports to the
observer port (the same values the Prometheus histogram
``eos_task_commit_latency_seconds`` is fed). Usage:

    python bench/soak.py [--bootstrap HOST:PORT] [--minutes 10] [--client librdkafka]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import anyio
from worker_run import Progress, bench_broker, bench_process, bench_settings

from eos.kafka.admin import ensure_topic
from eos.runtime.observer import NullObserver, NullTaskObserver, TaskObserver
from services.worker_service import run_worker

WARM_UP_S = 60.0


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Latencies(NullTaskObserver):
    def __init__(self, progress: Progress, commits: list[float]) -> None:
        self.progress = progress
        self.commits = commits

    def transaction_committed(
        self, records: int, commit_seconds: float, open_seconds: float
    ) -> None:
        self.progress.committed += records
        self.commits.append(commit_seconds)


class Observer(NullObserver):
    def __init__(self, progress: Progress, commits: list[float]) -> None:
        self.progress = progress
        self.commits = commits

    def task(self, connector: str, task_id: int) -> TaskObserver:
        return Latencies(self.progress, self.commits)


async def soak(bootstrap: str, client: str, minutes: float, every: float) -> None:
    settings = bench_settings(bootstrap, "soak", {"producer.client": client})
    topic = f"{settings.group_id}-out"
    # A short retention keeps the disk from filling up during the run.
    await ensure_topic(
        settings.client_config,
        topic,
        partitions=1,
        topic_configs={"retention.ms": "60000", "segment.bytes": "67108864"},
    )
    connector = {
        "name": "soak",
        "connector.class": "VerifiableSource",
        "tasks.max": "1",
        "topic": topic,
        "partitions.per.task": "1",
        "records.per.partition": "0",
        "record.bytes": "100",
        "batch.size": "1000",
        "transaction.boundary": "interval",
        "transaction.boundary.interval.ms": "1000",
    }
    progress, commits = Progress(target=0), list[float]()
    samples: list[tuple[float, float, int]] = []
    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        run = partial(run_worker, settings, [connector], observer=Observer(progress, commits))
        worker = await tg.start(run)
        while (elapsed := time.monotonic() - started) < minutes * 60:
            await anyio.sleep(every)
            samples.append((elapsed, rss_mb(), progress.committed))
            rss = samples[-1][1]
            print(f"  {elapsed:6.0f} s  RSS {rss:7.1f} MB  committed {progress.committed:,}")
        worker.stop()
    report(samples, commits, client)


def report(samples: list[tuple[float, float, int]], commits: list[float], client: str) -> None:
    warm = [s for s in samples if s[0] >= WARM_UP_S] or samples
    first, last = warm[0], warm[-1]
    rate = (last[2] - first[2]) / max(last[0] - first[0], 1e-9)
    ordered = sorted(commits)
    p50 = statistics.median(ordered) if ordered else 0.0
    p99 = ordered[int(0.99 * (len(ordered) - 1))] if ordered else 0.0
    print(f"producer.client={client}: {rate:,.0f} records/s after warm-up")
    print(
        f"RSS after warm-up: {first[1]:.1f} MB at {first[0]:.0f} s -> {last[1]:.1f} MB at "
        f"{last[0]:.0f} s (growth {last[1] - first[1]:+.1f} MB, max "
        f"{max(s[1] for s in warm):.1f} MB)"
    )
    print(
        f"commit latency: p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, max "
        f"{(ordered[-1] if ordered else 0) * 1000:.1f} ms over {len(ordered)} commits"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--every", type=float, default=15)
    parser.add_argument("--client", default="librdkafka", choices=("aiokafka", "librdkafka"))
    args = parser.parse_args()
    bench_process()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    with bench_broker(args.bootstrap, heap="1g") as (bootstrap, _):
        anyio.run(soak, bootstrap, args.client, args.minutes, args.every)


if __name__ == "__main__":
    main()
