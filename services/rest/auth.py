"""Authentication of REST requests (``rest.auth``, docs/security.md).

A provider (:class:`AuthProvider`) looks at each request and names the caller, or
refuses it: :class:`Unauthenticated` answers 401 (with the provider's
``WWW-Authenticate`` challenge), :class:`Forbidden` 403, both in Kafka Connect's
JSON error shape. ``rest.auth=basic`` is :class:`BasicAuth`; any other value is the
class path (``module:Class``) of a provider of one's own, made with the worker's
settings (its own under ``rest.auth.<name>.``).

Not authenticated by the provider: the internal endpoints (``PUT
/connectors/{c}/fence``, ``POST /connectors/{c}/tasks``), which only accept
requests signed with the cluster's session key, and ``GET /metrics`` unless
``rest.auth.metrics.protected=true``. A worker forwarding a request to the leader
passes the caller's ``Authorization`` header along (:func:`caller_credentials`),
so every worker of a cluster needs the same credentials.

The credentials file of :class:`BasicAuth` holds ``user:hash`` lines (``#``
comments and blank lines are skipped); the hash is PBKDF2-SHA256 in the form
``pbkdf2_sha256$<iterations>$<salt>$<base64 digest>`` (Django's). Make a line with::

    python -m services.rest.auth alice        # asks for the password twice
    echo -n "$PASSWORD" | python -m services.rest.auth alice
"""

from __future__ import annotations

import abc
import base64
import binascii
import getpass
import hashlib
import hmac
import importlib
import secrets
import string
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread
import structlog
from starlette.requests import HTTPConnection
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from eos.config.rest_security import AUTH, BASIC_CREDENTIALS
from eos.config.worker import WorkerConfig
from eos.errors import ConfigError
from services.rest.errors import error

log = structlog.get_logger(__name__)

ALGORITHM = "pbkdf2_sha256"
ITERATIONS = 600_000
"""PBKDF2 rounds of a new hash (OWASP's advice for PBKDF2-SHA256)."""
_SALT_CHARS = string.ascii_letters + string.digits


@dataclass(frozen=True)
class Principal:
    """Who made a request (``request.user`` in handlers)."""

    name: str


class AuthError(Exception):
    """A request is refused; the message goes to the caller."""

    status = 401


class Unauthenticated(AuthError):
    """No credentials, or wrong ones: 401 with the provider's challenge."""


class Forbidden(AuthError):
    """The caller is known but may not do this: 403."""

    status = 403


class AuthProvider(abc.ABC):
    """A ``rest.auth`` provider, made once per worker with the worker's settings."""

    challenge: str | None = None
    """The ``WWW-Authenticate`` header of a 401 answer, if any."""

    def __init__(self, settings: Mapping[str, str]) -> None:
        self.settings = settings

    @abc.abstractmethod
    async def authenticate(self, request: HTTPConnection) -> Principal:
        """The caller of ``request``; raise :class:`Unauthenticated` or :class:`Forbidden`
        to refuse it."""


# ----------------------------------------------------------------- passwords


def hash_password(password: str, *, iterations: int = ITERATIONS, salt: str | None = None) -> str:
    """``pbkdf2_sha256$<iterations>$<salt>$<base64 digest>`` of ``password``."""
    salt = salt or "".join(secrets.choice(_SALT_CHARS) for _ in range(22))
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), iterations)
    return f"{ALGORITHM}${iterations}${salt}${base64.b64encode(digest).decode()}"


def check_hash(hashed: str) -> str | None:
    """Why ``hashed`` is not a hash this module can check, or None."""
    parts = hashed.split("$")
    if len(parts) != 4 or parts[0] != ALGORITHM:
        return f"not a {ALGORITHM}$<iterations>$<salt>$<digest> hash (plain passwords are refused)"
    if not parts[1].isdigit() or int(parts[1]) < 1:
        return "the iterations of the hash are not a positive number"
    try:
        base64.b64decode(parts[3], validate=True)
    except binascii.Error:
        return "the digest of the hash is not base64"
    return None


def verify_password(password: str, hashed: str) -> bool:
    """Whether ``password`` matches ``hashed`` (a :func:`hash_password` result)."""
    _, iterations, salt, expected = hashed.split("$")
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), int(iterations))
    return hmac.compare_digest(base64.b64encode(digest).decode(), expected)


# ----------------------------------------------------------------- basic auth


