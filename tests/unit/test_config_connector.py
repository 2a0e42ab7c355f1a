"""Connector settings: parsing, overrides, the interval-boundary rule and the
pre-flight checks (docs/configuration.md), with tiny fake connectors."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import pytest
from structlog.testing import capture_logs

from eos.api import (
    ConfigDef,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SourceConnector,
    SourceRecord,
    SourceTask,
    SourceTaskContext,
    Type,
)
from eos.config import CONNECTOR_CONFIG, ConnectorConfig, WorkerConfig
from eos.errors import ConfigError
from eos.runtime.validation import (
    check_connector,
    unknown_connector_settings,
    validate_connector,
)

WORKER = {
    "group.id": "workers",
    "bootstrap.servers": "k1:9092,k2:9092",
    "config.storage.topic": "eos-configs",
    "offset.storage.topic": "eos-offsets",
    "status.storage.topic": "eos-status",
}
BASE = {"name": "orders", "connector.class": "acme.sources:Orders", "table": "orders"}


def worker(**settings: str) -> WorkerConfig:
    return WorkerConfig.from_properties({**WORKER, **settings})


def props(**settings: str) -> dict[str, str]:
    return {**BASE, **settings}


def parse(worker_config: WorkerConfig | None = None, /, **settings: str) -> ConnectorConfig:
    return ConnectorConfig.from_properties(props(**settings), worker_config or worker())


class _Task(SourceTask):
    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        pass

    async def poll(self) -> Sequence[SourceRecord] | None:
        return None

    async def stop(self) -> None:
        pass


class Unknowing(SourceConnector):
    """Defines ``table``; leaves every question to the framework's defaults."""

    async def start(self, config: Mapping[str, str]) -> None:
        pass

    def task_class(self) -> type[SourceTask]:
        return _Task

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{}]

    def config_def(self) -> ConfigDef:
        return ConfigDef().define("table", Type.STRING, doc="table to read")


class Fake(Unknowing):
    """Answers the framework's questions as configured."""

    def __init__(
        self,
        support: ExactlyOnceSupport | None = ExactlyOnceSupport.SUPPORTED,
        boundaries: ConnectorTransactionBoundaries = ConnectorTransactionBoundaries.SUPPORTED,
    ) -> None:
        self.support = support
        self.boundaries = boundaries

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return self.support

    def can_define_transaction_boundaries(
        self, config: Mapping[str, str]
    ) -> ConnectorTransactionBoundaries:
        return self.boundaries


class Broken(Fake):
    def validate(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        raise RuntimeError("boom")

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        raise RuntimeError("cannot tell")


# ------------------------------------------------------------------ parsing


def test_defaults() -> None:
    config = parse()
    assert config.name == "orders"
    assert config.connector_class == "acme.sources:Orders"
    assert config.tasks_max == 1
    assert (config.key_converter, config.value_converter) == ("json", "json")
    assert not config.exactly_once_required
    assert config.transaction_boundary == "poll"
    assert config.transaction_boundary_interval_ms is None
    assert config.offsets_topic is None
    assert config.producer_overrides == config.consumer_overrides == config.admin_overrides == {}
    assert config.raw == BASE


def test_values_are_parsed() -> None:
    config = parse(
        **{
            "tasks.max": "4",
            "key.converter": "STRING",
            "value.converter": "acme.convert.Avro",
            "exactly.once.support": "Required",
            "transaction.boundary": "INTERVAL",
            "transaction.boundary.interval.ms": "1000",
            "offsets.storage.topic": "orders-offsets",
            "table": "customers",
        }
    )
    assert config.tasks_max == 4
    assert (config.key_converter, config.value_converter) == ("string", "acme.convert.Avro")
    assert config.exactly_once_required
    assert config.transaction_boundary == "interval"
    assert config.transaction_boundary_interval_ms == 1000
    assert config.offsets_topic == "orders-offsets"
    assert config.raw["table"] == "customers"


@pytest.mark.parametrize("missing", ["name", "connector.class"])
def test_required_settings(missing: str) -> None:
    settings = {k: v for k, v in BASE.items() if k != missing}
    with pytest.raises(ConfigError, match=f"'{re.escape(missing)}'.*required setting is missing"):
        ConnectorConfig.from_properties(settings, worker())


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("name", ""),
        ("name", "   "),
        ("name", "a/b"),
        ("name", "bell\x07"),
        ("name", "new\nline"),
        ("connector.class", ""),
        ("tasks.max", "0"),
        ("tasks.max", "-3"),
        ("tasks.max", "two"),
        ("key.converter", "avro"),
        ("value.converter", "xml"),
        ("value.converter", "my module:Conv"),
        ("value.converter", "module:"),
        ("value.converter", "1module.Conv"),
        ("exactly.once.support", "yes"),
        ("transaction.boundary", "batch"),
        ("transaction.boundary.interval.ms", "0"),
        ("transaction.boundary.interval.ms", "1s"),
        ("offsets.storage.topic", "bad topic"),
        ("producer.override.transaction.timeout.ms", "0"),
        ("producer.override.transaction.timeout.ms", "long"),
    ],
)
def test_invalid_values_name_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(**{key: value})
    assert info.value.key == key
    assert f"'{key}'" in str(info.value)
    reported = validate_connector(props(**{key: value}), worker(), None)
    assert any(f"'{key}'" in message for message in reported[key])


