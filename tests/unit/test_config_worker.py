"""Worker settings: defaults, every documented invalid value, warnings, derived values."""

from __future__ import annotations

import re
import socket

import pytest
from structlog.testing import capture_logs

import eos.config
from eos.config import WORKER_CONFIG, WorkerConfig, docs_table
from eos.errors import ConfigError

BASE = {
    "group.id": "workers",
    "config.storage.topic": "eos-configs",
    "offset.storage.topic": "eos-offsets",
    "status.storage.topic": "eos-status",
}


def worker(**settings: str) -> WorkerConfig:
    return WorkerConfig.from_properties({**BASE, **settings})


def test_defaults() -> None:
    config = worker()
    assert config.bootstrap_servers == ["localhost:9092"]
    assert (config.group_id, config.client_id) == ("workers", None)
    assert (config.config_topic, config.offsets_topic, config.status_topic) == (
        "eos-configs",
        "eos-offsets",
        "eos-status",
    )
    assert config.config_replication_factor == -1
    assert config.offsets_replication_factor == -1
    assert config.status_replication_factor == -1
    assert (config.offsets_partitions, config.status_partitions) == (25, 5)
    assert config.exactly_once == "enabled"
    assert config.exactly_once_enabled
    assert config.transactional_config_writes
    assert config.offset_flush_interval_ms == 10000
    assert config.graceful_shutdown_ms == 5000
    assert (config.session_timeout_ms, config.heartbeat_interval_ms) == (10000, 3000)
    assert config.rebalance_timeout_ms == 60000
    assert config.rebalance_protocol == "sessioned"
    assert config.worker_sync_timeout_ms == 30000
    assert config.listeners == ["http://127.0.0.1:8083"]
    assert (config.advertised_host, config.advertised_port) == (None, None)
    assert config.raw == BASE


def test_values_are_parsed() -> None:
    config = worker(
        **{
            "bootstrap.servers": "k1:9092, k2:9092",
            "config.storage.replication.factor": "3",
            "offset.storage.partitions": "50",
            "exactly.once.source.support": "PREPARING",
            "connect.protocol": "eager",
            "offset.flush.interval.ms": "2000",
            "task.shutdown.graceful.timeout.ms": "0",
            "listeners": "http://0.0.0.0:8083,http://[::1]:9000",
        }
    )
    assert config.bootstrap_servers == ["k1:9092", "k2:9092"]
    assert config.config_replication_factor == 3
    assert config.offsets_partitions == 50
    assert config.exactly_once == "preparing"
    assert not config.exactly_once_enabled
    assert config.transactional_config_writes
    assert config.rebalance_protocol == "eager"
    assert config.offset_flush_interval_ms == 2000
    assert config.graceful_shutdown_ms == 0
    assert config.listeners == ["http://0.0.0.0:8083", "http://[::1]:9000"]


def test_disabled_has_no_transactional_writes() -> None:
    config = worker(**{"exactly.once.source.support": "disabled"})
    assert not config.exactly_once_enabled
    assert not config.transactional_config_writes


@pytest.mark.parametrize("missing", sorted(BASE))
def test_required_settings(missing: str) -> None:
    props = {k: v for k, v in BASE.items() if k != missing}
    with pytest.raises(ConfigError, match=f"'{re.escape(missing)}'.*required setting is missing"):
        WorkerConfig.from_properties(props)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("group.id", ""),
        ("bootstrap.servers", ""),
        ("config.storage.topic", "has space"),
        ("offset.storage.topic", ".."),
        ("status.storage.topic", "x" * 250),
        ("config.storage.replication.factor", "0"),
        ("offset.storage.replication.factor", "-2"),
        ("status.storage.replication.factor", "three"),
        ("offset.storage.partitions", "0"),
        ("status.storage.partitions", "-1"),
        ("exactly.once.source.support", "on"),
        ("offset.flush.interval.ms", "0"),
        ("offset.flush.interval.ms", "10s"),
        ("task.shutdown.graceful.timeout.ms", "-1"),
        ("session.timeout.ms", "0"),
        ("session.timeout.ms", "1.5"),
        ("heartbeat.interval.ms", "0"),
        ("rebalance.timeout.ms", "0"),
        ("connect.protocol", "incremental"),
        ("scheduled.rebalance.max.delay.ms", "-1"),
        ("assignor", ""),
        ("worker.priority", "high"),
        ("worker.priority", "1.5"),
        ("failover.settle.ms", "-5"),
        ("inter.worker.key.ttl.ms", "10"),
        ("inter.worker.signature.algorithm", "HmacMD5"),
        ("inter.worker.signature.algorithm", "hmacsha256"),
        ("inter.worker.signature.window.ms", "0"),
        ("worker.sync.timeout.ms", "0"),
        ("listeners", ""),
        ("listeners", "ftp://h:8083"),
        ("listeners", "http://h"),
        ("listeners", "h:8083"),
        ("listeners", "http://h:8083,http://h:99999"),
        ("listeners", "http://h:port"),
        ("rest.advertised.port", "0"),
        ("rest.advertised.port", "65536"),
        ("producer.transaction.timeout.ms", "0"),
        ("producer.transaction.timeout.ms", "soon"),
    ],
)
def test_invalid_values_name_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        worker(**{key: value})
    assert info.value.key == key
    assert f"'{key}'" in str(info.value)


