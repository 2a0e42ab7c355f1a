"""What makes a cluster's connectors match connector files: :func:`plan`, shared by the
leader's ``connectors.dir`` (:mod:`eos.runtime.declared_connectors`) and ``eos
connectors apply`` (which reads the cluster over REST). Pure: files and the cluster's
configs and states in, the steps out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from eos.config.connector_files import ConnectorFile

Action = Literal["create", "update", "state", "restart", "delete"]
RESTART_KEY = "declared.restart"
"""The connector setting that keeps the last ``restart`` of its file."""


@dataclass(frozen=True)
class Change:
    """One step of a reconcile."""

    action: Action
    connector: str
    file: str | None = None
    props: Mapping[str, str] | None = None
    state: str | None = None
    """RUNNING, PAUSED or STOPPED (create, state)."""

    def describe(self) -> str:
        what = f"{self.action} {self.connector}"
        if self.state is not None and self.action in ("create", "state"):
            what += f" ({self.state})"
        return what + (f" from {Path(self.file).name}" if self.file else "")


def plan(
    declared: Sequence[ConnectorFile],
    current: Mapping[str, Mapping[str, str]],
    states: Mapping[str, str],
    *,
    prune: bool,
    unreadable: bool = False,
    default_state: str | None = "RUNNING",
) -> list[Change]:
    """What makes the cluster (``current`` configs, ``states`` by name: RUNNING,
    PAUSED, STOPPED) match ``declared``.
    ``unreadable``: some file did not parse, so nothing is pruned. A file whose
    ``restart`` differs from the connector's ``declared.restart`` has it updated and the
    connector and its tasks restarted (after the state, so a resumed connector restarts).
    A file without a ``state`` keeps its connector in ``default_state`` (None: in whatever
    state it is; created in its ``initial_state``, else RUNNING)."""
    changes: list[Change] = []
    for f in declared:
        keep = f.state or default_state
        config = f.config if f.restart is None else {**f.config, RESTART_KEY: str(f.restart)}
        if f.name not in current:
            initial = keep or f.initial_state or "RUNNING"
            changes.append(Change("create", f.name, f.path, config, initial))
            continue
        if dict(current[f.name]) != config:
            changes.append(Change("update", f.name, f.path, config))
        if keep is not None and states.get(f.name, "RUNNING") != keep:
            changes.append(Change("state", f.name, f.path, state=keep))
        if f.restart is not None and current[f.name].get(RESTART_KEY, "0") != str(f.restart):
            changes.append(Change("restart", f.name, f.path))
    if prune and not unreadable:
        names = {f.name for f in declared}
        changes += [Change("delete", name) for name in sorted(set(current) - names)]
    return changes