@pytest.mark.parametrize(
    "converter", ["json", "String", "bytes", "acme.convert:Avro", "acme.convert.Avro", "a:B.C"]
)
def test_valid_converters(converter: str) -> None:
    assert parse(**{"value.converter": converter}).value_converter in (converter, "string")


def test_overrides_have_their_prefix_stripped() -> None:
    config = parse(
        **{
            "producer.override.linger.ms": "5",
            "consumer.override.max.poll.records": "10",
            "admin.override.request.timeout.ms": "1000",
        }
    )
    assert config.producer_overrides == {"linger.ms": "5"}
    assert config.consumer_overrides == {"max.poll.records": "10"}
    assert config.admin_overrides == {"request.timeout.ms": "1000"}
    client = config.client_config(worker(**{"producer.linger.ms": "1", "producer.acks": "all"}))
    assert client.common["bootstrap.servers"] == "k1:9092,k2:9092"
    assert client.producer == {"linger.ms": "5", "acks": "all"}
    assert client.consumer == {"max.poll.records": "10"}
    assert client.admin == {"request.timeout.ms": "1000"}


@pytest.mark.parametrize(
    "key", ["producer.override.transactional.id", "consumer.override.isolation.level"]
)
def test_overrides_eos_owns_are_dropped_with_a_warning_when_at_least_once(key: str) -> None:
    at_least_once = worker(**{"exactly.once.source.support": "disabled"})
    with capture_logs() as logs:
        config = parse(at_least_once, **{key: "mine"})
    assert [(e["event"], e["setting"], e["connector"]) for e in logs] == [
        ("setting ignored: eos sets it itself", key, "orders")
    ]
    assert logs[0]["log_level"] == "warning"
    assert config.producer_overrides == config.consumer_overrides == {}
    client = config.client_config(at_least_once)
    assert "transactional.id" not in client.producer
    assert "isolation.level" not in client.consumer
    assert validate_connector(props(**{key: "mine"}), at_least_once, Fake()) == {
        name: [] for name in [*CONNECTOR_CONFIG.keys, "table"]
    }


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("producer.override.transactional.id", "mine", "its own transactional.id"),
        ("consumer.override.isolation.level", "read_uncommitted", "read_committed"),
        ("producer.override.acks", "1", "acks=all"),
        ("producer.override.enable.idempotence", "false", "idempotent producer"),
        ("producer.override.max.in.flight.requests.per.connection", "6", "at most 5"),
    ],
)
def test_overrides_exactly_once_cannot_work_with_are_refused_by_name(
    key: str, value: str, says: str
) -> None:
    problems = validate_connector(props(**{key: value}), worker(), Fake())
    (message,) = problems[key]
    assert says in message
    with pytest.raises(ConfigError) as refused:
        parse(**{key: value})
    assert refused.value.key == key
    assert validate_connector(props(**{key: value}), worker(**{
        "exactly.once.source.support": "preparing"}), Fake()).get(key, []) == []  # fmt: skip


