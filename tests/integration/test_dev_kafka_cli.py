"""`eos dev-kafka start/status/stop` round trip, as a user types it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def eos(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *args],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_start_status_second_start_stop(tmp_path: Path) -> None:
    data = str(tmp_path / "dk")
    started = eos("dev-kafka", "start", "--port", "0", "--data-dir", data)
    try:
        assert started.returncode == 0, started.stderr
        assert "ready: bootstrap.servers=127.0.0.1:" in started.stdout
        bootstrap = started.stdout.split("bootstrap.servers=")[1].split()[0]

        status = eos("dev-kafka", "status", "--data-dir", data)
        assert status.returncode == 0
        assert f"broker 1: {bootstrap} running" in status.stdout

        again = eos("dev-kafka", "start", "--port", "0", "--data-dir", data)
        assert again.returncode == 0
        assert f"Kafka already runs at {bootstrap}" in again.stdout
        assert "eos dev-kafka stop" in again.stdout
    finally:
        stopped = eos("dev-kafka", "stop", "--data-dir", data)
    assert stopped.returncode == 0
    assert "stopped broker(s) [1]" in stopped.stdout
    status = eos("dev-kafka", "status", "--data-dir", data)
    assert status.returncode == 3
    assert "stopped" in status.stdout


def test_status_without_cluster(tmp_path: Path) -> None:
    status = eos("dev-kafka", "status", "--data-dir", str(tmp_path))
    assert status.returncode == 3
    assert "no dev-kafka cluster" in status.stdout