@pytest.mark.parametrize("value", ["-1", "1", "3"])
def test_valid_replication_factors(value: str) -> None:
    assert worker(**{"status.storage.replication.factor": value}).status_replication_factor == int(
        value
    )


def test_internal_topics_must_differ() -> None:
    with pytest.raises(ConfigError, match=r"must differ from config\.storage\.topic") as info:
        worker(**{"status.storage.topic": "eos-configs"})
    assert info.value.key == "status.storage.topic"


def test_heartbeat_below_session_timeout() -> None:
    with pytest.raises(ConfigError, match=r"below session\.timeout\.ms=3000") as info:
        worker(**{"session.timeout.ms": "3000"})
    assert info.value.key == "heartbeat.interval.ms"


def test_unknown_settings_are_logged_known_prefixes_are_not() -> None:
    with capture_logs() as logs:
        WorkerConfig.from_properties(
            {
                **BASE,
                "linger.ms": "5",  # producer setting without its prefix: unknown
                "bogus.setting": "x",
                "producer.linger.ms": "5",
                "consumer.max.poll.records": "10",
                "admin.request.timeout.ms": "1000",
                "offset.storage.min.insync.replicas": "2",
                "spark.master": "local[2]",
                "metrics.port": "9100",
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": "x",
                "ssl.cafile": "/ca.pem",
                "ssl.truststore.location": "/ca.pem",
                "request.timeout.ms": "1000",
                "client.id": "w1",
            },
            reserved=("spark.", "metrics."),  # what a plugin and a service declared
        )
    unknown = [e["setting"] for e in logs if e["event"] == "unknown worker setting, ignored"]
    assert unknown == ["bogus.setting", "linger.ms"]
    assert all(e["log_level"] == "warning" for e in logs)


def test_settings_nobody_reserved_are_unknown() -> None:
    with capture_logs() as logs:
        worker(**{"spark.master": "local[2]", "metrics.listeners": "http://127.0.0.1:9100"})
    unknown = [e["setting"] for e in logs if e["event"] == "unknown worker setting, ignored"]
    assert unknown == ["metrics.listeners", "spark.master"]


@pytest.mark.parametrize("key", ["producer.transactional.id", "consumer.isolation.level"])
def test_settings_eos_owns_are_ignored_with_a_warning(key: str) -> None:
    with capture_logs() as logs:
        config = worker(**{key: "mine"})
    assert [(e["event"], e["setting"]) for e in logs] == [
        ("setting ignored: eos sets it itself", key)
    ]
    client = config.client_config
    assert "transactional.id" not in client.producer
    assert "isolation.level" not in client.consumer


def test_client_config_layers() -> None:
    config = worker(
        **{
            "bootstrap.servers": "k:1",
            "security.protocol": "SSL",
            "producer.linger.ms": "5",
            "consumer.max.poll.records": "10",
            "admin.request.timeout.ms": "1000",
        }
    )
    client = config.client_config
    assert client.common == {"bootstrap.servers": "k:1", "security.protocol": "SSL"}
    assert client.producer == {"linger.ms": "5"}
    assert client.consumer == {"max.poll.records": "10"}
    assert client.admin == {"request.timeout.ms": "1000"}


def test_client_config_has_default_bootstrap() -> None:
    assert worker().client_config.common == {"bootstrap.servers": "localhost:9092"}


