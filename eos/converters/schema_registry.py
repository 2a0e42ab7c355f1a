"""A client of a Confluent-compatible schema registry (Confluent Schema Registry, Apicurio's
``/apis/ccompat/v7``, Karapace): register or look up a schema under a subject, read a
subject's latest version. Ids are cached per (subject, schema), so a schema costs one
request per converter. Synchronous (a converter runs inside the task's send step); every
request is bounded by ``timeout``.

Settings (``key.converter.*`` / ``value.converter.*``, Confluent's names):

- ``schema.registry.url``: one or more URLs, comma-separated; the next is tried when one
  cannot be reached.
- ``basic.auth.credentials.source``: ``USER_INFO`` (``basic.auth.user.info`` =
  ``user:password``) or ``URL`` (the credentials in the URL's ``user:password@``, also
  taken when neither setting is given); requests go to the URLs without them.
- ``bearer.auth.credentials.source``: ``STATIC_TOKEN`` or ``OAUTHBEARER``
  (:mod:`eos.converters.bearer_auth`), instead of basic credentials.
- TLS: an ``https://`` URL verifies the registry against the system's CAs, or the PEM file
  ``schema.registry.ssl.ca.location`` (also ``schema.registry.ssl.truststore.location``
  with ``schema.registry.ssl.truststore.type=PEM``); a client certificate from
  ``schema.registry.ssl.certificate.location`` + ``schema.registry.ssl.key.location``
  (or ``…keystore.location``, type PEM, holding both); ``schema.registry.ssl.key.password``
  for an encrypted key (never asked for on a terminal).
- ``schema.registry.request.timeout.ms`` (default 30000).
- ``normalize.schemas``: ``?normalize=true`` on registering and looking up a schema.

Errors never show credentials: URLs are printed without their user info. A registry that
answers 401/403, or refuses the TLS handshake (its certificate is not trusted, or it wants a
client certificate it trusts), fails with :class:`SchemaRegistryError` naming the settings
to check: waiting would not help.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx

from eos.converters.bearer_auth import SETTINGS as BEARER_SETTINGS
from eos.converters.bearer_auth import SOURCE as BEARER_SOURCE
from eos.converters.bearer_auth import bearer_auth
from eos.errors import ConfigError, SchemaRegistryError, SchemaRegistryUnavailable

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_PREFIX = "schema.registry."
_TLS_FILES = ("ca.location", "truststore.location", "truststore.type", "certificate.location",
              "key.location", "keystore.location", "keystore.type", "key.password")  # fmt: skip
CLIENT_SETTINGS = frozenset(
    {_PREFIX + "url", _PREFIX + "request.timeout.ms", "basic.auth.credentials.source",
     "basic.auth.user.info", "normalize.schemas", *BEARER_SETTINGS,
     *(f"{_PREFIX}ssl.{name}" for name in _TLS_FILES)}
)  # fmt: skip
"""The settings :meth:`RegistryClient.from_settings` reads."""


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


def _bare(url: str) -> str:
    """``url`` without user info (the credentials go in an Authorization header only: a
    URL holding them would be logged as it is, by httpx at INFO)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


_CLIENT_CERT_ALERTS = ("CERTIFICATE", "UNKNOWN_CA", "HANDSHAKE_FAILURE", "ACCESS_DENIED")
"""TLS alerts a server sends a client whose certificate it does not take (none sent, or
one its CA did not sign): ``TLSV13_ALERT_CERTIFICATE_REQUIRED``, ``…_BAD_CERTIFICATE``…"""


def _tls_refusal(url: str, exc: Exception, client_cert: bool) -> SchemaRegistryError | None:
    """The error to fail with when ``exc`` is a TLS handshake that cannot succeed however
    long one waits (None for any other failure)."""
    cause: BaseException | None = exc
    for _ in range(8):
        if cause is None or isinstance(cause, ssl.SSLError):
            break
        cause = cause.__cause__ or cause.__context__
    if not isinstance(cause, ssl.SSLError):
        return None
    where, said = f"schema registry {_shown(url)}", _one_line(str(cause))
    if isinstance(cause, ssl.SSLCertVerificationError):
        return SchemaRegistryError(
            f"{where}: its certificate is not trusted ({said}): set "
            f"{_PREFIX}ssl.ca.location to the PEM file of the CA that signed it"
        )
    if not any(alert in (cause.reason or "") for alert in _CLIENT_CERT_ALERTS):
        return None
    if client_cert:
        hint = (f"check that {_PREFIX}ssl.certificate.location holds a certificate the "
                f"registry trusts (and {_PREFIX}ssl.key.location its key)")  # fmt: skip
    else:
        hint = (f"it asks for a client certificate: set {_PREFIX}ssl.certificate.location "
                f"and {_PREFIX}ssl.key.location")  # fmt: skip
    return SchemaRegistryError(f"{where} refused the TLS handshake ({said}): {hint}")


