"""`eos dev-registry start/status/stop` as a user types it: the real command in a
subprocess, a real Apicurio Registry, its Confluent-compatible API answering."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import httpx
import pytest

from services import dev_registry
from services.dev_kafka import DevKafka, free_ports
from services.dev_registry import CCOMPAT_PATH, VERSION, DevRegistryError, RegistryState

pytestmark = pytest.mark.integration

AVRO: dict[str, object] = {
    "type": "record",
    "name": "Order",
    "namespace": "eos.test",
    "fields": [{"name": "id", "type": "long"}, {"name": "region", "type": "string"}],
}
SR_JSON = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def eos(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *args],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env=None if env is None else {**os.environ, **env},
    )


def url_of(started: subprocess.CompletedProcess[str]) -> str:
    assert started.returncode == 0, started.stdout + started.stderr
    assert "ready: schema.registry.url=http://127.0.0.1:" in started.stdout, started.stdout
    return started.stdout.split("schema.registry.url=")[1].split()[0]


def register(url: str, subject: str, schema: dict[str, object]) -> int:
    answer = httpx.post(
        f"{url}/subjects/{subject}/versions",
        json={"schema": json.dumps(schema)},
        headers=SR_JSON,
        timeout=30.0,
    )
    assert answer.status_code == 200, answer.text
    return int(answer.json()["id"])


def schema_by_id(url: str, schema_id: int) -> dict[str, object]:
    answer = httpx.get(f"{url}/schemas/ids/{schema_id}", timeout=30.0)
    assert answer.status_code == 200, answer.text
    return dict(json.loads(answer.json()["schema"]))


def free_port_pair() -> int:
    """A port P with P + 1 (the registry's management port) free as well."""
    for _ in range(50):
        (port,) = free_ports(1)
        with closing(socket.socket()) as probe:
            try:
                probe.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise AssertionError("no two adjacent free ports on 127.0.0.1")


@contextmanager
def listening(port: int) -> Iterator[None]:
    with closing(socket.socket()) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen()
        yield


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_start_status_second_start_taken_port_stop(tmp_path: Path) -> None:
    """One registry, in memory, through its whole life as the command line shows it."""
    port = free_port_pair()
    data, other = str(tmp_path / "registry"), tmp_path / "other"
    started = eos("dev-registry", "start", "--port", str(port), "--data-dir", data)
    try:
        url = url_of(started)
        assert url == f"http://127.0.0.1:{port}{CCOMPAT_PATH}"
        assert "storage: memory" in started.stdout
        assert (
            f"stop with: eos dev-registry stop --data-dir {Path(data).resolve()}" in started.stdout
        )

        schema_id = register(url, "orders-value", AVRO)
        assert schema_by_id(url, schema_id) == AVRO
        assert httpx.get(f"{url}/subjects", timeout=30.0).json() == ["orders-value"]

        status = eos("dev-registry", "status", "--data-dir", data)
        assert status.returncode == 0, status.stdout + status.stderr
        pid = json.loads(Path(data, "registry.json").read_text())["pid"]
        assert f"registry: {url} running (pid {pid}); storage memory" in status.stdout

        again = eos("dev-registry", "start", "--port", str(port), "--data-dir", data)
        assert again.returncode == 0, again.stdout + again.stderr
        resolved = Path(data).resolve()
        assert again.stdout.strip().splitlines() == [
            f"the registry already runs at {url} (pid {pid}, data {resolved}); "
            f"use it, or stop it first with: eos dev-registry stop --data-dir {resolved}"
        ]

        taken = one_error_line(
            eos("dev-registry", "start", "--port", str(port), "--data-dir", str(other))
        )
        assert f"port {port} on 127.0.0.1" in taken
        assert "already in use" in taken
        assert "--port" in taken
        assert not (other / "registry.json").exists()
        assert schema_by_id(url, schema_id) == AVRO  # the running one is untouched
    finally:
        eos("dev-registry", "stop", "--data-dir", str(other))  # were it started after all
        stopped = eos("dev-registry", "stop", "--data-dir", data)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert stopped.stdout.strip() == "stopped the registry"
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/subjects", timeout=5.0)

    status = eos("dev-registry", "status", "--data-dir", data)
    assert status.returncode == 3, status.stdout + status.stderr
    assert f"registry: {url} stopped" in status.stdout

    stopped = eos("dev-registry", "stop", "--data-dir", data)
    assert stopped.returncode == 0
    assert stopped.stdout.strip() == f"no dev-registry was running in {data}"


def test_status_without_registry(tmp_path: Path) -> None:
    status = eos("dev-registry", "status", "--data-dir", str(tmp_path))
    assert status.returncode == 3
    assert status.stdout.strip() == f"no dev-registry in {tmp_path.resolve()}"


def test_a_taken_management_port_is_one_line(tmp_path: Path) -> None:
    """The registry also listens on --port + 1 (Quarkus' management port): something
    there is named before any Java starts."""
    port = free_port_pair()
    with listening(port + 1):
        line = one_error_line(
            eos("dev-registry", "start", "--port", str(port), "--data-dir", str(tmp_path / "r"))
        )
    assert f"port {port + 1} on 127.0.0.1" in line
    assert "management" in line
    assert "--port" in line
    assert not (tmp_path / "r" / "registry.json").exists()


class _Subjects(http.server.BaseHTTPRequestHandler):
    """Any server answering ``GET …/subjects`` as a registry does."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"[]")

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_an_answer_from_another_process_is_not_taken_for_the_registry(tmp_path: Path) -> None:
    """Should the port be taken after the check (a race), readiness asks who listens: the
    registry just started does not, so it is one line, not a registry reported ready."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Subjects)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    child = subprocess.Popen(["sleep", "60"])  # alive, listening on nothing
    dev_registry._CHILDREN[child.pid] = child
    port = int(server.server_address[1])
    state = RegistryState(VERSION, str(tmp_path), port, port + 1, "memory", pid=child.pid)
    try:
        with pytest.raises(DevRegistryError) as refused:
            dev_registry._wait_ready(state, 30.0)
    finally:
        dev_registry._CHILDREN.pop(child.pid)
        child.kill()
        child.wait()
        server.shutdown()
        server.server_close()
    message = str(refused.value)
    assert "\n" not in message
    assert f"port {port} on 127.0.0.1 is already in use by another process" in message
    assert "--port" in message


def test_kafkasql_without_a_kafka_is_one_line(tmp_path: Path) -> None:
    """No --bootstrap-servers and no dev-kafka running (an empty cache directory)."""
    done = eos(
        "dev-registry", "start", "--storage", "kafkasql", "--port", "0",
        "--data-dir", str(tmp_path / "r"),
        env={"EOS_CACHE_DIR": str(tmp_path / "cache")},
    )  # fmt: skip
    line = one_error_line(done)
    assert "eos dev-kafka start" in line
    assert "--bootstrap-servers" in line


def test_kafkasql_schemas_survive_a_restart(tmp_path: Path, dev_kafka: DevKafka) -> None:
    """KafkaSQL storage on the dev broker: a schema registered before a stop is there,
    by the same id, after the next start."""
    state = dev_kafka.state()
    assert state is not None
    data = str(tmp_path / "registry")
    start = ("dev-registry", "start", "--port", "0", "--data-dir", data,
             "--storage", "kafkasql", "--bootstrap-servers", state.bootstrap)  # fmt: skip
    started = eos(*start)
    try:
        url = url_of(started)
        assert "storage: kafkasql" in started.stdout
        schema_id = register(url, "payments-value", AVRO)
        assert schema_by_id(url, schema_id) == AVRO
    finally:
        stopped = eos("dev-registry", "stop", "--data-dir", data)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert eos("dev-registry", "status", "--data-dir", data).returncode == 3

    restarted = eos(*start)
    try:
        url = url_of(restarted)
        status = eos("dev-registry", "status", "--data-dir", data)
        assert status.returncode == 0
        assert "storage kafkasql" in status.stdout
        assert schema_by_id(url, schema_id) == AVRO
        assert "payments-value" in httpx.get(f"{url}/subjects", timeout=30.0).json()
    finally:
        stopped = eos("dev-registry", "stop", "--data-dir", data)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