def test_overrides_exactly_once_works_with_pass() -> None:
    fine = {"producer.override.acks": "-1", "producer.override.enable.idempotence": "true",
            "producer.override.max.in.flight.requests.per.connection": "5",
            "consumer.override.isolation.level": "read_committed"}  # fmt: skip
    assert not any(validate_connector(props(**fine), worker(), Fake()).values())


@pytest.mark.parametrize(
    ("key", "value"), [("producer.acks", "1"), ("producer.enable.idempotence", "false")]
)
def test_a_worker_producer_setting_exactly_once_cannot_work_with_stops_it(
    key: str, value: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        worker(**{key: value})
    assert refused.value.key == key
    worker(**{key: value, "exactly.once.source.support": "disabled"})  # at-least-once: fine


def test_unknown_settings_against_framework_and_connector_keys() -> None:
    settings = props(tabel="typo", **{"producer.override.acks": "all", "transform": "x"})
    assert unknown_connector_settings(settings, Fake()) == ["tabel", "transform"]
    transforms = {"transforms": "x", "transforms.x.type": "Filter", "predicates.p.type": "?"}
    assert unknown_connector_settings(props(**transforms), Fake()) == []
    with capture_logs() as logs:
        ConnectorConfig.from_properties(settings, worker(), Fake().config_def())
    assert [e["setting"] for e in logs if e["event"] == "unknown connector setting"] == [
        "tabel",
        "transform",
    ]


# ------------------------------------------------------------------ derived values


def test_boundary_interval_defaults_to_worker_flush_interval() -> None:
    w = worker(**{"offset.flush.interval.ms": "7000"})
    assert parse(w, **{"transaction.boundary": "interval"}).boundary_interval_ms(w) == 7000
    own = parse(
        w, **{"transaction.boundary": "interval", "transaction.boundary.interval.ms": "2000"}
    )
    assert own.boundary_interval_ms(w) == 2000


def test_producer_transaction_timeout_precedence() -> None:
    plain = worker()
    configured = worker(**{"producer.transaction.timeout.ms": "90000"})
    assert parse(plain).producer_transaction_timeout_ms(plain) == 60000
    assert parse(configured).producer_transaction_timeout_ms(configured) == 90000
    overridden = parse(configured, **{"producer.override.transaction.timeout.ms": "120000"})
    assert overridden.producer_transaction_timeout_ms(configured) == 120000


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, None),
        ({"offsets.storage.topic": "orders-offsets"}, "orders-offsets"),
        ({"offsets.storage.topic": "eos-offsets"}, None),  # the worker's own topic
        ({"producer.override.bootstrap.servers": "other:9092"}, "eos-offsets"),
        ({"producer.override.bootstrap.servers": "k2:9092, k1:9092"}, None),  # same cluster
        (
            {
                "producer.override.bootstrap.servers": "other:9092",
                "offsets.storage.topic": "orders-offsets",
            },
            "orders-offsets",
        ),
    ],
)
def test_offsets_topic_for(settings: dict[str, str], expected: str | None) -> None:
    w = worker()
    assert parse(w, **settings).offsets_topic_for(w) == expected


def test_offsets_clients_follow_the_producer_cluster() -> None:
    w = worker()
    same = parse(w).output_cluster_config(w)
    assert same == parse(w).client_config(w)
    other = parse(w, **{"producer.override.bootstrap.servers": "other:9092"})
    client = other.output_cluster_config(w)
    assert client.producer_kwargs()["bootstrap_servers"] == ["other:9092"]
    assert client.consumer_kwargs()["bootstrap_servers"] == ["other:9092"]
    assert client.admin_kwargs()["bootstrap_servers"] == ["other:9092"]
    assert other.client_config(w).consumer_kwargs()["bootstrap_servers"] == ["k1:9092", "k2:9092"]


# ------------------------------------------------------------------ interval boundary


