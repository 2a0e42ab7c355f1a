"""A client of a Confluent-compatible schema registry (Confluent Schema Registry, Apicurio's
``/apis/ccompat/v7``, Karapace): register or look up a schema under a subject, read a
subject's latest version. Ids are cached per (subject, schema), so a schema costs one
request per converter. Synchronous (a converter runs inside the task's send step); every
request is bounded by ``timeout``.

Settings (``key.converter.*`` / ``value.converter.*``, Confluent's names):

- ``schema.registry.url``: one or more URLs, comma-separated; the next is tried when one
  cannot be reached.
- ``basic.auth.credentials.source``: ``USER_INFO`` (``basic.auth.user.info`` =
  ``user:password``) or ``URL`` (the credentials in the URL's ``user:password@``).
- TLS: an ``https://`` URL verifies the registry against the system's CAs, or the PEM file
  ``schema.registry.ssl.ca.location`` (also ``schema.registry.ssl.truststore.location``
  with ``schema.registry.ssl.truststore.type=PEM``); a client certificate from
  ``schema.registry.ssl.certificate.location`` + ``schema.registry.ssl.key.location``
  (or ``…keystore.location``, type PEM, holding both); ``schema.registry.ssl.key.password``.
- ``schema.registry.request.timeout.ms`` (default 30000).

Errors never show credentials: URLs are printed without their user info.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx

from eos.errors import ConfigError, SchemaRegistryError, SchemaRegistryUnavailable

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_PREFIX = "schema.registry."


@dataclass(frozen=True)
class Reference:
    """A schema another one imports (``name``: how it is imported), stored under ``subject``."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class RegistrySchema:
    """A schema as the registry stores it: ``schema_type`` AVRO, PROTOBUF or JSON."""

    schema_type: str
    text: str
    references: tuple[Reference, ...] = ()

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"schema": self.text}
        if self.schema_type != "AVRO":
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [
                {"name": r.name, "subject": r.subject, "version": r.version}
                for r in self.references
            ]
        return body


@dataclass(frozen=True)
class Registered:
    """A schema the registry holds: its global id, and (for a latest version) its text."""

    schema_id: int
    schema: RegistrySchema | None = None
    version: int | None = None


