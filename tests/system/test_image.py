"""The worker's container image (``make image``), run with podman against the session's
broker: the demo of ``make run`` inside it (every id exactly once), a worker configured
by a mounted file and EOS_* variables, and what the image declares (user, entrypoint,
labels, health check)."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

import eos
from tests.container import eos_image, inspect, podman_run, stop
from tests.prometheus_server import free_port

__all__ = ["eos_image"]
pytestmark = pytest.mark.system
DEMO_TIMEOUT = 420.0


def test_image_declares_user_entrypoint_labels_and_health_check(eos_image: str) -> None:
    image = inspect(eos_image)
    config = image["Config"]
    assert config["User"] == "10001:10001"  # numeric: runAsNonRoot can check it
    assert config["Entrypoint"] == ["/usr/bin/tini", "--", "eos"]
    assert config["Cmd"] == ["worker"]
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["EOS_HEALTH_URL"] == "http://127.0.0.1:8083/health"
    assert env["EOS_CACHE_DIR"] == "/var/lib/eos"
    labels = image["Labels"]
    assert labels["org.opencontainers.image.version"] == eos.__version__
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", labels["org.opencontainers.image.revision"])
    check = image["Healthcheck"]
    assert check["Test"][0] == "CMD"
    assert "EOS_HEALTH_URL" in " ".join(check["Test"])
    seconds = {k: check[k] / 1e9 for k in ("Interval", "Timeout", "StartPeriod")}
    assert seconds == {"Interval": 10, "Timeout": 5, "StartPeriod": 60}
    assert check["Retries"] == 3
    print(f"image size: {image['Size'] / 1e6:.0f} MB")


def test_version_and_runtime(eos_image: str) -> None:
    script = (
        "java -version 2>&1 | head -1; python3 --version; id -u; eos --version; "
        # every documented feature: the Avro and Protobuf converters, CDC, librdkafka
        "python3 -c 'import fastavro, google.protobuf, psycopg2, confluent_kafka; print(1)'"
    )
    done = subprocess.run(
        podman_run(eos_image, "-c", script, options=("--entrypoint", "sh")),
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    java, python, uid, version, extras = done.stdout.splitlines()
    assert extras == "1"
    assert '"17.' in java
    assert python.startswith("Python 3.11.")
    assert uid == "10001"
    assert version == f"eos {eos.__version__}"


def test_demo_of_make_run_exactly_once(eos_image: str, bootstrap: str) -> None:
    """``eos run`` in the container: Spark reads the 100 000-row sample into Kafka, the
    topic read back read_committed holds every id once; then a clean stop on SIGTERM.
    As the Helm chart runs it: a read-only root file system, scratch space (owned by the
    container's user, as an emptyDir with fsGroup is) on /tmp and /var/lib/eos only."""
    name = f"eos-demo-{uuid.uuid4().hex[:8]}"
    scratch = ("--read-only", "--tmpfs", "/tmp:rw,U", "--tmpfs", "/var/lib/eos:rw,U")
    command = podman_run(
        eos_image, "run", "--bootstrap-servers", bootstrap, "--rest-port", str(free_port()),
        name=name, options=scratch,
    )  # fmt: skip
    lines: list[str] = []
    give_up = threading.Timer(DEMO_TIMEOUT, stop, [name, 0])
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as container:
        assert container.stdout
        give_up.start()
        try:
            for line in container.stdout:
                lines.append(line.rstrip())
                if "every id exactly once" in line or "PROBLEM" in line:
                    break
            stop(name)
            lines += [line.rstrip() for line in container.stdout]
            code = container.wait(timeout=60)
        finally:
            give_up.cancel()
            stop(name, timeout=0)
    output = "\n".join(lines[-40:])
    assert any("every id exactly once" in line for line in lines), output
    assert "records=100000 distinct ids=100000 missing=0 duplicates=0" in output
    assert code == 0, output


def test_worker_from_a_mounted_file_and_environment(
    eos_image: str, bootstrap: str, tmp_path: Path
) -> None:
    """The mounted file gives Kafka and the topics; EOS_* variables the group, the
    listener and the advertised name (they win over the file); SIGTERM stops it, exit 0."""
    group = f"image-{uuid.uuid4().hex[:8]}"
    port = free_port()
    worker = tmp_path / "worker.properties"
    worker.write_text(
        f"bootstrap.servers={bootstrap}\ngroup.id=from-the-file\n"
        f"config.storage.topic={group}-configs\noffset.storage.topic={group}-offsets\n"
        f"status.storage.topic={group}-status\n"
    )
    worker.chmod(0o644)
    env = {
        "EOS_GROUP_ID": group,
        "EOS_LISTENERS": f"http://127.0.0.1:{port}",
        "EOS_REST_ADVERTISED_HOST_NAME": "eos-0.eos-headless.test.svc",
    }
    name = f"eos-worker-{group}"
    options = ("-v", f"{worker}:/etc/eos/worker.properties:ro",
               *(f"--env={k}={v}" for k, v in env.items()))  # fmt: skip
    command = podman_run(eos_image, "worker", "/etc/eos/worker.properties", name=name,
                         options=options)  # fmt: skip
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as container:
        try:
            root = _wait_for_root(f"http://127.0.0.1:{port}/", container)
            assert root["cluster"]["group_id"] == group
            assert root["worker_id"] == f"eos-0.eos-headless.test.svc:{port}"
            stop(name)
            out, _ = container.communicate(timeout=60)
        finally:
            stop(name, timeout=0)
    log = out.decode(errors="replace")
    assert container.returncode == 0, log[-3000:]
    line = next(x for x in log.splitlines() if "settings from the environment" in x)
    assert json.loads(line)["message"] == "settings from the environment"  # JSON lines
    assert "eos-0.eos-headless" not in line


def _wait_for_root(url: str, container: subprocess.Popen[bytes]) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert container.poll() is None, "the worker's container exited"
        try:
            answer = httpx.get(url, timeout=2)
            if answer.status_code == 200 and answer.json()["cluster"]["generation"] > 0:
                found: dict[str, Any] = answer.json()
                return found
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"no answer from {url} in 120 s")