def test_topic_settings_pass_through() -> None:
    with capture_logs() as logs:
        config = worker(
            **{
                "offset.storage.min.insync.replicas": "2",
                "offset.storage.partitions": "10",
                "offset.storage.replication.factor": "3",
                "offset.storage.cleanup.policy": "delete",
                "config.storage.partitions": "3",
                "config.storage.retention.ms": "-1",
                "status.storage.segment.bytes": "1048576",
            }
        )
    assert config.topic_settings("offset") == {"min.insync.replicas": "2"}
    assert config.topic_settings("config") == {"retention.ms": "-1"}
    assert config.topic_settings("status") == {"segment.bytes": "1048576"}
    ignored = {e["setting"] for e in logs}
    assert ignored == {"offset.storage.cleanup.policy", "config.storage.partitions"}


def test_rest_url_from_first_listener() -> None:
    config = worker(listeners="http://10.0.0.1:8084,http://127.0.0.1:9000")
    assert config.rest_url == "http://10.0.0.1:8084"
    assert config.worker_id == "10.0.0.1:8084"


def test_rest_url_advertised() -> None:
    config = worker(
        **{"rest.advertised.host.name": "worker-1.example", "rest.advertised.port": "18083"}
    )
    assert config.rest_url == "http://worker-1.example:18083"
    assert config.worker_id == "worker-1.example:18083"


@pytest.mark.parametrize("listener", ["http://0.0.0.0:8083", "http://:8083", "http://[::]:8083"])
def test_rest_url_of_wildcard_listener_is_the_host_name(listener: str) -> None:
    assert worker(listeners=listener).rest_url == f"http://{socket.gethostname()}:8083"


def test_rest_url_ipv6() -> None:
    assert worker(listeners="http://[::1]:8083").worker_id == "[::1]:8083"
    advertised = worker(**{"rest.advertised.host.name": "fe80::1"})
    assert advertised.rest_url == "http://[fe80::1]:8083"


def test_docs_table_lists_every_setting() -> None:
    table = docs_table()
    lines = table.splitlines()
    assert lines[0] == "| name | type | default | meaning |"
    assert len(lines) == 2 + len(WORKER_CONFIG.keys)
    assert "| `group.id` | string | *required* |" in table
    assert "| `offset.flush.interval.ms` | long | `10000` |" in table
    assert "| `rest.advertised.port` | int | none |" in table
    assert all(key.doc for key in WORKER_CONFIG.keys.values())


def test_package_exports() -> None:
    expected = {
        "CONNECTOR_CONFIG",
        "CONNECTOR_PREFIXES",
        "ConfigDef",
        "ConfigKey",
        "ConnectorConfig",
        "IGNORED_OVERRIDES",
        "IGNORED_WORKER_SETTINGS",
        "Importance",
        "NO_DEFAULT",
        "NonEmpty",
        "OneOf",
        "Range",
        "TopicName",
        "Type",
        "WORKER_CONFIG",
        "WORKER_PREFIXES",
        "WorkerConfig",
        "docs_table",
        "load_config_file",
        "load_json",
        "load_properties",
        "load_yaml",
    }
    public = {name for name in vars(eos.config) if not name.startswith("_")}
    submodules = {
        "auto_restart",
        "connector",
        "connector_files",
        "connector_plan",
        "converters",
        "definition",
        "error_handling",
        "files",
        "providers",
        "rest_security",
        "worker",
        "worker_settings",
    }
    assert public - submodules == expected


def test_connects_own_listener_form_is_taken() -> None:
    """Connect's sample file writes ``listeners=HTTP://:8083`` (any case, no host)."""
    config = worker(listeners="HTTP://:8083,HTTPS://[::1]:8443")
    assert config.listeners == ["http://:8083", "https://[::1]:8443"]
    assert config.rest_url.startswith("http://")


def test_connect_only_settings_are_one_warning_saying_what_eos_does_instead() -> None:
    with capture_logs() as logs:
        worker(**{"plugin.path": "/usr/share/java", "topic.creation.enable": "true",
                  "connector.client.config.override.policy": "All",
                  "offset.flush.timeout.ms": "5000"})  # fmt: skip
    found = {e["setting"]: e for e in logs if e["log_level"] == "warning"}
    assert set(found) == {"plugin.path", "topic.creation.enable", "offset.flush.timeout.ms"}
    assert found["plugin.path"]["event"] == "Kafka Connect setting, ignored"
    assert "entry point" in found["plugin.path"]["instead"]


@pytest.mark.parametrize("policy", ["None", "Principal"])
def test_an_override_policy_eos_does_not_keep_is_refused(policy: str) -> None:
    with pytest.raises(ConfigError, match=r"connector\.client\.config\.override\.policy.*All"):
        worker(**{"connector.client.config.override.policy": policy})
