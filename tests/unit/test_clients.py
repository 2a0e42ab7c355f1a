"""Client settings in Kafka's names become the right aiokafka keywords."""

from __future__ import annotations

import pytest

from eos.errors import ConfigError
from eos.kafka import ClientConfig
from eos.kafka.clients import is_client_setting


def test_layers_and_overrides() -> None:
    config = ClientConfig.from_properties(
        {
            "bootstrap.servers": "a:1,b:2",
            "group.id": "workers",  # a worker setting, not a client one
            "producer.linger.ms": "5",
            "consumer.max.poll.records": "100",
            "producer.override.linger.ms": "7",  # connector-level syntax is not a worker layer
        }
    )
    kwargs = config.with_overrides(producer={"linger.ms": "9"}).producer_kwargs()
    assert kwargs["bootstrap_servers"] == ["a:1", "b:2"]
    assert kwargs["linger_ms"] == 9
    assert config.consumer_kwargs(isolation_level="read_committed") == {
        "bootstrap_servers": ["a:1", "b:2"],
        "max_poll_records": 100,
        "isolation_level": "read_committed",
    }


def test_security_settings_pass_through() -> None:
    config = ClientConfig(
        {
            "bootstrap.servers": "k:9093",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": 'ScramLoginModule required username="eos" password="s3cret";',
        }
    )
    kwargs = config.admin_kwargs()
    assert kwargs["security_protocol"] == "SASL_PLAINTEXT"
    assert kwargs["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (kwargs["sasl_plain_username"], kwargs["sasl_plain_password"]) == ("eos", "s3cret")


def test_fixed_keywords_win() -> None:
    config = ClientConfig({"bootstrap.servers": "k:1"}, producer={"transactional.id": "user"})
    assert config.producer_kwargs(transactional_id="eos-x-0")["transactional_id"] == "eos-x-0"


def test_bad_value_names_the_key() -> None:
    config = ClientConfig({"bootstrap.servers": "k:1"}, producer={"linger.ms": "soon"})
    with pytest.raises(ConfigError, match=r"'linger.ms'"):
        config.producer_kwargs()


@pytest.mark.parametrize(
    "key", ["bootstrap.servers", "security.protocol", "sasl.jaas.config", "ssl.truststore.location"]
)
def test_settings_every_client_takes(key: str) -> None:
    assert is_client_setting(key)
    assert ClientConfig.from_properties({key: "x"}).common == {key: "x"}


@pytest.mark.parametrize("key", ["linger.ms", "group.id", "producer.linger.ms", "ssl.unknown"])
def test_settings_of_one_client_or_none(key: str) -> None:
    assert not is_client_setting(key)
