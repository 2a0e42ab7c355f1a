"""REST security without a worker: the TLS and auth settings, password hashes, the
credentials file, and the auth middleware in front of a small Starlette app."""

from __future__ import annotations

import base64
import hashlib
import io
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from eos.config import WorkerConfig
from eos.errors import ConfigError
from services.rest import auth
from services.rest.auth import (
    AuthMiddleware,
    AuthProvider,
    BasicAuth,
    Forbidden,
    Principal,
    auth_provider,
    check_hash,
    hash_password,
    read_credentials,
    verify_password,
)
from tests.tls_certs import CertificateAuthority

BASE = {
    "group.id": "workers",
    "config.storage.topic": "eos-configs",
    "offset.storage.topic": "eos-offsets",
    "status.storage.topic": "eos-status",
}
FAST = 1000  # PBKDF2 rounds in tests


def worker(**settings: str) -> WorkerConfig:
    return WorkerConfig.from_properties({**BASE, **settings})


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


# ------------------------------------------------------------------ TLS settings


def test_https_listener_is_advertised_with_https(tmp_path: Path) -> None:
    config = worker(
        listeners="https://127.0.0.1:8443,http://127.0.0.1:8083",
        **{"listeners.https.ssl.certfile": "/etc/eos/worker.pem"},
    )
    assert config.rest_url == "https://127.0.0.1:8443"
    assert config.worker_id == "127.0.0.1:8443"
    assert config.rest_tls.certfile == "/etc/eos/worker.pem"
    assert config.rest_tls.client_auth == "none"
    assert config.rest_tls.check_hostname


def test_https_listener_needs_a_certificate() -> None:
    with pytest.raises(ConfigError) as info:
        worker(listeners="https://127.0.0.1:8443")
    assert info.value.key == "listeners.https.ssl.certfile"


def test_client_auth_needs_a_ca() -> None:
    with pytest.raises(ConfigError) as info:
        worker(
            listeners="https://127.0.0.1:8443",
            **{
                "listeners.https.ssl.certfile": "c.pem",
                "listeners.https.ssl.client.auth": "required",
            },
        )
    assert info.value.key == "listeners.https.ssl.cafile"


def test_connect_keystore_names_are_aliases() -> None:
    config = worker(
        listeners="https://127.0.0.1:8443",
        **{
            "listeners.https.ssl.keystore.location": "/etc/eos/worker.pem",
            "listeners.https.ssl.truststore.location": "/etc/eos/ca.pem",
            "listeners.https.ssl.client.auth": "requested",
            "listeners.https.ssl.endpoint.identification.algorithm": "",
        },
    )
    tls = config.rest_tls
    assert (tls.certfile, tls.cafile, tls.client_auth) == (
        "/etc/eos/worker.pem",
        "/etc/eos/ca.pem",
        "requested",
    )
    assert not tls.check_hostname


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("listeners.https.ssl.keystore.type", "JKS"),
        ("listeners.https.ssl.truststore.type", "PKCS12"),
        ("listeners.https.ssl.client.auth", "always"),
        ("listeners.https.ssl.keystore.location", "/other.pem"),
        ("listeners.https.ssl.endpoint.identification.algorithm", "http"),
        ("rest.auth.metrics.protected", "yes"),
    ],
)
def test_invalid_security_settings_name_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        worker(**{"listeners.https.ssl.certfile": "/etc/eos/worker.pem", key: value})
    assert info.value.key == key


def test_unusable_files_name_the_setting(tmp_path: Path) -> None:
    missing = worker(
        listeners="https://127.0.0.1:8443",
        **{"listeners.https.ssl.certfile": str(tmp_path / "nope.pem")},
    )
    with pytest.raises(ConfigError, match="no such file") as info:
        missing.rest_tls.server_context()
    assert info.value.key == "listeners.https.ssl.certfile"

    not_pem = tmp_path / "worker.jks"
    not_pem.write_bytes(b"\xfe\xed\xfe\xed not a PEM file")
    jks = worker(
        listeners="https://127.0.0.1:8443",
        **{"listeners.https.ssl.keystore.location": str(not_pem)},
    )
    with pytest.raises(ConfigError, match="PEM") as info:
        jks.rest_tls.server_context()
    assert info.value.key == "listeners.https.ssl.certfile"
    assert "keytool" in str(info.value)

    bad_ca = worker(**{"rest.client.ssl.cafile": str(not_pem)})
    with pytest.raises(ConfigError, match="PEM") as info:
        bad_ca.rest_tls.client_context()
    assert info.value.key == "rest.client.ssl.cafile"


