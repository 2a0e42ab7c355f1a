"""Converters resolved as Kafka Connect resolves them (eos/config/converters.py): the
worker's key, value and header converters, with their settings, are every connector's
unless it names its own, which then replaces the worker's whole; validation, the parsed
config and the task agree; a worker's bad converter stops it at start naming the setting.
Connect's number converters and SimpleHeaderConverter byte for byte (Kafka's serializers
themselves: tests/integration/test_connect_number_header_converters.py)."""

from __future__ import annotations

import math
import re
import struct
from typing import Any

import pytest
from structlog.testing import capture_logs

from eos.config import ConnectorConfig, WorkerConfig
from eos.config.converters import converters_in_force
from eos.converters import make_converter, make_header_converter
from eos.errors import ConfigError, DataError, PluginError
from eos.runtime.validation import validate_connector
from services.worker_service import worker_settings
from tests.unit.test_config_connector import BASE, WORKER

AVRO = "io.confluent.connect.avro.AvroConverter"
REGISTRY = "http://registry.invalid:8081"
AVRO_WORKER = {
    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    "value.converter": AVRO,
    "value.converter.schema.registry.url": REGISTRY,
    "value.converter.basic.auth.credentials.source": "USER_INFO",
    "value.converter.basic.auth.user.info": "u:p",
}
NUMBERS = "org.apache.kafka.connect.converters."
SIMPLE = "org.apache.kafka.connect.storage.SimpleHeaderConverter"


def worker(**settings: str) -> WorkerConfig:
    return WorkerConfig.from_properties({**WORKER, **settings})


def parse(worker_settings: dict[str, str], **settings: str) -> ConnectorConfig:
    return ConnectorConfig.from_properties({**BASE, **settings}, worker(**worker_settings))


def test_a_connector_without_converters_uses_the_workers_with_the_workers_settings() -> None:
    config = parse(AVRO_WORKER)
    assert config.value_converter == AVRO
    assert config.value_converter.props == {
        "schema.registry.url": REGISTRY,
        "basic.auth.credentials.source": "USER_INFO",
        "basic.auth.user.info": "u:p",
    }
    assert config.key_converter == "org.apache.kafka.connect.storage.StringConverter"
    assert config.header_converter == SIMPLE  # neither names one: Connect's default


def test_a_connectors_own_converter_replaces_the_workers_whole() -> None:
    config = parse(AVRO_WORKER, **{"value.converter": "json",
                                   "value.converter.schemas.enable": "true"})  # fmt: skip
    assert config.value_converter == "json"
    assert config.value_converter.props == {"schemas.enable": "true"}  # no registry URL
    assert config.key_converter == "org.apache.kafka.connect.storage.StringConverter"


def test_a_connectors_settings_for_the_workers_converter_are_ignored_with_a_warning() -> None:
    with capture_logs() as logs:
        config = parse(AVRO_WORKER, **{"value.converter.schema.registry.url": "http://other"})
    assert config.value_converter.props["schema.registry.url"] == REGISTRY
    (warning,) = [e for e in logs if e.get("setting") == "value.converter.schema.registry.url"]
    assert warning["log_level"] == "warning"
    assert warning["converter"] == "value.converter"
    assert "set the converter on the connector" in warning["event"]


def test_without_a_converter_on_either_side_the_connectors_settings_lie_over_the_workers() -> None:
    props = converters_in_force(
        {"value.converter.schemas.enable": "true"},
        {"value.converter.schemas.enable": "false", "value.converter.decimal.format": "NUMERIC"},
    )
    assert props == {
        "value.converter.schemas.enable": "true",
        "value.converter.decimal.format": "NUMERIC",
    }


def test_the_header_converter_is_inherited_too() -> None:
    config = parse({"header.converter": "org.apache.kafka.connect.storage.StringConverter"})
    assert config.header_converter == "org.apache.kafka.connect.storage.StringConverter"


def test_validation_checks_the_converters_in_force() -> None:
    settings = worker(**{"value.converter": AVRO})  # no registry URL on the worker
    problems = validate_connector({**BASE}, settings, None)
    assert problems["value.converter.schema.registry.url"] != []
    overridden = validate_connector({**BASE, "value.converter": "json"}, settings, None)
    assert not any(overridden.values())


