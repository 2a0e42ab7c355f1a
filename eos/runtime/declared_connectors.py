"""Connectors declared as files (``connectors.dir``): the leader keeps the cluster in line
with them, as Strimzi's operator does with ``KafkaConnector`` resources.

Each file in the directory declares one connector (the formats of
:mod:`eos.config.connector_files`; a structured file may give ``state``). Hidden entries
are skipped, so a Kubernetes ConfigMap mounted there works: its files are symlinks into a
``..data`` directory that kubelet swaps atomically. Every second the leader looks whether
the files changed (names, sizes, modification times, through the symlinks), and reads them
all on a change and every ``connectors.dir.poll.interval.ms``. :func:`plan` compares them
with the config topic:

- a connector no one has: **create** it in its declared state;
- a connector whose settings differ: **update** it (nothing is written when they match);
- a connector in another state than declared (none declared: RUNNING): **state**;
- a file whose ``restart`` number changed: **restart** the connector and its tasks once;
- with ``connectors.dir.prune=true``, a connector no file declares: **delete** it.

A file that does not parse (half written, a syntax error) is one log line naming it and
its problem; its connector keeps running as it was, and no connector is pruned while any
file does not parse. A change the worker refuses (a bad setting) is one line too. Each
file's outcome is in ``GET /`` (``connectors_dir``) and, on the leader, in
``eos_worker_connector_file_outcome``. A new leader reconciles at once,
so a reconcile cut short by the leader's death is finished by the next one; the config
topic is keyed by name, so nothing is created twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio
import structlog
from anyio.abc import TaskStatus

from eos.config.connector_files import ConnectorFile, files_in, read_connector
from eos.config.connector_plan import Action, Change, plan
from eos.config.worker import WorkerConfig
from eos.errors import EosError
from eos.runtime.observer import NullObserver, WorkerObserver
from eos.runtime.worker_api import WorkerApi
from eos.storage.config_log import RestartRequest, TargetState

log = structlog.get_logger(__name__)

TARGETS: Mapping[str, TargetState] = {
    "RUNNING": TargetState.STARTED,
    "PAUSED": TargetState.PAUSED,
    "STOPPED": TargetState.STOPPED,
}
"""A file's ``state`` → the target state the config topic keeps."""
_SHOWN = {state: name for name, state in TARGETS.items()}
LOOK_EVERY_S = 1.0
"""How often the leader looks whether the files changed (a listing and a stat each)."""


def read_directory(directory: Path) -> tuple[list[ConnectorFile], dict[str, str]]:
    """The connector files of ``directory`` and the problem of each file that has one
    (a name declared twice is a problem of the later file, in name order)."""
    paths = files_in(directory)
    found: list[ConnectorFile] = []
    problems: dict[str, str] = {}
    first: dict[str, str] = {}
    for path in paths:
        connector, own = read_connector(str(path))
        if own:
            problems[str(path)] = "; ".join(p.removeprefix(f"{path}: ") for p in own)
        elif connector is not None and connector.name in first:
            problems[str(path)] = f"connector {connector.name!r} is also in {first[connector.name]}"
        elif connector is not None:
            first[connector.name] = path.name
            found.append(connector)
    return found, problems


def _signature(directory: Path) -> tuple[tuple[str, int, int], ...]:
    """What changes when a file is added, removed or rewritten (through symlinks)."""
    seen = []
    for path in sorted(directory.iterdir()):
        if path.name.startswith("."):
            continue
        try:
            stat = path.stat()
        except OSError:
            continue
        seen.append((path.name, stat.st_mtime_ns, stat.st_size))
    return tuple(seen)


@dataclass(frozen=True)
class FileOutcome:
    """A file's last reconcile, as ``GET /`` shows it."""

    connector: str | None
    outcome: str
    """What was last done for it: created, updated or state (kept while it stays in line;
    unchanged if nothing ever was), or why not: not applied, unreadable."""
    message: str = ""


