"""The worker's container images (``make image``), run with podman against the session's
broker: the demo of ``make run`` inside the full image (every id exactly once), a worker
configured by a mounted file and EOS_* variables, and what the image declares (user,
entrypoint, labels, health check); the full image writing Avro through a schema registry;
eos:slim without Spark or a JRE, under a quarter of the full image's size, running a
connector installed with pip in an image derived from it."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import re
import subprocess
import threading
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import eos
from eos.kafka import ClientConfig, read_to_end
from services.dev_registry import RegistryState
from tests.container import builder, eos_image, eos_slim_image, inspect, podman_run, stop
from tests.integration.registry_readers import read_avro
from tests.prometheus_server import free_port
from tests.scripts import REPO

__all__ = ["eos_image", "eos_slim_image"]
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


def shell(image: str, script: str) -> list[str]:
    """The lines ``script`` prints, run by ``sh`` in a container of ``image``."""
    done = subprocess.run(
        podman_run(image, "-c", script, options=("--entrypoint", "sh")),
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout.splitlines()


def test_version_and_runtime(eos_image: str) -> None:
    script = (
        "java -version 2>&1 | head -1; python3 --version; id -u; eos --version; "
        # every documented feature: the Avro and Protobuf converters, CDC, librdkafka
        "python3 -c 'import fastavro, google.protobuf, psycopg2, confluent_kafka; print(1)'"
    )
    java, python, uid, version, extras = shell(eos_image, script)
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


# ------------------------------------------------------------------ variants of the image


def test_the_full_image_writes_avro_through_a_schema_registry(
    eos_image: str, bootstrap: str, dev_registry: RegistryState, tmp_path: Path
) -> None:
    """The formats extra in the image: VerifiableSource's records as Avro through the
    session's registry, read back read_committed with confluent-kafka's AvroDeserializer
    (a reader eos does not own)."""
    group = f"image-avro-{uuid.uuid4().hex[:8]}"
    topic, records = f"{group}-out", 300
    connector = {
        "name": "avro", "connector.class": "VerifiableSource", "tasks.max": "1",
        "topic": topic, "partitions.per.task": "1", "records.per.partition": str(records),
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": dev_registry.url,
    }  # fmt: skip
    with worker_container(eos_image, bootstrap, group, tmp_path, connector) as port:
        written = _committed(bootstrap, topic, records)
        health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
    assert health.status_code == 200
    values = [read_avro(dev_registry.url, topic, r.value) for r in written]
    assert sorted(v["seqno"] for v in values) == list(range(records))
    assert {v["task"] for v in values} == {0}


def test_slim_has_no_spark_nor_jre_and_is_under_a_quarter_of_the_full_image(
    eos_image: str, eos_slim_image: str
) -> None:
    script = (
        "command -v java || echo no-java; "
        "python3 -c 'import pyspark' 2>/dev/null && echo spark || echo no-spark; "
        "eos --version; "
        "python3 -c 'import fastavro, google.protobuf, psycopg2, confluent_kafka; print(1)'"
    )
    assert shell(eos_slim_image, script) == ["no-java", "no-spark", f"eos {eos.__version__}", "1"]
    demo = subprocess.run(
        podman_run(eos_slim_image, "run", "--bootstrap-servers", "127.0.0.1:1"),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert demo.returncode == 2, demo.stdout + demo.stderr
    (said,) = [line for line in demo.stderr.splitlines() if line.startswith("error:")]
    assert "pip install 'eos[spark]'" in said
    assert "eos:latest" in said
    slim, full = inspect(eos_slim_image), inspect(eos_image)
    assert slim["Labels"]["dev.eos.image.variant"] == "slim"
    assert full["Labels"]["dev.eos.image.variant"] == "latest"
    assert slim["Config"]["Entrypoint"] == full["Config"]["Entrypoint"]
    print(f"image sizes: full {full['Size'] / 1e6:.0f} MB, slim {slim['Size'] / 1e6:.0f} MB")
    assert slim["Size"] < full["Size"] / 4


def test_slim_runs_a_user_connector_installed_with_pip_in_a_derived_image(
    eos_slim_image: str, bootstrap: str, tmp_path: Path
) -> None:
    """docs/connectors.md's CounterSource as a distribution with an ``eos.connectors``
    entry point, installed with pip in an image made FROM eos:slim (as docs/deploy.md
    shows); the worker finds it by its alias, /health answers 200, the records arrive."""
    context = tmp_path / "context"
    context.mkdir()
    wheel = counter_wheel(context)
    (context / "Containerfile").write_text(
        f"FROM {eos_slim_image}\nUSER root\nCOPY {wheel.name} /tmp/\n"
        f"RUN pip install --no-index --no-deps --no-cache-dir /tmp/{wheel.name} "
        f"&& rm /tmp/{wheel.name}\nUSER 10001:10001\n"
    )
    derived = f"localhost/eos-counter:{uuid.uuid4().hex[:8]}"
    flags = tuple(builder().PODMAN_RUN_FLAGS)
    subprocess.run(
        ["podman", "build", *flags, "--format", "docker", "-t", derived, str(context)],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    group = f"image-slim-{uuid.uuid4().hex[:8]}"
    topic = f"{group}-out"
    connector = {"name": "counter", "connector.class": "counter", "topic": topic}
    try:
        with worker_container(derived, bootstrap, group, tmp_path, connector) as port:
            written = _committed(bootstrap, topic, 300)
            health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
            plugins = httpx.get(f"http://127.0.0.1:{port}/connector-plugins", timeout=5).json()
    finally:
        subprocess.run(["podman", "rmi", "--force", derived], capture_output=True, check=False)
    assert health.status_code == 200
    assert "counter" in {p.get("alias") for p in plugins} | {p["class"] for p in plugins}
    numbers = [json.loads(r.value)["n"] for r in written]
    assert sorted(numbers)[:300] == list(range(300))


COUNTER_MODULE = "counter_source"


def counter_wheel(directory: Path) -> Path:
    """A wheel of docs/connectors.md's first example (CounterSource), written by hand (a
    wheel is a zip: the module, its metadata and the entry point)."""
    doc = (REPO / "docs" / "connectors.md").read_text()
    code = re.search(r"```python\n(.*?)```", doc, re.S)
    assert code, "no example in docs/connectors.md"
    name, version = "counter-source", "1.0"
    info = f"counter_source-{version}.dist-info"
    files = {
        f"{COUNTER_MODULE}.py": code[1],
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
        f"{info}/entry_points.txt": f"[eos.connectors]\ncounter = {COUNTER_MODULE}:CounterSource\n",
    }
    records = [
        f"{path},sha256={_b64_digest(text)},{len(text.encode())}" for path, text in files.items()
    ]
    files[f"{info}/RECORD"] = "\n".join([*records, f"{info}/RECORD,,"]) + "\n"
    wheel = directory / f"counter_source-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def _b64_digest(text: str) -> str:
    raw = hashlib.sha256(text.encode()).digest()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@contextlib.contextmanager
def worker_container(
    image: str, bootstrap: str, group: str, directory: Path, connector: dict[str, str]
) -> Iterator[int]:
    """A worker of ``image`` with the connector's file on its command line; yields its
    REST port once it answers; stopped with SIGTERM after, which must end it with 0."""
    port = free_port()
    worker = directory / f"{group}.properties"
    worker.write_text(
        f"bootstrap.servers={bootstrap}\ngroup.id={group}\nlisteners=http://127.0.0.1:{port}\n"
        f"config.storage.topic={group}-configs\noffset.storage.topic={group}-offsets\n"
        f"status.storage.topic={group}-status\n"
    )
    config = directory / f"{group}-connector.json"
    config.write_text(json.dumps(connector))
    for path in (worker, config):
        path.chmod(0o644)
    name = f"eos-worker-{group}"
    mounts = ("-v", f"{worker}:/etc/eos/worker.properties:ro",
              "-v", f"{config}:/etc/eos/connector.json:ro")  # fmt: skip
    command = podman_run(
        image, "worker", "/etc/eos/worker.properties", "/etc/eos/connector.json",
        name=name, options=mounts,
    )  # fmt: skip
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as container:
        try:
            _wait_for_root(f"http://127.0.0.1:{port}/", container)
            yield port
            stop(name)
            out, _ = container.communicate(timeout=60)
        finally:
            stop(name, timeout=0)
    assert container.returncode == 0, out.decode(errors="replace")[-3000:]


def _committed(bootstrap: str, topic: str, count: int, timeout: float = 120) -> list[Any]:
    """The committed records of ``topic`` once there are at least ``count``."""
    config = ClientConfig({"bootstrap.servers": bootstrap}, {}, {}, {})
    deadline = time.monotonic() + timeout
    while True:
        found = asyncio.run(read_to_end(config, topic, timeout=30))
        if len(found) >= count or time.monotonic() > deadline:
            assert len(found) >= count, f"{len(found)} of {count} records in {topic}"
            return found
        time.sleep(1)
