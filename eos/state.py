"""The states of connectors and tasks, as Kafka Connect names them (one enum for
the status topic, the runtime, the metrics and the REST API)."""

from __future__ import annotations

import enum


class State(enum.Enum):
    UNASSIGNED = "UNASSIGNED"
    """Not running on any worker (yet, or any more)."""
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"
    """Stopped by an error; the status carries the trace. Restarted only on request."""
    RESTARTING = "RESTARTING"
    DESTROYED = "DESTROYED"


TASK_STATES = tuple(s for s in State if s is not State.DESTROYED)
"""The states a task reports (metrics keep one series per state)."""
