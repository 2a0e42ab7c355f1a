"""deploy/systemd/eos-worker.service, checked offline by systemd's own tools: ``systemd-analyze
verify`` (every key known, every value parsed, the command there) and ``systemd-analyze
security`` (its exposure score), in a throw-away root that holds the unit, systemd's own
units and a stand-in for the eos command (no running systemd is needed)."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from eos.config.worker import WORKER_CONFIG
from tests.debian import ensure_commands

pytestmark = pytest.mark.integration
UNIT = Path(__file__).resolve().parents[2] / "deploy" / "systemd" / "eos-worker.service"
SYSTEM_UNITS = Path("/lib/systemd/system")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ensure_commands({"systemd-analyze": "systemd"})
    root = tmp_path_factory.mktemp("root")
    shutil.copytree(SYSTEM_UNITS, root / "usr/lib/systemd/system", symlinks=True)
    (root / "etc/systemd/system").mkdir(parents=True)
    shutil.copy(UNIT, root / "etc/systemd/system" / UNIT.name)
    command = root / _setting("ExecStart").split()[0].lstrip("/")
    command.parent.mkdir(parents=True)
    command.write_text("#!/bin/sh\n")
    command.chmod(0o755)
    return root


def _analyze(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["systemd-analyze", *args, f"--root={root}", UNIT.name],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def _setting(key: str) -> str:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(UNIT)
    return unit["Service"][key]


def test_systemd_analyze_verify_finds_nothing(root: Path) -> None:
    """systemd-analyze exits 0 even for unknown keys and bad values ("ignoring"): any
    output at all fails the test."""
    done = _analyze(root, "verify")
    assert done.returncode == 0, done.stderr
    assert done.stdout + done.stderr == ""


def test_systemd_analyze_verify_would_see_a_mistake(root: Path, tmp_path: Path) -> None:
    broken = root / "etc/systemd/system" / UNIT.name
    text = broken.read_text()
    try:
        broken.write_text(text.replace("KillMode=mixed", "KillMode=mixd"))
        assert "kill mode" in _analyze(root, "verify").stderr
    finally:
        broken.write_text(text)


def test_exposure_score_is_low(root: Path) -> None:
    done = _analyze(root, "security", "--offline=true", "--threshold=40")
    assert done.returncode == 0, done.stdout
    score = re.search(r"Overall exposure level for \S+: ([\d.]+)", done.stdout)
    assert score, done.stdout
    assert float(score[1]) <= 4.0


def test_stops_cleanly_restarts_on_failure_and_is_hardened() -> None:
    assert _setting("KillMode") == "mixed"  # SIGTERM to the worker alone, SIGKILL at the end
    assert _setting("Restart") == "on-failure"
    assert _setting("RestartPreventExitStatus") == "2"  # a bad setting
    graceful_ms = WORKER_CONFIG.keys["task.shutdown.graceful.timeout.ms"].default
    assert int(_setting("TimeoutStopSec")) >= graceful_ms / 1000 + 20
    assert _setting("NoNewPrivileges") == "yes"
    assert _setting("ProtectSystem") == "strict"
    assert "/var/lib/eos" in _setting("ReadWritePaths")
    assert _setting("StateDirectory") == "eos"
    assert _setting("User") == "eos"
    assert int(_setting("LimitNOFILE")) >= 200 + 3 * 1000  # docs/sizing.md, 1000 tasks
