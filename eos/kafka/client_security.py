"""Kafka's client security settings, read as Kafka reads them, for both Python clients.

One worker file (or a Kafka tool's ``--command-config`` file) configures aiokafka and
librdkafka alike, by Kafka's property names:

- ``security.protocol``: ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``;
- ``sasl.mechanism``: ``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``, ``GSSAPI``; the
  credentials in ``sasl.jaas.config`` (``…PlainLoginModule`` / ``…ScramLoginModule required
  username="…" password="…";``, the module matching the mechanism) or, librdkafka's way,
  ``sasl.username`` / ``sasl.password``; ``sasl.kerberos.service.name``;
- TLS from **PEM**, in files or inline: ``ssl.truststore.location`` (type ``PEM``; alias
  ``ssl.cafile``) or ``ssl.truststore.certificates``; the client certificate for mutual TLS
  in ``ssl.keystore.location`` (type ``PEM``: the certificate chain and the key in one file)
  or ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``, or eos's ``ssl.certfile`` +
  ``ssl.keyfile`` (a file wins over inline PEM: a connector's ``producer.override.ssl.certfile``
  over the worker's inline certificate); the key's password in ``ssl.key.password`` (alias
  ``ssl.password``); ``ssl.endpoint.identification.algorithm`` (``https``, the default,
  checks the broker's host name; empty does not).

Java keystores (``JKS``, ``PKCS12``) are refused with one line saying how to turn them
into PEM: both Python clients read PEM only. Every problem raises
:class:`~eos.errors.ConfigError` naming the setting; a value that holds a secret is shown
as ``[hidden]``.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from eos.errors import ConfigError

PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI")
HIDDEN: Final = "[hidden]"

_SASL = frozenset(
    {"sasl.mechanism", "sasl.jaas.config", "sasl.username", "sasl.password",
     "sasl.kerberos.service.name"}
)  # fmt: skip
_SSL = frozenset(
    {"ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.certificates",
     "ssl.truststore.password", "ssl.keystore.location", "ssl.keystore.type",
     "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.password",
     "ssl.key.password", "ssl.endpoint.identification.algorithm",
     "ssl.cafile", "ssl.certfile", "ssl.keyfile", "ssl.password"}
)  # fmt: skip
SECURITY_SETTINGS: Final = frozenset({"security.protocol"}) | _SASL | _SSL
"""Every client security setting eos reads (without a ``producer.``-style prefix)."""

SECRET_SETTINGS: Final = frozenset(
    {"sasl.jaas.config", "sasl.password", "ssl.key.password", "ssl.password",
     "ssl.keystore.password", "ssl.truststore.password", "ssl.keystore.key",
     "basic.auth.user.info", "bearer.auth.token", "bearer.auth.client.secret"}
)  # fmt: skip
"""Settings whose values are secrets (Kafka's PASSWORD type; the last three a schema
registry's, as converters take them)."""

_JAAS = re.compile(r"^\s*(?P<module>[\w.$]+)\s+(?:required|requisite|sufficient|optional)\b")
_OPTION = re.compile(r'([\w.]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;]+))')
_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_TO_PEM = (
    "eos reads PEM only: convert with `keytool -importkeystore -srckeystore KS "
    "-destkeystore ks.p12 -deststoretype PKCS12` and `openssl pkcs12 -in ks.p12 -nodes "
    "-out ks.pem`, then set the type to PEM (docs/security.md)"
)


def is_security_setting(key: str) -> bool:
    """Whether ``key`` (without a role prefix) is a client security setting."""
    return key in SECURITY_SETTINGS


def is_secret(key: str) -> bool:
    """Whether ``key`` (with or without a prefix such as ``producer.override.``) holds a
    secret."""
    return any(key == name or key.endswith(f".{name}") for name in SECRET_SETTINGS)


def shown(key: str, value: object) -> object:
    """``value`` as it may appear in a message: ``[hidden]`` for secrets."""
    return HIDDEN if is_secret(key) else value


def _fail(key: str, value: object, allowed: str) -> ConfigError:
    return ConfigError(key, shown(key, value), allowed)


class Security:
    """The security settings of one client, checked and normalised."""

    def __init__(self, props: Mapping[str, str]) -> None:
        self.props = {k: v for k, v in props.items() if k in SECURITY_SETTINGS}
        raw = self.props.get("security.protocol", "PLAINTEXT").strip().upper()
        if raw not in PROTOCOLS:
            raise _fail("security.protocol", raw, f"must be one of {', '.join(PROTOCOLS)}")
        self.protocol = raw
        self.mechanism: str | None = None
        self.username: str | None = None
        self.password: str | None = None
        if raw.startswith("SASL_"):
            self._sasl()

    # ------------------------------------------------------------------ SASL

    def _sasl(self) -> None:
        mechanism = self.props.get("sasl.mechanism", "GSSAPI").strip().upper()
        if mechanism not in MECHANISMS:
            raise _fail(
                "sasl.mechanism", mechanism, f"must be one of {', '.join(MECHANISMS)} for eos"
            )
        self.mechanism = mechanism
        self.username = self.props.get("sasl.username")
        self.password = self.props.get("sasl.password")
        jaas = self.props.get("sasl.jaas.config")
        if jaas:
            self._jaas(jaas, mechanism)
        if mechanism != "GSSAPI" and (not self.username or self.password is None):
            raise _fail(
                "sasl.jaas.config",
                jaas or "",
                f"sasl.mechanism={mechanism} needs a user name and a password: sasl.jaas.config="
                f'{_MODULES[mechanism]} required username="…" password="…"; '
                "(or sasl.username and sasl.password)",
            )

    def _jaas(self, value: str, mechanism: str) -> None:
        found = _JAAS.match(value)
        if found is None or not value.rstrip().endswith(";"):
            raise _fail(
                "sasl.jaas.config",
                value,
                'must read "<LoginModule class> required username=\\"…\\" password=\\"…\\";"',
            )
        module = found["module"]
        expected = _MODULES.get(mechanism)
        if expected is not None and module.rsplit(".", 1)[-1] != expected.rsplit(".", 1)[-1]:
            raise _fail(
                "sasl.jaas.config",
                value,
                f"sasl.mechanism={mechanism} needs the login module {expected}, not {module}",
            )
        options = {k: (quoted if quoted is not None else bare)
                   for k, quoted, bare in _OPTION.findall(value[found.end():])}  # fmt: skip
        self.username = _unquote(options["username"]) if "username" in options else self.username
        self.password = _unquote(options["password"]) if "password" in options else self.password

    # ------------------------------------------------------------------ TLS

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def _type(self, store: str) -> None:
        key = f"ssl.{store}.type"
        kind = self.props.get(key, "").strip().upper()
        if kind and kind != "PEM":
            raise _fail(key, kind, _TO_PEM)

    def _existing(self, *keys: str) -> tuple[str, str] | None:
        """(setting, path) of the first of ``keys`` that is set, the file checked."""
        for key in keys:
            value = self.props.get(key, "").strip()
            if not value:
                continue
            path = Path(value)
            if not path.is_file():
                raise _fail(key, value, "must name an existing, readable PEM file")
            try:
                head = path.read_bytes()[:4096]
            except OSError as exc:
                raise _fail(key, value, f"must name a readable PEM file ({exc})") from None
            if b"-----BEGIN" not in head:
                raise _fail(key, value, f"is not a PEM file; {_TO_PEM}")
            return key, value
        return None

    def truststore(self) -> tuple[str, str] | None:
        """(setting, CA file) if a file is given."""
        self._type("truststore")
        return self._existing("ssl.truststore.location", "ssl.cafile")

    def keystore(self) -> tuple[str, str, str | None] | None:
        """(setting, certificate chain file, key file or None if in the same file)."""
        self._type("keystore")
        cert = self._existing("ssl.keystore.location", "ssl.certfile")
        if cert is None:
            if "ssl.keyfile" in self.props:
                raise _fail("ssl.keyfile", self.props["ssl.keyfile"], "needs ssl.certfile")
            return None
        key = self._existing("ssl.keyfile") if cert[0] == "ssl.certfile" else None
        return cert[0], cert[1], key[1] if key else None

    @property
    def key_password(self) -> str | None:
        return self.props.get("ssl.key.password") or self.props.get("ssl.password") or None

    @property
    def check_hostname(self) -> bool:
        value = self.props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
        if value not in ("", "https", "none"):
            raise _fail("ssl.endpoint.identification.algorithm", value, "must be https or empty")
        return value == "https"

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context of an aiokafka client."""
        trust = self.truststore()
        inline_ca = self.props.get("ssl.truststore.certificates")
        try:
            context = ssl.create_default_context(
                cafile=trust[1] if trust else None, cadata=inline_ca or None
            )
        except (ssl.SSLError, ValueError) as exc:
            key = trust[0] if trust else "ssl.truststore.certificates"
            value = trust[1] if trust else "…"
            raise _fail(key, value, f"no CA certificates in it ({exc})") from None
        context.check_hostname = self.check_hostname
        self._load_client_certificate(context)
        return context

    def _load_client_certificate(self, context: ssl.SSLContext) -> None:
        store = self.keystore()
        chain, key = (
            self.props.get("ssl.keystore.certificate.chain"),
            self.props.get("ssl.keystore.key"),
        )
        if store is None and (chain or key):
            if not (chain and key):
                missing = "ssl.keystore.key" if chain else "ssl.keystore.certificate.chain"
                raise _fail(missing, "", "ssl.keystore.certificate.chain and ssl.keystore.key "
                            "go together (the client certificate and its key)")  # fmt: skip
            with _private_copy(chain + "\n" + key) as combined:
                self._load(context, "ssl.keystore.certificate.chain", combined, None)
        elif store is not None:
            self._load(context, store[0], store[1], store[2])

    def _load(self, context: ssl.SSLContext, key: str, certfile: str, keyfile: str | None) -> None:
        try:
            context.load_cert_chain(certfile, keyfile, self.key_password)
        except ssl.SSLError as exc:
            encrypted = b"ENCRYPTED" in Path(keyfile or certfile).read_bytes()
            if encrypted:
                raise _fail(
                    "ssl.key.password",
                    self.key_password or "",
                    f"the private key in {keyfile or certfile} could not be decrypted with it",
                ) from None
            raise _fail(
                key, certfile, f"the client certificate and its key could not be loaded ({exc})"
            ) from None

    # ------------------------------------------------------------------ clients

    def aiokafka(self) -> dict[str, Any]:
        """aiokafka keywords."""
        kwargs: dict[str, Any] = {}
        if "security.protocol" in self.props:
            kwargs["security_protocol"] = self.protocol
        if self.mechanism is not None:
            kwargs["sasl_mechanism"] = self.mechanism
            kwargs["sasl_plain_username"] = self.username
            kwargs["sasl_plain_password"] = self.password
            if "sasl.kerberos.service.name" in self.props:
                kwargs["sasl_kerberos_service_name"] = self.props["sasl.kerberos.service.name"]
        if self.tls:
            kwargs["ssl_context"] = self.ssl_context()
        return kwargs

    def librdkafka(self) -> dict[str, str]:
        """librdkafka settings."""
        settings: dict[str, str] = {}
        if "security.protocol" in self.props:
            settings["security.protocol"] = self.protocol.lower()
        if self.mechanism is not None:
            settings["sasl.mechanisms"] = self.mechanism
            if self.username is not None:
                settings["sasl.username"] = self.username
            if self.password is not None:
                settings["sasl.password"] = self.password
            if "sasl.kerberos.service.name" in self.props:
                settings["sasl.kerberos.service.name"] = self.props["sasl.kerberos.service.name"]
        if self.tls:
            settings |= self._librdkafka_tls()
        return settings

    def _librdkafka_tls(self) -> dict[str, str]:
        settings: dict[str, str] = {}
        trust = self.truststore()
        if trust is not None:
            settings["ssl.ca.location"] = trust[1]
        elif self.props.get("ssl.truststore.certificates"):
            settings["ssl.ca.pem"] = self.props["ssl.truststore.certificates"]
        settings["ssl.endpoint.identification.algorithm"] = (
            "https" if self.check_hostname else "none"
        )
        store = self.keystore()
        if store is not None:
            settings["ssl.certificate.location"] = store[1]
            settings["ssl.key.location"] = store[2] or store[1]
        elif self.props.get("ssl.keystore.certificate.chain"):
            settings["ssl.certificate.pem"] = self.props["ssl.keystore.certificate.chain"]
            settings["ssl.key.pem"] = self.props.get("ssl.keystore.key", "")
        if self.key_password:
            settings["ssl.key.password"] = self.key_password
        return settings


def _unquote(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


class _private_copy:
    """A file only this process's user can read, holding ``text``, removed on exit (the
    ssl module loads certificates and keys from files only)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.directory = ""

    def __enter__(self) -> str:
        self.directory = tempfile.mkdtemp(prefix="eos-tls-")
        path = os.path.join(self.directory, "client.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(self.text)
        return path

    def __exit__(self, *_: object) -> None:
        for name in os.listdir(self.directory):
            os.unlink(os.path.join(self.directory, name))
        os.rmdir(self.directory)
