"""The files the client reads, checked before anything is sent: every problem of
every file is collected, so one run names them all (:class:`BadFiles`).

A **connector file** is one connector's settings, read by
:mod:`eos.config.connector_files` (the worker's ``connectors.dir`` reads the same).

An **offsets file** is JSON (or YAML) in the shape of ``GET
/connectors/{name}/offsets``: ``{"offsets": [{"partition": {...}, "offset":
{...}}]}``, where a null offset resets that partition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eos.config.connector_files import (
    INITIAL_STATES as INITIAL_STATES,
)
from eos.config.connector_files import ConnectorFile as ConnectorFile
from eos.config.connector_files import read_connector as read_connector
from eos.config.connector_files import read_connectors as read_connectors
from eos.config.connector_files import structured
from eos.errors import ConfigError


class BadFiles(Exception):
    """Files with problems; ``problems`` holds every one as ``"<file>: <what>"``."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def read_offsets(path: str) -> dict[str, Any]:
    """The body of ``PATCH /connectors/{name}/offsets`` in ``path``; :class:`BadFiles`
    names every problem."""
    try:
        data = structured(path)
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
