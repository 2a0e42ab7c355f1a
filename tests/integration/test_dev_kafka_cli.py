"""`eos dev-kafka start/status/stop` round trip, as a user types it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from services.dev_kafka import MARKER, STATE_FILE, DevKafka

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
        # typed as printed, in a shell without the Makefile's EOS_CACHE_DIR, it stops it
        assert f"stop it first with: eos dev-kafka stop --data-dir {data}" in again.stdout
        assert f"stop with: eos dev-kafka stop --data-dir {data}" in started.stdout
    finally:
        stopped = eos("dev-kafka", "stop", "--data-dir", data)
    assert stopped.returncode == 0
    assert "stopped broker(s) [1]" in stopped.stdout
    status = eos("dev-kafka", "status", "--data-dir", data)
    assert status.returncode == 3
    assert "stopped" in status.stdout
    again = eos("dev-kafka", "stop", "--data-dir", data)
    assert again.stdout.strip() == f"no dev-kafka broker was running in {data}"


def test_status_without_cluster(tmp_path: Path) -> None:
    status = eos("dev-kafka", "status", "--data-dir", str(tmp_path))
    assert status.returncode == 3
    assert "no dev-kafka cluster" in status.stdout


def test_start_refuses_a_directory_it_did_not_make(tmp_path: Path) -> None:
    """A user's directory is never emptied: dev-kafka refuses it and touches nothing."""
    data = tmp_path / "my-project"
    (data / "src").mkdir(parents=True)
    (data / "notes.txt").write_text("precious")
    (data / "src" / "main.py").write_text("print('hi')")
    refused = eos("dev-kafka", "start", "--port", "0", "--data-dir", str(data))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "is not empty and is not a dev-kafka data directory" in refused.stderr
    assert str(data) in refused.stderr
    assert sorted(p.name for p in data.rglob("*")) == ["main.py", "notes.txt", "src"]
    assert (data / "notes.txt").read_text() == "precious"


def test_a_new_layout_removes_only_what_dev_kafka_made(tmp_path: Path) -> None:
    """In its own (marked) directory a new layout replaces the state file and the broker
    directories, and leaves anything else there alone."""
    data = tmp_path / "dk"
    kafka = DevKafka(data)
    kafka._layout(2, 0)
    assert (data / MARKER).exists()
    (data / "broker-1" / "data").mkdir(parents=True)
    (data / "broker-2").mkdir()
    (data / STATE_FILE).write_text("{}")
    (data / "mine.txt").write_text("keep me")
    state = kafka._layout(1, 0)
    assert [n.directory for n in state.nodes] == [str(data / "broker-1")]
    assert sorted(p.name for p in data.iterdir()) == [MARKER, "mine.txt"]
    assert (data / "mine.txt").read_text() == "keep me"


def test_an_older_dev_kafka_directory_is_still_its_own(tmp_path: Path) -> None:
    data = tmp_path / "dk"
    (data / "broker-1").mkdir(parents=True)
    (data / STATE_FILE).write_text("{}")
    DevKafka(data)._layout(1, 0)
    assert (data / MARKER).exists()
    assert not (data / "broker-1").exists()
