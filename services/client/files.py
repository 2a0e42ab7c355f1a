"""The files the client reads, checked before anything is sent: every problem of
every file is collected, so one run names them all (:class:`BadFiles`).

A **connector file** is one connector's settings:

- ``.properties`` / ``.conf``: Java properties, as a worker reads them;
- ``.json`` / ``.yaml`` / ``.yml``: a mapping of settings (nested mappings are
  flattened with dots, :func:`eos.config.files.flatten`), or Kafka Connect's
  create body ``{"name": ..., "config": {...}}`` (optionally with
  ``"initial_state"``), so ``eos connectors describe NAME --json`` and the files
  written for ``curl -X POST /connectors`` can be applied as they are.

It must name the connector (``name``) and its plugin (``connector.class``); the
settings sent always include ``name`` (Connect's validation requires it).

An **offsets file** is JSON (or YAML) in the shape of ``GET
/connectors/{name}/offsets``: ``{"offsets": [{"partition": {...}, "offset":
{...}}]}``, where a null offset resets that partition.
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


class BadFiles(Exception):
    """Files with problems; ``problems`` holds every one as ``"<file>: <what>"``."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class ConnectorFile:
    path: str
    name: str
    config: dict[str, str]
    initial_state: str | None = None


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
        name, config, initial = _load(path)
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
    if problems:
        return None, problems
    config = {"name": name, **config}  # a create body may leave it out of its config
    return ConnectorFile(path, name, config, initial.upper() if initial else None), []


def _load(path: str) -> tuple[str, dict[str, str], str | None]:
    """(name, flat settings, initial state) of a connector file."""
    if Path(path).suffix.lower() not in _STRUCTURED:
        if not Path(path).is_file():
            raise ConfigError("<file>", path, "cannot be read (no such file)")
        config = load_config_file(path)
        return config.get("name", ""), config, None
    data = _structured(path)
    if isinstance(data, Mapping) and isinstance(data.get("config"), Mapping):
        config = flatten(data["config"], source=path)
        name = data.get("name")
        if name is not None and not isinstance(name, str):
            raise ConfigError("<file>", path, f"'name' must be a string, not {name!r}")
        inner = config.get("name")
        if name and inner and inner != name:
            raise ConfigError("<file>", path, f"'name' is {name!r} but config.name is {inner!r}")
        state = data.get("initial_state")
        return name or inner or "", config, None if state is None else str(state)
    config = flatten(data, source=path)
    return config.get("name", ""), config, None


def _structured(path: str) -> Any:
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


def read_offsets(path: str) -> dict[str, Any]:
    """The body of ``PATCH /connectors/{name}/offsets`` in ``path``; :class:`BadFiles`
    names every problem."""
    try:
        data = _structured(path)
    except ConfigError as exc:
        raise BadFiles([f"{path}: {exc.allowed}"]) from None
    entries = data.get("offsets") if isinstance(data, Mapping) else None
    if not isinstance(entries, list) or not entries:
        raise BadFiles(
            [f'{path}: needs {{"offsets": [{{"partition": {{...}}, "offset": {{...}}}}, ...]}}']
        )
    problems = []
    for index, entry in enumerate(entries):
        where = f"{path}: offsets[{index}]"
        if not isinstance(entry, Mapping):
            problems.append(f"{where}: must be an object with partition and offset")
            continue
        if not isinstance(entry.get("partition"), Mapping):
            problems.append(f"{where}: partition must be an object")
        if "offset" not in entry:
            problems.append(f"{where}: offset is missing (null resets the partition)")
        elif entry["offset"] is not None and not isinstance(entry["offset"], Mapping):
            problems.append(f"{where}: offset must be an object or null")
    if problems:
        raise BadFiles(problems)
    return {"offsets": [dict(e) for e in entries]}
