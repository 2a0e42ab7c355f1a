"""Connector files: one connector's settings per file, as ``eos worker``, the ``eos
connectors`` commands and the worker's ``connectors.dir`` read them.

A **connector file** is one connector's settings:

- ``.properties`` / ``.conf``: Java properties, as a worker reads them;
- ``.json`` / ``.yaml`` / ``.yml``: a mapping of settings (nested mappings are
  flattened with dots, :func:`eos.config.files.flatten`), or Kafka Connect's
  create body ``{"name": ..., "config": {...}}`` (optionally with
  ``"initial_state"``), so ``eos connectors describe NAME --json`` and the files
  written for ``curl -X POST /connectors`` can be applied as they are.

It must name the connector (``name``) and its plugin (``connector.class``); the
settings sent always include ``name`` (Connect's validation requires it).

A structured file may also say the connector's ``state`` (``RUNNING``, ``PAUSED`` or
``STOPPED``, as Strimzi's ``KafkaConnector`` ``spec.state``), which ``connectors.dir``
keeps it in, and a ``restart`` number: raising it restarts the connector and its tasks
once (Strimzi's ``strimzi.io/restart`` annotation; the number is kept in the connector's
``declared.restart`` setting, so a new leader does not restart it again).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from eos.config.files import flatten, load_config_file
from eos.errors import ConfigError

INITIAL_STATES = ("RUNNING", "PAUSED", "STOPPED")
_STRUCTURED = (".json", ".yaml", ".yml")
SUFFIXES = (".properties", ".conf", *_STRUCTURED)
"""What a connector file in a directory is named."""


def files_in(directory: Path) -> list[Path]:
    """The connector files of ``directory``, by name: hidden entries are skipped (a mounted
    ConfigMap's ``..data`` and its versions), and so is a link left dangling (kubelet has
    swapped ``..data`` and not yet removed it)."""
    return sorted(
        p for p in directory.iterdir()
        if not p.name.startswith(".") and p.suffix.lower() in SUFFIXES and p.exists()
    )  # fmt: skip


def expand_directories(paths: Sequence[str]) -> list[str]:
    """``paths`` with each directory replaced by its connector files."""
    expanded: list[str] = []
    for path in paths:
        if Path(path).is_dir():
            expanded += [str(p) for p in files_in(Path(path))]
        else:
            expanded.append(path)
    return expanded


@dataclass(frozen=True)
class ConnectorFile:
    path: str
    name: str
    config: dict[str, str]
    initial_state: str | None = None
    state: str | None = None
    """The state the connector is kept in (``connectors.dir``): RUNNING, PAUSED or STOPPED;
    None: RUNNING, as Strimzi's ``spec.state``."""
    restart: int | None = None
    """The file's ``restart`` number (None: it has none)."""


def read_connectors(paths: Sequence[str]) -> tuple[list[ConnectorFile], list[str]]:
    """The good connectors of ``paths``, and every problem of the others (a name
    given twice is a problem of the later file)."""
    found: list[ConnectorFile] = []
    problems: list[str] = []
    first_file: dict[str, str] = {}
    for path in paths:
        connector, own = read_connector(path)
        problems += own
        if connector is None:
            continue
        if connector.name in first_file:
            problems.append(
                f"{path}: connector {connector.name!r} is also in {first_file[connector.name]}"
            )
            continue
        first_file[connector.name] = path
        found.append(connector)
    return found, problems


def read_connector(path: str) -> tuple[ConnectorFile | None, list[str]]:
    """The connector of one file, or None, and the file's problems."""
    try:
        name, config, initial, state, restart = _load(path)
    except ConfigError as exc:
        return None, [f"{path}: {exc.allowed}"]
    problems = []
    if not name:
        problems.append(f"{path}: no name: add name=<connector name>")
    if not config.get("connector.class"):
        problems.append(
            f"{path}: no connector.class: add connector.class=<plugin class or alias> "
            "(eos plugins list shows them)"
        )
    if initial is not None and initial.upper() not in INITIAL_STATES:
        problems.append(f"{path}: initial_state {initial!r} is not one of {INITIAL_STATES}")
    if state is not None and state.upper() not in INITIAL_STATES:
        problems.append(f"{path}: state {state!r} is not one of {INITIAL_STATES}")
    if restart is not None and (type(restart) is not int or restart < 0):
        problems.append(f"{path}: restart {restart!r} is not a whole number of 0 or more")
    if problems:
        return None, problems
    config = {"name": name, **config}  # a create body may leave it out of its config
    return ConnectorFile(
        path,
        name,
        config,
        initial.upper() if initial else None,
        state.upper() if state else None,
        restart if type(restart) is int else None,
    ), []


def _load(path: str) -> tuple[str, dict[str, str], str | None, str | None, object]:
    """(name, flat settings, initial state, state, restart) of a connector file."""
    if Path(path).suffix.lower() not in _STRUCTURED:
        if not Path(path).is_file():
            raise ConfigError("<file>", path, "cannot be read (no such file)")
        config = load_config_file(path)
        return config.get("name", ""), config, None, None, None
    data = structured(path)
    if isinstance(data, Mapping) and isinstance(data.get("config"), Mapping):
        config = flatten(data["config"], source=path)
        name = data.get("name")
        if name is not None and not isinstance(name, str):
            raise ConfigError("<file>", path, f"'name' must be a string, not {name!r}")
        inner = config.get("name")
        if name and inner and inner != name:
            raise ConfigError("<file>", path, f"'name' is {name!r} but config.name is {inner!r}")
        initial, state = data.get("initial_state"), data.get("state")
        return (
            name or inner or "",
            config,
            None if initial is None else str(initial),
            None if state is None else str(state),
            data.get("restart"),
        )
    config = flatten(data, source=path)
    return config.get("name", ""), config, None, None, None


def structured(path: str) -> Any:
    """The parsed content of a JSON or YAML file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = "no such file" if isinstance(exc, FileNotFoundError) else str(exc)
        raise ConfigError("<file>", path, f"cannot be read ({reason})") from None
    if Path(path).suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError("<file>", path, f"not valid JSON ({exc})") from None
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ConfigError("<file>", path, f"not valid YAML ({where}{exc.problem})") from None
    except yaml.YAMLError as exc:
        raise ConfigError("<file>", path, f"not valid YAML ({exc})") from None
