"""An HTTPS gateway in front of a plain-HTTP schema registry, as deployments put one: it
takes only clients presenting a certificate its CA signed (``CERT_REQUIRED``) and HTTP
Basic credentials, answers 401 with ``WWW-Authenticate`` otherwise, and forwards the rest
to the registry. Threads, not the event loop: eos's registry client is synchronous.

Each handshake and request is noted in :attr:`AuthProxy.seen` (who came, with which
certificate, what they were answered), so a test can tell which check refused a client.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import os
import secrets
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from services.dev_registry import RegistryState
from tests.tls_certs import CertificateAuthority, Issued

_HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "authorization", "content-length",
}  # fmt: skip


@dataclass(frozen=True)
class Seen:
    """One handshake the gateway refused (``status`` 0, ``error`` its reason) or one
    request it answered (``status``, ``user`` as sent, ``client`` the certificate's CN)."""

    client: str | None
    status: int
    user: str | None = None
    path: str = ""
    error: str = ""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    gateway: AuthProxy

    def finish_request(self, request: Any, client_address: Any) -> None:
        """The TLS handshake runs in the connection's own thread (a client that never
        finishes it holds up no one else)."""
        gateway = self.gateway
        raw: socket.socket = request
        raw.settimeout(10)
        tls = gateway.context.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        try:
            tls.do_handshake()
        except (ssl.SSLError, OSError) as exc:
            gateway.note(Seen(None, 0, error=f"{type(exc).__name__}: {exc}"))
            _linger(tls)
            return
        try:
            super().finish_request(tls, client_address)
        finally:
            tls.close()

    def shutdown_request(self, request: Any) -> None:
        with contextlib.suppress(OSError):
            request.close()


def _linger(tls: ssl.SSLSocket) -> None:
    """Close a refused connection so the client reads the TLS alert already sent rather
    than a reset (closing with its request unread would send RST): stop sending, then read
    whatever the client still sends until it closes."""
    with socket.socket(fileno=os.dup(tls.fileno())) as plain, contextlib.suppress(OSError):
        plain.shutdown(socket.SHUT_WR)
        plain.settimeout(2)
        while plain.recv(65536):
            pass
    tls.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the gateway's record is AuthProxy.seen

    def _client(self) -> str | None:
        assert isinstance(self.connection, ssl.SSLSocket)
        peer: dict[str, Any] = dict(self.connection.getpeercert() or {})
        names = [pair for rdn in peer.get("subject", ()) for pair in rdn]
        return next((str(value) for name, value in names if name == "commonName"), None)

    def _user(self) -> tuple[str | None, bool]:
        """The user the request names and whether its credentials are right."""
        scheme, _, encoded = (self.headers.get("Authorization") or "").partition(" ")
        if scheme.lower() != "basic":
            return None, False
        try:
            user, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except ValueError:
            return None, False
        gateway = self.server.gateway
        right = secrets.compare_digest(f"{user}:{password}", f"{gateway.user}:{gateway.password}")
        return user, right

    def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _forward(self) -> None:
        gateway = self.server.gateway
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        user, right = self._user()
        client = self._client()
        if not right:
            gateway.note(Seen(client, 401, user, self.path))
            self._answer(
                401,
                [("WWW-Authenticate", 'Basic realm="schema-registry"'),
                 ("Content-Type", "application/json")],
                b'{"error_code":401,"message":"Unauthorized"}',
            )  # fmt: skip
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        upstream = http.client.HTTPConnection(gateway.target[0], gateway.target[1], timeout=30)
        try:
            upstream.request(self.command, self.path, body, headers)
            answer = upstream.getresponse()
            data = answer.read()
        finally:
            upstream.close()
        gateway.note(Seen(client, answer.status, user, self.path))
        kept = [(k, v) for k, v in answer.getheaders() if k.lower() not in _HOP_BY_HOP]
        self._answer(answer.status, kept, data)

    do_GET = do_POST = do_PUT = do_DELETE = _forward


class AuthProxy:
    """HTTPS on ``127.0.0.1:port`` (certificate ``server_cert``/``server_key``) forwarding to
    the plain-HTTP registry ``target_url``, for clients with a certificate ``client_ca``
    signed and the credentials ``user``/``password``. A context manager (started inside)."""

    def __init__(
        self,
        target_url: str,
        *,
        server_cert: Path,
        server_key: Path,
        client_ca: Path,
        user: str,
        password: str,
        max_version: ssl.TLSVersion = ssl.TLSVersion.MAXIMUM_SUPPORTED,
    ) -> None:
        target = urlsplit(target_url)
        assert target.scheme == "http", target_url
        assert target.hostname, target_url
        assert target.port, target_url
        self.target = (target.hostname, target.port)
        self.path = target.path.rstrip("/")
        self.user, self.password = user, password
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=client_ca)
        self.context.verify_mode = ssl.CERT_REQUIRED
        self.context.maximum_version = max_version
        self.context.load_cert_chain(server_cert, server_key)
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.gateway = self
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def url(self, userinfo: str = "") -> str:
        """The registry's URL through the gateway (``userinfo``: ``user:password@``)."""
        return f"https://{userinfo}localhost:{self.port}{self.path}"

    def note(self, seen: Seen) -> None:
        with self._lock:
            self.seen.append(seen)

    def refused_handshakes(self, more_than: int | None = None) -> list[Seen]:
        """The handshakes refused so far; ``more_than``: wait (5 s at most) until there are
        more than that many (the client hears the alert before the gateway notes it)."""
        deadline = time.monotonic() + 5
        while True:
            with self._lock:
                refused = [s for s in self.seen if s.status == 0]
            if more_than is None or len(refused) > more_than or time.monotonic() > deadline:
                return refused
            time.sleep(0.02)

    def __enter__(self) -> AuthProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)


