"""A real Prometheus server for tests: installed from Debian when missing, run as a
subprocess on a free loopback port with a temporary storage directory.

Use the ``prometheus_factory`` fixture (import it into a conftest or a test module)::

    prom = prometheus_factory(["127.0.0.1:8083"])        # scrapes every second
    await prom.wait_for('eos_task_transactions_committed_total')
    samples = await prom.query('sum(eos_task_transactions_committed_total)')

or, outside pytest, ``with run_prometheus(targets, workdir) as prom: ...``.

``python -m tests.prometheus_server`` installs Prometheus (if needed) and prints the
paths of ``prometheus`` and ``promtool``.

Installing: :func:`tests.debian.ensure_installed` (``apt-get install prometheus`` as
root, its system service kept from starting).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import yaml
from anyio.from_thread import BlockingPortal, start_blocking_portal
from prometheus_client import CollectorRegistry

from services.http import serve_metrics
from tests.debian import ensure_installed

PROMETHEUS = Path("/usr/bin/prometheus")
PROMTOOL = Path("/usr/bin/promtool")
REPO = Path(__file__).resolve().parent.parent
DEPLOY = REPO / "deploy" / "prometheus"
SCRAPE_CONFIG = DEPLOY / "prometheus.yml"
ALERT_RULES = DEPLOY / "alerts.yml"
_START_TIMEOUT = 60.0


class PrometheusError(RuntimeError):
    """Prometheus could not be installed or started, or a query failed."""


def ensure_prometheus() -> tuple[Path, Path]:
    """``(prometheus, promtool)``; installs the Debian package when they are missing."""
    ensure_installed([PROMETHEUS, PROMTOOL], ["prometheus"])
    return PROMETHEUS, PROMTOOL


def promtool(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run promtool; the caller checks ``returncode`` (output is in stdout/stderr)."""
    _, tool = ensure_prometheus()
    return subprocess.run(
        [str(tool), *map(str, args)], input=stdin, capture_output=True, text=True, timeout=120
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def scrape_config(
    targets: Sequence[str],
    *,
    scrape_interval: str = "1s",
    rule_files: Sequence[Path] = (ALERT_RULES,),
    job: str = "eos",
) -> dict[str, Any]:
    """deploy/prometheus/prometheus.yml with the given targets, intervals and rule files."""
    config: dict[str, Any] = yaml.safe_load(SCRAPE_CONFIG.read_text())
    config["global"]["scrape_interval"] = scrape_interval
    config["global"]["evaluation_interval"] = scrape_interval
    config["rule_files"] = [str(p) for p in rule_files]
    (scrape,) = [s for s in config["scrape_configs"] if s["job_name"] == "eos"]
    scrape["job_name"] = job
    scrape["scrape_interval"] = scrape_interval
    scrape["scrape_timeout"] = scrape_interval
    scrape["static_configs"] = [{"targets": list(targets)}]
    return config


@dataclass
class PrometheusServer:
    """One running Prometheus; ``url`` is its HTTP API base (``http://127.0.0.1:<port>``)."""

    url: str
    workdir: Path
    process: subprocess.Popen[bytes]
    log: Path

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    async def api(self, path: str, **params: str) -> Any:
        """GET ``/api/v1/<path>``; returns ``data`` or raises :class:`PrometheusError`."""
        async with httpx.AsyncClient(base_url=self.url, timeout=30) as client:
            resp = await client.get(f"/api/v1/{path}", params=params)
        body = resp.json()
        if resp.status_code != 200 or body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {resp.status_code} {body}")
        return body["data"]

    async def query(self, expr: str) -> list[dict[str, Any]]:
        """Evaluate an instant query now; the result as a list (scalars become one item)."""
        data = await self.api("query", query=expr)
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        result: list[dict[str, Any]] = data["result"]
        return result

    async def query_range(
        self, expr: str, start: float, end: float, step: float
    ) -> list[dict[str, Any]]:
        data = await self.api(
            "query_range", query=expr, start=str(start), end=str(end), step=str(step)
        )
        result: list[dict[str, Any]] = data["result"]
        return result

    async def wait_for(
        self,
        expr: str,
        timeout: float = 30.0,
        predicate: Callable[[list[dict[str, Any]]], bool] = bool,
    ) -> list[dict[str, Any]]:
        """Poll ``expr`` until ``predicate(result)`` (default: not empty)."""
        deadline = time.monotonic() + timeout
        while True:
            result = await self.query(expr)
            if predicate(result):
                return result
            if time.monotonic() > deadline:
                raise PrometheusError(
                    f"no data for {expr!r} after {timeout}s (last: {result})\n"
                    f"prometheus log:\n{self.log_tail()}"
                )
            await anyio.sleep(0.25)

    async def targets_up(self, timeout: float = 30.0) -> None:
        """Wait until every target has been scraped successfully."""

        def all_up(result: list[dict[str, Any]]) -> bool:
            return bool(result) and all(s["value"][1] == "1" for s in result)

        await self.wait_for("up", timeout, all_up)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)


def start_prometheus(
    targets: Sequence[str],
    workdir: Path,
    *,
    scrape_interval: str = "1s",
    rule_files: Sequence[Path] = (ALERT_RULES,),
    port: int = 0,
) -> PrometheusServer:
    """Start Prometheus scraping ``targets`` (``host:port``); returns once it is ready."""
    binary, _ = ensure_prometheus()
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    settings = scrape_config(targets, scrape_interval=scrape_interval, rule_files=rule_files)
    config.write_text(yaml.safe_dump(settings))
    port = port or free_port()
    log = workdir / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                str(binary),
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--web.enable-lifecycle",
                "--log.level=info",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = PrometheusServer(f"http://127.0.0.1:{port}", workdir, process, log)
    try:
        _wait_ready(server)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_ready(server: PrometheusServer) -> None:
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise PrometheusError(f"prometheus exited:\n{server.log_tail()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{server.url}/-/ready", timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise PrometheusError(f"prometheus not ready after {_START_TIMEOUT}s:\n{server.log_tail()}")


@contextlib.contextmanager
def run_prometheus(
    targets: Sequence[str], workdir: Path, **kwargs: Any
) -> Iterator[PrometheusServer]:
    server = start_prometheus(targets, workdir, **kwargs)
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def serving(registry: CollectorRegistry) -> Iterator[tuple[str, BlockingPortal]]:
    """Serve ``registry`` with :func:`services.http.serve_metrics` on a free loopback port from
    an event loop in a background thread; yields ``("127.0.0.1:<port>", portal)``. The
    portal runs more background work (``portal.start_task_soon(workload.run)``), all of
    it cancelled on exit."""
    with start_blocking_portal() as portal:
        _, port = portal.start_task(serve_metrics, registry, "127.0.0.1", 0)
        try:
            yield f"127.0.0.1:{port}", portal
        finally:
            portal.call(portal.stop, True)


PrometheusFactory = Callable[..., PrometheusServer]


@pytest.fixture
def prometheus_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusFactory]:
    """``prometheus_factory(["127.0.0.1:8083"], scrape_interval="1s", rule_files=(...))``
    starts a Prometheus scraping those targets; every one started is stopped at teardown."""
    started: list[PrometheusServer] = []

    def start(targets: Sequence[str], **kwargs: Any) -> PrometheusServer:
        server = start_prometheus(targets, tmp_path_factory.mktemp("prometheus"), **kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def main() -> None:
    for path in ensure_prometheus():
        print(path)


if __name__ == "__main__":
    main()