def test_contexts_from_pem_files(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path)
    issued = ca.issue("worker", password="s3cret")
    config = worker(
        listeners="https://127.0.0.1:8443",
        **{
            "listeners.https.ssl.certfile": str(issued.certfile),
            "listeners.https.ssl.keyfile": str(issued.keyfile),
            "listeners.https.ssl.key.password": "s3cret",
            "listeners.https.ssl.cafile": str(ca.cafile),
            "listeners.https.ssl.client.auth": "required",
        },
    )
    server = config.rest_tls.server_context()
    assert server.verify_mode == ssl.CERT_REQUIRED
    client = config.rest_tls.client_context()
    assert client.verify_mode == ssl.CERT_REQUIRED
    assert client.check_hostname
    wrong = worker(
        listeners="https://127.0.0.1:8443",
        **{
            "listeners.https.ssl.certfile": str(issued.certfile),
            "listeners.https.ssl.keyfile": str(issued.keyfile),
            "listeners.https.ssl.key.password": "guess",
        },
    )
    with pytest.raises(ConfigError, match=r"key\.password"):
        wrong.rest_tls.server_context()


# ------------------------------------------------------------------ auth settings


def test_auth_settings() -> None:
    assert worker().rest_auth.provider is None
    assert worker(**{"rest.auth": "none"}).rest_auth.provider is None
    assert auth_provider(worker()) is None
    with pytest.raises(ConfigError) as info:
        worker(**{"rest.auth": "basic"})
    assert info.value.key == "rest.auth.basic.credentials.file"
    assert not worker().rest_auth.metrics_protected


def test_provider_class_paths() -> None:
    custom = worker(**{"rest.auth": f"{__name__}:DeleteForbidden", "rest.auth.x.level": "1"})
    provider = auth_provider(custom)
    assert isinstance(provider, DeleteForbidden)
    assert provider.settings["rest.auth.x.level"] == "1"
    dotted = worker(**{"rest.auth": f"{__name__}.DeleteForbidden"})
    assert isinstance(auth_provider(dotted), DeleteForbidden)
    for bad in ("nosuch.module:Auth", f"{__name__}:Nope", f"{__name__}:Principal"):
        with pytest.raises(ConfigError) as info:
            auth_provider(worker(**{"rest.auth": bad}))
        assert info.value.key == "rest.auth"


# ------------------------------------------------------------------ passwords


def test_hashes_verify_and_differ_by_salt() -> None:
    first, second = hash_password("pw", iterations=FAST), hash_password("pw", iterations=FAST)
    assert first != second
    assert first.startswith(f"pbkdf2_sha256${FAST}$")
    assert check_hash(first) is None
    assert verify_password("pw", first)
    assert not verify_password("pW", first)


def test_hash_format_is_djangos() -> None:
    """``pbkdf2_sha256$<rounds>$<salt>$<base64 digest>``, as Django's make_password writes."""
    digest = hashlib.pbkdf2_hmac("sha256", b"secret", b"seasalt", 1000)
    expected = f"pbkdf2_sha256$1000$seasalt${base64.b64encode(digest).decode()}"
    assert hash_password("secret", iterations=1000, salt="seasalt") == expected


def test_credentials_file_refuses_plain_passwords(tmp_path: Path) -> None:
    path = tmp_path / "users"
    path.write_text(f"# users\n\nalice:{hash_password('a', iterations=FAST)}\nbob:hunter2\n")
    with pytest.raises(ConfigError) as info:
        read_credentials(path)
    assert info.value.key == "rest.auth.basic.credentials.file"
    assert "line 4" in str(info.value)
    assert "python -m services.rest.auth bob" in str(info.value)
    with pytest.raises(ConfigError, match="cannot read it"):
        read_credentials(tmp_path / "missing")


def test_hash_password_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("open sesame\n"))
    assert auth.main(["alice"]) == 0
    user, hashed = capsys.readouterr().out.strip().split(":", 1)
    assert user == "alice"
    assert verify_password("open sesame", hashed)
    assert auth.main(["a:b"]) == 2


