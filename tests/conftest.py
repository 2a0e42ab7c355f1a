"""Shared fixtures: a real KRaft broker started by the project's own harness
(services.dev_kafka), factories for unique topics, groups and transactional ids,
and broker logs attached to failing tests. If the broker cannot start, every
test that needs it fails: nothing is skipped."""

from __future__ import annotations

import itertools
import logging
import os
import ssl
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eos.kafka import ClientConfig
from eos.kafka.admin import ensure_topic
from services.dev_kafka import ClusterState, DevKafka
from services.dev_registry import DevRegistry, RegistryState
from tests import prebuild
from tests.integration.auth_proxy import Gateway, gateway_in_front
from tests.integration.secured import Secured, start_secured

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("EOS_CACHE_DIR", str(REPO / ".cache"))
logging.getLogger("aiokafka").setLevel(logging.CRITICAL)

_clusters: dict[str, DevKafka] = {}


def _start(name: str, brokers: int, tmp_path_factory: pytest.TempPathFactory) -> DevKafka:
    kafka = DevKafka(tmp_path_factory.mktemp(name), heap="512m")
    _clusters[name] = kafka
    kafka.start(brokers, port=0)
    return kafka


@pytest.fixture(scope="session")
def dev_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevKafka]:
    """One broker for the whole session (started on first use)."""
    kafka = _start("kafka", 1, tmp_path_factory)
    yield kafka
    kafka.stop()


@pytest.fixture(scope="module")
def other_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second one-broker cluster, for the tests of a module (its bootstrap address):
    connectors that write to a cluster other than the workers'."""
    kafka = _start("kafka-other", 1, tmp_path_factory)
    state = kafka.state()
    assert state is not None
    yield state.bootstrap
    kafka.stop()
    del _clusters["kafka-other"]


@pytest.fixture(scope="session")
def kafka_cluster3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevKafka]:
    """Three brokers (replication 3, min ISR 2) for fault tests."""
    kafka = _start("kafka3", 3, tmp_path_factory)
    yield kafka
    kafka.stop()


@pytest.fixture(scope="session")
def secured_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Secured]]:
    """``secured_kafka("sasl-scram" | "sasl-ssl" | "mtls")``: one secured broker per mode
    for the whole session, started on first use with ``eos dev-kafka start --security``."""
    started: dict[str, Secured] = {}

    def get(mode: str) -> Secured:
        if mode not in started:
            kafka = start_secured(tmp_path_factory.mktemp(f"kafka-{mode}"), mode)
            _clusters[mode] = kafka
            started[mode] = Secured(kafka, mode)
        return started[mode]

    yield get
    for secured in started.values():
        secured.kafka.stop()


@pytest.fixture(scope="session")
def kafka(dev_kafka: DevKafka) -> ClusterState:
    state = dev_kafka.state()
    assert state is not None
    return state


@pytest.fixture(scope="session")
def bootstrap(kafka: ClusterState) -> str:
    return kafka.bootstrap


@pytest.fixture(scope="session")
def dev_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryState]:
    """One Apicurio Registry for the whole session (started on first use), in memory,
    compatibility BACKWARD; HTTP at ``.url``, HTTPS at ``.https_url`` with the self-signed
    certificate ``registry-tls/cert.pem`` of the session's temporary directory."""
    directory = tmp_path_factory.mktemp("registry")
    cert, key = self_signed_certificate(directory / "tls", "localhost")
    registry = DevRegistry(directory / "data")
    _registries.append(registry)
    state = registry.start(0, tls=(cert, key))
    yield state
    registry.stop()


_registries: list[DevRegistry] = []


made_converters: list[Any] = []
"""Converters a test made (their HTTP connections to a registry): each closed after it."""


@pytest.fixture(autouse=True)
def _close_made_converters() -> Iterator[None]:
    yield
    while made_converters:
        made_converters.pop().close()


@pytest.fixture(scope="session")
def registry_gateway(
    dev_registry: RegistryState, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    """An HTTPS gateway with Basic credentials and client certificates in front of the
    session's registry (tests/integration/auth_proxy.py; TLS 1.3)."""
    yield from gateway_in_front(
        dev_registry, tmp_path_factory.mktemp("gateway"), ssl.TLSVersion.MAXIMUM_SUPPORTED
    )


def self_signed_certificate(directory: Path, host: str) -> tuple[Path, Path]:
    """A self-signed certificate for ``host`` and its key, as PEM files."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ))  # fmt: skip
    return cert_file, key_file


@pytest.fixture
def client_config(bootstrap: str) -> ClientConfig:
    return ClientConfig({"bootstrap.servers": bootstrap})


_counter = itertools.count()


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Names unique to this test run: ``unique_name("topic")`` → ``topic-<test>-<n>-<rand>``."""
    test = request.node.name.split("[")[0].replace("_", "-")[:40]
    run = uuid.uuid4().hex[:6]
    return lambda kind: f"{kind}-{test}-{next(_counter)}-{run}"


TopicFactory = Callable[..., Awaitable[str]]


@pytest.fixture
async def topic_factory(
    client_config: ClientConfig, unique_name: Callable[[str], str]
) -> TopicFactory:
    """``await topic_factory(partitions=3, compacted=False)`` creates a fresh topic."""

    async def create(partitions: int = 1, *, compacted: bool = False, name: str = "") -> str:
        topic = name or unique_name("topic")
        await ensure_topic(client_config, topic, partitions=partitions, compacted=compacted)
        return topic

    return create


@pytest.fixture
def transactional_id(unique_name: Callable[[str], str]) -> Callable[[], str]:
    return lambda: unique_name("txn")


@pytest.fixture
def group_id(unique_name: Callable[[str], str]) -> str:
    return unique_name("group")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    if report.failed and _clusters:  # type: ignore[attr-defined]
        for name, kafka in _clusters.items():
            for node_id, tail in kafka.logs(60):
                report.sections.append((f"broker log {name}/{node_id} (tail)", tail))  # type: ignore[attr-defined]
    if report.failed:  # type: ignore[attr-defined]
        for registry in _registries:
            report.sections.append(("registry log (tail)", registry.log_tail(40)))  # type: ignore[attr-defined]
    return report


PRODUCER_CLIENTS = ("aiokafka", "librdkafka")


@pytest.fixture(params=PRODUCER_CLIENTS)
def producer_client(request: pytest.FixtureRequest) -> str:
    """Each task-producer client in turn (``producer.client``): exactly-once tests run on both."""
    return str(request.param)


PREBUILD_LOGS = REPO / ".cache" / "prebuild"


def _worker() -> str | None:
    """This process's pytest-xdist worker (``gw0``, ``gw1``…), None for the controller or a
    run without workers."""
    return os.environ.get("PYTEST_XDIST_WORKER")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    prebuild.last(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    if not session.config.option.collectonly and _worker() in (None, "gw0"):
        prebuild.start(session.items, PREBUILD_LOGS)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _worker() is None:  # the controller outlives its workers
        prebuild.stop(PREBUILD_LOGS)