def _shown(url: str) -> str:
    """``url`` without user info (credentials never reach a message)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


@dataclass
class RegistryClient:
    urls: list[str]
    auth: tuple[str, str] | None = None
    verify: ssl.SSLContext | bool = True
    timeout: float = 30.0
    _http: httpx.Client | None = field(default=None, init=False, repr=False)
    _ids: dict[tuple[str, str], int] = field(default_factory=dict, init=False, repr=False)

    @classmethod
    def from_settings(cls, props: Mapping[str, str]) -> RegistryClient:
        """The client ``props`` describe (a converter's settings); ConfigError naming the
        setting when one is missing or wrong."""
        raw = str(props.get(_PREFIX + "url", "")).strip()
        if not raw:
            raise ConfigError(
                _PREFIX + "url", None,
                "this converter writes through a schema registry: set <key|value>.converter."
                "schema.registry.url to its URL (e.g. the one `eos dev-registry start` prints)",
            )  # fmt: skip
        urls = [u.strip().rstrip("/") for u in raw.split(",") if u.strip()]
        for url in urls:
            if urlsplit(url).scheme not in ("http", "https"):
                raise ConfigError(
                    _PREFIX + "url", _shown(url), "must be an http:// or https:// URL"
                )
        timeout_ms = props.get(_PREFIX + "request.timeout.ms", "30000")
        try:
            timeout = int(timeout_ms) / 1000
        except ValueError:
            raise ConfigError(
                _PREFIX + "request.timeout.ms", timeout_ms, "must be an integer"
            ) from None
        return cls(urls, _auth(props, urls), _tls(props), timeout)

    @property
    def http(self) -> httpx.Client:
        if self._http is None:
            self._http = httpx.Client(
                auth=self.auth, verify=self.verify, timeout=self.timeout,
                headers={"Accept": _CONTENT_TYPE},
            )  # fmt: skip
        return self._http

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    # ---- the requests a converter makes

    def register(self, subject: str, schema: RegistrySchema) -> int:
        """The id of ``schema`` under ``subject``, registering it if the subject lacks it."""
        key = (subject, schema.text)
        if key not in self._ids:
            answer = self._request("POST", f"/subjects/{quote(subject, safe='')}/versions",
                                   subject, schema.body())  # fmt: skip
            self._ids[key] = int(answer["id"])
        return self._ids[key]

    def lookup(self, subject: str, schema: RegistrySchema) -> int:
        """The id of ``schema``, which must already be registered under ``subject``."""
        key = (subject, schema.text)
        if key not in self._ids:
            answer = self._request("POST", f"/subjects/{quote(subject, safe='')}", subject,
                                   schema.body())  # fmt: skip
            self._ids[key] = int(answer["id"])
        return self._ids[key]

    def latest(self, subject: str) -> Registered:
        """The subject's latest version (its id and text)."""
        answer = self._request("GET", f"/subjects/{quote(subject, safe='')}/versions/latest",
                               subject)  # fmt: skip
        refs = tuple(Reference(r["name"], r["subject"], int(r["version"]))
                     for r in answer.get("references") or ())  # fmt: skip
        text = RegistrySchema(answer.get("schemaType", "AVRO"), answer["schema"], refs)
        return Registered(int(answer["id"]), text, answer.get("version"))

    def compatibility(self, subject: str) -> str:
        """The compatibility level that applies to ``subject`` ("unknown" if not told)."""
        try:
            answer = self._request(
                "GET", f"/config/{quote(subject, safe='')}?defaultToGlobal=true", subject
            )
        except (SchemaRegistryError, SchemaRegistryUnavailable):
            return "unknown"
        level = answer.get("compatibilityLevel") or answer.get("compatibility")
        return str(level) if level else "unknown"

    def probe(self) -> None:
        """Reach the registry once (``GET /schemas/types``): :class:`SchemaRegistryUnavailable`
        if none of its URLs answers, :class:`SchemaRegistryError` if it refuses the
        credentials; any other answer will do."""
        last: Exception | None = None
        for url in self.urls:
            try:
                answer = self.http.get(url + "/schemas/types")
            except httpx.HTTPError as exc:
                last = exc
                continue
            if answer.status_code >= 500:
                last = RuntimeError(f"HTTP {answer.status_code}: {_one_line(answer.text)[:300]}")
                continue
            if answer.status_code in (401, 403):
                raise SchemaRegistryError(
                    f"schema registry {_shown(url)} answered {answer.status_code}: check "
                    "basic.auth.credentials.source and basic.auth.user.info"
                )
            return
        raise self._unreachable(last)

    # ---- transport

    def _request(
        self, method: str, path: str, subject: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        last: Exception | None = None
        for url in self.urls:
            try:
                answer = self.http.request(
                    method, url + path, json=body,
                    headers={"Content-Type": _CONTENT_TYPE} if body is not None else None,
                )  # fmt: skip
            except httpx.HTTPError as exc:
                last = exc
                continue
            if answer.status_code >= 500:
                last = RuntimeError(f"HTTP {answer.status_code}: {_one_line(answer.text)[:300]}")
                continue
            if answer.status_code >= 400:
                raise self._refused(url, subject, answer, body)
            parsed: dict[str, Any] = answer.json()
            return parsed
        raise self._unreachable(last)

    def _unreachable(self, last: Exception | None) -> SchemaRegistryUnavailable:
        shown = ", ".join(_shown(u) for u in self.urls)
        return SchemaRegistryUnavailable(
            f"schema registry {shown} cannot be reached ({type(last).__name__}: "
            f"{_one_line(str(last))}); check schema.registry.url and that the registry runs"
        )

    def _refused(
        self, url: str, subject: str, answer: httpx.Response, body: dict[str, Any] | None
    ) -> SchemaRegistryError:
        try:
            detail = answer.json()
        except ValueError:
            detail = {"message": answer.text}
        message = _one_line(detail.get("message") or answer.text)
        where = f"schema registry {_shown(url)}"
        if answer.status_code == 409:
            level = self.compatibility(subject)
            change = message.split("list of diff types:")[-1].strip(" []") or message
            return SchemaRegistryError(
                f"{where} refused the schema for subject {subject!r} (compatibility {level}), "
                f"incompatible change: {change}"
            )
        if answer.status_code in (401, 403):
            return SchemaRegistryError(
                f"{where} answered {answer.status_code} for subject {subject!r}: check "
                "basic.auth.credentials.source and basic.auth.user.info"
            )
        if answer.status_code == 404 and body is not None and "/versions" not in str(answer.url):
            return SchemaRegistryError(
                f"{where}: the schema is not registered under subject {subject!r} "
                "(auto.register.schemas=false): register it first, or allow auto.register.schemas"
            )
        return SchemaRegistryError(
            f"{where} answered {answer.status_code} for subject {subject!r}: {message}"
        )


def _auth(props: Mapping[str, str], urls: list[str]) -> tuple[str, str] | None:
    source = str(props.get("basic.auth.credentials.source", "")).strip().upper()
    if source in ("", "NONE") and "basic.auth.user.info" not in props:
        return None
    if source == "URL":
        parts = urlsplit(urls[0])
        if parts.username is None:
            raise ConfigError("basic.auth.credentials.source", "URL",
                              "needs user:password@ in schema.registry.url")  # fmt: skip
        return parts.username, parts.password or ""
    if source in ("USER_INFO", ""):
        info = str(props.get("basic.auth.user.info", ""))
        user, sep, password = info.partition(":")
        if not sep or not user:
            raise ConfigError("basic.auth.user.info", "[hidden]", "must be user:password")
        return user, password
    raise ConfigError("basic.auth.credentials.source", source, "must be USER_INFO or URL")


def _tls(props: Mapping[str, str]) -> ssl.SSLContext | bool:
    def setting(*names: str) -> str | None:
        return next((str(props[_PREFIX + n]) for n in names if props.get(_PREFIX + n)), None)

    for kind in ("truststore", "keystore"):
        declared = setting(f"ssl.{kind}.type")
        if setting(f"ssl.{kind}.location") and (declared or "JKS").upper() != "PEM":
            raise ConfigError(
                _PREFIX + f"ssl.{kind}.type", declared or "JKS (the default)",
                "eos reads PEM files: convert the store to PEM and set PEM",
            )  # fmt: skip
    ca = setting("ssl.ca.location", "ssl.truststore.location")
    cert = setting("ssl.certificate.location", "ssl.keystore.location")
    key = setting("ssl.key.location")
    if ca is None and cert is None:
        return True
    context = ssl.create_default_context(cafile=ca)
    if cert is not None:
        password = setting("ssl.key.password", "ssl.keystore.password")
        try:
            context.load_cert_chain(cert, key, password)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                _PREFIX + "ssl.certificate.location", cert, f"cannot be loaded: {exc}"
            ) from exc
    return context
