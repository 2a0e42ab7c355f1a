"""Running workers in tests: in-process (``running_worker``) and as real
processes (``WorkerProcess``, for SIGKILL/SIGSTOP)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx

from eos.config.worker import WorkerConfig
from eos.runtime.worker import Worker
from services.dev_kafka import free_ports
from services.worker_service import run_worker, worker_settings
from tests import spark_cds

REPO = Path(__file__).resolve().parents[2]


def worker_props(bootstrap: str, group: str, **extra: str) -> dict[str, str]:
    """Settings of a test worker. Automatic restarts are off (tests of failures look at
    the FAILED state); tests of them turn them on (``auto_restart_enabled="true"``)."""
    (port,) = free_ports(1)
    props = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "config.storage.topic": f"{group}-configs",
        "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status",
        "offset.storage.partitions": "3",
        "status.storage.partitions": "1",
        "offset.flush.interval.ms": "1000",
        "task.shutdown.graceful.timeout.ms": "5000",
        "listeners": f"http://127.0.0.1:{port}",
        "auto.restart.enabled": "false",
    }
    props.update({k.replace("_", "."): v for k, v in extra.items()})
    return props


SPARK_JDBC = {
    "spark.master": "local[2]",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "512m",
    "spark.jdbc.drivers": "postgresql",
    # a worker restarted again and again: C1 alone and the tests' class archive
    # (tests/spark_cds.py) warm Spark's JVM up sooner
    "spark.driver.extraJavaOptions": f"-XX:TieredStopAtLevel=1 {spark_cds.JAVA_OPTIONS}",
}
"""Spark for a test worker process that reads PostgreSQL over JDBC (two Spark tasks)."""

QUICK_REJOIN = {"session.timeout.ms": "4000", "heartbeat.interval.ms": "500"}
"""For a worker SIGKILLed and started again and again: it joins once its killed
predecessor's membership expired, so a short session keeps each rejoin to a few seconds."""


def connector_config(connector: str, name: str, topic: str, **settings: object) -> dict[str, str]:
    """The config of ``name``, a connector of tests/integration/connectors.py writing to
    ``topic`` (``settings``: ``some_setting=1`` becomes ``some.setting=1``)."""
    props = {
        "name": name,
        "connector.class": f"tests.integration.connectors:{connector}",
        "topic": topic,
    }
    props.update({k.replace("_", "."): str(v) for k, v in settings.items()})
    return props


@dataclass
class RunningWorker:
    worker: Worker
    http: httpx.AsyncClient
    settings: WorkerConfig

    async def status(self, name: str) -> dict[str, Any]:
        response = await self.http.get(f"/connectors/{name}/status")
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body

    async def wait_for_tasks(
        self, name: str, state: str, count: int, timeout: float = 60
    ) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            while True:
                response = await self.http.get(f"/connectors/{name}/status")
                if response.status_code == 200:
                    body: dict[str, Any] = response.json()
                    states = [t["state"] for t in body["tasks"]]
                    if len(states) == count and all(s == state for s in states):
                        return body
                await anyio.sleep(0.2)


@asynccontextmanager
async def running_worker(
    props: Mapping[str, str], connectors: Sequence[Mapping[str, str]] = ()
) -> AsyncIterator[RunningWorker]:
    settings = worker_settings(props)
    async with anyio.create_task_group() as tg:
        worker: Worker = await tg.start(run_worker, settings, connectors)
        async with httpx.AsyncClient(base_url=settings.rest_url, timeout=60) as http:
            try:
                yield RunningWorker(worker, http, settings)
            finally:
                worker.stop()


def write_properties(path: Path, props: Mapping[str, str]) -> Path:
    """A Java properties file (a value's line breaks escaped, e.g. inline PEM)."""
    lines = (f"{key}={value}".replace("\n", "\\n") for key, value in props.items())
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


