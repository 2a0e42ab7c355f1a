"""Logging in to Kafka once, at start-up, to say plainly why it fails.

aiokafka's clients swallow a refused login into "Unable to bootstrap" (the broker's
answer only reaches its log). :func:`check_login` opens one connection to the first
bootstrap server that answers, with the client's security settings, and turns a refusal
into a :class:`~eos.errors.ConfigError` naming the setting (``sasl.jaas.config``,
``sasl.mechanism``, ``ssl.truststore.location``) and the broker's answer. A broker that does
not answer at all is left to the caller's usual "cannot reach Kafka" handling.
"""

from __future__ import annotations

import ssl
from typing import Any, Final

from aiokafka import errors as kerrors
from aiokafka.conn import create_conn

from eos.errors import ConfigError
from eos.kafka.client_security import HIDDEN, Security
from eos.kafka.clients import ClientConfig

_CONNECTION: Final = (
    "ssl_context", "security_protocol", "sasl_mechanism", "sasl_plain_username",
    "sasl_plain_password", "sasl_kerberos_service_name", "client_id", "request_timeout_ms",
)  # fmt: skip


async def check_login(config: ClientConfig, role: str = "admin") -> None:
    """Log in as the ``role`` client of ``config`` (``producer``, ``consumer``, ``admin``)."""
    layer = getattr(config, role)
    props = {**config.common, **layer}
    security = Security(props)
    kwargs = {k: v for k, v in getattr(config, f"{role}_kwargs")().items() if k in _CONNECTION}
    kwargs.setdefault("request_timeout_ms", 10_000)
    for server in config.bootstrap_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            conn = await create_conn(host.strip("[]"), int(port), **kwargs)
        except (OSError, kerrors.KafkaConnectionError, kerrors.KafkaTimeoutError, TimeoutError):
            continue  # this one does not answer: try the next
        except Exception as exc:
            raise _refused(exc, security, props) from None
        conn.close()
        return


def _refused(exc: BaseException, security: Security, props: dict[str, Any]) -> BaseException:
    answer = str(exc) or type(exc).__name__
    if isinstance(exc, kerrors.UnsupportedSaslMechanismError):
        return ConfigError(
            "sasl.mechanism", security.mechanism, f"the brokers refused it: {answer}"
        )
    if isinstance(exc, kerrors.SaslAuthenticationFailed | kerrors.IllegalSaslStateError):
        key = "sasl.jaas.config" if "sasl.jaas.config" in props else "sasl.password"
        return ConfigError(
            key,
            HIDDEN,
            f"the brokers refused the login of {security.username!r} with "
            f"sasl.mechanism={security.mechanism}: {answer}",
        )
    if isinstance(exc, ssl.SSLCertVerificationError):
        key = "ssl.truststore.location" if "ssl.truststore.location" in props else "ssl.cafile"
        return ConfigError(
            key, props.get(key, "the system's CAs"), f"the broker's certificate: {answer}"
        )
    if isinstance(exc, ssl.SSLError):
        return ConfigError(
            "security.protocol",
            security.protocol,
            f"the TLS handshake failed ({answer}); check the ssl.* settings (a client "
            "certificate the brokers trust, if they ask for one)",
        )
    return exc
