"""Bearer tokens to the schema registry (``bearer.auth.*``, Confluent's names) through a
gateway in front of the real registry (Apicurio) that takes only tokens it knows, with an
OAuth token endpoint (client credentials) the test serves: a static token; tokens fetched,
cached, fetched again when they expire or the gateway stops taking them; refusals that
name the settings and never show a secret. What eos writes reads back with confluent-kafka."""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import pytest

from eos.api.schema import STRING_SCHEMA
from eos.converters import make_converter
from eos.errors import ConfigError, SchemaRegistryError
from services.dev_registry import RegistryState
from tests.conftest import made_converters
from tests.integration.registry_readers import read_avro

pytestmark = pytest.mark.integration

AVRO = "io.confluent.connect.avro.AvroConverter"
STATIC = "static-T0ken"
CLIENT, SECRET = "eos-client", "cl1ent-Secr3t"


class BearerGateway:
    """``/token``: OAuth's client credentials grant (Basic client id and secret), tokens
    that live ``lifetime`` seconds; every other path forwarded to the registry for a known
    token, 401 otherwise."""

    def __init__(self, registry: str, lifetime: float = 5.0) -> None:
        self.registry, self.lifetime = registry.rstrip("/"), lifetime
        self.tokens: dict[str, float] = {STATIC: float("inf")}
        self.issued = 0
        self.scopes: list[str] = []
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                if self.path == "/token":
                    gateway.token(self)
                else:
                    gateway.forward(self)

            def do_GET(self) -> None:
                gateway.forward(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> BearerGateway:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def token(self, handler: BaseHTTPRequestHandler) -> None:
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0)).decode()
        form = parse_qs(body)
        expected = "Basic " + base64.b64encode(f"{CLIENT}:{SECRET}".encode()).decode()
        if handler.headers.get("Authorization") != expected or form.get("grant_type") != [
            "client_credentials"
        ]:
            self.answer(handler, 401, {"error": "invalid_client"})
            return
        self.scopes += form.get("scope", [])
        token = secrets.token_hex(8)
        self.tokens[token] = time.monotonic() + self.lifetime
        self.issued += 1
        self.answer(handler, 200, {"access_token": token, "token_type": "Bearer",
                                   "expires_in": self.lifetime})  # fmt: skip

    def forward(self, handler: BaseHTTPRequestHandler) -> None:
        given = (handler.headers.get("Authorization") or "").removeprefix("Bearer ")
        if self.tokens.get(given, 0) < time.monotonic():
            self.answer(handler, 401, {"error_code": 401, "message": "Unauthorized"})
            return
        length = int(handler.headers.get("Content-Length") or 0)
        data = handler.rfile.read(length) if length else None
        request = urllib.request.Request(self.registry + handler.path, data=data,
                                         method=handler.command)  # fmt: skip
        if handler.headers.get("Content-Type"):
            request.add_header("Content-Type", handler.headers["Content-Type"])
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                status, body = answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    @staticmethod
    def answer(handler: BaseHTTPRequestHandler, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)


@pytest.fixture
def gateway(dev_registry: RegistryState) -> Iterator[BearerGateway]:
    with BearerGateway(dev_registry.url) as running:
        yield running


def converter(gateway: BearerGateway, **settings: str) -> Any:
    made = make_converter(AVRO, {"schema.registry.url": gateway.url, **settings})
    made_converters.append(made)
    return made


def oauth(gateway: BearerGateway, secret: str = SECRET) -> dict[str, str]:
    return {
        "bearer.auth.credentials.source": "OAUTHBEARER",
        "bearer.auth.issuer.endpoint.url": f"{gateway.url}/token",
        "bearer.auth.client.id": CLIENT,
        "bearer.auth.client.secret": secret,
        "bearer.auth.scope": "schema_registry",
        "bearer.auth.cache.expiry.buffer.seconds": "1",
    }


def topic() -> str:
    return f"bearer-{uuid.uuid4().hex[:8]}"


def test_a_static_token(gateway: BearerGateway, dev_registry: RegistryState) -> None:
    t = topic()
    made = converter(gateway, **{"bearer.auth.credentials.source": "STATIC_TOKEN",
                                 "bearer.auth.token": STATIC})  # fmt: skip
    data = made.from_connect_data(t, STRING_SCHEMA, "with a token")
    assert read_avro(dev_registry.url, t, data) == "with a token"


def test_oauth_client_credentials_fetched_cached_and_renewed(
    gateway: BearerGateway, dev_registry: RegistryState
) -> None:
    made = converter(gateway, **oauth(gateway))
    first = topic()
    data = made.from_connect_data(first, STRING_SCHEMA, "one")
    made.from_connect_data(topic(), STRING_SCHEMA, "two")  # another subject, same token
    assert gateway.issued == 1  # kept 4 s: the lifetime (5 s) less the 1 s buffer
    assert gateway.scopes == ["schema_registry"]
    assert read_avro(dev_registry.url, first, data) == "one"
    time.sleep(gateway.lifetime + 0.2)  # expired: a new one before the next request
    made.from_connect_data(topic(), STRING_SCHEMA, "three")
    assert gateway.issued == 2
    gateway.tokens = {STATIC: float("inf")}  # the gateway forgets every token it issued
    made.from_connect_data(topic(), STRING_SCHEMA, "four")  # 401, a new token, once more
    assert gateway.issued == 3


def test_refusals_name_the_settings_and_never_a_secret(gateway: BearerGateway) -> None:
    wrong_secret = "wr0ng-Secr3t"
    with pytest.raises(SchemaRegistryError) as refused:
        converter(gateway, **oauth(gateway, wrong_secret)).from_connect_data(
            topic(), STRING_SCHEMA, "x"
        )
    assert "answered 401: check bearer.auth.credentials.source, bearer.auth.client.id and " \
        "bearer.auth.client.secret" in str(refused.value)  # fmt: skip
    assert wrong_secret not in str(refused.value)
    wrong_token = "n0t-a-token"
    with pytest.raises(SchemaRegistryError) as denied:
        converter(gateway, **{"bearer.auth.credentials.source": "STATIC_TOKEN",
                              "bearer.auth.token": wrong_token}).from_connect_data(
            topic(), STRING_SCHEMA, "x")  # fmt: skip
    assert "check bearer.auth.credentials.source and bearer.auth.token" in str(denied.value)
    assert wrong_token not in str(denied.value)


def test_bad_bearer_settings_are_setting_errors(gateway: BearerGateway) -> None:
    with pytest.raises(ConfigError, match=r"bearer\.auth\.token"):
        converter(gateway, **{"bearer.auth.credentials.source": "STATIC_TOKEN"})
    with pytest.raises(ConfigError, match=r"bearer\.auth\.client\.secret"):
        converter(gateway, **{**oauth(gateway), "bearer.auth.client.secret": ""})
    with pytest.raises(ConfigError, match="not both"):
        converter(gateway, **{**oauth(gateway), "basic.auth.credentials.source": "USER_INFO",
                              "basic.auth.user.info": "u:p"})  # fmt: skip
    with pytest.raises(ConfigError, match="STATIC_TOKEN or OAUTHBEARER"):
        converter(gateway, **{"bearer.auth.credentials.source": "SASL_OAUTHBEARER_INHERIT"})
