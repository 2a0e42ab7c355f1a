"""The front door of a plain ``http://`` REST listener: a thread that accepts its
connections, answers ``GET /health`` itself and hands every other connection to
uvicorn on the event loop (docs/operations.md, "Health").

The REST API runs on the worker's event loop; while the loop is blocked (a blocking
call in a connector, say), nothing on it answers. Kafka Connect's health check must
still say so — 500 within its 10 s bound — instead of timing out, so the health
answer cannot depend on the loop. The thread looks at the first bytes of each new
connection without taking them (``MSG_PEEK``): a request line ``GET /health`` is
answered here, from the health monitor's last observations
(:meth:`eos.runtime.health.HealthMonitor.health`, safe from any thread); any other
connection is handed to the loop as it is (uvicorn then reads those same bytes), and
so is one that sends nothing for :data:`PEEK_SECONDS` (uvicorn's own timeouts apply
to it). Waiting connections are multiplexed with a selector, so a slow client holds
up no other.

A connection kept alive for more requests is uvicorn's after its first: a later
``GET /health`` on it is served on the loop by the same monitor. https listeners keep
uvicorn's own accept: the thread cannot read a request line through TLS.
"""

from __future__ import annotations

import json
import selectors
import socket
import threading
import time
from collections.abc import Callable
from http import HTTPStatus

import structlog

from eos.runtime.health import Health

log = structlog.get_logger(__name__)

HEALTH_LINE = b"GET /health"
PEEK_SECONDS = 2.0
"""How long a new connection may take to send its request line before it is handed
to the loop unread."""
READ_SECONDS = 1.0
"""How long a health request may take to arrive whole."""
MAX_REQUEST_BYTES = 16384
"""A health request's head (request line and headers) may be this long at most."""


def route(head: bytes) -> str:
    """What to do with a connection whose first bytes are ``head``: ``health`` (answer
    here), ``loop`` (hand it over) or ``wait`` (too few bytes to tell)."""
    line = HEALTH_LINE
    if head.startswith(line):
        rest = head[len(line) : len(line) + 1]
        if not rest:
            return "wait"
        return "health" if rest in (b" ", b"?") else "loop"
    return "wait" if line.startswith(head) else "loop"


def health_response(health: Health) -> bytes:
    """The HTTP/1.1 answer to a health request (the connection closes after it)."""
    body = json.dumps({"status": health.status, "message": health.message}).encode()
    reason = HTTPStatus(health.code).phrase
    head = (
        f"HTTP/1.1 {health.code} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class FrontDoor:
    """Accepts on ``sock`` (a bound, listening socket) in a thread of its own."""

    def __init__(
        self,
        sock: socket.socket,
        health: Callable[[], Health],
        hand_over: Callable[[socket.socket], object],
    ) -> None:
        self._sock = sock
        self._health = health
        self._hand_over = hand_over
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="eos-rest-front-door", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        """Stop accepting (the listening socket stays open: its owner closes it)."""
        self._closing.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        self._sock.setblocking(False)
        selector.register(self._sock, selectors.EVENT_READ, None)
        try:
            while not self._closing.is_set():
                ready = selector.select(timeout=0.1)
                now = time.monotonic()
                for key, _ in ready:
                    if key.fileobj is self._sock:
                        self._accept(selector, now + PEEK_SECONDS)
                    else:
                        self._look(selector, key.fileobj, key.data)  # type: ignore[arg-type]
                for key in list(selector.get_map().values()):
                    if key.data is not None and key.data < now:  # sent nothing yet
                        selector.unregister(key.fileobj)
                        self._give(key.fileobj)  # type: ignore[arg-type]
        except Exception as exc:  # never seen; the listener is then dead: say so
            log.error("REST front door failed", error=repr(exc), exc_info=exc)
        finally:
            for key in list(selector.get_map().values()):
                if key.fileobj is not self._sock:
                    key.fileobj.close()  # type: ignore[union-attr]
            selector.close()

    def _accept(self, selector: selectors.BaseSelector, deadline: float) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. too many open files: try again later
                log.warning("REST connection not accepted", error=repr(exc))
                return
            conn.setblocking(False)
            selector.register(conn, selectors.EVENT_READ, deadline)

    def _look(self, selector: selectors.BaseSelector, conn: socket.socket, deadline: float) -> None:
        try:
            head = conn.recv(len(HEALTH_LINE) + 1, socket.MSG_PEEK)
        except OSError:
            head = b""
        if not head:  # the client went away
            selector.unregister(conn)
            conn.close()
            return
        what = route(head)
        if what == "wait":
            return  # more bytes will come (or the deadline hands it over)
        selector.unregister(conn)
        if what == "health":
            self._answer(conn)
        else:
            self._give(conn)

    def _give(self, conn: socket.socket) -> None:
        try:
            self._hand_over(conn)
        except Exception:  # the loop is closed: the worker is stopping
            conn.close()

    def _checked_health(self) -> Health:
        try:
            return self._health()
        except Exception as exc:  # a bug: still an answer, and the door stays open
            log.error("health check failed", error=repr(exc), exc_info=exc)
            return Health("unhealthy", f"the health check failed: {exc!r}")

    def _answer(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(READ_SECONDS)
            received = b""
            while b"\r\n\r\n" not in received and len(received) < MAX_REQUEST_BYTES:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                received += chunk
            conn.sendall(health_response(self._checked_health()))
        except OSError:
            pass  # the client went away or was too slow
        finally:
            conn.close()
