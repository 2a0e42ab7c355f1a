"""What the benchmark scripts share: a worker on throw-away topics, timed by the
runtime's observer port from the first poll to the commit that covers the target."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
import time
import tomllib
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import anyio
from cpu_meter import CpuMeter

from eos.config.files import load_config_file
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


def code_at(rev: str) -> Path:
    """A worktree of this repository at commit ``rev`` (made once, under .cache/), to run
    a bench on other code with ``PYTHONPATH`` set to it. It carries the metadata of an
    ``eos`` distribution with that commit's entry points (connectors, assignors, ...),
    which hides the installed one's for a process that finds it first on its path."""
    full = subprocess.run(["git", "rev-parse", rev], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
    tree = CACHE / "bench-code" / full[:12]
    if not (tree / "eos").is_dir():
        shutil.rmtree(tree, ignore_errors=True)
        subprocess.run(["git", "worktree", "add", "--force", "--detach", str(tree), full],
                       cwd=REPO, check=True, capture_output=True)  # fmt: skip
    project = tomllib.loads((tree / "pyproject.toml").read_text())["project"]
    info = tree / "eos-0+bench.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: eos\nVersion: 0+bench\n")
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in points.items())
            for group, points in project.get("entry-points", {}).items()
        )
    )
    return tree


def bench_process() -> None:
    """Set this process up as `eos worker` runs: GC tuned, quiet logs."""
    tune_gc()
    configure("WARNING")
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    logging.getLogger("py4j").setLevel(logging.WARNING)


SECURITY = os.environ.get("EOS_BENCH_SECURITY", "none")
"""``EOS_BENCH_SECURITY=sasl-scram|sasl-ssl|mtls``: the local broker a bench starts is secured
(``eos dev-kafka start --security``) and the bench's clients log in as its super user; with
``--bootstrap``, ``EOS_BENCH_COMMAND_CONFIG=FILE`` gives the clients' security settings."""
_client_settings: dict[str, str] = {}


def bench_client_settings() -> dict[str, str]:
    """The Kafka security settings of the bench's clients (empty: PLAINTEXT)."""
    return dict(_client_settings)


@contextmanager
def bench_broker(bootstrap: str | None, heap: str = "1g") -> Iterator[tuple[str, list[int]]]:
    """``bootstrap`` (an existing cluster) or a fresh local broker in a temporary
    directory, removed afterwards; also the broker's pids (none for ``bootstrap``)."""
    if bootstrap is not None:
        command_config = os.environ.get("EOS_BENCH_COMMAND_CONFIG")
        if command_config:
            _client_settings.update(load_config_file(command_config))
        yield bootstrap, []
        return
    directory = Path(tempfile.mkdtemp(prefix="eos-bench-"))
    kafka = DevKafka(directory, heap=heap)
    try:
        cluster = kafka.start(1, port=0, security=SECURITY)
        _client_settings.update(kafka.security(cluster).client_properties())
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
            **_client_settings,
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
