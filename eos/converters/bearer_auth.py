"""Bearer tokens for the schema registry, as Confluent's clients take them.

``bearer.auth.credentials.source``:

- ``STATIC_TOKEN``: ``bearer.auth.token`` on every request;
- ``OAUTHBEARER``: a token from ``bearer.auth.issuer.endpoint.url`` by OAuth's client
  credentials grant (``bearer.auth.client.id`` and ``bearer.auth.client.secret`` as HTTP
  Basic, ``bearer.auth.scope`` if set), kept until ``bearer.auth.cache.expiry.buffer.seconds``
  (300) before it expires, and fetched again at once if the registry answers 401.

``bearer.auth.logical.cluster`` and ``bearer.auth.identity.pool.id`` go along as Confluent
Cloud's ``target-sr-cluster`` and ``Confluent-Identity-Pool-Id`` headers. Errors name the
settings to check, never a secret: a token endpoint that refuses the client is a
:class:`SchemaRegistryError` (waiting would not help), one that cannot be reached a
:class:`SchemaRegistryUnavailable`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator, Mapping

import httpx

from eos.errors import ConfigError, SchemaRegistryError, SchemaRegistryUnavailable

SOURCE = "bearer.auth.credentials.source"
SETTINGS = frozenset(
    {SOURCE, "bearer.auth.token", "bearer.auth.issuer.endpoint.url", "bearer.auth.client.id",
     "bearer.auth.client.secret", "bearer.auth.scope", "bearer.auth.scope.claim.name",
     "bearer.auth.sub.claim.name", "bearer.auth.cache.expiry.buffer.seconds",
     "bearer.auth.logical.cluster", "bearer.auth.identity.pool.id"}
)  # fmt: skip
"""The settings :func:`bearer_auth` reads."""

STATIC_HINT = f"{SOURCE} and bearer.auth.token"
OAUTH_HINT = f"{SOURCE}, bearer.auth.client.id and bearer.auth.client.secret"


def bearer_auth(props: Mapping[str, str], timeout: float) -> httpx.Auth | None:
    """The bearer authentication ``props`` ask for, or None; :class:`ConfigError` naming a
    setting that is missing or wrong."""
    source = str(props.get(SOURCE, "")).strip().upper()
    if not source:
        return None
    headers = {
        header: str(props[key])
        for key, header in (("bearer.auth.logical.cluster", "target-sr-cluster"),
                            ("bearer.auth.identity.pool.id", "Confluent-Identity-Pool-Id"))
        if props.get(key)
    }  # fmt: skip
    if source == "STATIC_TOKEN":
        token = str(props.get("bearer.auth.token", ""))
        if not token:
            raise ConfigError("bearer.auth.token", None, f"is needed with {SOURCE}=STATIC_TOKEN")
        return StaticToken(token, headers)
    if source == "OAUTHBEARER":
        missing = [
            key
            for key in ("bearer.auth.issuer.endpoint.url", "bearer.auth.client.id",
                        "bearer.auth.client.secret")
            if not props.get(key)
        ]  # fmt: skip
        if missing:
            raise ConfigError(missing[0], None, f"is needed with {SOURCE}=OAUTHBEARER")
        buffer = str(props.get("bearer.auth.cache.expiry.buffer.seconds", "300"))
        if not buffer.isdigit():
            raise ConfigError("bearer.auth.cache.expiry.buffer.seconds", buffer,
                              "must be a number of seconds")  # fmt: skip
        return ClientCredentials(
            str(props["bearer.auth.issuer.endpoint.url"]), str(props["bearer.auth.client.id"]),
            str(props["bearer.auth.client.secret"]), props.get("bearer.auth.scope"),
            float(buffer), timeout, headers,
        )  # fmt: skip
    raise ConfigError(SOURCE, source, "must be STATIC_TOKEN or OAUTHBEARER")


class StaticToken(httpx.Auth):
    hint = STATIC_HINT

    def __init__(self, token: str, headers: Mapping[str, str]) -> None:
        self._token, self._headers = token, dict(headers)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._token}"
        request.headers.update(self._headers)
        yield request


class ClientCredentials(httpx.Auth):
    """OAuth's client credentials grant, the token cached until shortly before it expires
    (thread-safe: a task's converters share nothing, but a worker's threads might)."""

    hint = OAUTH_HINT

    def __init__(
        self,
        endpoint: str,
        client_id: str,
        secret: str,
        scope: str | None,
        buffer_seconds: float,
        timeout: float,
        headers: Mapping[str, str],
    ) -> None:
        self._endpoint, self._client, self._secret, self._scope = endpoint, client_id, secret, scope
        self._buffer, self._timeout, self._headers = buffer_seconds, timeout, dict(headers)
        self._token: str | None = None
        self._expires = 0.0
        self._lock = threading.Lock()
        self.fetched = 0
        """How many tokens were fetched (tests read it)."""

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._current()}"
        request.headers.update(self._headers)
        response = yield request
        if response.status_code == 401:  # revoked or expired early: once more, a new one
            request.headers["Authorization"] = f"Bearer {self._current(renew=True)}"
            yield request

    def _current(self, renew: bool = False) -> str:
        with self._lock:
            if renew or self._token is None or time.monotonic() >= self._expires:
                self._token, lifetime = self._fetch()
                self._expires = time.monotonic() + max(lifetime - self._buffer, lifetime / 2)
            return self._token

    def _fetch(self) -> tuple[str, float]:
        form = {"grant_type": "client_credentials"}
        if self._scope:
            form["scope"] = self._scope
        try:
            answer = httpx.post(self._endpoint, data=form, auth=(self._client, self._secret),
                                timeout=self._timeout)  # fmt: skip
        except httpx.HTTPError as exc:
            raise SchemaRegistryUnavailable(
                f"the token endpoint {self._endpoint} cannot be reached ({type(exc).__name__}); "
                "check bearer.auth.issuer.endpoint.url"
            ) from None
        if answer.status_code != 200:
            raise SchemaRegistryError(
                f"the token endpoint {self._endpoint} answered {answer.status_code}: check "
                f"{OAUTH_HINT}"
            )
        try:
            body = answer.json()
            return str(body["access_token"]), float(body.get("expires_in", 3600))
        except (ValueError, KeyError, TypeError):
            raise SchemaRegistryError(
                f"the token endpoint {self._endpoint} answered without an access_token: "
                "check bearer.auth.issuer.endpoint.url"
            ) from None