@dataclass
class RegistryClient:
    urls: list[str]
    auth: httpx.Auth | tuple[str, str] | None = None
    verify: ssl.SSLContext | bool = True
    timeout: float = 30.0
    client_cert: bool = False
    """Whether a TLS client certificate is set (to say what to check when refused)."""
    credentials: str = "basic.auth.credentials.source and basic.auth.user.info"
    """The settings a 401 or 403 says to check."""
    normalize: bool = False
    """``normalize.schemas``: the registry normalizes each schema before registering or
    looking it up (``?normalize=true``)."""
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
        auth: httpx.Auth | tuple[str, str] | None = _auth(props, urls)
        credentials = cls.credentials
        bearer = bearer_auth(props, timeout)
        if bearer is not None:
            if auth is not None:
                raise ConfigError(
                    BEARER_SOURCE, props[BEARER_SOURCE],
                    "set either basic.auth.* or bearer.auth.* credentials, not both",
                )  # fmt: skip
            auth, credentials = bearer, bearer.hint  # type: ignore[attr-defined]
        verify = _tls(props)
        cert = any(props.get(_PREFIX + f"ssl.{n}.location") for n in ("certificate", "keystore"))
        normalize = str(props.get("normalize.schemas", "false")).strip().lower()
        if normalize not in ("true", "false"):
            raise ConfigError("normalize.schemas", normalize, "must be true or false")
        return cls([_bare(u) for u in urls], auth, verify, timeout, client_cert=cert,
                   credentials=credentials, normalize=normalize == "true")  # fmt: skip

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
            answer = self._request("POST", f"/subjects/{quote(subject, safe='')}/versions"
                                   f"{self._normalized}", subject, schema.body())  # fmt: skip
            self._ids[key] = int(answer["id"])
        return self._ids[key]

    def lookup(self, subject: str, schema: RegistrySchema) -> int:
        """The id of ``schema``, which must already be registered under ``subject``."""
        key = (subject, schema.text)
        if key not in self._ids:
            answer = self._request("POST", f"/subjects/{quote(subject, safe='')}"
                                   f"{self._normalized}", subject, schema.body())  # fmt: skip
            self._ids[key] = int(answer["id"])
        return self._ids[key]

    @property
    def _normalized(self) -> str:
        return "?normalize=true" if self.normalize else ""

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
        credentials or the TLS handshake; any other answer will do."""
        url, answer = self._send("GET", "/schemas/types")
        if answer.status_code in (401, 403):
            raise SchemaRegistryError(
                f"schema registry {_shown(url)} answered {answer.status_code}: check "
                f"{self.credentials}"
            )

    # ---- transport

    def _request(
        self, method: str, path: str, subject: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        url, answer = self._send(method, path, body)
        if answer.status_code >= 400:
            raise self._refused(url, subject, answer, body)
        parsed: dict[str, Any] = answer.json()
        return parsed

    def _send(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> tuple[str, httpx.Response]:
        """The first answer below 500 of the URLs tried in turn, and the URL that gave it.
        :class:`SchemaRegistryError` when every URL refused the TLS handshake,
        :class:`SchemaRegistryUnavailable` when none answered otherwise."""
        last: Exception | None = None
        refused: SchemaRegistryError | None = None
        for url in self.urls:
            try:
                answer = self.http.request(
                    method, url + path, json=body,
                    headers={"Content-Type": _CONTENT_TYPE} if body is not None else None,
                )  # fmt: skip
            except httpx.HTTPError as exc:
                tls = _tls_refusal(url, exc, self.client_cert)
                if tls is None:
                    last = exc
                refused = refused or tls
                continue
            if answer.status_code >= 500:
                last = RuntimeError(f"HTTP {answer.status_code}: {_one_line(answer.text)[:300]}")
                continue
            return url, answer
        if refused is not None and last is None:
            raise refused
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
                f"{self.credentials}"
            )
        code = detail.get("error_code") if isinstance(detail, dict) else None
        if answer.status_code == 404 and not (isinstance(code, int) and 40400 < code < 40500):
            return SchemaRegistryError(
                f"{where} has no Confluent-compatible API at this URL (404 for "
                f"{answer.url.path}): point schema.registry.url at it, for Apicurio Registry "
                "http://HOST:PORT/apis/ccompat/v7 (not its own /apis/registry/ API), for "
                "Confluent's and Karapace's the server's root"
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
        if source == "" and urlsplit(urls[0]).username is not None:
            source = "URL"  # Confluent's default source
        else:
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
    if key is not None and cert is None:
        raise ConfigError(
            _PREFIX + "ssl.certificate.location", None,
            f"is needed with {_PREFIX}ssl.key.location (the client certificate)",
        )  # fmt: skip
    if ca is None and cert is None:
        return True
    try:
        context = ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(_PREFIX + "ssl.ca.location", ca,
                          f"cannot be loaded: {_one_line(str(exc))}") from exc  # fmt: skip
    if cert is not None:
        password = setting("ssl.key.password", "ssl.keystore.password")

        def asked() -> str:  # OpenSSL would otherwise ask on the terminal
            if password is None:
                raise ConfigError(
                    _PREFIX + "ssl.key.password", None,
                    f"the key in {key or cert} is encrypted: set its password",
                )  # fmt: skip
            return password

        try:
            context.load_cert_chain(cert, key, asked)
        except (OSError, ssl.SSLError) as exc:
            wrong = " (or a wrong ssl.key.password)" if password is not None else ""
            raise ConfigError(
                _PREFIX + "ssl.certificate.location", cert,
                f"cannot be loaded with key {key or cert}{wrong}: {_one_line(str(exc))}",
            ) from exc  # fmt: skip
    return context
