"""A certificate authority for development clusters and tests: a CA kept in a directory,
and the certificates it signs for 127.0.0.1 / localhost (for servers and clients).

``eos dev-kafka start --security sasl-ssl|mtls`` makes one in ``<data-dir>/security``
and issues the brokers' and each user's certificate with it; the tests make throwaway
ones (``tests/tls_certs.py``). Private keys are written mode 0600.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_CA_USAGE = dict.fromkeys(
    ("content_commitment", "key_encipherment", "data_encipherment", "key_agreement",
     "encipher_only", "decipher_only"),
    False,
) | {"digital_signature": True, "key_cert_sign": True, "crl_sign": True}  # fmt: skip

CA_KEY_FILE = "ca.key.pem"


@dataclass(frozen=True)
class Issued:
    certfile: Path
    keyfile: Path


def _write_private(path: Path, data: bytes) -> None:
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


class CertificateAuthority:
    """A CA whose certificate is in ``cafile``; :meth:`issue` makes leaf certificates.

    ``CertificateAuthority(directory, name)`` makes a new CA; :meth:`load` opens one that
    :meth:`save_key` kept in ``directory``.
    """

    def __init__(
        self, directory: Path, name: str = "eos test CA", *, days: int = 1, _load: bool = False
    ) -> None:
        self.directory = directory
        self.days = days
        self.cafile = directory / f"{name.replace(' ', '-')}.pem"
        if _load:
            self._key = serialization.load_pem_private_key(
                (directory / CA_KEY_FILE).read_bytes(), None
            )
            self.cert = x509.load_pem_x509_certificate(self.cafile.read_bytes())
            self._name = self.cert.subject
            return
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(**_CA_USAGE), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.cafile.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    @classmethod
    def load(cls, directory: Path, name: str, *, days: int = 1) -> CertificateAuthority:
        """The CA that :meth:`save_key` kept in ``directory`` (issuing for ``days``)."""
        return cls(directory, name, days=days, _load=True)

    def save_key(self) -> None:
        """Keep the CA's private key beside its certificate (to issue more later)."""
        assert isinstance(self._key, ec.EllipticCurvePrivateKey)
        _write_private(
            self.directory / CA_KEY_FILE,
            self._key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
        )

    def issue(self, name: str, *, password: str | None = None, key_in_cert: bool = False) -> Issued:
        """A certificate with common name ``name`` for 127.0.0.1 and localhost, for servers
        and clients alike. ``key_in_cert``: one PEM file with the certificate chain, then the
        key (what Kafka's ``ssl.keystore.type=PEM`` reads); ``password`` encrypts the key."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        assert isinstance(self._key, ec.EllipticCurvePrivateKey)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=self.days))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .sign(self._key, hashes.SHA256())
        )
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode())
            if password
            else serialization.NoEncryption()
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )
        chain = cert.public_bytes(serialization.Encoding.PEM) + self.cert.public_bytes(
            serialization.Encoding.PEM
        )
        certfile = self.directory / f"{name}.crt.pem"
        keyfile = self.directory / f"{name}.key.pem"
        if key_in_cert:
            _write_private(certfile, chain + key_pem)
            return Issued(certfile, certfile)
        certfile.write_bytes(chain)
        _write_private(keyfile, key_pem)
        return Issued(certfile, keyfile)
