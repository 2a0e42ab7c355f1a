"""Secured development clusters: ``eos dev-kafka start --security MODE``.

Modes (each with ``StandardAuthorizer``, super user ``admin``,
``allow.everyone.if.no.acl.found=false``):

- ``sasl-scram``: clients on ``SASL_PLAINTEXT`` with SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN;
- ``sasl-ssl``: the same on ``SASL_SSL`` (the brokers' certificate signed by the cluster's CA);
- ``mtls``: ``SSL`` with client certificates; a client's principal is its certificate's
  common name (``CN=alice`` is ``User:alice``).

Everything lives in ``<data-dir>/security``: the CA (``eos-dev-kafka-CA.pem`` and its
key), the brokers' and users' certificates and keys, ``users.json`` (every user's password:
a development cluster's, never a real one's) and one client settings file per user
(``admin.properties`` …) in Kafka's own property names, so Kafka's tools
(``--command-config``) and eos read the same file. Keys and certificates are inlined in
those files (``ssl.keystore.key``, ``ssl.keystore.certificate.chain``) unencrypted: a PEM
keystore *file* needs an encrypted key, and Java 17 cannot read the PBES2 encryption Python
writes. The controller listener authenticates too (PLAIN for the SASL modes, a certificate
for mTLS) as the brokers' own principal, so no unauthenticated principal is a super user.

``eos dev-kafka user add NAME`` adds a user: SCRAM credentials (both SHA-256 and SHA-512)
at once through the admin API (PLAIN users are read from ``users.json`` when the
cluster starts); for mTLS, a client certificate.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from eos.errors import DevKafkaError
from eos.kafka.clients import ClientConfig

MODES: Final = ("none", "sasl-scram", "sasl-ssl", "mtls")
ADMIN: Final = "admin"
"""The super user every secured mode has."""
BROKER: Final = "broker"
"""The brokers' own principal under mTLS (their certificate's common name)."""
SECURITY_DIR: Final = "security"
CA_NAME: Final = "eos-dev-kafka CA"
SCRAM: Final = ("SCRAM-SHA-512", "SCRAM-SHA-256")
_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_PROTOCOL = {
    "none": "PLAINTEXT",
    "sasl-scram": "SASL_PLAINTEXT",
    "sasl-ssl": "SASL_SSL",
    "mtls": "SSL",
}


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise DevKafkaError(f"--security must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


def jaas(module: str, user: str, password: str, **extra: str) -> str:
    """A ``sasl.jaas.config`` value."""
    options = [f'username="{user}"', f'password="{password}"']
    options += [f'{key}="{value}"' for key, value in extra.items()]
    return f"{module} required {' '.join(options)};"


@dataclass(frozen=True)
class Listeners:
    """The listener lines of one node's ``server.properties``."""

    client: str
    controller: str

    def lines(self, port: int, controller_port: int) -> dict[str, str]:
        return {
            "listeners": f"{self.client}://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"{self.client}://127.0.0.1:{port}",
            "inter.broker.listener.name": self.client,
            "listener.security.protocol.map": f"CONTROLLER:{self.controller},"
            f"{self.client}:{self.client}",
        }