class WorkerProcess:
    """``eos worker`` as a real process (so it can be SIGKILLed and SIGSTOPped)."""

    def __init__(
        self, directory: Path, props: Mapping[str, str], connectors: Sequence[Mapping[str, str]]
    ) -> None:
        self.directory = directory
        self.props = dict(props)
        self.rest_url = self.props["listeners"]
        self.worker_file = write_properties(directory / "worker.properties", props)
        self.connector_files = [
            write_properties(directory / f"connector-{i}.properties", c)
            for i, c in enumerate(connectors)
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = directory / "worker.log"
        self.starts = 0
        self.paused = False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def set(self, settings: Mapping[str, str]) -> None:
        """Change worker settings for its next start (a rolling change of settings)."""
        self.props.update(settings)
        self.worker_file = write_properties(self.directory / "worker.properties", self.props)

    def start(self, *, own_group: bool = False) -> None:
        """Start the worker; ``own_group``: in a process group (and session) of its own,
        which :meth:`signal_group` signals as systemd, ``timeout`` or a terminal do."""
        self.starts += 1
        out = open(self.log, "ab")  # noqa: SIM115 - handed to the child process
        out.write(f"\n===== start {self.starts} =====\n".encode())
        out.flush()
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        files = [str(self.worker_file), *map(str, self.connector_files)]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "services.cli", "worker", *files],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO, env=env,
            start_new_session=own_group,
        )  # fmt: skip
        out.close()

    def wait_running(self, name: str, tasks: int, timeout: float = 90) -> None:
        """Until ``tasks`` tasks of ``name`` run in this process and the REST status says
        RUNNING for each.

        The status alone would not do: it comes from the status topic, where a SIGKILLed
        predecessor's RUNNING stays until this process's tasks write theirs, so a restarted
        worker looks running before it has even joined the group. The worker's own
        metrics (``eos_task_state``) say what runs here. They are asked only once the
        status agrees, and no more often than every other scrape's time: the page of a
        worker of 300 tasks is 2 MB, half a second of its CPU."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            assert self.proc.poll() is None, f"worker exited\n{self.tail()}"
            pause = 0.1
            try:
                if self._all_running(name, tasks):
                    asked = time.monotonic()
                    if self.running_here(name) == tasks:
                        return
                    pause = max(0.25, 2 * (time.monotonic() - asked))
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(pause)
        raise AssertionError(f"tasks of {name} not RUNNING within {timeout}s\n{self.tail()}")

    def running_here(self, name: str) -> int:
        """How many tasks of ``name`` this process runs: its ``/metrics`` lines
        ``eos_task_state{connector="name",state="RUNNING",…} 1.0`` (a scan: parsing the
        page takes a second of the test's CPU at 300 tasks)."""
        text = httpx.get(f"{self.rest_url}/metrics", timeout=30).text
        connector = f'connector="{name}"'
        return sum(
            1
            for line in text.splitlines()
            if line.startswith("eos_task_state{")
            and connector in line
            and 'state="RUNNING"' in line
            and float(line.rsplit(" ", 1)[1]) == 1
        )

    def _all_running(self, name: str, tasks: int) -> bool:
        body = httpx.get(f"{self.rest_url}/connectors/{name}/status", timeout=5).json()
        states = [t["state"] for t in body.get("tasks", [])]
        return len(states) == tasks and all(s == "RUNNING" for s in states)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.paused = sig == signal.SIGSTOP
            self.proc.send_signal(sig)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                self.proc.wait(timeout=60)

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to every process of the worker's process group (started with
        ``own_group``)."""
        assert self.proc is not None
        assert os.getpgid(self.proc.pid) == self.proc.pid, "started without own_group"
        os.killpg(self.proc.pid, sig)

    def children(self) -> list[int]:
        """The pids of the worker's child processes (the Spark JVM, for one)."""
        assert self.proc is not None
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.proc.pid:
                found.append(int(stat.parent.name))
        return found

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.paused = False
            self.proc.terminate()
            try:
                return self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                return self.proc.wait()
        return self.proc.returncode

    def tail(self, lines: int = 60) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_gone(pids: Sequence[int], timeout: float = 10, what: str = "process") -> None:
    """Until none of ``pids`` lives; an AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while any(map(process_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(process_alive, pids)), f"the {what} {pids} outlived the worker"


def cluster_worker_props(bootstrap: str, group: str, **extra: str) -> dict[str, str]:
    """Worker settings for a cluster test: short session and heartbeat so that
    failures are noticed within seconds."""
    settings = {
        "session_timeout_ms": "6000",
        "heartbeat_interval_ms": "500",
        "rebalance_timeout_ms": "20000",
        "task_shutdown_graceful_timeout_ms": "3000",
        "status_storage_partitions": "3",
        **extra,
    }
    return worker_props(bootstrap, group, **settings)


class Cluster:
    """Several ``eos worker`` processes of one group, driven over REST as a user would."""

    def __init__(
        self,
        directory: Path,
        bootstrap: str,
        group: str,
        workers: int = 3,
        *,
        each: Sequence[Mapping[str, str]] = (),
        **extra: str,
    ) -> None:
        """``extra``: settings of every worker (``some_setting=1`` is ``some.setting=1``);
        ``each``: more settings per worker, by position."""
        self.directory, self.bootstrap, self.group, self.extra = directory, bootstrap, group, extra
        self.workers: list[WorkerProcess] = []
        for i in range(workers):
            self.add(each[i] if i < len(each) else {})

    def add(self, settings: Mapping[str, str]) -> WorkerProcess:
        """Another worker of the group (not started)."""
        home = self.directory / f"worker-{len(self.workers)}"
        home.mkdir(parents=True, exist_ok=True)
        props = {**cluster_worker_props(self.bootstrap, self.group, **self.extra), **settings}
        worker = WorkerProcess(home, props, [])
        self.workers.append(worker)
        return worker

    def start(self) -> None:
        for worker in self.workers:
            worker.start()

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()

    def live(self) -> list[WorkerProcess]:
        return [w for w in self.workers if w.alive() and not w.paused]

    def worker_id(self, worker: WorkerProcess) -> str:
        return worker.rest_url.removeprefix("http://")

    def by_id(self, worker_id: str) -> WorkerProcess:
        return next(w for w in self.workers if self.worker_id(w) == worker_id)

    def get(self, path: str) -> Any:
        """GET from the first live worker that answers."""
        for worker in self.live():
            try:
                response = httpx.get(f"{worker.rest_url}{path}", timeout=10)
            except httpx.HTTPError:
                continue
            if response.status_code == 200:
                return response.json()
        return None

    def leader(self, timeout: float = 60) -> WorkerProcess:
        """The live worker that says it leads, once every live worker agrees."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            views = []
            for worker in self.live():
                try:
                    views.append(httpx.get(f"{worker.rest_url}/", timeout=5).json()["cluster"])
                except (httpx.HTTPError, ValueError, KeyError):
                    views.append(None)
            urls = {v["leader_url"] for v in views if v}
            if views and None not in views and len(urls) == 1 and None not in urls:
                (url,) = urls
                return next(w for w in self.workers if w.rest_url == url)
            time.sleep(0.2)
        raise AssertionError(f"no leader agreed on within {timeout}s\n{self.tails()}")

    def put_connector(self, config: Mapping[str, str], timeout: float = 60) -> None:
        """Create or update through the leader, retrying while the group settles."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            leader = self.leader()
            try:
                response = httpx.put(
                    f"{leader.rest_url}/connectors/{config['name']}/config",
                    json=dict(config),
                    timeout=30,
                )
                if response.status_code in (200, 201):
                    return
                last = response.text
            except httpx.HTTPError as exc:
                last = repr(exc)
            time.sleep(0.3)
        raise AssertionError(f"connector not applied: {last}\n{self.tails()}")

    def placement(self, name: str, tasks: int, timeout: float = 90) -> dict[int, str]:
        """Task id → worker id, once all ``tasks`` tasks are RUNNING on live workers."""
        deadline = time.monotonic() + timeout
        body: Any = None
        while time.monotonic() < deadline:
            body = self.get(f"/connectors/{name}/status")
            live = {self.worker_id(w) for w in self.live()}
            if body is not None:
                states = {t["id"]: (t["state"], t["worker_id"]) for t in body["tasks"]}
                if len(states) == tasks and all(
                    s == "RUNNING" and w in live for s, w in states.values()
                ):
                    return {t: w for t, (_, w) in states.items()}
            time.sleep(0.2)
        raise AssertionError(
            f"{tasks} tasks of {name} not RUNNING on live workers within {timeout}s: "
            f"{body}\n{self.tails()}"
        )

    def tails(self, lines: int = 25) -> str:
        return "\n".join(f"--- {w.rest_url} ---\n{w.tail(lines)}" for w in self.workers)
