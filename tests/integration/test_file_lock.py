"""services.file_lock across real processes: the cache's builders take turns, and a
holder that is killed leaves the lock free."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from services.file_lock import file_lock
from tests.scripts import REPO

HOLD = """
import sys, time
from pathlib import Path
from services.file_lock import file_lock
with file_lock(Path(sys.argv[1])):
    with open(sys.argv[2], "a") as log:
        log.write("in\\n")
    time.sleep(float(sys.argv[3]))
    with open(sys.argv[2], "a") as log:
        log.write("out\\n")
"""


def _holder(lock: Path, log: Path, seconds: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock), str(log), str(seconds)], cwd=REPO
    )


def _wait_for(log: Path, text: str) -> None:
    deadline = time.monotonic() + 30
    while text not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, f"{text!r} never written"
        time.sleep(0.02)


def test_two_processes_take_turns(tmp_path: Path) -> None:
    lock, log = tmp_path / "locks" / "cache.lock", tmp_path / "log"
    holders = [_holder(lock, log, 0.5) for _ in range(2)]
    assert [h.wait(timeout=60) for h in holders] == [0, 0]
    assert log.read_text().split() == ["in", "out", "in", "out"]  # never two inside


def test_a_killed_holder_frees_the_lock(tmp_path: Path) -> None:
    lock, log = tmp_path / "cache.lock", tmp_path / "log"
    holder = _holder(lock, log, 600)
    try:
        _wait_for(log, "in")
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        started = time.monotonic()
        with file_lock(lock):
            assert time.monotonic() - started < 5
    finally:
        holder.kill()
        holder.wait()
    assert log.read_text().split() == ["in"]