class Security:
    """The security material and settings of the dev cluster in ``data_dir``."""

    def __init__(self, data_dir: Path, mode: str) -> None:
        self.mode = check_mode(mode)
        self.directory = data_dir / SECURITY_DIR
        self.protocol = _PROTOCOL[mode]

    @property
    def secured(self) -> bool:
        return self.mode != "none"

    @property
    def sasl(self) -> bool:
        return self.mode in ("sasl-scram", "sasl-ssl")

    @property
    def tls(self) -> bool:
        return self.mode in ("sasl-ssl", "mtls")

    @property
    def cafile(self) -> Path:
        return self.directory / f"{CA_NAME.replace(' ', '-')}.pem"

    @property
    def admin_file(self) -> Path:
        return self.client_file(ADMIN)

    def client_file(self, user: str) -> Path:
        return self.directory / f"{user}.properties"

    def listeners(self) -> Listeners:
        if not self.secured:
            return Listeners("PLAINTEXT", "PLAINTEXT")
        return Listeners(self.protocol, "SSL" if self.mode == "mtls" else "SASL_PLAINTEXT")

    # ------------------------------------------------------------------ users

    def users(self) -> dict[str, str]:
        """User name → password (empty for mTLS users: they have a certificate)."""
        path = self.directory / "users.json"
        if not path.exists():
            return {}
        users: dict[str, str] = json.loads(path.read_text())
        return users

    def _save_users(self, users: dict[str, str]) -> None:
        path = self.directory / "users.json"
        path.write_text(json.dumps(users, indent=2))
        path.chmod(0o600)

    def prepare(self) -> None:
        """Make what the brokers and the admin need, once (kept across restarts)."""
        if not self.secured or (self.directory / "users.json").exists():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        self.directory.chmod(0o700)
        if self.tls:
            from services.dev_tls import CertificateAuthority

            ca = CertificateAuthority(self.directory, CA_NAME, days=3650)
            ca.save_key()
            ca.issue(BROKER)
        self._save_users({})
        self.register(ADMIN, secrets.token_urlsafe(18))

    def _keystore(self, user: str) -> dict[str, str]:
        """``user``'s certificate chain and key, inline (Kafka's PEM keystore settings)."""
        return {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": (self.directory / f"{user}.crt.pem").read_text(),
            "ssl.keystore.key": (self.directory / f"{user}.key.pem").read_text(),
        }

    def register(self, user: str, password: str | None = None) -> Path:
        """Record ``user`` (and issue its certificate under mTLS); write its client
        settings file and return its path. SCRAM credentials are the caller's job."""
        if not user or any(c in user for c in ',="\\/ ') or not user.isprintable():
            raise DevKafkaError(f"user name {user!r}: use letters, digits, '-', '_' or '.'")
        users = self.users()
        if self.mode == "mtls":
            from services.dev_tls import CertificateAuthority

            ca = CertificateAuthority.load(self.directory, CA_NAME, days=3650)
            ca.issue(user)
            users[user] = ""
        else:
            users[user] = password or users.get(user) or secrets.token_urlsafe(18)
        self._save_users(users)
        path = self.client_file(user)
        path.write_text(properties_text(self.client_properties(user)))
        path.chmod(0o600)
        return path

    def client_properties(
        self, user: str = ADMIN, mechanism: str = "SCRAM-SHA-512"
    ) -> dict[str, str]:
        """Kafka client settings of ``user`` (no ``bootstrap.servers``)."""
        props = {"security.protocol": self.protocol}
        if self.sasl:
            module = _PLAIN_MODULE if mechanism == "PLAIN" else _SCRAM_MODULE
            props["sasl.mechanism"] = mechanism
            props["sasl.jaas.config"] = jaas(module, user, self.users()[user])
        if self.tls:
            props["ssl.truststore.type"] = "PEM"
            props["ssl.truststore.location"] = str(self.cafile)
        if self.mode == "mtls":
            props |= self._keystore(user)
        return props

    def client_config(self, bootstrap: str, user: str = ADMIN) -> ClientConfig:
        return ClientConfig({"bootstrap.servers": bootstrap, **self.client_properties(user)})

    # ------------------------------------------------------------------ brokers

    def broker_settings(self) -> dict[str, str]:
        """What a secured mode adds to every node's ``server.properties``."""
        if not self.secured:
            return {}
        admin_password = self.users()[ADMIN]
        settings = {
            "authorizer.class.name": _AUTHORIZER,
            "super.users": f"User:{ADMIN};User:{BROKER}",
            "allow.everyone.if.no.acl.found": "false",
        }
        client = self.protocol.lower()
        if self.sasl:
            plain_users = {f"user_{name}": pw for name, pw in self.users().items() if pw}
            settings |= {
                "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                f"listener.name.{client}.scram-sha-512.sasl.jaas.config": jaas(
                    _SCRAM_MODULE, ADMIN, admin_password
                ),
                f"listener.name.{client}.scram-sha-256.sasl.jaas.config": jaas(
                    _SCRAM_MODULE, ADMIN, admin_password
                ),
                f"listener.name.{client}.plain.sasl.jaas.config": jaas(
                    _PLAIN_MODULE, ADMIN, admin_password, **plain_users
                ),
                # The controllers' listener: PLAIN, the admin its only user.
                "sasl.mechanism.controller.protocol": "PLAIN",
                "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
                "listener.name.controller.plain.sasl.jaas.config": jaas(
                    _PLAIN_MODULE, ADMIN, admin_password, user_admin=admin_password
                ),
            }
        if self.tls:
            settings |= self._keystore(BROKER) | {
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.cafile),
                "ssl.endpoint.identification.algorithm": "https",
            }
        if self.mode == "mtls":
            settings |= {
                "ssl.client.auth": "required",
                "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
            }
        return settings

    def format_arguments(self) -> list[str]:
        """``kafka-storage format`` arguments: the SCRAM credentials that exist from the start."""
        if not self.sasl:
            return []
        return [
            f"--add-scram={mechanism}=[name={name},password={password}]"
            for name, password in self.users().items()
            for mechanism in SCRAM
        ]


def properties_text(props: dict[str, str]) -> str:
    """``props`` as a Java properties file (line breaks in values escaped)."""
    return "".join(f"{k}={v.replace(chr(10), chr(92) + 'n')}\n" for k, v in props.items())
