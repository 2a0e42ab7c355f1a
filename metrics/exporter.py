"""Exposition of a worker's registry: content negotiation for ``GET /metrics`` and a
small standalone HTTP listener for a separate ``metrics.listeners`` port.

:func:`metrics_response` is framework-free; the REST app wraps it in a Starlette
route. Negotiation follows the ``Accept`` header's q-values: OpenMetrics 1.0.0
when the client prefers ``application/openmetrics-text`` (Prometheus does),
otherwise the Prometheus text format 0.0.4.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import anyio.abc
from anyio.abc import TaskStatus
from prometheus_client import CollectorRegistry
from prometheus_client import generate_latest as text_latest
from prometheus_client.openmetrics import exposition as openmetrics

__all__ = [
    "OPENMETRICS_CONTENT_TYPE",
    "TEXT_CONTENT_TYPE",
    "metrics_response",
    "serve_metrics",
    "wants_openmetrics",
]

OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_MAX_REQUEST_HEAD = 16 * 1024
_READ_TIMEOUT = 10.0
_PLAIN = "text/plain; charset=utf-8"

_log = logging.getLogger(__name__)
openmetrics_latest: Callable[[CollectorRegistry], bytes] = openmetrics.generate_latest


def _accepted(accept_header: str) -> dict[str, float]:
    """Highest q-value per media type in an Accept header."""
    best: dict[str, float] = {}
    for item in accept_header.split(","):
        media, *params = (part.strip() for part in item.split(";"))
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if media:
            best[media.lower()] = max(q, best.get(media.lower(), 0.0))
    return best


def wants_openmetrics(accept_header: str | None) -> bool:
    """True if the client prefers OpenMetrics over the Prometheus text format."""
    accepted = _accepted(accept_header or "")
    openmetrics = accepted.get("application/openmetrics-text", 0.0)
    text = max(accepted.get("text/plain", 0.0), accepted.get("*/*", 0.0))
    return openmetrics > 0.0 and openmetrics >= text


def metrics_response(registry: CollectorRegistry, accept_header: str | None) -> tuple[bytes, str]:
    """``(body, content_type)`` for a scrape of ``registry``.

    Blocking, about 1 ms (8 kB) per task: from async code call it through
    ``anyio.to_thread.run_sync``.
    """
    if wants_openmetrics(accept_header):
        return openmetrics_latest(registry), OPENMETRICS_CONTENT_TYPE
    return text_latest(registry), TEXT_CONTENT_TYPE


@dataclass(frozen=True)
class _Request:
    method: str
    path: str
    accept: str | None


async def serve_metrics(
    registry: CollectorRegistry,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``GET /metrics`` on ``host:port`` until cancelled.

    Start it with ``port = await task_group.start(serve_metrics, registry, host, port)``:
    the reported port is the bound one (useful with ``port=0``). One request per
    connection (``Connection: close``), which is all a scraper needs. The exposition
    is rendered in a worker thread (anyio's default limiter).
    """
    listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    async with listener:
        bound: int = listener.extra(anyio.abc.SocketAttribute.local_port)
        task_status.started(bound)
        await listener.serve(lambda stream: _handle(registry, stream))


async def _handle(registry: CollectorRegistry, stream: anyio.abc.ByteStream) -> None:
    async with stream:
        try:
            with anyio.fail_after(_READ_TIMEOUT):
                try:
                    request = await _read_request(stream)
                except ValueError as exc:
                    await stream.send(_http(400, "Bad Request", f"{exc}\n".encode(), _PLAIN))
                    return
            # exposition takes ~1 ms per task: keep it off the event loop
            await stream.send(await anyio.to_thread.run_sync(_respond, registry, request))
        except (
            TimeoutError,
            anyio.EndOfStream,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
        ) as exc:
            _log.debug("metrics listener: dropped a connection: %r", exc)
        except Exception:
            _log.exception("metrics listener: failed to answer a scrape")


async def _read_request(stream: anyio.abc.ByteStream) -> _Request:
    head = b""
    while b"\r\n\r\n" not in head:
        if len(head) > _MAX_REQUEST_HEAD:
            raise ValueError("request head too large")
        head += await stream.receive()
    lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    try:
        method, target, _version = lines[0].split(" ", 2)
    except ValueError:
        raise ValueError(f"malformed request line {lines[0][:80]!r}") from None
    accept = None
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "accept":
            accept = value.strip()
    return _Request(method, target.split("?", 1)[0], accept)


def _respond(registry: CollectorRegistry, request: _Request) -> bytes:
    if request.path != "/metrics":
        return _http(404, "Not Found", b"not found; try /metrics\n", _PLAIN)
    if request.method not in ("GET", "HEAD"):
        return _http(405, "Method Not Allowed", b"", _PLAIN, "Allow: GET, HEAD")
    body, content_type = metrics_response(registry, request.accept)
    return _http(200, "OK", body, content_type, head=request.method == "HEAD")


def _http(
    status: int, reason: str, body: bytes, content_type: str, *extra: str, head: bool = False
) -> bytes:
    headers = [
        f"HTTP/1.1 {status} {reason}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        "Connection: close",
        *extra,
    ]
    return ("\r\n".join(headers) + "\r\n\r\n").encode("latin-1") + (b"" if head else body)
