"""The HTTP stack of a worker process: uvicorn serving Starlette apps, for the REST
API on ``listeners`` (http or https) and for Prometheus on ``metrics.listeners``.

Every listener is bound by :func:`listen` before the worker starts anything else,
so a taken address stops the process with one line naming it and the setting
(uvicorn itself would exit the process). uvicorn's own signal handling is
switched off: the service entry point owns signals. A plain ``http://`` REST
listener given a health check is accepted by a :class:`~services.health_thread.FrontDoor`
thread, which answers ``GET /health`` even while the event loop is blocked and hands
every other connection to uvicorn.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import urlparse

import anyio
import anyio.to_thread
import httpx
import uvicorn
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from eos.config.rest_security import RestTls
from eos.config.worker import WorkerConfig
from eos.errors import ConfigError
from eos.runtime.health import Health
from metrics import metrics_response
from services.health_thread import FrontDoor

METRICS_LISTENERS = "metrics.listeners"
METRICS_PREFIX = "metrics."
"""Worker settings the service reads itself (declared to the worker config as reserved)."""
SHUTDOWN_TIMEOUT = 5
"""Seconds a stopping server waits for requests in progress before closing them."""
BACKLOG = 2048
"""Connections a listener queues before they are accepted (uvicorn's default)."""
HealthCheck = Callable[[], Health]


class HttpServer(uvicorn.Server):
    """uvicorn on a socket bound beforehand (:func:`listen`), without its own signal
    handling."""

    def __init__(self, config: uvicorn.Config, listener: Listener) -> None:
        super().__init__(config)
        self.listener = listener

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def protocol(self) -> asyncio.Protocol:
        """A protocol instance for one accepted connection, as uvicorn makes them for the
        sockets it accepts itself (for connections a front door hands over)."""
        config = self.config
        made: asyncio.Protocol = config.http_protocol_class(  # type: ignore[call-arg]
            config=config, server_state=self.server_state, app_state=self.lifespan.state
        )
        return made

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return self.listener.port


@dataclass
class Listener:
    """A listening address, bound (see :func:`listen`); ``ssl`` for https."""

    url: str
    sock: socket.socket
    ssl: ssl.SSLContext | None = None

    @property
    def port(self) -> int:
        port: int = self.sock.getsockname()[1]
        return port

    def close(self) -> None:
        self.sock.close()


def listen(listener: str, setting: str, tls: RestTls | None = None) -> Listener:
    """Bind ``listener`` (``http://host:port`` or, with ``tls``, ``https://host:port``)
    now, so that a taken address is known before anything else starts. A
    :class:`ConfigError` naming the address and ``setting`` if it cannot be bound."""
    url = urlparse(listener)
    schemes = ("http", "https") if tls is not None else ("http",)
    if url.scheme not in schemes or url.port is None:
        raise ConfigError(setting, listener, f"expected {' or '.join(schemes)}://host:port")
    context = tls.server_context() if url.scheme == "https" and tls is not None else None
    host = url.hostname or ""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, url.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise ConfigError(setting, listener, f"cannot resolve {host!r}: {exc.strerror}") from exc
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise ConfigError(
            setting,
            listener,
            f"cannot listen on {host or '*'}:{url.port}: {exc.strerror or exc}; stop what "
            f"listens there or set {setting} to another address",
        ) from exc
    return Listener(listener, sock, context)


class _Config(uvicorn.Config):
    """uvicorn's config with a TLS context made beforehand (so that its errors name
    the setting and come before anything else starts)."""

    def __init__(self, app: Starlette, context: ssl.SSLContext | None) -> None:
        super().__init__(
            app,
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=SHUTDOWN_TIMEOUT,
        )
        self._context = context

    def load(self) -> None:
        super().load()
        self.ssl = self._context


def http_server(app: Starlette, listener: Listener) -> HttpServer:
    return HttpServer(_Config(app, listener.ssl), listener)


async def serve(
    server: HttpServer, *, task_status: TaskStatus[int], health: HealthCheck | None = None
) -> None:
    """Serve until cancelled; ready (with the bound port) once it accepts requests.
    With ``health`` (and plain http), a front door accepts the connections.

    Cancelling stops the server the way uvicorn expects (``should_exit``): it closes
    its socket and connections itself, within :data:`SHUTDOWN_TIMEOUT`, so that a
    worker restarted on the same port can bind it again."""
    done = anyio.Event()
    listener = server.listener
    arrived, connections = anyio.create_memory_object_stream[socket.socket](math.inf)
    door = None
    if health is not None and listener.ssl is None:
        loop = asyncio.get_running_loop()

        def deliver(conn: socket.socket) -> None:  # on the loop
            try:
                arrived.send_nowait(conn)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                conn.close()  # the server is stopping

        door = FrontDoor(
            listener.sock, health, lambda conn: loop.call_soon_threadsafe(deliver, conn)
        )

    async def run() -> None:
        with anyio.CancelScope(shield=True):  # uvicorn cleans up only when it exits itself
            try:
                await server._serve(sockets=[] if door else [listener.sock])
            finally:
                if door is not None:
                    door.close()
                listener.close()
                done.set()

    async def adopt() -> None:
        loop = asyncio.get_running_loop()
        async for conn in connections:
            await loop.connect_accepted_socket(server.protocol, conn)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            try:
                while not server.started and not done.is_set():  # noqa: ASYNC110 - a flag
                    await anyio.sleep(0.02)
                if door is not None and server.started:
                    tg.start_soon(adopt)
                    door.start()
                task_status.started(server.port if server.started else 0)
                await done.wait()
            finally:
                server.should_exit = True
                arrived.close()
                tg.cancel_scope.cancel()
    finally:
        with connections:  # handed over while the server stopped: never served
            for conn in _left(connections):
                conn.close()


def _left(connections: MemoryObjectReceiveStream[socket.socket]) -> Iterator[socket.socket]:
    while True:
        try:
            yield connections.receive_nowait()
        except (anyio.WouldBlock, anyio.EndOfStream):
            return


def peer_client(settings: WorkerConfig, timeout: float) -> httpx.AsyncClient:
    """An HTTP client for calls to other workers (forwarding, internal requests): it
    trusts the cluster's CA when their listeners are https (docs/security.md)."""
    return httpx.AsyncClient(timeout=timeout, verify=settings.rest_tls.client_context())


def metrics_route(registry: CollectorRegistry) -> Route:
    """``GET /metrics``: Prometheus text, or OpenMetrics when the scraper prefers it."""

    async def endpoint(request: Request) -> Response:
        body, content_type = await anyio.to_thread.run_sync(
            metrics_response, registry, request.headers.get("accept")
        )
        return Response(body, media_type=content_type)

    return Route("/metrics", endpoint, methods=["GET"])


async def serve_metrics(
    registry: CollectorRegistry,
    host: str,
    port: int,
    *,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """``/metrics`` alone on its own listener (``metrics.listeners``); ready with the port."""
    listener = listen(f"http://{host}:{port}", METRICS_LISTENERS)
    await serve_listener(
        Starlette(routes=[metrics_route(registry)]), listener, task_status=task_status
    )


async def serve_listener(
    app: Starlette,
    listener: Listener,
    *,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
    health: HealthCheck | None = None,
) -> None:
    """Serve ``app`` on a bound ``listener`` until cancelled; with ``health``, a plain
    http listener answers ``GET /health`` from a thread of its own
    (:mod:`services.health_thread`)."""
    await serve(http_server(app, listener), task_status=task_status, health=health)