class DeclaredConnectors:
    """The leader's reconcile of ``connectors.dir`` (see the module documentation)."""

    def __init__(
        self, worker: WorkerApi, settings: WorkerConfig, observer: WorkerObserver | None = None
    ) -> None:
        assert settings.connectors_dir is not None
        self._worker = worker
        self._observer = observer or NullObserver()
        self._directory = Path(settings.connectors_dir)
        self._interval_s = settings.connectors_dir_poll_interval_ms / 1000
        self._prune = settings.connectors_dir_prune
        self.outcomes: dict[str, FileOutcome] = {}
        """File name → its last outcome (this worker's last reconcile as leader)."""
        self._said: dict[str, str] = {}
        """File name → the problem last logged for it (said once, until it changes)."""

    def view(self) -> dict[str, object]:
        """What ``GET /`` shows."""
        return {
            "path": str(self._directory),
            "prune": self._prune,
            "files": {
                name: {"connector": o.connector, "outcome": o.outcome, "message": o.message}
                for name, o in sorted(self.outcomes.items())
            },
        }

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        last: tuple[tuple[str, int, int], ...] | None = None
        read_at = -float("inf")
        was_leader = False
        while True:
            await anyio.sleep(LOOK_EVERY_S)
            leader = self._worker.cluster().is_leader
            if not leader:
                if was_leader:  # the new leader reports the files from now on
                    self._observer.connector_files({})
                was_leader = False
                continue
            try:  # a listing and a stat per file, in the thread pool like every file read
                signature = await anyio.to_thread.run_sync(_signature, self._directory)
            except OSError as exc:
                self._say("", "connectors.dir cannot be read", str(exc))
                continue
            now = anyio.current_time()
            if was_leader and signature == last and now - read_at < self._interval_s:
                continue
            was_leader, last, read_at = True, signature, now
            try:
                await self.reconcile()
            except (EosError, OSError) as exc:  # the config topic or the directory: next time
                self._say("", "connectors.dir not reconciled", str(exc))

    async def reconcile(self) -> list[Change]:
        """Read the files, then make the cluster match them (leader only)."""
        declared, problems = await anyio.to_thread.run_sync(read_directory, self._directory)
        snap = await self._worker.snapshot()
        states = {name: _SHOWN[snap.target_state(name)] for name in snap.connectors}
        changes = plan(declared, snap.connectors, states, prune=self._prune,
                       unreadable=bool(problems))  # fmt: skip
        outcomes = {Path(f.path).name: FileOutcome(f.name, "unchanged") for f in declared}
        for path, problem in problems.items():
            name = Path(path).name
            outcomes[name] = FileOutcome(None, "unreadable", problem)
            self._say(name, "connector file not applied: it does not parse", problem)
        if problems and self._prune:
            unreadable = ", ".join(sorted(Path(p).name for p in problems))
            self._say("", "connectors.dir: nothing pruned while a file does not parse", unreadable)
        for change in changes:
            file = Path(change.file).name if change.file else None
            try:
                await self._apply(change)
            except EosError as exc:
                if file is not None:
                    outcomes[file] = FileOutcome(change.connector, "not applied", str(exc))
                    self._say(file, "connector file not applied", str(exc))
                else:
                    log.warning("connector not pruned", connector=change.connector,
                                error=str(exc))  # fmt: skip
                continue
            log.info("declared connector reconciled", change=change.describe())
            if file is not None and outcomes[file].outcome == "unchanged":
                outcomes[file] = FileOutcome(change.connector, _done(change.action))
        for name, outcome in outcomes.items():
            if outcome.outcome not in ("unreadable", "not applied"):
                self._said.pop(name, None)
            before = self.outcomes.get(name)
            if (
                outcome.outcome == "unchanged"
                and before is not None
                and before.connector == outcome.connector
                and before.outcome not in ("unreadable", "not applied")
            ):
                outcomes[name] = before  # what was last done for it still holds
        self.outcomes = outcomes
        self._observer.connector_files(
            {name: (o.connector or "", o.outcome) for name, o in outcomes.items()}
        )
        return changes

    async def _apply(self, change: Change) -> None:
        worker = self._worker
        if change.action == "create":
            assert change.props is not None
            assert change.state is not None
            await worker.put_connector(change.connector, change.props, TARGETS[change.state])
        elif change.action == "update":
            assert change.props is not None
            await worker.put_connector(change.connector, change.props)
        elif change.action == "state":
            assert change.state is not None
            await worker.set_target_state(change.connector, TARGETS[change.state])
        elif change.action == "restart":
            await worker.restart(change.connector, RestartRequest(include_tasks=True))
        else:
            await worker.delete_connector(change.connector)

    def _say(self, file: str, event: str, problem: str) -> None:
        if self._said.get(file) != problem:
            self._said[file] = problem
            if file:
                log.warning(event, file=file, problem=problem)
            else:
                log.warning(event, detail=problem)


def _done(action: Action) -> str:
    done = {"create": "created", "update": "updated", "state": "state", "restart": "restarted"}
    return done.get(action, "deleted")