@pytest.mark.parametrize(
    ("settings", "key", "says"),
    [
        ({"value.converter": "io.acme.XmlConverter"}, "value.converter", "unknown converter"),
        ({"value.converter": AVRO}, "value.converter.schema.registry.url", "schema registry"),
        ({"header.converter": AVRO}, "header.converter", "cannot convert headers"),
        ({"key.converter": "json", "key.converter.schemas.enable": "maybe"},
         "key.converter.schemas.enable", "true or false"),
    ],
)  # fmt: skip
def test_a_bad_worker_converter_stops_the_worker_naming_the_setting(
    settings: dict[str, str], key: str, says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        worker_settings({**WORKER, **settings})
    assert caught.value.key == key
    assert says in str(caught.value)


def test_worker_converter_settings_are_not_unknown_settings() -> None:
    with capture_logs() as logs:
        worker_settings({**WORKER, **AVRO_WORKER, "header.converter": SIMPLE})
    assert [e for e in logs if e["event"].startswith("unknown worker setting")] == []


# ------------------------------------------------------------------ number converters

LAYOUTS: list[tuple[str, str, Any]] = [
    ("Short", ">h", -2),
    ("Short", ">h", 32767),
    ("Integer", ">i", -(2**31)),
    ("Integer", ">i", 70000),
    ("Long", ">q", 2**63 - 1),
    ("Long", ">q", -1),
    ("Float", ">f", 0.1),
    ("Float", ">f", -3),
    ("Double", ">d", 12345.678),
    ("Double", ">d", math.inf),
]


@pytest.mark.parametrize(("java", "layout", "value"), LAYOUTS)
def test_number_converters_write_big_endian_and_read_it_back(
    java: str, layout: str, value: Any
) -> None:
    converter: Any = make_converter(f"{NUMBERS}{java}Converter")
    data = converter.convert("t", value)
    assert data == struct.pack(layout, value)
    assert converter.reader()(data) == struct.unpack(layout, data)[0]
    assert converter.convert("t", None) is None


def test_the_boolean_converter_writes_one_byte() -> None:
    converter: Any = make_converter(f"{NUMBERS}BooleanConverter")
    assert (converter.convert("t", True), converter.convert("t", False)) == (b"\x01", b"\x00")
    with pytest.raises(DataError, match="Unexpected byte"):
        converter.reader()(b"\x02")


@pytest.mark.parametrize(
    ("java", "value"),
    [("Short", 32768), ("Integer", "7"), ("Long", True), ("Long", 1.5), ("Float", 1e39),
     ("Boolean", 1), ("Double", "x")],
)  # fmt: skip
def test_a_value_a_number_converter_cannot_write_is_a_data_error(java: str, value: Any) -> None:
    with pytest.raises(DataError, match=f"Failed to serialize to {java}"):
        make_converter(f"{NUMBERS}{java}Converter").convert("t", value)


# ------------------------------------------------------------------ header converters


def test_simple_header_converter_writes_text_and_reads_it_back_typed() -> None:
    converter = make_header_converter(SIMPLE)
    assert converter.from_connect_header("t", "h", None, [1, 2.5]) == b"[1,2.5]"
    assert converter.from_connect_header("t", "h", None, 1.0) == b"1.0"
    schema, value = converter.to_connect_header("t", "h", b"[1, 2.5]")
    assert (schema.type.name, schema.value_schema.type.name, value) == (
        "ARRAY",
        "FLOAT32",
        [1.0, 2.5],
    )
    assert converter.to_connect_header("t", "h", b"40000")[0].type.name == "INT32"
    assert converter.to_connect_header("t", "h", b"not [ a list")[1] == "not [ a list"


@pytest.mark.parametrize(
    "name", [SIMPLE, "org.apache.kafka.connect.storage.StringConverter",
             "org.apache.kafka.connect.converters.ByteArrayConverter",
             "org.apache.kafka.connect.json.JsonConverter", f"{NUMBERS}LongConverter"],
)  # fmt: skip
def test_connects_header_converters_are_header_converters(name: str) -> None:
    assert callable(make_header_converter(name).from_connect_header)


def test_a_registry_converter_is_no_header_converter() -> None:
    with pytest.raises(PluginError, match="cannot convert headers"):
        make_header_converter(AVRO, {"schema.registry.url": REGISTRY})


# ------------------------------------------------------------------ honoured, refused, unknown


@pytest.mark.parametrize(
    ("setting", "value", "says"),
    [
        ("connect.meta.data", "false", "only true is"),
        ("context.name.strategy", "MyStrategy", "schema.registry.url"),
        ("latest.cache.ttl.sec", "60", "never expires"),
        ("use.schema.id", "3", "use.latest.version"),
    ],
)
def test_a_confluent_setting_eos_does_not_implement_is_refused_by_name(
    setting: str, value: str, says: str
) -> None:
    props = {**BASE, "value.converter": AVRO, "value.converter.schema.registry.url": REGISTRY,
             f"value.converter.{setting}": value}  # fmt: skip
    problems = validate_connector(props, worker(), None)
    (message,) = problems[f"value.converter.{setting}"]
    assert f"eos does not support {setting}" in message
    assert says in message


def test_a_refused_setting_at_the_value_eos_acts_as_is_accepted() -> None:
    props = {**BASE, "value.converter": AVRO, "value.converter.schema.registry.url": REGISTRY,
             "value.converter.connect.meta.data": "true",
             "value.converter.enhanced.avro.schema.support": "false"}  # fmt: skip
    assert not any(validate_connector(props, worker(), None).values())


def test_every_setting_eos_honours_passes_without_a_warning() -> None:
    honoured = {
        "auto.register.schemas": "false", "use.latest.version": "true",
        "latest.compatibility.strict": "false", "normalize.schemas": "true",
        "value.subject.name.strategy": "RecordNameStrategy",
        "basic.auth.credentials.source": "USER_INFO", "basic.auth.user.info": "u:p",
        "schema.registry.request.timeout.ms": "5000",
    }  # fmt: skip
    props = {**BASE, "value.converter": AVRO, "value.converter.schema.registry.url": REGISTRY,
             **{f"value.converter.{k}": v for k, v in honoured.items()}}  # fmt: skip
    with capture_logs() as logs:
        problems = validate_connector(props, worker(), None)
    assert not any(problems.values())
    assert [e for e in logs if "unknown converter setting" in e["event"]] == []


def test_an_unknown_converter_setting_is_a_warning_naming_it() -> None:
    props = {**BASE, "value.converter": "json", "value.converter.schemas.enabel": "true"}
    with capture_logs() as logs:
        problems = validate_connector(props, worker(), None)
    assert not any(problems.values())
    (warning,) = [e for e in logs if "unknown converter setting" in e["event"]]
    assert (warning["log_level"], warning["setting"]) == (
        "warning",
        "value.converter.schemas.enabel",
    )


def test_an_unknown_worker_converter_setting_is_a_warning_at_start() -> None:
    with capture_logs() as logs:
        worker_settings({**WORKER, "key.converter": "json", "key.converter.decimal.fromat": "x"})
    assert [e["setting"] for e in logs if "unknown converter setting" in e["event"]] == [
        "key.converter.decimal.fromat"
    ]


def test_a_connector_sees_the_converters_in_force_but_not_the_workers_secrets() -> None:
    from eos.config.converters import connector_view

    view = connector_view(
        {**BASE, "key.converter": AVRO, "key.converter.basic.auth.user.info": "mine:own"},
        {**AVRO_WORKER, "key.converter": "json"},
    )
    assert view["value.converter"] == AVRO  # SparkSource knows not to write JSON itself
    assert view["value.converter.schema.registry.url"] == REGISTRY
    assert "value.converter.basic.auth.user.info" not in view  # could reach task configs
    assert view["key.converter.basic.auth.user.info"] == "mine:own"  # its own, as given


def test_registry_credentials_are_secrets_hidden_in_rest_answers() -> None:
    from services.rest.hidden import hidden

    shown = hidden({**BASE, "value.converter.basic.auth.user.info": "u:p",
                    "value.converter.schema.registry.ssl.key.password": "k"})  # fmt: skip
    assert shown["value.converter.basic.auth.user.info"] == "[hidden]"
    assert shown["value.converter.schema.registry.ssl.key.password"] == "[hidden]"


def test_a_misspelt_converter_class_is_named_with_the_one_meant() -> None:
    meant = re.escape("did you mean 'io.confluent.connect.avro.AvroConverter'?")
    with pytest.raises(PluginError, match=meant):
        make_converter("io.confluent.connect.avro.AvroConvertor")