@pytest.mark.parametrize(
    ("worker_settings", "settings"),
    [
        ({}, {}),  # 10000 vs 60000
        ({}, {"transaction.boundary.interval.ms": "30000"}),  # exactly half
        ({"offset.flush.interval.ms": "60000", "producer.transaction.timeout.ms": "120000"}, {}),
        (
            {"offset.flush.interval.ms": "60000"},
            {"producer.override.transaction.timeout.ms": "120000"},
        ),
    ],
)
def test_interval_boundary_well_below_transaction_timeout_is_accepted(
    worker_settings: dict[str, str], settings: dict[str, str]
) -> None:
    w = worker(**worker_settings)
    all_settings = props(**{"transaction.boundary": "interval", **settings})
    config = ConnectorConfig.from_properties(all_settings, w)
    assert 2 * config.boundary_interval_ms(w) <= config.producer_transaction_timeout_ms(w)
    assert not any(validate_connector(all_settings, w, Fake()).values())
    check_connector(all_settings, w, Fake())


@pytest.mark.parametrize(
    ("worker_settings", "settings", "interval", "timeout"),
    [
        ({"offset.flush.interval.ms": "60000"}, {}, 60000, 60000),  # Connect's defaults
        ({}, {"transaction.boundary.interval.ms": "30001"}, 30001, 60000),
        (
            {"producer.transaction.timeout.ms": "15000"},
            {"transaction.boundary.interval.ms": "10000"},
            10000,
            15000,
        ),
        (
            {"producer.transaction.timeout.ms": "900000"},
            {"producer.override.transaction.timeout.ms": "5000"},
            10000,
            5000,
        ),
    ],
)
def test_interval_boundary_near_transaction_timeout_is_rejected(
    worker_settings: dict[str, str], settings: dict[str, str], interval: int, timeout: int
) -> None:
    w = worker(**worker_settings)
    all_settings = props(**{"transaction.boundary": "interval", **settings})
    expected = (
        f"the commit interval {interval} ms is not well below the producer's "
        f"transaction.timeout.ms={timeout} ms: transactions would time out; lower the interval "
        "or raise producer.override.transaction.timeout.ms (the interval must be at most half "
        "of it)"
    )
    with pytest.raises(ConfigError) as info:
        ConnectorConfig.from_properties(all_settings, w)
    assert info.value.key == "transaction.boundary.interval.ms"
    assert expected in str(info.value)
    reported = validate_connector(all_settings, w, Fake())
    assert len(reported["transaction.boundary.interval.ms"]) == 1
    assert reported["transaction.boundary.interval.ms"][0].startswith(expected)
    with pytest.raises(ConfigError, match="not well below"):
        check_connector(all_settings, w, Fake())


def test_interval_rejection_says_where_the_values_come_from() -> None:
    w = worker(**{"offset.flush.interval.ms": "40000", "producer.transaction.timeout.ms": "60000"})
    reported = validate_connector(props(**{"transaction.boundary": "interval"}), w, Fake())
    (message,) = reported["transaction.boundary.interval.ms"]
    assert "the interval is the worker's offset.flush.interval.ms" in message
    assert "the timeout is the worker's producer.transaction.timeout.ms" in message


@pytest.mark.parametrize("boundary", ["poll", "connector"])
def test_interval_setting_only_applies_with_interval_boundary(boundary: str) -> None:
    settings = props(
        **{"transaction.boundary": boundary, "transaction.boundary.interval.ms": "1000"}
    )
    with pytest.raises(ConfigError, match=r"only applies with transaction\.boundary=interval"):
        ConnectorConfig.from_properties(settings, worker())
    reported = validate_connector(settings, worker(), Fake())
    assert reported["transaction.boundary.interval.ms"] == [
        "transaction.boundary.interval.ms only applies with transaction.boundary=interval "
        f"(it is {boundary}); remove it or use transaction.boundary=interval"
    ]


# ------------------------------------------------------------------ pre-flight checks

