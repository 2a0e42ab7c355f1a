"""Finding connector classes: by alias from the ``eos.connectors`` entry-point group,
or by dotted class path (``package.module:Class`` or ``package.module.Class``)."""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points
from typing import Any

import structlog

from eos.api import SourceConnector
from eos.errors import PluginError

log = structlog.get_logger(__name__)

ENTRY_POINT_GROUP = "eos.connectors"


@cache
def available_connectors() -> dict[str, str]:
    """Alias → ``module:Class`` of every installed connector plugin."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def reserved_worker_prefixes() -> tuple[str, ...]:
    """The worker-setting prefixes every installed connector plugin declares
    (``SourceConnector.worker_settings``); a plugin that cannot be loaded is skipped."""
    prefixes: set[str] = set()
    for alias in available_connectors():
        try:
            prefixes.update(connector_class(alias).worker_settings)
        except PluginError as exc:
            log.warning("connector plugin not loadable", plugin=alias, error=str(exc))
    return tuple(sorted(prefixes))


def load_class(path: str) -> type[Any]:
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise PluginError(f"{path!r} is not a class path (expected package.module:Class)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PluginError(f"cannot import {module_name!r} for {path!r}: {exc}") from exc
    found = getattr(module, attr, None)
    if not isinstance(found, type):
        raise PluginError(f"{path!r}: module {module_name!r} has no class {attr!r}")
    return found


def connector_class(name: str) -> type[SourceConnector]:
    """The SourceConnector class for ``connector.class``: an alias or a class path."""
    aliases = available_connectors()
    if name in aliases:
        target = aliases[name]
    elif "." in name or ":" in name:
        target = name
    else:
        known = ", ".join(sorted(aliases)) or "none installed"
        raise PluginError(f"unknown connector.class {name!r}: known aliases are {known}")
    cls = load_class(target)
    if not issubclass(cls, SourceConnector):
        raise PluginError(f"connector.class {name!r} is not a eos.api.SourceConnector")
    return cls