USER = "connect"
PASSWORD = "s3cret-Pa55:with-colon"
"""The gateway's password (a colon in it: only the first one separates the user)."""


@dataclass(frozen=True)
class Gateway:
    proxy: AuthProxy
    ca: CertificateAuthority
    client: Issued
    """A client certificate the gateway's CA signed (CN ``eos-connector``)."""
    reader: Issued
    """Another (CN ``reader``), for confluent-kafka's client."""
    rogue: Issued
    """A client certificate an unrelated CA signed."""
    other_ca: CertificateAuthority
    registry: RegistryState

    def settings(self, **extra: str) -> dict[str, str]:
        """A converter's settings as a Connect user writes them, with ``extra`` on top."""
        return {
            "schema.registry.url": self.proxy.url(),
            "basic.auth.credentials.source": "USER_INFO",
            "basic.auth.user.info": f"{USER}:{PASSWORD}",
            "schema.registry.ssl.ca.location": str(self.ca.cafile),
            "schema.registry.ssl.certificate.location": str(self.client.certfile),
            "schema.registry.ssl.key.location": str(self.client.keyfile),
            **extra,
        }

    def url_credentials(self, password: str) -> dict[str, str]:
        """The same settings with the credentials in the URL (source ``URL``)."""
        settings = self.settings(**{
            "schema.registry.url": self.proxy.url(f"{USER}:{password}@"),
            "basic.auth.credentials.source": "URL",
        })  # fmt: skip
        del settings["basic.auth.user.info"]
        return settings


def gateway_in_front(
    registry: RegistryState, directory: Path, max_version: ssl.TLSVersion
) -> Iterator[Gateway]:
    """A gateway with a CA of its own in front of ``registry`` while the caller iterates
    (a pytest fixture yields from it)."""
    (directory / "ca").mkdir(parents=True)
    (directory / "other").mkdir()
    ca = CertificateAuthority(directory / "ca", "registry gateway CA")
    other = CertificateAuthority(directory / "other", "unrelated CA")
    server = ca.issue("gateway")
    proxy = AuthProxy(
        registry.url, server_cert=server.certfile, server_key=server.keyfile,
        client_ca=ca.cafile, user=USER, password=PASSWORD, max_version=max_version,
    )  # fmt: skip
    with proxy:
        yield Gateway(
            proxy, ca, ca.issue("eos-connector"), ca.issue("reader"), other.issue("rogue"),
            other, registry,
        )  # fmt: skip
