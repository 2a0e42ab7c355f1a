"""CPU time of the processes a benchmark runs on this machine: this Python process,
its other descendants (Spark's JVM), and the broker (read from ``/proc``)."""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")
PARTS = ("python", "spark", "broker")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, user+system CPU seconds) of ``pid``, None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()  # after "pid (comm)"
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK


def _descendants(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            parents[int(entry.name)] = stat[0]
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


class CpuMeter:
    """CPU seconds used so far, per part (:data:`PARTS`). The processes are found by
    :meth:`start` (call it when they all run); later snapshots only read their stats."""

    def __init__(self, broker_pids: Collection[int] = ()) -> None:
        self._brokers = set(broker_pids)
        self._parts: dict[int, str] = {}
        self.first: dict[str, float] | None = None
        self.last: dict[str, float] | None = None

    def start(self) -> None:
        brokers = set(self._brokers)
        for pid in self._brokers:
            brokers.update(_descendants(pid))
        self._parts = {os.getpid(): "python"}
        for pid in _descendants(os.getpid()):
            self._parts[pid] = "broker" if pid in brokers else "spark"
        for pid in brokers:
            self._parts[pid] = "broker"
        self.first = self.last = self.snapshot()

    def snapshot(self) -> dict[str, float]:
        used = dict.fromkeys(PARTS, 0.0)
        times = os.times()
        used["python"] = times.user + times.system
        for pid, part in self._parts.items():
            if part != "python" and (stat := _stat(pid)) is not None:
                used[part] += stat[1]
        return used

    def mark(self) -> None:
        """The end of the measured span (so far)."""
        self.last = self.snapshot()

    def used(self) -> dict[str, float]:
        """CPU seconds per part between :meth:`start` and the last :meth:`mark`."""
        assert self.first is not None
        assert self.last is not None
        return {part: self.last[part] - self.first[part] for part in PARTS}