# ------------------------------------------------------------------ the middleware


class DeleteForbidden(AuthProvider):
    """Everyone is "anyone"; DELETE is forbidden (a provider answering 403)."""

    async def authenticate(self, request: HTTPConnection) -> Principal:
        if request.scope["method"] == "DELETE":
            raise Forbidden("anyone may not delete")
        return Principal("anyone")


async def whoami(request: Request) -> Response:
    return JSONResponse({"user": request.user.name})


async def internal(request: Request) -> Response:
    return Response(status_code=204)


INTERNAL = Route("/connectors/{name}/fence", internal, methods=["PUT"])
OPEN = Route("/metrics", internal, methods=["GET"])


def app_with(provider: AuthProvider) -> Starlette:
    routes = [Route("/", whoami, methods=["GET", "DELETE"]), INTERNAL, OPEN]
    middleware = [Middleware(AuthMiddleware, provider=provider, open_routes=[INTERNAL, OPEN])]
    return Starlette(routes=routes, middleware=middleware)


@pytest.fixture
async def basic_client(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Path]]:
    path = tmp_path / "users"
    path.write_text(f"alice:{hash_password('wonderland', iterations=FAST)}\n")
    provider = BasicAuth({"rest.auth.basic.credentials.file": str(path)})
    transport = httpx.ASGITransport(app=app_with(provider))
    async with httpx.AsyncClient(transport=transport, base_url="http://eos") as client:
        yield client, path


async def test_basic_auth(basic_client: tuple[httpx.AsyncClient, Path]) -> None:
    client, _ = basic_client
    none = await client.get("/")
    assert none.status_code == 401
    assert none.headers["www-authenticate"].startswith("Basic ")
    assert none.json() == {
        "error_code": 401,
        "message": "authentication required: send HTTP basic credentials",
    }
    wrong = await client.get("/", headers=basic("alice", "looking-glass"))
    assert wrong.status_code == 401
    assert wrong.json()["message"] == "invalid credentials"
    assert wrong.headers["www-authenticate"].startswith("Basic ")
    unknown = await client.get("/", headers=basic("mallory", "wonderland"))
    assert unknown.status_code == 401
    for _ in range(2):  # the second time from the remembered check
        right = await client.get("/", headers=basic("alice", "wonderland"))
        assert right.status_code == 200
        assert right.json() == {"user": "alice"}
    for header in ("Bearer abc", "Basic !!!", f"Basic {base64.b64encode(b'alice').decode()}"):
        malformed = await client.get("/", headers={"Authorization": header})
        assert malformed.status_code == 401
        assert malformed.json()["error_code"] == 401


async def test_open_routes_need_no_credentials(
    basic_client: tuple[httpx.AsyncClient, Path],
) -> None:
    client, _ = basic_client
    assert (await client.put("/connectors/c/fence")).status_code == 204
    assert (await client.get("/metrics")).status_code == 204
    assert (await client.post("/connectors/c/fence")).status_code == 401  # other verb


async def test_credentials_file_is_read_again_when_it_changes(
    basic_client: tuple[httpx.AsyncClient, Path],
) -> None:
    client, path = basic_client
    assert (await client.get("/", headers=basic("alice", "wonderland"))).status_code == 200
    path.write_text(f"bob:{hash_password('builder', iterations=FAST)}\n# alice is gone\n")
    assert (await client.get("/", headers=basic("bob", "builder"))).status_code == 200
    assert (await client.get("/", headers=basic("alice", "wonderland"))).status_code == 401
    path.write_text("bob:plain\n")  # a broken file keeps the users read before
    assert (await client.get("/", headers=basic("bob", "builder"))).status_code == 200


async def test_forbidden_is_403_in_the_json_shape() -> None:
    transport = httpx.ASGITransport(app=app_with(DeleteForbidden({})))
    async with httpx.AsyncClient(transport=transport, base_url="http://eos") as client:
        assert (await client.get("/")).json() == {"user": "anyone"}
        refused = await client.delete("/")
        assert refused.status_code == 403
        assert refused.json() == {"error_code": 403, "message": "anyone may not delete"}
        assert "www-authenticate" not in refused.headers
