"""The registry converters through an authenticating HTTPS gateway (auth_proxy) in front of
the real registry (Apicurio, started once per session): a client certificate its CA signed
and HTTP Basic credentials, set the way a Connect user sets them
(``basic.auth.credentials.source``, ``basic.auth.user.info``, ``schema.registry.ssl.*``).
What eos writes is read back by confluent-kafka's ``SchemaRegistryClient`` and
``AvroDeserializer`` through the same gateway with the same credentials. Refusals (a wrong
password, no client certificate, one from another CA, a registry certificate not trusted)
are one line naming the settings to check, never show a secret, and do not wait."""

from __future__ import annotations

import logging
import ssl
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer

from eos.api import SchemaBuilder, Struct
from eos.api.schema import INT64_SCHEMA, OPTIONAL_STRING_SCHEMA, STRING_SCHEMA
from eos.converters import make_converter
from eos.errors import ConfigError, SchemaRegistryError
from services.dev_registry import RegistryState
from tests.conftest import made_converters
from tests.integration.auth_proxy import PASSWORD, USER, Gateway, gateway_in_front
from tests.integration.registry_readers import TOPIC_SUBJECTS, context, schema_id

pytestmark = pytest.mark.integration

AVRO = "io.confluent.connect.avro.AvroConverter"
WRONG = "wr0ng-Pa55word"
KEY_PASSWORD = "k3y-pa55phrase"

ORDER = (
    SchemaBuilder.struct().name("com.example.Order")
    .field("id", INT64_SCHEMA).field("note", OPTIONAL_STRING_SCHEMA).build()
)  # fmt: skip


@pytest.fixture(scope="session")
def gateway(registry_gateway: Gateway) -> Gateway:
    """The session's gateway in front of the registry (tests/conftest.py)."""
    return registry_gateway


@pytest.fixture(scope="module")
def reader(gateway: Gateway) -> Iterator[SchemaRegistryClient]:
    """confluent-kafka's client, through the gateway with the same kind of credentials."""
    with SchemaRegistryClient({
        "url": gateway.proxy.url(),
        "basic.auth.user.info": f"{USER}:{PASSWORD}",
        "ssl.ca.location": str(gateway.ca.cafile),
        "ssl.certificate.location": str(gateway.reader.certfile),
        "ssl.key.location": str(gateway.reader.keyfile),
    }) as client:  # fmt: skip
        yield client


def converter(settings: Mapping[str, str], *, key: bool = False) -> Any:
    made = make_converter(AVRO, settings, key)
    made_converters.append(made)
    return made


def topic() -> str:
    return f"auth-{uuid.uuid4().hex[:8]}"


def read_back(reader: SchemaRegistryClient, t: str, data: bytes, key: bool = False) -> Any:
    return AvroDeserializer(reader, conf=TOPIC_SUBJECTS)(data, context(t, key))


def _write_and_read(
    gateway: Gateway, reader: SchemaRegistryClient, settings: dict[str, str]
) -> None:
    t = topic()
    row = Struct(ORDER, {"id": 42, "note": "through the gateway"})
    data = converter(settings).from_connect_data(t, ORDER, row)
    assert read_back(reader, t, data) == {"id": 42, "note": "through the gateway"}
    # the schema is in the real registry behind the gateway, under the id the bytes carry
    behind = httpx.get(f"{gateway.registry.url}/subjects/{t}-value/versions/latest").json()
    assert behind["id"] == schema_id(data)


def test_a_record_goes_through_the_gateway_and_reads_back_with_confluents_client(
    gateway: Gateway, reader: SchemaRegistryClient
) -> None:
    t = topic()
    before = len(gateway.proxy.seen)
    row = Struct(ORDER, {"id": 7, "note": None})
    value = converter(gateway.settings())
    value.probe()
    data = value.from_connect_data(t, ORDER, row)
    key = converter(gateway.settings(), key=True).from_connect_data(t, STRING_SCHEMA, "k-7")
    assert read_back(reader, t, data) == {"id": 7, "note": None}
    assert read_back(reader, t, key, key=True) == "k-7"
    behind = httpx.get(f"{gateway.registry.url}/subjects").json()
    assert {f"{t}-value", f"{t}-key"} <= set(behind)
    seen = gateway.proxy.seen[before:]
    eos = [s for s in seen if s.client == "eos-connector"]
    assert eos, seen
    assert {(s.user, s.status) for s in eos} == {(USER, 200)}
    assert any(s.path.endswith("/schemas/types") for s in eos)  # the probe
    assert any(s.client == "reader" and s.status == 200 for s in seen)
    assert not gateway.proxy.refused_handshakes()


