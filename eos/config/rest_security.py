"""Settings that lock the REST API down (docs/security.md): TLS on ``https://``
listeners, the trust workers place in each other when they call each other, and
the authentication hook.

TLS settings keep Kafka Connect's names under ``listeners.https.ssl.``, but eos
reads PEM files, not Java keystores: ``listeners.https.ssl.certfile`` (alias
``listeners.https.ssl.keystore.location``) is the server's certificate chain,
with its private key in the same file or in ``listeners.https.ssl.keyfile``;
``listeners.https.ssl.cafile`` (alias ``listeners.https.ssl.truststore.location``)
holds the CA certificates that client certificates are checked against
(``listeners.https.ssl.client.auth``) and that workers trust when they call each
other (unless ``rest.client.ssl.cafile`` names others).
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

from eos.config.definition import (
    ConfigDef,
    Importance,
    OneOf,
    Type,
    config_class,
    definition_of,
    fill,
    setting,
)
from eos.errors import ConfigError

ClientAuth = Literal["none", "requested", "required"]

_P = "listeners.https.ssl."
CERTFILE, KEYSTORE = f"{_P}certfile", f"{_P}keystore.location"
KEYFILE = f"{_P}keyfile"
KEY_PASSWORD = f"{_P}key.password"
CAFILE, TRUSTSTORE = f"{_P}cafile", f"{_P}truststore.location"
CLIENT_AUTH = f"{_P}client.auth"
ENDPOINT_IDENTIFICATION = f"{_P}endpoint.identification.algorithm"
KEYSTORE_TYPE, TRUSTSTORE_TYPE = f"{_P}keystore.type", f"{_P}truststore.type"
CLIENT_CAFILE = "rest.client.ssl.cafile"
AUTH = "rest.auth"
BASIC_CREDENTIALS = "rest.auth.basic.credentials.file"
METRICS_PROTECTED = "rest.auth.metrics.protected"

_TLS = "rest security"
_PEM_ONLY = (
    "eos reads PEM files only; convert a Java keystore with `keytool -importkeystore "
    "-srckeystore KS.jks -destkeystore KS.p12 -deststoretype PKCS12` and "
    "`openssl pkcs12 -in KS.p12 -nodes -out KS.pem`"
)

_TLS_CONFIG: Final = (
    ConfigDef()
    .define(
        CERTFILE,
        Type.STRING,
        None,
        None,
        Importance.HIGH,
        "PEM file with the certificate chain of https:// listeners (the server's "
        "certificate first), and its private key unless listeners.https.ssl.keyfile is set. "
        "Required when a listener is https.",
        _TLS,
    )
    .define(
        KEYSTORE,
        Type.STRING,
        None,
        None,
        Importance.LOW,
        "Kafka Connect's name for listeners.https.ssl.certfile; in eos it must name a PEM "
        "file (certificate chain and private key).",
        _TLS,
    )
    .define(
        KEYFILE,
        Type.STRING,
        None,
        None,
        Importance.MEDIUM,
        "PEM file with the private key of listeners.https.ssl.certfile, if not in that file.",
        _TLS,
    )
    .define(
        KEY_PASSWORD,
        Type.PASSWORD,
        None,
        None,
        Importance.MEDIUM,
        "Password of an encrypted private key.",
        _TLS,
    )
    .define(
        CAFILE,
        Type.STRING,
        None,
        None,
        Importance.MEDIUM,
        "PEM file of CA certificates: client certificates are checked against them "
        "(listeners.https.ssl.client.auth), and workers trust them when they call each "
        "other over https (unless rest.client.ssl.cafile is set).",
        _TLS,
    )
    .define(
        TRUSTSTORE,
        Type.STRING,
        None,
        None,
        Importance.LOW,
        "Kafka Connect's name for listeners.https.ssl.cafile; in eos it must name a PEM file.",
        _TLS,
    )
    .define(
        KEYSTORE_TYPE,
        Type.STRING,
        "PEM",
        OneOf("PEM"),
        Importance.LOW,
        "Only PEM (Java keystores must be converted, see docs/security.md).",
        _TLS,
    )
    .define(
        TRUSTSTORE_TYPE,
        Type.STRING,
        "PEM",
        OneOf("PEM"),
        Importance.LOW,
        "Only PEM (Java truststores must be converted, see docs/security.md).",
        _TLS,
    )
    .define(
        CLIENT_AUTH,
        Type.STRING,
        "none",
        OneOf("none", "requested", "required"),
        Importance.MEDIUM,
        "Client certificates on https listeners: none, requested (checked if presented) or "
        "required (every client, other workers included, presents a certificate signed by "
        "a CA of listeners.https.ssl.cafile; workers present listeners.https.ssl.certfile).",
        _TLS,
    )
    .define(
        ENDPOINT_IDENTIFICATION,
        Type.STRING,
        "https",
        OneOf("https", ""),
        Importance.LOW,
        "https: a worker calling another checks that the certificate names the host it "
        "called (rest.advertised.host.name); empty: it does not (the CA is still checked).",
        _TLS,
    )
    .define(
        CLIENT_CAFILE,
        Type.STRING,
        None,
        None,
        Importance.LOW,
        "PEM file of the CA certificates workers trust when they call each other over https "
        "(default: listeners.https.ssl.cafile, else the system's CAs).",
        _TLS,
    )
)


@dataclass(frozen=True)
class RestTls:
    """TLS of the REST listeners and of the calls workers make to each other."""

    certfile: str | None = None
    keyfile: str | None = None
    key_password: str | None = None
    cafile: str | None = None
    client_auth: ClientAuth = "none"
    check_hostname: bool = True
    client_cafile: str | None = None

    @classmethod
    def from_values(cls, values: Mapping[str, Any], *, https: bool) -> RestTls:
        """From parsed settings; ``https``: some listener is https."""
        tls = cls(
            certfile=_aliased(values, CERTFILE, KEYSTORE),
            keyfile=values[KEYFILE],
            key_password=values[KEY_PASSWORD],
            cafile=_aliased(values, CAFILE, TRUSTSTORE),
            client_auth=cast(ClientAuth, values[CLIENT_AUTH].lower()),
            check_hostname=values[ENDPOINT_IDENTIFICATION] == "https",
            client_cafile=values[CLIENT_CAFILE],
        )
        if https and tls.certfile is None:
            raise ConfigError(CERTFILE, None, "required with an https:// listener (a PEM file)")
        if https and tls.client_auth != "none" and tls.cafile is None:
            raise ConfigError(
                CAFILE, None, f"required with {CLIENT_AUTH}={tls.client_auth} (the clients' CAs)"
            )
        return tls

    def server_context(self) -> ssl.SSLContext:
        """The context of https listeners; :class:`ConfigError` if a file is unusable."""
        return _server_context(self)

    def client_context(self) -> ssl.SSLContext:
        """The context of calls to other workers: their CA, and this worker's certificate
        for listeners that ask for one."""
        return _client_context(self)


def _aliased(values: Mapping[str, Any], name: str, alias: str) -> str | None:
    value, other = values[name], values[alias]
    if value and other and value != other:
        raise ConfigError(alias, other, f"is another name for {name}, which says {value!r}")
    return cast(str | None, value or other or None)


@functools.cache
def _server_context(tls: RestTls) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(context, tls)
    if tls.client_auth != "none":
        context.verify_mode = ssl.CERT_REQUIRED if tls.client_auth == "required" else (
            ssl.CERT_OPTIONAL
        )  # fmt: skip
        _load_cas(context, CAFILE, tls.cafile)
    return context


@functools.cache
def _client_context(tls: RestTls) -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if tls.client_cafile or tls.cafile:
        key = CLIENT_CAFILE if tls.client_cafile else CAFILE
        _load_cas(context, key, tls.client_cafile or tls.cafile)
    context.check_hostname = tls.check_hostname
    if tls.certfile:
        _load_chain(context, tls)
    return context


def _readable(key: str, path: str | None) -> None:
    if path is not None and not os.access(path, os.R_OK):
        why = "cannot read it" if os.path.exists(path) else "no such file"
        raise ConfigError(key, path, why)


def _load_chain(context: ssl.SSLContext, tls: RestTls) -> None:
    assert tls.certfile is not None
    _readable(CERTFILE, tls.certfile)
    _readable(KEYFILE, tls.keyfile)
    try:
        context.load_cert_chain(tls.certfile, tls.keyfile, lambda: tls.key_password or "")
    except ssl.SSLError as exc:
        raise ConfigError(
            CERTFILE,
            tls.certfile,
            f"not a PEM certificate chain with its private key ({KEYFILE}), or a wrong "
            f"{KEY_PASSWORD} ({exc.reason or exc}); {_PEM_ONLY}",
        ) from exc


def _load_cas(context: ssl.SSLContext, key: str, cafile: str | None) -> None:
    _readable(key, cafile)
    try:
        context.load_verify_locations(cafile=cafile)
    except ssl.SSLError as exc:
        raise ConfigError(key, cafile, f"not a PEM file of CA certificates; {_PEM_ONLY}") from exc


def _provider(value: str | None) -> str | None:
    return None if value is None or value.strip().lower() in ("", "none") else value


@config_class
class RestAuth:
    """Which provider authenticates REST requests (``None``: none)."""

    provider: str | None = setting(
        AUTH,
        Type.STRING,
        None,
        None,
        Importance.HIGH,
        "Authentication of REST requests: none (default), basic (HTTP basic auth against "
        "rest.auth.basic.credentials.file), or the class path (module:Class) of a provider. "
        "Internal requests between workers are checked by their signature instead.",
        _TLS,
        convert=_provider,
    )
    basic_credentials_file: str | None = setting(
        BASIC_CREDENTIALS,
        Type.STRING,
        None,
        None,
        Importance.HIGH,
        "With rest.auth=basic: a file of user:hashed-password lines (make a line with "
        "`python -m services.rest.auth USER`); read again when it changes.",
        _TLS,
    )
    metrics_protected: bool = setting(
        METRICS_PROTECTED,
        Type.BOOLEAN,
        False,
        None,
        Importance.LOW,
        "With rest.auth set: false (default) leaves GET /metrics on the REST listeners open "
        "for Prometheus; true requires credentials there too. metrics.listeners is never "
        "authenticated.",
        _TLS,
    )

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> RestAuth:
        auth = fill(cls, values)
        if auth.provider == "basic" and not auth.basic_credentials_file:
            raise ConfigError(BASIC_CREDENTIALS, None, "required with rest.auth=basic")
        return auth


REST_SECURITY_CONFIG: Final = _TLS_CONFIG.merged(definition_of(RestAuth))
"""Every setting of this module (part of the worker's settings)."""
