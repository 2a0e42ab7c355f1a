"""The config topic's record formats (docs/exactly-once.md, "The config topic and the
leader"): what each kind of record means, how it is encoded, and how it is read back.
:mod:`eos.storage.config_log` applies the records; this module only knows their shapes.

Record formats (keys are UTF-8 text; values are JSON objects with a format
version ``"v"``; a tombstone is a record whose value is null)::

    key                      value (v1)                                      tombstone
    ──────────────────────── ─────────────────────────────────────────────── ─────────────────────
    connector-<name>         {"v":1,"properties":{str:str}}                  connector deleted:
                                                                             its tasks, task counts,
                                                                             target state go too
    task-<name>-<n>          {"v":1,"properties":{str:str}}   (n from 0)     pending task dropped
    commit-<name>            {"v":1,"tasks":N}                               ignored
    target-state-<name>      {"v":1,"state":"STARTED"|"PAUSED"|"STOPPED"}    back to the default
                                                                             (STARTED)
    tasks-count-<name>       {"v":1,"tasks":N}                               count forgotten
    session-key              {"v":1,"key":"<base64>","algorithm":"HmacSHA256",
                              "created_ms":int}                              no session key
    restart-<name>           {"v":1,"include_tasks":bool,"only_failed":bool, ignored
                              "task":int|null}

Records of unknown kinds and values of other versions are ignored with a warning;
so are values that do not fit their format (:func:`decode_record` returns None).
"""

from __future__ import annotations

import base64
import binascii
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import structlog

from eos.storage._store import Record, decode_key, decode_versioned, encode_json, malformed

log = structlog.get_logger(__name__)

_STORE = "config"


class TargetState(enum.Enum):
    """What the user wants a connector to do."""

    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


@dataclass(frozen=True)
class SessionKey:
    """The cluster's key for signing internal requests (the fence endpoint)."""

    key: bytes = field(repr=False)
    algorithm: str = "HmacSHA256"
    created_ms: int = 0


# ── Records ──────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class ConnectorConfigRecord:
    name: str
    properties: Mapping[str, str] | None  # None: tombstone, connector deleted


@dataclass(frozen=True)
class TaskConfigRecord:
    name: str
    task: int
    properties: Mapping[str, str] | None


@dataclass(frozen=True)
class TaskCommitRecord:
    name: str
    tasks: int | None


@dataclass(frozen=True)
class TargetStateRecord:
    name: str
    state: TargetState | None


@dataclass(frozen=True)
class TaskCountRecord:
    name: str
    tasks: int | None


@dataclass(frozen=True)
class SessionKeyRecord:
    session_key: SessionKey | None


@dataclass(frozen=True)
class RestartRequest:
    """A user's restart of a connector (and its tasks), or of one task."""

    include_tasks: bool = False
    only_failed: bool = False
    task: int | None = None


@dataclass(frozen=True)
class RestartRecord:
    name: str
    request: RestartRequest | None


ConfigRecord = (
    ConnectorConfigRecord
    | TaskConfigRecord
    | TaskCommitRecord
    | TargetStateRecord
    | TaskCountRecord
    | SessionKeyRecord
    | RestartRecord
)

_CONNECTOR = "connector-"
_TASK = "task-"
_COMMIT = "commit-"
_TARGET_STATE = "target-state-"
_TASKS_COUNT = "tasks-count-"
_SESSION_KEY = "session-key"
_RESTART = "restart-"


def encode_connector_config(name: str, properties: Mapping[str, str]) -> Record:
    return (_CONNECTOR + name).encode(), encode_json({"v": 1, "properties": dict(properties)})


def encode_connector_tombstone(name: str) -> Record:
    return (_CONNECTOR + name).encode(), None


def encode_task_config(name: str, task: int, properties: Mapping[str, str]) -> Record:
    key = f"{_TASK}{name}-{task}"
    return key.encode(), encode_json({"v": 1, "properties": dict(properties)})


def encode_task_commit(name: str, tasks: int) -> Record:
    return (_COMMIT + name).encode(), encode_json({"v": 1, "tasks": tasks})


def encode_target_state(name: str, state: TargetState) -> Record:
    return (_TARGET_STATE + name).encode(), encode_json({"v": 1, "state": state.value})


def encode_target_state_tombstone(name: str) -> Record:
    return (_TARGET_STATE + name).encode(), None