REQUIRED = props(**{"exactly.once.support": "required"})
NOT_ENABLED = (
    "exactly.once.support=required needs exactly.once.source.support=enabled on the worker "
    "(it is {mode})"
)
CANNOT = "the connector cannot provide exactly-once delivery with this configuration"
UNKNOWN = (
    "the connector could not determine whether it supports exactly-once delivery with this "
    "configuration; consult its documentation, or use exactly.once.support=requested"
)
NO_BOUNDARIES = (
    "the connector does not support connector-defined transaction boundaries with this "
    "configuration"
)


def test_required_and_supported_passes() -> None:
    reported = validate_connector(REQUIRED, worker(), Fake(ExactlyOnceSupport.SUPPORTED))
    assert reported == {name: [] for name in [*CONNECTOR_CONFIG.keys, "table"]}
    check_connector(REQUIRED, worker(), Fake(ExactlyOnceSupport.SUPPORTED))
    assert parse(**{"exactly.once.support": "required"}).exactly_once_required


@pytest.mark.parametrize("mode", ["disabled", "preparing"])
def test_required_needs_an_enabled_worker(mode: str) -> None:
    w = worker(**{"exactly.once.source.support": mode})
    reported = validate_connector(REQUIRED, w, Fake(ExactlyOnceSupport.SUPPORTED))
    assert reported["exactly.once.support"] == [NOT_ENABLED.format(mode=mode)]
    with pytest.raises(ConfigError, match=r"needs exactly\.once\.source\.support=enabled") as info:
        check_connector(REQUIRED, w, Fake())
    assert info.value.key == "exactly.once.support"


@pytest.mark.parametrize(
    ("connector", "message"),
    [
        (Fake(ExactlyOnceSupport.UNSUPPORTED), CANNOT),
        (Fake(None), UNKNOWN),
        (Unknowing(), UNKNOWN),
    ],
)
def test_required_needs_the_connector_to_say_supported(
    connector: SourceConnector, message: str
) -> None:
    reported = validate_connector(REQUIRED, worker(), connector)
    assert reported["exactly.once.support"] == [message]
    with pytest.raises(ConfigError) as info:
        check_connector(REQUIRED, worker(), connector)
    assert (info.value.key, info.value.value, info.value.allowed) == (
        "exactly.once.support",
        "required",
        message,
    )


def test_requested_never_asks_the_connector() -> None:
    settings = props(**{"exactly.once.support": "requested"})
    disabled = worker(**{"exactly.once.source.support": "disabled"})
    assert not any(validate_connector(settings, disabled, Fake(None)).values())


def test_every_exactly_once_problem_is_reported() -> None:
    w = worker(**{"exactly.once.source.support": "disabled"})
    reported = validate_connector(REQUIRED, w, Fake(ExactlyOnceSupport.UNSUPPORTED))
    assert reported["exactly.once.support"] == [NOT_ENABLED.format(mode="disabled"), CANNOT]


@pytest.mark.parametrize(
    "connector", [Fake(boundaries=ConnectorTransactionBoundaries.UNSUPPORTED), Unknowing()]
)
def test_connector_boundary_needs_support(connector: SourceConnector) -> None:
    settings = props(**{"transaction.boundary": "connector"})
    assert validate_connector(settings, worker(), connector)["transaction.boundary"] == [
        NO_BOUNDARIES
    ]
    with pytest.raises(ConfigError, match="connector-defined transaction boundaries") as info:
        check_connector(settings, worker(), connector)
    assert info.value.key == "transaction.boundary"


def test_connector_boundary_supported_passes() -> None:
    settings = props(**{"transaction.boundary": "connector"})
    check_connector(settings, worker(), Fake())
    assert parse(**{"transaction.boundary": "connector"}).transaction_boundary == "connector"


def test_connector_validate_is_merged() -> None:
    settings = {k: v for k, v in props().items() if k != "table"}
    reported = validate_connector(settings, worker(), Fake())
    assert reported["table"] == [
        "invalid value None for setting 'table': required setting is missing. table to read"
    ]
    with pytest.raises(ConfigError) as info:
        check_connector(settings, worker(), Fake())
    assert str(info.value) == reported["table"][0]


