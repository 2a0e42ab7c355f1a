"""Kafka's client security settings become the same connection for aiokafka and librdkafka;
every bad value is one ConfigError naming the setting, secrets never in it."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from eos.errors import ConfigError
from eos.kafka import ClientConfig
from eos.kafka.client_security import Security, is_secret
from eos.runtime.task.producers.settings import librdkafka_settings
from tests.tls_certs import CertificateAuthority

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SENTINEL = "s3ntinel-Pa55"


def jaas(module: str = SCRAM, user: str = "eos", password: str = SENTINEL) -> str:
    return f'{module} required username="{user}" password="{password}";'


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
def test_scram_for_both_clients(mechanism: str) -> None:
    props = {
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": jaas(),
    }
    assert Security(props).aiokafka() == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": "eos",
        "sasl_plain_password": SENTINEL,
    }
    assert Security(props).librdkafka() == {
        "security.protocol": "sasl_plaintext",
        "sasl.mechanisms": mechanism,
        "sasl.username": "eos",
        "sasl.password": SENTINEL,
    }


def test_plain_with_librdkafka_names_and_escaped_quotes() -> None:
    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": jaas(PLAIN, password='a\\"b'),
    }
    assert Security(props).aiokafka()["sasl_plain_password"] == 'a"b'
    own = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
           "sasl.username": "u", "sasl.password": "p"}  # fmt: skip
    assert Security(own).aiokafka()["sasl_plain_username"] == "u"


@pytest.mark.parametrize(
    ("props", "key", "says"),
    [
        ({"security.protocol": "SASL"}, "security.protocol", "must be one of PLAINTEXT"),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTH", "sasl.jaas.config": "x"},
            "sasl.mechanism",
            "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
             "sasl.jaas.config": jaas()},
            "sasl.jaas.config",
            "needs the login module org.apache.kafka.common.security.plain.PlainLoginModule",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"},
            "sasl.jaas.config",
            "needs a user name and a password",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
             "sasl.jaas.config": f'{PLAIN} required username="x" password="{SENTINEL}"'},
            "sasl.jaas.config",
            "must read",
        ),
    ],
)  # fmt: skip
def test_bad_sasl_settings_name_the_setting_and_hide_the_secret(
    props: dict[str, str], key: str, says: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        Security(props).aiokafka()
    assert raised.value.key == key
    assert says in str(raised.value)
    assert SENTINEL not in str(raised.value)


def tls_props(directory: Path, **extra: str) -> dict[str, str]:
    ca = CertificateAuthority(directory)
    return {"security.protocol": "SSL", "ssl.truststore.location": str(ca.cafile), **extra}


def test_tls_from_pem_files_and_inline(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path)
    both = ca.issue("client", key_in_cert=True)
    split = ca.issue("other")
    for keystore in (
        {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(both.certfile)},
        {"ssl.certfile": str(split.certfile), "ssl.keyfile": str(split.keyfile)},
        {"ssl.keystore.certificate.chain": split.certfile.read_text(),
         "ssl.keystore.key": split.keyfile.read_text()},
    ):  # fmt: skip
        props = {"security.protocol": "SSL", "ssl.truststore.location": str(ca.cafile), **keystore}
        context = Security(props).aiokafka()["ssl_context"]
        assert isinstance(context, ssl.SSLContext)
        assert context.check_hostname
    props = {"security.protocol": "SSL", "ssl.truststore.certificates": ca.cafile.read_text(),
             "ssl.endpoint.identification.algorithm": ""}  # fmt: skip
    assert not Security(props).aiokafka()["ssl_context"].check_hostname


def test_librdkafka_tls_names(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path)
    both = ca.issue("client", key_in_cert=True, password="kp")
    config = ClientConfig(
        {
            "bootstrap.servers": "b:9093",
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca.cafile),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(both.certfile),
            "ssl.key.password": "kp",
        }
    )
    assert librdkafka_settings(config) == {
        "bootstrap.servers": "b:9093",
        "security.protocol": "ssl",
        "ssl.ca.location": str(ca.cafile),
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.certificate.location": str(both.certfile),
        "ssl.key.location": str(both.certfile),
        "ssl.key.password": "kp",
    }


def test_bad_tls_settings(tmp_path: Path) -> None:
    props = tls_props(tmp_path)
    missing = {**props, "ssl.truststore.location": str(tmp_path / "gone.pem")}
    with pytest.raises(ConfigError, match=r"'ssl.truststore.location'.*existing, readable PEM"):
        Security(missing).aiokafka()
    with pytest.raises(ConfigError, match=r"'ssl.keystore.type'.*PEM only.*keytool"):
        Security({**props, "ssl.keystore.type": "JKS"}).aiokafka()
    (tmp_path / "store.jks").write_bytes(b"\xfe\xed\xfe\xed")
    with pytest.raises(ConfigError, match="is not a PEM file"):
        Security({**props, "ssl.truststore.location": str(tmp_path / "store.jks")}).aiokafka()
    with pytest.raises(ConfigError, match=r"'ssl.keystore.key'.*go together"):
        Security({**props, "ssl.keystore.certificate.chain": "x"}).aiokafka()
    issued = CertificateAuthority(tmp_path, "other").issue("c", password="right", key_in_cert=True)
    wrong = {**props, "ssl.keystore.location": str(issued.certfile), "ssl.key.password": SENTINEL}
    with pytest.raises(ConfigError) as raised:
        Security(wrong).aiokafka()
    assert raised.value.key == "ssl.key.password"
    assert SENTINEL not in str(raised.value)


def test_what_is_secret() -> None:
    for key in ("sasl.jaas.config", "producer.override.sasl.jaas.config", "admin.ssl.key.password"):
        assert is_secret(key)
    assert not is_secret("ssl.truststore.location")