@pytest.mark.parametrize(
    "form",
    [
        "encrypted key + ssl.key.password", "PEM keystore holding both",
        "credentials in the URL", "credentials in the URL, no source set",
    ],
)  # fmt: skip
def test_other_ways_to_give_the_client_certificate_and_credentials(
    gateway: Gateway, reader: SchemaRegistryClient, form: str
) -> None:
    if form.startswith("encrypted"):
        issued = gateway.ca.issue(f"enc-{uuid.uuid4().hex[:6]}", password=KEY_PASSWORD)
        assert b"ENCRYPTED" in issued.keyfile.read_bytes()
        settings = gateway.settings(**{
            "schema.registry.ssl.certificate.location": str(issued.certfile),
            "schema.registry.ssl.key.location": str(issued.keyfile),
            "schema.registry.ssl.key.password": KEY_PASSWORD,
        })  # fmt: skip
    elif form.startswith("PEM keystore"):
        both = gateway.ca.issue(f"both-{uuid.uuid4().hex[:6]}", key_in_cert=True)
        settings = gateway.settings(**{
            "schema.registry.ssl.keystore.location": str(both.certfile),
            "schema.registry.ssl.keystore.type": "PEM",
            "schema.registry.ssl.truststore.location": str(gateway.ca.cafile),
            "schema.registry.ssl.truststore.type": "PEM",
        })  # fmt: skip
        for name in ("ca", "certificate", "key"):
            del settings[f"schema.registry.ssl.{name}.location"]
    else:
        settings = gateway.url_credentials(PASSWORD)
        if form.endswith("no source set"):  # Confluent's default source is URL
            del settings["basic.auth.credentials.source"]
    _write_and_read(gateway, reader, settings)