def test_connector_messages_of_its_own_are_wrapped() -> None:
    class Picky(Fake):
        def validate(self, config: Mapping[str, str]) -> dict[str, list[str]]:
            return {"table": ["no such table"]}

    assert validate_connector(props(), worker(), Picky())["table"] == ["no such table"]
    with pytest.raises(ConfigError) as info:
        check_connector(props(), worker(), Picky())
    assert (info.value.key, info.value.value, info.value.allowed) == (
        "table",
        "orders",
        "no such table",
    )


def test_connector_that_raises_is_reported_not_propagated() -> None:
    reported = validate_connector(REQUIRED, worker(), Broken())
    assert reported["connector.class"] == [
        "the connector's validate() failed: RuntimeError('boom')"
    ]
    (message,) = reported["exactly.once.support"]
    assert message.startswith(UNKNOWN)
    assert "cannot tell" in message


def test_without_a_connector_only_its_checks_are_skipped() -> None:
    w = worker(**{"exactly.once.source.support": "preparing"})
    reported = validate_connector(
        props(**{"exactly.once.support": "required", "transaction.boundary": "connector"}), w, None
    )
    assert reported["exactly.once.support"] == [NOT_ENABLED.format(mode="preparing")]
    assert reported["transaction.boundary"] == []


def test_check_connector_raises_the_first_problem_in_order() -> None:
    settings = props(**{"tasks.max": "0", "exactly.once.support": "required"})
    with pytest.raises(ConfigError, match=r"'tasks\.max'"):
        check_connector(settings, worker(), Fake(None))


@pytest.mark.parametrize(
    ("settings", "key", "words"),
    [
        ({"value.converter": "io.confluent.connect.avro.AvroConverter"},
         "value.converter.schema.registry.url", "schema registry"),
        ({"key.converter": "io.confluent.connect.protobuf.ProtobufConverter",
          "key.converter.schema.registry.url": "http://127.0.0.1:1",
          "key.converter.basic.auth.credentials.source": "SASL_INHERIT"},
         "key.converter.basic.auth.credentials.source", "USER_INFO"),
        ({"value.converter": "json", "value.converter.decimal.format": "WORDS"},
         "value.converter.decimal.format", "NUMERIC"),
        ({"value.converter": "no.such.module.Converter"}, "value.converter", "no.such"),
    ],
)  # fmt: skip
def test_converter_settings_are_validated_as_a_task_would_configure_them(
    settings: dict[str, str], key: str, words: str
) -> None:
    reported = validate_connector(props(**settings), worker(), None)
    assert len(reported[key]) == 1, reported
    assert words in reported[key][0]
    with pytest.raises(ConfigError) as raised:
        check_connector(props(**settings), worker(), None)
    assert raised.value.key == key


def test_a_registry_converter_with_its_url_validates_without_reaching_the_registry() -> None:
    settings = props(**{
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": "http://127.0.0.1:1",  # nothing listens
    })  # fmt: skip
    assert not any(validate_connector(settings, worker(), None).values())


def test_a_transaction_timeout_above_the_brokers_limit_is_refused_by_name() -> None:
    from eos.config.connector import transaction_timeout_problems

    key = "producer.override.transaction.timeout.ms"
    (problem,) = transaction_timeout_problems(props(**{key: "900001"}), worker(), 900000)
    assert problem.key == key
    assert "above the brokers' transaction.max.timeout.ms (900000)" in problem.message
    (worker_s,) = transaction_timeout_problems(
        props(), worker(**{"producer.transaction.timeout.ms": "1000000"}), 900000
    )
    assert (worker_s.key, "(the worker's)" in worker_s.message) == (
        "producer.transaction.timeout.ms",
        True,
    )
    assert transaction_timeout_problems(props(**{key: "900000"}), worker(), 900000) == []
    assert transaction_timeout_problems(props(**{key: "900001"}), worker(), None) == []
    elsewhere = props(**{key: "900001", "producer.override.bootstrap.servers": "other:9092"})
    assert transaction_timeout_problems(elsewhere, worker(), 900000) == []  # its own limit
    at_least_once = worker(**{"exactly.once.source.support": "disabled"})
    assert transaction_timeout_problems(props(**{key: "900001"}), at_least_once, 900000) == []
