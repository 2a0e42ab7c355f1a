"""What a user sees when a worker cannot join its cluster: a start-up error naming
the setting (exit 2, one line, no traceback), or — for a group.id that other Kafka
clients use — an explanation in ``GET /`` while the worker keeps trying."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx
import pytest

from eos.kafka import ClientConfig, make_consumer
from tests.integration.worker_harness import (
    REPO,
    WorkerProcess,
    worker_props,
    write_properties,
)

pytestmark = pytest.mark.integration


def start_worker(path: Path, props: dict[str, str]) -> subprocess.CompletedProcess[str]:
    write_properties(path, props)
    return subprocess.run(
        [sys.executable, "-m", "services.cli", "worker", str(path)],
        capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("setting", "value", "says"),
    [
        ("session.timeout.ms", "900", "group.min.session.timeout.ms"),  # dev brokers: min 1000
        ("assignor", "fastest", "round-robin"),
        ("connect.protocol", "incremental", "eager, compatible, sessioned"),
        ("worker.priority", "high", "'worker.priority'"),
    ],
)
def test_bad_cluster_settings_stop_the_worker_with_one_line(
    setting: str,
    value: str,
    says: str,
    bootstrap: str,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    props = worker_props(bootstrap, unique_name("g"), heartbeat_interval_ms="500")
    props[setting] = value
    done = start_worker(tmp_path / "worker.properties", props)
    assert done.returncode == 2, done.stderr[-2000:]
    error = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1, done.stderr[-2000:]
    assert setting in error[0]
    assert value in error[0]
    assert says in error[0]
    assert "Traceback" not in done.stderr


async def test_group_id_of_a_consumer_group_is_explained(
    bootstrap: str,
    unique_name: Callable[[str], str],
    topic_factory: Callable[..., object],
    tmp_path: Path,
) -> None:
    group = unique_name("consumers")
    topic = await topic_factory()  # type: ignore[misc]
    consumer = make_consumer(
        ClientConfig({"bootstrap.servers": bootstrap}), group_id=group, session_timeout_ms=30000
    )
    consumer.subscribe([topic])
    await consumer.start()
    try:
        with anyio.fail_after(30):
            while not consumer.assignment():
                await consumer.getmany(timeout_ms=200)
        props = worker_props(bootstrap, group)
        props["config.storage.topic"] = f"{group}-eos-configs"
        worker = WorkerProcess(tmp_path, props, [])
        worker.start()
        try:
            message = ""
            async with httpx.AsyncClient(base_url=props["listeners"], timeout=5) as http:
                with anyio.fail_after(60):
                    while not message:
                        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                            message = (await http.get("/")).json()["cluster"]["error"] or ""
                        await anyio.sleep(0.3)
                await anyio.sleep(2)
                assert worker.alive(), worker.tail()  # it keeps trying, it does not crash
            assert "protocol type 'consumer'" in message
            assert "group.id of its own" in message
        finally:
            worker.stop()
    finally:
        await consumer.stop()
