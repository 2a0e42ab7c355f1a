"""Who a client is to the brokers: its Kafka principal, from its security settings.

SASL (PLAIN, SCRAM): ``User:<user name>``. Mutual TLS: ``User:<common name>`` of the
client certificate, what a broker with ``ssl.principal.mapping.rules=RULE:^CN=([^,]+).*$/$1/``
(``eos dev-kafka --security mtls``) makes of it; brokers with other rules name it otherwise
(``eos acls --principal`` then says who). No authentication: ``User:ANONYMOUS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from eos.kafka.client_security import Security

ANONYMOUS = "User:ANONYMOUS"


def principal_of(props: Mapping[str, str]) -> str:
    """The principal of a client with settings ``props`` (Kafka's names)."""
    security = Security(props)
    if security.mechanism is not None and security.username:
        return f"User:{security.username}"
    if security.tls:
        chain = _certificate_chain(security)
        if chain is not None:
            return f"User:{_common_name(chain)}"
    return ANONYMOUS


def _certificate_chain(security: Security) -> bytes | None:
    """The client certificate the clients present: a file before inline PEM (as
    :meth:`~eos.kafka.client_security.Security.ssl_context` loads them)."""
    store = security.keystore()
    if store is not None:
        return Path(store[1]).read_bytes()
    inline = security.props.get("ssl.keystore.certificate.chain")
    return inline.encode() if inline else None


def _common_name(pem: bytes) -> str:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    certificate = x509.load_pem_x509_certificate(pem)
    names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else certificate.subject.rfc4514_string()
