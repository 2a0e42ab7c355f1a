"""How many tasks a worker can hold: file descriptors and memory per task, measured by
``bench/scale.py`` (docs/sizing.md)."""

from __future__ import annotations

import math
import resource
from pathlib import Path

FDS_PER_TASK = 3
"""An exactly-once task holds about two sockets (its producer's connections); one more
leaves room for a broker it has not met yet."""
FDS_BASE = 200
"""The worker's own sockets and files (REST, readers, the status and config clients)."""
RSS_PER_TASK = 1 << 20
"""Measured about 0.4 MiB per VerifiableSource task; a connector's own state comes on top."""


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft limit of open files to the hard one (as servers do); the limits."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard and (hard == resource.RLIM_INFINITY or soft < hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft, hard


def available_memory() -> int | None:
    """MemAvailable of /proc/meminfo in bytes; None where there is none."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def capacity_warning(connector: str, tasks_max: int, members: int, running: int) -> str | None:
    """A warning when ``tasks_max`` tasks spread over ``members`` workers, on top of the
    ``running`` tasks of this one, would exceed its open-files limit or its memory;
    None when they fit."""
    tasks = running + math.ceil(tasks_max / max(1, members))
    problems = []
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    need_fds = FDS_BASE + FDS_PER_TASK * tasks
    if soft != resource.RLIM_INFINITY and need_fds > soft:
        problems.append(
            f"about {need_fds} open files (limit {soft}: raise it with `ulimit -n` or "
            "LimitNOFILE in the service unit)"
        )
    memory = available_memory()
    need_memory = RSS_PER_TASK * tasks
    if memory is not None and need_memory > memory:
        problems.append(f"about {need_memory >> 20} MiB of memory ({memory >> 20} MiB available)")
    if not problems:
        return None
    return (
        f"connector {connector}: tasks.max={tasks_max} puts about {tasks} tasks on this "
        f"worker ({members} worker(s) in the group, {running} task(s) running here), which "
        f"needs {' and '.join(problems)}; lower tasks.max or add workers"
    )
