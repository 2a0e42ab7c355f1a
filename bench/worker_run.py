"""What the benchmark scripts share: a worker on throw-away topics, timed by the
runtime's observer port from the first poll to the commit that covers the target."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import anyio
from cpu_meter import CpuMeter

from eos.config.worker import WorkerConfig
from eos.kafka.admin import ensure_topic
from eos.runtime.observer import NullObserver, NullTaskObserver, TaskObserver
from services.dev_kafka import DevKafka, free_ports
from services.log_setup import configure
from services.worker_service import run_worker, tune_gc, worker_settings

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("EOS_CACHE_DIR", str(REPO / ".cache"))  # as the Makefile sets it
CACHE = Path(os.environ["EOS_CACHE_DIR"])
"""Where the benches keep their data sets and downloads (the Makefile's cache)."""


def bench_process() -> None:
    """Set this process up as `eos worker` runs: GC tuned, quiet logs."""
    tune_gc()
    configure("WARNING")
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    logging.getLogger("py4j").setLevel(logging.WARNING)


@contextmanager
def bench_broker(bootstrap: str | None, heap: str = "1g") -> Iterator[tuple[str, list[int]]]:
    """``bootstrap`` (an existing cluster) or a fresh local broker in a temporary
    directory, removed afterwards; also the broker's pids (none for ``bootstrap``)."""
    if bootstrap is not None:
        yield bootstrap, []
        return
    directory = Path(tempfile.mkdtemp(prefix="eos-bench-"))
    kafka = DevKafka(directory, heap=heap)
    try:
        cluster = kafka.start(1, port=0)
        yield cluster.bootstrap, [node.pid for node in cluster.nodes]
    finally:
        kafka.stop()
        shutil.rmtree(directory, ignore_errors=True)


@dataclass
class Progress:
    target: int
    committed: int = 0
    nbytes: int = 0
    first_poll: float | None = None
    last_commit: float = 0.0
    done: anyio.Event = field(default_factory=anyio.Event)
    cpu: CpuMeter | None = None
    """Measures CPU from the first poll to the last commit, when given."""
    from_any_poll: bool = False
    """Start the clock at the first poll even if it returned nothing (a source whose
    first records take a long read, which must be timed too); else at the first poll
    that returned records."""

    @property
    def seconds(self) -> float:
        assert self.first_poll is not None
        return self.last_commit - self.first_poll


class CountingTask(NullTaskObserver):
    def __init__(self, progress: Progress) -> None:
        self.p = progress

    def poll_completed(self, records: int, seconds: float) -> None:
        if (records or self.p.from_any_poll) and self.p.first_poll is None:
            self.p.first_poll = time.perf_counter() - seconds
            if self.p.cpu is not None:
                self.p.cpu.start()

    def records_written(self, records: int, nbytes: int) -> None:
        self.p.nbytes += nbytes

    def transaction_committed(
        self, records: int, commit_seconds: float, open_seconds: float
    ) -> None:
        self.p.committed += records
        self.p.last_commit = time.perf_counter()
        if self.p.cpu is not None:
            self.p.cpu.mark()
        if self.p.committed >= self.p.target:
            self.p.done.set()


class CountingObserver(NullObserver):
    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    def task(self, connector: str, task_id: int) -> TaskObserver:
        return CountingTask(self.progress)


def bench_settings(bootstrap: str, prefix: str, extra: Mapping[str, str]) -> WorkerConfig:
    """Worker settings on fresh internal topics named after a random group."""
    group = f"{prefix}-{uuid.uuid4().hex[:8]}"
    (port,) = free_ports(1)
    return worker_settings(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            "offset.storage.partitions": "5",
            "status.storage.partitions": "1",
            "listeners": f"http://127.0.0.1:{port}",
            **extra,
        }
    )


async def spark_connector(
    settings: WorkerConfig, name: str, data: Path, **extra: str
) -> dict[str, str]:
    """A SparkSource config reading ``data`` into a fresh 2-partition topic (created
    here), keyed by ``id``."""
    topic = f"{settings.group_id}-out"
    await ensure_topic(settings.client_config, topic, partitions=2)
    return {
        "name": name,
        "connector.class": "services.connectors.spark:SparkSource",
        "path": str(data),
        "topic": topic,
        "key.columns": "id",
        **extra,
    }


async def run_until_committed(
    settings: WorkerConfig,
    connector: Mapping[str, str],
    target: int,
    timeout: float,
    *,
    progress: Progress | None = None,
) -> Progress:
    """Run one connector until ``target`` records are committed, the timeout passes or
    the worker stops (Ctrl-C); ``progress.done`` says whether the target was reached."""
    progress = progress or Progress(target=target)
    async with anyio.create_task_group() as tg:
        run = partial(run_worker, settings, [connector], observer=CountingObserver(progress))
        worker = await tg.start(run)
        with anyio.move_on_after(timeout):
            async with anyio.create_task_group() as race:

                async def finish(event: anyio.Event) -> None:
                    await event.wait()
                    race.cancel_scope.cancel()

                race.start_soon(finish, progress.done)
                race.start_soon(finish, worker.stopped)
        worker.stop()
    return progress
