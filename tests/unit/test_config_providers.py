"""Config providers (KIP-297, KIP-887): ${file:…}, ${env:…}, ${dir:…} resolved; every
problem one ConfigError naming the setting and showing the variable, never a value."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from eos.config.providers import (
    ConfigProvider,
    ConfigProviders,
    EnvVarConfigProvider,
    resolve_worker_file,
    reverse,
)
from eos.errors import ConfigError

SECRET = "s3ntinel-Pa55word"
KAFKA = "org.apache.kafka.common.config.provider."


def providers(tmp_path: Path, **params: str) -> ConfigProviders:
    props = {
        "config.providers": "file,env,dir",
        "config.providers.file.class": f"{KAFKA}FileConfigProvider",
        "config.providers.env.class": "env",
        "config.providers.dir.class": "eos.config.providers:DirectoryConfigProvider",
        **params,
    }
    return ConfigProviders.from_worker(props)


def test_file_env_and_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "secrets.properties").write_text(f"password={SECRET}\nuser=eos\n")
    (tmp_path / "vol").mkdir()
    (tmp_path / "vol" / "token").write_text("tok")
    monkeypatch.setenv("EOS_USER", "alice")
    resolved = providers(tmp_path).resolve(
        {
            "a": f"${{file:{tmp_path}/secrets.properties:password}}",
            "b": f'user="${{env:EOS_USER}}" x="${{dir:{tmp_path}/vol:token}}"',
            "c": "plain",
        }
    )
    assert resolved == {"a": SECRET, "b": 'user="alice" x="tok"', "c": "plain"}


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("${file:{d}/none.properties:password}", "none.properties does not exist"),
        ("${file:{d}/secrets.properties:nope}", "has no key nope"),
        ("${vault:kv/eos:password}", "unknown config provider 'vault' (config.providers: dir"),
        ("${env:HOME}", "does not match the provider's allowlist.pattern EOS_.*"),
        ("${env:EOS_UNSET_FOR_TEST}", "the environment variable EOS_UNSET_FOR_TEST is not set"),
        ("${dir:{d}:nothing}", "has no file nothing"),
        ("${file:/etc/hosts:x}", "is outside the provider's allowed.paths"),
    ],
)
def test_each_problem_names_the_setting(tmp_path: Path, value: str, says: str) -> None:
    (tmp_path / "secrets.properties").write_text(f"password={SECRET}\n")
    configured = providers(
        tmp_path,
        **{
            "config.providers.env.param.allowlist.pattern": "EOS_.*",
            "config.providers.file.param.allowed.paths": str(tmp_path),
        },
    )
    value = value.replace("{d}", str(tmp_path))
    with pytest.raises(ConfigError) as raised:
        configured.resolve({"sasl.jaas.config": value})
    assert raised.value.key == "sasl.jaas.config"
    assert says in str(raised.value)
    assert value in str(raised.value)
    assert SECRET not in str(raised.value)


def test_unknown_provider_class_and_missing_class() -> None:
    with pytest.raises(ConfigError, match=r"config\.providers\.x\.class"):
        ConfigProviders.from_worker({"config.providers": "x", "config.providers.x.class": "no.Pe"})
    with pytest.raises(ConfigError, match="give its class"):
        ConfigProviders.from_worker({"config.providers": "x"})


class Upper(ConfigProvider):
    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        return {k: k.upper() for k in keys}


def test_a_provider_of_ones_own_and_the_worker_file(tmp_path: Path) -> None:
    props = {
        "config.providers": "up",
        "config.providers.up.class": f"{__name__}:Upper",
        "sasl.password": "${up:abc}",
    }
    assert resolve_worker_file(props)["sasl.password"] == "ABC"
    assert resolve_worker_file(props)["config.providers.up.class"] == f"{__name__}:Upper"
    assert isinstance(EnvVarConfigProvider(), ConfigProvider)


def test_task_configs_keep_the_variables() -> None:
    raw = {"topic": "t", "password": "${file:/s:p}"}
    task = {"topic": "t", "password": SECRET, "task.id": "0"}
    assert reverse(raw, task) == {"topic": "t", "password": "${file:/s:p}", "task.id": "0"}


def test_validation_problems_never_show_a_resolved_value(tmp_path: Path) -> None:
    (tmp_path / "s.properties").write_text(f"n={SECRET}\n")
    variable = f"${{file:{tmp_path}/s.properties:n}}"

    def validate(props: Mapping[str, str]) -> dict[str, list[str]]:
        return {"tasks.max": [f"invalid value {props['tasks.max']!r}"]}

    problems = providers(tmp_path).checked({"tasks.max": variable, "x": "${nope:y}"}, validate)
    assert problems["tasks.max"] == [f"invalid value {variable!r}"]
    assert "unknown config provider 'nope'" in problems["x"][0]