def encode_task_count(name: str, tasks: int) -> Record:
    return (_TASKS_COUNT + name).encode(), encode_json({"v": 1, "tasks": tasks})


def encode_session_key(session_key: SessionKey) -> Record:
    value = {
        "v": 1,
        "key": base64.b64encode(session_key.key).decode("ascii"),
        "algorithm": session_key.algorithm,
        "created_ms": session_key.created_ms,
    }
    return _SESSION_KEY.encode(), encode_json(value)


def encode_restart(name: str, request: RestartRequest) -> Record:
    value = {
        "v": 1,
        "include_tasks": request.include_tasks,
        "only_failed": request.only_failed,
        "task": request.task,
    }
    return (_RESTART + name).encode(), encode_json(value)


def decode_record(key: bytes | None, value: bytes | None) -> ConfigRecord | None:
    """The record, or None (with a warning) for anything this worker cannot read."""
    text = decode_key(key, store=_STORE)
    if text is None:
        return None
    document: dict[str, Any] | None = None
    if value is not None:
        document = decode_versioned(value, store=_STORE, key=text)
        if document is None:
            return None
    try:
        return _decode(text, document)
    except _Malformed as exc:
        malformed(_STORE, text, str(exc))
        return None


class _Malformed(Exception):
    """A record of a known kind and version whose fields do not fit its format."""


def _decode(key: str, document: dict[str, Any] | None) -> ConfigRecord | None:
    if key == _SESSION_KEY:
        return SessionKeyRecord(None if document is None else _session_key(document))
    if key.startswith(_RESTART):
        return RestartRecord(key[len(_RESTART) :], _restart(document))
    if key.startswith(_TASKS_COUNT):
        return TaskCountRecord(key[len(_TASKS_COUNT) :], _tasks(document))
    if key.startswith(_TARGET_STATE):
        return TargetStateRecord(key[len(_TARGET_STATE) :], _target_state(document))
    if key.startswith(_CONNECTOR):
        return ConnectorConfigRecord(key[len(_CONNECTOR) :], _properties(document))
    if key.startswith(_COMMIT):
        return TaskCommitRecord(key[len(_COMMIT) :], _tasks(document))
    if key.startswith(_TASK):
        name, _, task = key[len(_TASK) :].rpartition("-")
        if not name or not (task.isascii() and task.isdigit()):
            raise _Malformed("a task key is task-<connector>-<task number>")
        return TaskConfigRecord(name, int(task), _properties(document))
    log.warning("record ignored: unknown kind", store=_STORE, key=key)
    return None


def _properties(document: dict[str, Any] | None) -> Mapping[str, str] | None:
    if document is None:
        return None
    props = document.get("properties")
    if not isinstance(props, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in props.items()
    ):
        raise _Malformed("properties must be an object of strings")
    return MappingProxyType(props)


def _natural(document: dict[str, Any], name: str) -> int:
    number = document.get(name)
    if not isinstance(number, int) or isinstance(number, bool) or number < 0:
        raise _Malformed(f"{name} must be a non-negative integer")
    return number


def _tasks(document: dict[str, Any] | None) -> int | None:
    return None if document is None else _natural(document, "tasks")


def _target_state(document: dict[str, Any] | None) -> TargetState | None:
    if document is None:
        return None
    try:
        return TargetState(document.get("state"))
    except ValueError:
        raise _Malformed("state must be STARTED, PAUSED or STOPPED") from None


def _restart(document: dict[str, Any] | None) -> RestartRequest | None:
    if document is None:
        return None
    include, only, task = (document.get(k) for k in ("include_tasks", "only_failed", "task"))
    if not isinstance(include, bool) or not isinstance(only, bool):
        raise _Malformed("include_tasks and only_failed must be true or false")
    if task is not None and (not isinstance(task, int) or isinstance(task, bool) or task < 0):
        raise _Malformed("task must be null or a non-negative integer")
    return RestartRequest(include, only, task)


def _session_key(document: dict[str, Any]) -> SessionKey:
    secret, algorithm = document.get("key"), document.get("algorithm")
    if not isinstance(secret, str) or not isinstance(algorithm, str):
        raise _Malformed("needs key (base64 text), algorithm and created_ms")
    try:
        raw = base64.b64decode(secret, validate=True)
    except binascii.Error:
        raise _Malformed("key is not base64") from None
    return SessionKey(raw, algorithm, _natural(document, "created_ms"))