@pytest.mark.parametrize("how", ["wrong password", "no credentials", "wrong password in URL"])
def test_refused_credentials_are_one_line_naming_the_settings_without_the_secret(
    gateway: Gateway,
    how: str,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("httpx", "httpcore", "eos"):
        caplog.set_level(logging.DEBUG, logger=name)
    if how == "wrong password":
        settings = gateway.settings(**{"basic.auth.user.info": f"{USER}:{WRONG}"})
    elif how == "no credentials":
        settings = gateway.settings()
        del settings["basic.auth.credentials.source"], settings["basic.auth.user.info"]
    else:
        settings = gateway.url_credentials(WRONG)
    before = len(gateway.proxy.seen)
    refused = converter(settings)
    with pytest.raises(SchemaRegistryError) as at_start:
        refused.probe()
    with pytest.raises(SchemaRegistryError) as converting:
        refused.from_connect_data(topic(), ORDER, Struct(ORDER, {"id": 1, "note": "x"}))
    for exc in (at_start.value, converting.value):
        message = str(exc)
        assert "\n" not in message
        assert "answered 401" in message
        assert "basic.auth.credentials.source" in message
        assert "basic.auth.user.info" in message
        assert not exc.retriable  # waiting would not help: the task fails at once
        assert WRONG not in message
        assert PASSWORD not in message
    # the gateway did refuse (not the registry behind it), with the user eos sent
    answers = {(s.user, s.status) for s in gateway.proxy.seen[before:]}
    assert answers == {(None if how == "no credentials" else USER, 401)}
    # nothing logged or printed shows a secret (httpx logs each request, URL and all)
    assert any(r.name == "httpx" and "401" in r.getMessage() for r in caplog.records)
    logged = "\n".join(f"{r.getMessage()} {r.args!r} {r.__dict__!r}" for r in caplog.records)
    printed = "".join(capfd.readouterr())
    for text in (logged, printed):
        assert WRONG not in text
        assert PASSWORD not in text


@pytest.fixture(scope="module")
def tls12_gateway(
    dev_registry: RegistryState, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    """The same gateway on TLS 1.2, where a missing certificate fails the handshake itself
    (on TLS 1.3 the client hears of it on its first read)."""
    yield from gateway_in_front(
        dev_registry, tmp_path_factory.mktemp("gateway12"), ssl.TLSVersion.TLSv1_2
    )


@pytest.mark.parametrize("tls", ["TLS 1.3", "TLS 1.2"])
def test_no_client_certificate_is_one_line_naming_the_certificate_setting(
    request: pytest.FixtureRequest, tls: str
) -> None:
    gateway: Gateway = request.getfixturevalue("gateway" if tls == "TLS 1.3" else "tls12_gateway")
    settings = gateway.settings()
    del settings["schema.registry.ssl.certificate.location"]
    del settings["schema.registry.ssl.key.location"]
    refused_before = len(gateway.proxy.refused_handshakes())
    answered_before = len(gateway.proxy.seen) - refused_before
    no_cert = converter(settings)
    with pytest.raises(SchemaRegistryError) as at_start:
        no_cert.probe()
    with pytest.raises(SchemaRegistryError) as converting:
        no_cert.from_connect_data(topic(), ORDER, Struct(ORDER, {"id": 2, "note": None}))
    for exc in (at_start.value, converting.value):
        message = str(exc)
        assert "\n" not in message
        assert "refused the TLS handshake" in message
        assert "schema.registry.ssl.certificate.location" in message
        assert "schema.registry.ssl.key.location" in message
        assert "cannot be reached" not in message
        assert not exc.retriable
        assert PASSWORD not in message
    refused = gateway.proxy.refused_handshakes(more_than=refused_before)[refused_before:]
    assert all("PEER_DID_NOT_RETURN_A_CERTIFICATE" in s.error for s in refused), refused
    answered = len(gateway.proxy.seen) - len(gateway.proxy.refused_handshakes())
    assert answered == answered_before  # no request got past the handshake


def test_a_client_certificate_from_another_ca_is_refused(gateway: Gateway) -> None:
    settings = gateway.settings(**{
        "schema.registry.ssl.certificate.location": str(gateway.rogue.certfile),
        "schema.registry.ssl.key.location": str(gateway.rogue.keyfile),
    })  # fmt: skip
    refused_before = len(gateway.proxy.refused_handshakes())  # earlier tests' too
    with pytest.raises(SchemaRegistryError, match="refused the TLS handshake") as refused:
        converter(settings).probe()
    message = str(refused.value)
    assert "check that schema.registry.ssl.certificate.location holds a certificate" in message
    assert not refused.value.retriable
    # the client hears the alert before the gateway notes the handshake: wait for it
    now = gateway.proxy.refused_handshakes(more_than=refused_before)[refused_before:]
    assert now, "the gateway saw no refused handshake"
    assert all("CERTIFICATE_VERIFY_FAILED" in seen.error for seen in now), now


def test_a_gateway_certificate_not_trusted_names_the_ca_setting(gateway: Gateway) -> None:
    settings = gateway.settings(**{"schema.registry.ssl.ca.location": str(gateway.other_ca.cafile)})
    row = Struct(ORDER, {"id": 3, "note": None})
    with pytest.raises(SchemaRegistryError, match="CERTIFICATE_VERIFY_FAILED") as refused:
        converter(settings).from_connect_data(topic(), ORDER, row)
    assert "set schema.registry.ssl.ca.location to the PEM file" in str(refused.value)
    assert not refused.value.retriable


def test_client_key_settings_that_cannot_work_are_setting_errors(gateway: Gateway) -> None:
    issued = gateway.ca.issue(f"enc-{uuid.uuid4().hex[:6]}", password=KEY_PASSWORD)
    encrypted = {
        "schema.registry.ssl.certificate.location": str(issued.certfile),
        "schema.registry.ssl.key.location": str(issued.keyfile),
    }
    # no password: a setting error, not OpenSSL's "Enter PEM pass phrase:" on the terminal
    with pytest.raises(ConfigError, match=r"schema\.registry\.ssl\.key\.password") as unset:
        converter(gateway.settings(**encrypted))
    assert "encrypted" in str(unset.value)
    with pytest.raises(ConfigError, match=r"wrong ssl\.key\.password") as wrong:
        converter(gateway.settings(**encrypted, **{"schema.registry.ssl.key.password": WRONG}))
    assert WRONG not in str(wrong.value)
    key_only = gateway.settings()
    del key_only["schema.registry.ssl.certificate.location"]
    with pytest.raises(ConfigError, match=r"schema\.registry\.ssl\.certificate\.location"):
        converter(key_only)
    missing = str(gateway.ca.directory / "no-such-ca.pem")
    with pytest.raises(ConfigError, match=r"schema\.registry\.ssl\.ca\.location"):
        converter(gateway.settings(**{"schema.registry.ssl.ca.location": missing}))
