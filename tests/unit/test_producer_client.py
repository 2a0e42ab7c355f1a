"""``producer.client``: parsed on the worker and per connector, a clear error when
librdkafka's package is missing, and producer settings one client ignores named in a
warning."""

from __future__ import annotations

import importlib.util

import pytest
from structlog.testing import capture_logs

from eos.config import WorkerConfig
from eos.config.connector import ConnectorConfig, settings_problems
from eos.errors import ConfigError, FencedError, TaskError, TransactionAbortable
from eos.kafka.clients import ClientConfig
from eos.runtime.task.producers import make_task_producer
from eos.runtime.task.producers.settings import librdkafka_settings

BASE = {
    "group.id": "workers",
    "config.storage.topic": "eos-configs",
    "offset.storage.topic": "eos-offsets",
    "status.storage.topic": "eos-status",
}
CONNECTOR = {"name": "c", "connector.class": "VerifiableSource"}


def worker(**settings: str) -> WorkerConfig:
    return WorkerConfig.from_properties({**BASE, **settings})


def no_confluent_kafka(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "confluent_kafka" else real(name, *a),
    )


def test_worker_default_is_aiokafka_and_connector_inherits_it() -> None:
    w = worker()
    assert w.producer_client == "aiokafka"
    connector = ConnectorConfig.from_properties(CONNECTOR, w)
    assert connector.producer_client is None
    assert connector.task_producer_client(w) == "aiokafka"


def test_connector_overrides_the_worker() -> None:
    w = worker(**{"producer.client": "librdkafka"})
    assert w.producer_client == "librdkafka"
    own = ConnectorConfig.from_properties({**CONNECTOR, "producer.client": "aiokafka"}, w)
    assert own.task_producer_client(w) == "aiokafka"
    inherited = ConnectorConfig.from_properties(CONNECTOR, w)
    assert inherited.task_producer_client(w) == "librdkafka"


def test_setting_is_not_passed_to_the_clients() -> None:
    with capture_logs() as logs:
        config = worker(**{"producer.client": "librdkafka"}).client_config
    assert "client" not in config.producer
    assert not [e for e in logs if e.get("setting") in ("client", "producer.client")]


def test_unknown_client_is_rejected() -> None:
    with pytest.raises(ConfigError, match="aiokafka, librdkafka"):
        worker(**{"producer.client": "kafka-python"})


def test_missing_package_is_a_startup_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    no_confluent_kafka(monkeypatch)
    with pytest.raises(ConfigError, match=r"pip install 'eos\[librdkafka\]'"):
        worker(**{"producer.client": "librdkafka"})
    problems = settings_problems({**CONNECTOR, "producer.client": "librdkafka"}, worker())
    assert [p.key for p in problems] == ["producer.client"]
    assert "confluent-kafka" in problems[0].message


def test_settings_in_librdkafka_names_and_ignored_ones_named() -> None:
    config = ClientConfig(
        {"bootstrap.servers": "b:9092"},
        {"max.request.size": "2000000", "linger.ms": "5", "buffer.memory": "1"},
    )
    with capture_logs() as logs:
        settings = librdkafka_settings(config)
    assert settings == {
        "bootstrap.servers": "b:9092",
        "message.max.bytes": "2000000",
        "linger.ms": "5",
    }
    assert [(e["setting"], e["library"]) for e in logs] == [("buffer.memory", "librdkafka")]


async def test_aiokafka_names_a_setting_only_librdkafka_knows() -> None:
    config = ClientConfig({"bootstrap.servers": "b:9092"}, {"batch.num.messages": "10000"})
    with capture_logs() as logs:
        producer = make_task_producer("aiokafka", config, per_record=False)
    await producer.close()
    assert [(e["setting"], e["library"]) for e in logs] == [("batch.num.messages", "aiokafka")]


def test_librdkafka_errors_as_eos_errors() -> None:
    """Fenced stops the task as a zombie, TRANSACTION_ABORTABLE aborts and goes on, the
    rest fails the task."""
    from confluent_kafka import KafkaError

    from eos.runtime.task.producers.librdkafka import as_eos_error

    assert isinstance(as_eos_error(KafkaError(KafkaError.PRODUCER_FENCED), "commit"), FencedError)
    abortable = as_eos_error(KafkaError(KafkaError.TRANSACTION_ABORTABLE), "commit")
    assert isinstance(abortable, TransactionAbortable)
    assert "TRANSACTION_ABORTABLE" in str(abortable)
    other = as_eos_error(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE), "sending")
    assert type(other) is TaskError
