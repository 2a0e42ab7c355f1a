"""``eos health``: one line saying whether the worker at ``--url`` is healthy (its
``GET /health``, Kafka Connect's KIP-1017 check): ``healthy: …``, ``starting: …``,
``unhealthy: …`` or ``unreachable: …``; exit 0 if healthy, 1 otherwise. For container
health checks and scripts (docs/operations.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from services.client.http import ClientError, RequestFailed

if TYPE_CHECKING:
    from services.client.commands import Context

HEALTH_TIMEOUT = 15.0
"""Seconds ``eos health`` waits by default (the worker answers well within its 10 s bound)."""
_STATES = {503: "starting", 500: "unhealthy"}


def health(c: Context) -> int:
    try:
        body = c.client.get("/health")
        status = str(body.get("status", "unknown")) if isinstance(body, dict) else "unknown"
        message = str(body.get("message", "")) if isinstance(body, dict) else str(body)
    except RequestFailed as failed:
        status, message = _STATES.get(failed.status, f"HTTP {failed.status}"), failed.message
    except ClientError as exc:
        status, message = "unreachable", str(exc)
    c.emit({"status": status, "message": message}, lambda: f"{status}: {message}")
    return 0 if status == "healthy" else 1


def add_health(leaf: argparse.ArgumentParser) -> None:
    """``eos health`` waits :data:`HEALTH_TIMEOUT` unless ``--timeout`` says otherwise."""
    leaf.set_defaults(timeout=HEALTH_TIMEOUT)
