"""A real Spark standalone cluster for tests: a master and workers on 127.0.0.1, started
from the installed PySpark's own ``bin/spark-class`` (the wheel has no
``sbin/start-master.sh``), each a JVM this module owns by its pid.

Use the session fixture ``spark_cluster`` (import it into a test module)::

    props = {"spark.master": spark_cluster.master, **CLUSTER_DRIVER}   # an eos worker's
    spark_cluster.executors()       # pids of the executors the workers launched
    spark_cluster.kill_executor()   # SIGKILL one; its worker launches another

The master's REST submission port is off (``spark.master.rest.enabled=false``, else it
opens 6066); every port is a free one. An application (an eos worker's Spark driver,
client mode) gets one executor per worker, each with the worker's cores.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pyspark
import pytest

from services.dev_kafka import free_ports

SPARK_HOME = Path(pyspark.__file__).parent
_START_TIMEOUT = 90.0

CLUSTER_DRIVER = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.executor.memory": "512m",
    "spark.ui.enabled": "false",
}
"""Worker settings for an eos worker whose Spark driver joins the test cluster."""


class SparkClusterError(RuntimeError):
    """The cluster could not be started."""


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


@dataclass
class SparkCluster:
    home: Path
    master: str
    ui: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def status(self) -> dict[str, object]:
        """The master's ``/json/`` view (workers, applications)."""
        body: dict[str, object] = httpx.get(f"{self.ui}/json/", timeout=5).json()
        return body

    def executors(self) -> list[int]:
        """Pids of the executor JVMs the workers run now."""
        return [pid for w in self.workers for pid in _children(w.pid) if _alive(pid)]

    def kill_executor(self) -> int:
        """SIGKILL one executor (its worker starts a new one); its pid, once it is gone."""
        pids = self.executors()
        if not pids:
            raise AssertionError(f"no executor is running\n{self.log_tail()}")
        os.kill(pids[0], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _alive(pids[0]) and time.monotonic() < deadline:
            time.sleep(0.05)
        return pids[0]

    def wait_executors(self, count: int, timeout: float = 60) -> list[int]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = self.executors()
            if len(pids) >= count:
                return pids
            time.sleep(0.2)
        raise AssertionError(f"{count} executors not running after {timeout}s\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        parts = []
        for log in sorted(self.home.glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {log.name} ---\n" + "\n".join(tail))
        return "\n".join(parts)

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=20)
        shutil.rmtree(self.home, ignore_errors=True)


def _spawn(cluster: SparkCluster, name: str, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}
    with (cluster.home / f"{name}.log").open("wb") as out:
        process = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True,
        )  # fmt: skip
    cluster.processes.append(process)
    return process


def start_spark_cluster(workers: int = 2, cores: int = 1, memory: str = "1g") -> SparkCluster:
    """A master and ``workers`` workers; returns once every worker has registered."""
    home = Path(tempfile.mkdtemp(prefix="eos-spark-cluster-"))
    port, ui_port, *worker_ports = free_ports(2 + workers)
    conf = home / "spark-defaults.conf"
    conf.write_text("spark.master.rest.enabled false\nspark.ui.showConsoleProgress false\n")
    cluster = SparkCluster(home, f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui_port}")
    try:
        _spawn(
            cluster, "master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
            "--port", str(port), "--webui-port", str(ui_port), "--properties-file", str(conf),
        )  # fmt: skip
        for n, web in enumerate(worker_ports):
            work = home / f"worker-{n}"
            work.mkdir()
            worker = _spawn(
                cluster, f"worker-{n}", "org.apache.spark.deploy.worker.Worker",
                "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                "--webui-port", str(web), "--work-dir", str(work),
                "--properties-file", str(conf), cluster.master,
            )  # fmt: skip
            cluster.workers.append(worker)
        _wait_workers(cluster, workers)
    except BaseException:
        tail = cluster.log_tail()
        cluster.stop()
        raise SparkClusterError(f"the Spark cluster did not start:\n{tail}") from None
    return cluster


def _wait_workers(cluster: SparkCluster, count: int) -> None:
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        for process in cluster.processes:
            if process.poll() is not None:
                raise SparkClusterError(f"a Spark process exited\n{cluster.log_tail()}")
        with contextlib.suppress(httpx.HTTPError, ValueError):
            alive = cluster.status().get("aliveworkers")
            if isinstance(alive, int) and alive >= count:
                return
        time.sleep(0.5)
    raise SparkClusterError(f"{count} workers not registered after {_START_TIMEOUT}s")


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[SparkCluster]:
    """One standalone cluster (a master, two one-core workers) for the whole session."""
    cluster = start_spark_cluster()
    yield cluster
    cluster.stop()