class BasicAuth(AuthProvider):
    """HTTP basic authentication against ``rest.auth.basic.credentials.file``.

    The file is read when the worker starts (a bad line stops it, naming the line)
    and again whenever it changes; a changed file with a bad line is refused with an
    error in the log and the users read before stay. Checked passwords are
    remembered (as keyed digests, in memory) so that PBKDF2 runs once per user and
    password, not once per request."""

    challenge = 'Basic realm="eos", charset="UTF-8"'
    _REMEMBERED = 1024

    def __init__(self, settings: Mapping[str, str]) -> None:
        super().__init__(settings)
        path = settings.get(BASIC_CREDENTIALS)
        if not path:
            raise ConfigError(BASIC_CREDENTIALS, None, "required with rest.auth=basic")
        self.path = Path(path)
        self._stamp = self._file_stamp()
        self._users = read_credentials(self.path)
        self._key = secrets.token_bytes(32)
        self._good: set[bytes] = set()
        self._limiter = anyio.CapacityLimiter(2)

    async def authenticate(self, request: HTTPConnection) -> Principal:
        header = request.headers.get("authorization")
        if not header:
            raise Unauthenticated("authentication required: send HTTP basic credentials")
        user, password = _basic_credentials(header)
        self._reload_if_changed()
        hashed = self._users.get(user)
        remembered = hmac.new(self._key, f"{user}\0{password}".encode(), "sha256").digest()
        if hashed is not None and remembered in self._good:
            return Principal(user)
        if hashed is None or not await anyio.to_thread.run_sync(
            verify_password, password, hashed, limiter=self._limiter
        ):
            log.info("REST authentication failed", user=user, path=request.url.path)
            raise Unauthenticated("invalid credentials")
        if len(self._good) >= self._REMEMBERED:
            self._good.clear()
        self._good.add(remembered)
        return Principal(user)

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def _reload_if_changed(self) -> None:
        stamp = self._file_stamp()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            users = read_credentials(self.path)
        except ConfigError as exc:
            log.error("credentials file not reloaded; the users read before stay", error=str(exc))
            return
        self._users, self._good = users, set()
        log.info("credentials file reloaded", path=str(self.path), users=len(users))


def read_credentials(path: Path) -> dict[str, str]:
    """``user → hash`` from a credentials file; :class:`ConfigError` naming a bad line."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(BASIC_CREDENTIALS, str(path), f"cannot read it: {exc.strerror}") from exc
    users: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, hashed = line.partition(":")
        problem = "expected user:hash" if not sep or not user else check_hash(hashed.strip())
        if problem is not None:
            raise ConfigError(
                BASIC_CREDENTIALS,
                str(path),
                f"line {number}: {problem}; make the line with `python -m services.rest.auth "
                f"{user.strip() or 'USER'}`",
            )
        users[user.strip()] = hashed.strip()
    return users


def _basic_credentials(header: str) -> tuple[str, str]:
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        raise Unauthenticated(f"{scheme} credentials are not accepted here: use HTTP basic")
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except binascii.Error:
        raise Unauthenticated("malformed basic credentials (not base64)") from None
    try:
        text = decoded.decode()
    except UnicodeDecodeError:
        text = decoded.decode("latin-1")
    user, sep, password = text.partition(":")
    if not sep:
        raise Unauthenticated("malformed basic credentials (no user:password)")
    return user, password


# ----------------------------------------------------------------- wiring


def auth_provider(settings: WorkerConfig) -> AuthProvider | None:
    """The provider ``rest.auth`` names (None without one); :class:`ConfigError` if it
    cannot be loaded or made."""
    name = settings.rest_auth.provider
    if name is None:
        return None
    if name.lower() == "basic":
        return BasicAuth(settings.raw)
    module_name, sep, class_name = name.partition(":")
    if not sep:
        module_name, _, class_name = name.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(AUTH, name, f"basic, or a provider's class path: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, AuthProvider)):
        raise ConfigError(AUTH, name, "must name a subclass of services.rest.auth.AuthProvider")
    provider: AuthProvider = cls(settings.raw)
    return provider


class AuthMiddleware:
    """Asks the provider about every HTTP request but those of ``open_routes``."""

    def __init__(
        self, app: ASGIApp, *, provider: AuthProvider, open_routes: Sequence[BaseRoute] = ()
    ) -> None:
        self.app = app
        self.provider = provider
        self.open_routes = open_routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._open(scope):
            await self.app(scope, receive, send)
            return
        try:
            scope["user"] = await self.provider.authenticate(HTTPConnection(scope))
        except AuthError as refused:
            answer = error(refused.status, str(refused))
            if refused.status == 401 and self.provider.challenge:
                answer.headers["WWW-Authenticate"] = self.provider.challenge
            await answer(scope, receive, send)
            return
        except Exception as exc:
            log.error("authentication failed with an error", error=repr(exc), exc_info=exc)
            await error(500, f"authentication failed: {exc!r}")(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _open(self, scope: Scope) -> bool:
        return any(route.matches(scope)[0] == Match.FULL for route in self.open_routes)


def caller_credentials(headers: Mapping[str, str]) -> dict[str, str]:
    """The caller's ``Authorization`` header, to pass along with a forwarded request."""
    value = headers.get("authorization")
    return {"Authorization": value} if value else {}


# ----------------------------------------------------------------- the command


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m services.rest.auth USER``: print a credentials file line for USER."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or ":" in args[0] or args[0].startswith("-"):
        print("usage: python -m services.rest.auth USER  (the password is read from the "
              "terminal, or from standard input)", file=sys.stderr)  # fmt: skip
        return 2
    if sys.stdin.isatty():
        password = getpass.getpass(f"password for {args[0]}: ")
        if getpass.getpass("again: ") != password:
            print("the passwords differ", file=sys.stderr)
            return 2
    else:
        password = sys.stdin.read().removesuffix("\n")
    if not password:
        print("empty password refused", file=sys.stderr)
        return 2
    print(f"{args[0]}:{hash_password(password)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
