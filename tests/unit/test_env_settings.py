"""Worker settings from EOS_* environment variables (the container image's way), and
``eos --version``."""

from __future__ import annotations

from pathlib import Path

import pytest

import eos
from eos.errors import ConfigError
from services.cli import main as cli_main
from services.env_settings import NOT_SETTINGS, setting_name, settings_from_env
from services.worker_service import load_worker_settings


@pytest.mark.parametrize(
    ("variable", "setting"),
    [
        ("EOS_BOOTSTRAP_SERVERS", "bootstrap.servers"),
        ("EOS_GROUP_ID", "group.id"),
        ("EOS_CONFIG_PROVIDERS_FILE_CLASS", "config.providers.file.class"),
        ("EOS_SPARK_SQL_SESSION_TIME__ZONE", "spark.sql.session.time_zone"),
        ("EOS_SOME___SETTING", "some-setting"),
        ("EOS_X1_Y2", "x1.y2"),
    ],
)
def test_names_follow_confluents_connect_images(variable: str, setting: str) -> None:
    assert setting_name(variable) == setting


@pytest.mark.parametrize("variable", ["EOS_", "EOS__GROUP", "EOS_GROUP_", "EOS_A____B"])
def test_a_name_that_is_no_setting_is_refused_naming_the_variable(variable: str) -> None:
    with pytest.raises(ConfigError) as raised:
        setting_name(variable)
    assert raised.value.key == variable
    assert "EOS_BOOTSTRAP_SERVERS is bootstrap.servers" in str(raised.value)


def test_only_eos_variables_and_not_the_commands_own() -> None:
    environ = {
        "EOS_BOOTSTRAP_SERVERS": "kafka:9092",
        "EOS_CACHE_DIR": "/var/lib/eos",
        "EOS_LOG_LEVEL": "DEBUG",
        "EOS_URL": "http://w:8083",
        "CONNECT_GROUP_ID": "theirs",
        "PATH": "/usr/bin",
    }
    assert settings_from_env(environ) == {"bootstrap.servers": "kafka:9092"}
    assert {"EOS_CACHE_DIR", "EOS_LOG_LEVEL", "EOS_URL", "EOS_PASSWORD"} <= NOT_SETTINGS


def test_kubernetes_service_links_are_no_settings() -> None:
    """What a pod gets for the Services eos and eos-headless (port rest, 8083): skipped
    without a word, while a real setting with a similar name stays."""
    environ = {
        "EOS_SERVICE_HOST": "10.0.0.7",
        "EOS_SERVICE_PORT": "8083",
        "EOS_SERVICE_PORT_REST": "8083",
        "EOS_PORT": "tcp://10.0.0.7:8083",
        "EOS_PORT_8083_TCP": "tcp://10.0.0.7:8083",
        "EOS_PORT_8083_TCP_PROTO": "tcp",
        "EOS_PORT_8083_TCP_PORT": "8083",
        "EOS_PORT_8083_TCP_ADDR": "10.0.0.7",
        "EOS_HEADLESS_SERVICE_HOST": "10.0.0.8",
        "EOS_HEADLESS_PORT": "tcp://10.0.0.8:8083",
        "EOS_REST_ADVERTISED_PORT": "8083",
        "EOS_GROUP_ID": "orders",
    }
    assert settings_from_env(environ) == {"rest.advertised.port": "8083", "group.id": "orders"}


TOPICS = {
    "EOS_CONFIG_STORAGE_TOPIC": "c-configs",
    "EOS_OFFSET_STORAGE_TOPIC": "c-offsets",
    "EOS_STATUS_STORAGE_TOPIC": "c-status",
}


def test_environment_adds_to_the_file_and_wins(tmp_path: Path) -> None:
    path = tmp_path / "worker.properties"
    path.write_text(
        "bootstrap.servers=file:9092\ngroup.id=from-file\n"
        "config.storage.topic=c\noffset.storage.topic=o\nstatus.storage.topic=s\n"
    )
    settings = load_worker_settings(str(path), {"EOS_GROUP_ID": "from-env"})
    assert settings.bootstrap_servers == ["file:9092"]
    assert settings.raw["group.id"] == "from-env"


def test_environment_alone_is_enough() -> None:
    settings = load_worker_settings(
        None, {"EOS_BOOTSTRAP_SERVERS": "k1:9092,k2:9092", "EOS_GROUP_ID": "g", **TOPICS}
    )
    assert settings.bootstrap_servers == ["k1:9092", "k2:9092"]
    assert settings.raw["offset.storage.topic"] == "c-offsets"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli_main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"eos {eos.__version__}\n"
