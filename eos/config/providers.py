"""Config providers (Kafka's KIP-297 and KIP-887): secrets out of settings files.

A worker file names its providers and configures them::

    config.providers=file,env,dir
    config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider
    config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
    config.providers.env.param.allowlist.pattern=^EOS_.*
    config.providers.dir.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider

and any value of the worker file or of a connector config may then hold variables:

- ``${file:PATH:KEY}``: the value of KEY in the properties file PATH;
- ``${env:NAME}``: the environment variable NAME (only names matching the provider's
  ``allowlist.pattern``, when it has one);
- ``${dir:PATH:FILE}``: the content of the file FILE in the directory PATH.

A class is given by Kafka's class name (the three above), a name of the ``eos.config_providers``
entry-point group (``file``, ``env`` and ``dir`` are installed), or a class path
(``module:Class``) of a :class:`ConfigProvider` subclass of one's own. ``param.allowed.paths``
(KIP-993) limits the file and dir providers to some directories.

Variables are resolved by the worker that runs the connector or task, each time it starts it;
what is stored (the config topic), logged, reported (status traces) or answered (REST)
keeps the ``${…}`` form. Unlike Kafka, which leaves a variable it cannot resolve as it is,
an unknown provider, a missing file or a missing key is an error naming the setting.
"""

from __future__ import annotations

import importlib
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Final

from eos.errors import ConfigError

ENTRY_POINT_GROUP: Final = "eos.config_providers"
PROVIDERS: Final = "config.providers"
VARIABLE: Final = re.compile(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}")
"""Kafka's variable syntax: ``${provider:[path:]key}``."""

TaskConfigsSink = Callable[[str, list[dict[str, str]]], Awaitable[None]]

KAFKA_CLASSES: Final = {
    "org.apache.kafka.common.config.provider.FileConfigProvider": "file",
    "org.apache.kafka.common.config.provider.EnvVarConfigProvider": "env",
    "org.apache.kafka.common.config.provider.DirectoryConfigProvider": "dir",
}


class ConfigProvider(ABC):
    """A source of values for ``${name:path:key}`` variables (Kafka's ``ConfigProvider``)."""

    def configure(self, params: Mapping[str, str]) -> None:
        """The provider's ``config.providers.<name>.param.*`` settings (prefix removed)."""

    @abstractmethod
    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        """The values of ``keys`` at ``path`` (``path`` is empty for ``${name:key}``).
        Raise :class:`LookupError` with a message for a path or key that is not there."""

    def close(self) -> None:
        """Release what :meth:`configure` acquired."""


class _Paths:
    """``allowed.paths`` of the file and directory providers (KIP-993)."""

    def __init__(self) -> None:
        self.allowed: list[Path] = []

    def configure(self, params: Mapping[str, str]) -> None:
        raw = params.get("allowed.paths", "")
        self.allowed = [Path(p.strip()).resolve() for p in raw.split(",") if p.strip()]

    def check(self, path: Path) -> Path:
        resolved = path.resolve()
        if self.allowed and not any(resolved.is_relative_to(a) for a in self.allowed):
            allowed = ", ".join(map(str, self.allowed))
            raise LookupError(f"{path} is outside the provider's allowed.paths ({allowed})")
        return resolved


class FileConfigProvider(ConfigProvider):
    """``${file:PATH:KEY}``: KEY of the Java properties file PATH."""

    def __init__(self) -> None:
        self.paths = _Paths()

    def configure(self, params: Mapping[str, str]) -> None:
        self.paths.configure(params)

    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        from eos.config.files import load_properties

        file = self.paths.check(Path(path))
        if not file.is_file():
            raise LookupError(f"the file {path} does not exist (or is not readable)")
        values = load_properties(file)
        absent = sorted(keys - values.keys())
        if absent:
            raise LookupError(f"the file {path} has no key {', '.join(absent)}")
        return {key: values[key] for key in keys}


class DirectoryConfigProvider(ConfigProvider):
    """``${dir:PATH:FILE}``: the content of PATH/FILE (e.g. a Kubernetes secret volume)."""

    def __init__(self) -> None:
        self.paths = _Paths()

    def configure(self, params: Mapping[str, str]) -> None:
        self.paths.configure(params)

    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        directory = self.paths.check(Path(path))
        if not directory.is_dir():
            raise LookupError(f"the directory {path} does not exist")
        values = {}
        for key in keys:
            file = directory / key
            if "/" in key or not file.is_file():
                raise LookupError(f"the directory {path} has no file {key}")
            values[key] = file.read_text()
        return values


class EnvVarConfigProvider(ConfigProvider):
    """``${env:NAME}``: the environment variable NAME, if it matches ``allowlist.pattern``."""

    def __init__(self) -> None:
        self.allowed: re.Pattern[str] | None = None

    def configure(self, params: Mapping[str, str]) -> None:
        pattern = params.get("allowlist.pattern")
        self.allowed = re.compile(pattern) if pattern else None

    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        values = {}
        for key in keys:
            if self.allowed is not None and not self.allowed.fullmatch(key):
                raise LookupError(
                    f"the environment variable {key} does not match the provider's "
                    f"allowlist.pattern {self.allowed.pattern}"
                )
            if key not in os.environ:
                raise LookupError(f"the environment variable {key} is not set")
            values[key] = os.environ[key]
        return values


