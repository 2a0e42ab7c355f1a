"""Debezium's PostgreSQL connector (3.6.1, from Maven Central) in Kafka Connect's Java
worker: the peer PostgresCdcSource is compared with (tests/system/test_cdc_debezium.py,
bench/cdc.py).

``debezium_plugins()`` resolves the connector with what it needs (bench/debezium-pom.xml)
into ``.cache/debezium-plugins/<version>/``, a Connect ``plugin.path``; ``connect_worker``
runs a distributed worker (bench/peers.py's jars) with it until the block ends.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from services.dev_kafka import free_ports

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))  # bench scripts import their siblings by name
from peers import (  # noqa: E402 - after the path it is found on
    internal_topics,
    java,
    kafka_version,
    process,
    resolve_jars,
    write_props,
)

CACHE = REPO / ".cache"
POM = REPO / "bench" / "debezium-pom.xml"
SETTINGS = REPO / "bench" / "spark-kafka-settings.xml"
CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"


def debezium_version() -> str:
    found = re.search(r"<debezium.version>([^<]+)</debezium.version>", POM.read_text())
    assert found is not None
    return found.group(1)


def debezium_plugins() -> Path:
    """The ``plugin.path`` holding Debezium's PostgreSQL connector."""
    root = CACHE / "debezium-plugins" / debezium_version()
    target = root / "debezium-connector-postgres"
    if not (root / ".complete").exists():
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RuntimeError(
                "mvn not found: install Apache Maven (Debian: apt-get install maven)"
            )
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [mvn, "-q", "-B", "-s", str(SETTINGS), "-f", str(POM),
             f"-Dmaven.repo.local={CACHE / 'm2'}", "dependency:copy-dependencies",
             "-DincludeScope=runtime", f"-DoutputDirectory={target}"],
            check=True,
        )  # fmt: skip
        (root / ".complete").touch()
    return root


@contextmanager
def connect_worker(bootstrap: str, work: Path, **settings: str) -> Iterator[tuple[str, int]]:
    """A Kafka Connect distributed worker with Debezium installed: (REST URL, pid)."""
    jars = resolve_jars(kafka_version())
    plugins = debezium_plugins()
    (port,) = free_ports(1)
    group = f"debezium-{uuid.uuid4().hex[:8]}"
    props = {
        "bootstrap.servers": bootstrap,
        **internal_topics(group),
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "exactly.once.source.support": "enabled",
        "listeners": f"http://127.0.0.1:{port}",
        "plugin.path": str(plugins),
        "offset.flush.interval.ms": "1000",
        **settings,
    }
    worker = write_props(work / f"{group}.properties", props)
    url = f"http://127.0.0.1:{port}"
    cmd = java(jars, "org.apache.kafka.connect.cli.ConnectDistributed", str(worker))
    with process(cmd, work / "connect.log", f"{url}/connectors") as pid:
        yield url, pid
