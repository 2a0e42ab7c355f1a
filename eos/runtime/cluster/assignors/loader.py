"""Finding assignors: by name from the ``eos.assignors`` entry-point group (the
four bundled ones and any a user installs), or by class path
(``package.module:Class`` or ``package.module.Class``) of an
:class:`~eos.runtime.cluster.assignors.base.Assignor` subclass.

A plugin registers its assignor in its own ``pyproject.toml``::

    [project.entry-points."eos.assignors"]
    my-assignor = "my_package.assignor:MyAssignor"
"""

from __future__ import annotations

import inspect
from importlib.metadata import entry_points

from eos.errors import ConfigError, PluginError
from eos.runtime.cluster.assignors.base import Assignor, AssignorSettings
from eos.runtime.plugins import load_class

ENTRY_POINT_GROUP = "eos.assignors"


def available_assignors() -> dict[str, str]:
    """Name → ``module:Class`` of every installed assignor."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def make_assignor(name: str, settings: AssignorSettings) -> Assignor:
    """The assignor the worker setting ``assignor`` names, made with ``settings``."""
    known = available_assignors()
    allowed = (
        f"one of {', '.join(sorted(known)) or 'none installed'}, or a class path "
        "(package.module:Class) of an eos.runtime.cluster.assignors.base.Assignor subclass"
    )
    target = known.get(name) or (name if ":" in name or "." in name else None)
    if target is None:
        raise ConfigError("assignor", name, allowed)
    try:
        cls = load_class(target)
    except PluginError as exc:
        raise ConfigError("assignor", name, f"{exc}; use {allowed}") from exc
    if not issubclass(cls, Assignor) or inspect.isabstract(cls):
        raise ConfigError("assignor", name, f"not a concrete Assignor subclass; use {allowed}")
    assignor: Assignor = cls(settings)
    return assignor