def _load(name: str, target: str) -> ConfigProvider:
    key = f"{PROVIDERS}.{name}.class"
    target = KAFKA_CLASSES.get(target, target)
    aliases = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    path = aliases.get(target, target)
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    try:
        cls: Any = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        known = ", ".join(sorted(aliases))
        raise ConfigError(key, target, f"no such config provider ({exc}); known: {known}") from None
    if not (isinstance(cls, type) and issubclass(cls, ConfigProvider)):
        raise ConfigError(key, target, "not a eos.config.providers.ConfigProvider")
    provider: ConfigProvider = cls()
    return provider


class ConfigProviders:
    """The providers a worker file configures, and variable resolution with them."""

    def __init__(self, providers: Mapping[str, ConfigProvider]) -> None:
        self.providers = dict(providers)

    @classmethod
    def from_worker(cls, props: Mapping[str, str]) -> ConfigProviders:
        """Providers of a worker file's ``config.providers*`` settings."""
        names = [n.strip() for n in props.get(PROVIDERS, "").split(",") if n.strip()]
        providers = {}
        for name in names:
            target = props.get(f"{PROVIDERS}.{name}.class")
            if not target:
                raise ConfigError(
                    f"{PROVIDERS}.{name}.class", None, f"{PROVIDERS} names {name}: give its class"
                )
            provider = _load(name, target)
            prefix = f"{PROVIDERS}.{name}.param."
            provider.configure(
                {k.removeprefix(prefix): v for k, v in props.items() if k.startswith(prefix)}
            )
            providers[name] = provider
        return cls(providers)

    def resolve(self, props: Mapping[str, str]) -> dict[str, str]:
        """``props`` with every variable replaced; a :class:`ConfigError` names the first
        setting that cannot be resolved (showing the variable, never a value)."""
        resolved = {}
        for key, value in props.items():
            resolved[key] = self.resolve_value(key, value) if "${" in value else value
        return resolved

    def resolve_value(self, key: str, value: str) -> str:
        def substitute(match: re.Match[str]) -> str:
            name, path, item = match.group(1), match.group(2) or "", match.group(3)
            provider = self.providers.get(name)
            if provider is None:
                known = ", ".join(sorted(self.providers)) or "none"
                raise ConfigError(
                    key, value, f"unknown config provider {name!r} (config.providers: {known})"
                )
            try:
                return provider.get(path, {item})[item]
            except LookupError as exc:
                raise ConfigError(key, value, str(exc).strip("'\"")) from None

        return VARIABLE.sub(substitute, value)

    def problems(self, props: Mapping[str, str]) -> tuple[dict[str, str], dict[str, list[str]]]:
        """(``props`` resolved where possible, problems per setting that is not)."""
        resolved, problems = dict(props), {}
        for key, value in props.items():
            if "${" not in value:
                continue
            try:
                resolved[key] = self.resolve_value(key, value)
            except ConfigError as exc:
                problems[key] = [str(exc)]
        return resolved, problems

    def checked(
        self,
        props: Mapping[str, str],
        validate: Callable[[Mapping[str, str]], dict[str, list[str]]],
    ) -> dict[str, list[str]]:
        """``validate``'s problems of ``props`` resolved, and those of the variables; a
        resolved value is never in a message (its variable is shown instead)."""
        resolved, problems = self.problems(props)
        found = validate(resolved)
        secrets = {
            resolved[k]: props[k] for k in props if resolved[k] != props[k] and len(resolved[k]) > 2
        }
        for key, messages in found.items():
            if key not in problems:
                problems[key] = [_scrub(m, secrets) for m in messages]
        return problems

    def close(self) -> None:
        for provider in self.providers.values():
            provider.close()


def _scrub(message: str, secrets: Mapping[str, str]) -> str:
    for value, variable in secrets.items():
        message = message.replace(value, variable)
    return message


def task_configs_sink(raw: Mapping[str, str], sink: TaskConfigsSink) -> TaskConfigsSink:
    """``sink`` (where a connector's task configs go) receiving them :func:`reverse`-d
    against the connector's config as stored (``raw``)."""

    async def submit(name: str, configs: list[dict[str, str]]) -> None:
        await sink(name, [reverse(raw, config) for config in configs])

    return submit


def has_variables(value: str) -> bool:
    return VARIABLE.search(value) is not None


def reverse(raw: Mapping[str, str], resolved: Mapping[str, str]) -> dict[str, str]:
    """Task configs as the config topic keeps them: a value the connector copied from a
    setting that held variables gets the variables back (Kafka Connect's reverseTransform),
    so a task config never carries a resolved secret."""
    return {
        key: raw[key] if key in raw and has_variables(raw[key]) else value
        for key, value in resolved.items()
    }


def resolve_worker_file(props: Mapping[str, str]) -> dict[str, str]:
    """A worker file's settings with its variables resolved by its own providers."""
    providers = ConfigProviders.from_worker(props)
    try:
        return {
            key: value if key.startswith(PROVIDERS) else providers.resolve({key: value})[key]
            for key, value in props.items()
        }
    finally:
        providers.close()
