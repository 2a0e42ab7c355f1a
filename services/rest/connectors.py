"""``/connectors``: list, create, read, update and delete connectors, their status
and task configs (Kafka Connect's paths, bodies and status codes).

Reads are answered by any worker from its view of the config and status topics.
Writes are served by the leader; another worker forwards them there
(:mod:`services.rest.forwarding`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from eos.errors import ConfigError, ConflictError, NotFoundError
from eos.runtime.worker_api import WorkerApi
from eos.state import State
from eos.storage.config_log import ConfigSnapshot, TargetState
from eos.storage.status_log import Status
from services.rest.errors import guard, json_object
from services.rest.forwarding import leader_only
from services.rest.hidden import hidden, kept
from services.rest.task_progress import Progress, progress_of


def _worker(request: Request) -> WorkerApi:
    worker: WorkerApi = request.app.state.worker
    return worker


def _info(name: str, snap: ConfigSnapshot) -> dict[str, Any]:
    return {
        "name": name,
        "config": hidden(snap.connectors[name]),
        "tasks": [{"connector": name, "task": i} for i in range(len(snap.tasks(name)))],
        "type": "source",
    }


async def _existing(worker: WorkerApi, name: str) -> ConfigSnapshot:
    snap = await worker.snapshot()
    if name not in snap.connectors:
        raise NotFoundError(f"Connector {name} not found")
    return snap


def _status_body(status: Status | None, progress: Progress | None = None) -> dict[str, Any]:
    if status is None:
        return {"state": State.UNASSIGNED.value, "worker_id": None}
    body: dict[str, Any] = {"state": status.state.value, "worker_id": status.worker_id}
    if status.trace:
        body["trace"] = status.trace
    if progress is not None:  # eos's own field (services/rest/task_progress.py)
        body["progress"] = progress
    restarts = status.auto_restart
    if restarts is not None:  # eos's own field (docs/operations.md)
        at = restarts.next_attempt_ms
        body["auto_restart"] = {
            "restarts": restarts.restarts,
            "next_attempt": None if at is None else iso_utc(at),
            **({"not_restarted": restarts.reason} if restarts.reason else {}),
        }
    return body


def iso_utc(epoch_ms: int) -> str:
    """``epoch_ms`` as ISO 8601 in UTC, to the second (``2026-11-25T10:42:00Z``)."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


async def _status(request: Request, name: str) -> dict[str, Any]:
    worker = _worker(request)
    snap = await _existing(worker, name)
    statuses = await worker.read_status()
    count = len(snap.tasks(name))
    tasks = {i: s for i, s in statuses.task_statuses(name).items() if i < count}
    progress = await progress_of(request, name, tasks)
    return {
        "name": name,
        "connector": _status_body(statuses.connector_status(name)),
        "tasks": [{"id": i, **_status_body(tasks.get(i), progress.get(i))} for i in range(count)],
        "type": "source",
    }


async def list_connectors(request: Request) -> Response:
    worker = _worker(request)
    snap = await worker.snapshot()
    names = sorted(snap.connectors)
    expand = request.query_params.getlist("expand")
    if not expand:
        return JSONResponse(names)
    body: dict[str, Any] = {}
    for name in names:
        entry: dict[str, Any] = {}
        if "status" in expand:
            entry["status"] = await _status(request, name)
        if "info" in expand:
            entry["info"] = _info(name, snap)
        body[name] = entry
    return JSONResponse(body)


async def create_connector(request: Request) -> Response:
    worker = _worker(request)
    body = await json_object(request)
    name = body.get("name")
    config = body.get("config") or {}
    if not isinstance(name, str) or not name:
        raise ConfigError("name", name, "the request body needs a non-empty string 'name'")
    if not isinstance(config, dict):
        raise ConfigError("config", config, "'config' must be an object of settings")
    props = {str(k): str(v) for k, v in config.items()}
    if "name" in props and props["name"] != name:
        raise ConfigError("name", props["name"], f"must match the connector name {name!r}")
    props = kept(props, None)
    initial = _initial_state(body.get("initial_state"))
    worker.require_leader()
    if name in (await worker.snapshot()).connectors:
        raise ConflictError(f"Connector {name} already exists")
    await worker.put_connector(name, props, initial)
    return JSONResponse(_info(name, await worker.snapshot()), status_code=201)


_INITIAL_STATES = {
    "RUNNING": TargetState.STARTED,
    "PAUSED": TargetState.PAUSED,
    "STOPPED": TargetState.STOPPED,
}


def _initial_state(value: object) -> TargetState:
    if value is None:
        return TargetState.STARTED
    state = _INITIAL_STATES.get(str(value).upper()) if isinstance(value, str) else None
    if state is None:
        raise ConfigError("initial_state", value, "must be RUNNING, PAUSED or STOPPED")
    return state


async def get_connector(request: Request) -> Response:
    name = request.path_params["name"]
    return JSONResponse(_info(name, await _existing(_worker(request), name)))


async def get_config(request: Request) -> Response:
    name = request.path_params["name"]
    return JSONResponse(hidden((await _existing(_worker(request), name)).connectors[name]))


async def put_config(request: Request) -> Response:
    worker = _worker(request)
    name = request.path_params["name"]
    config = await json_object(request)
    props = {str(k): str(v) for k, v in config.items()}
    if "name" in props and props["name"] != name:
        raise ConfigError(
            "name",
            props["name"],
            f"Connector name configuration ({props['name']}) doesn't match connector name "
            f"in the URL ({name})",
        )
    props = kept(props, (await worker.snapshot()).connectors.get(name))
    created = await worker.put_connector(name, props)
    snap = await worker.snapshot()
    return JSONResponse(_info(name, snap), status_code=201 if created else 200)


async def patch_config(request: Request) -> Response:
    """Change some settings (a null value removes one); the others stay."""
    worker = _worker(request)
    name = request.path_params["name"]
    patch = await json_object(request)
    stored = (await _existing(worker, name)).connectors[name]
    props = dict(stored)
    for key, value in patch.items():
        if value is None:
            props.pop(str(key), None)
        else:
            props[str(key)] = str(value)
    await worker.put_connector(name, kept(props, stored))
    return JSONResponse(_info(name, await worker.snapshot()))


async def get_status(request: Request) -> Response:
    return JSONResponse(await _status(request, request.path_params["name"]))


async def get_task_status(request: Request) -> Response:
    worker = _worker(request)
    name = request.path_params["name"]
    task = _task_number(request)
    snap = await _existing(worker, name)
    if task >= len(snap.tasks(name)):
        raise NotFoundError(f"Task {name}-{task} not found")
    statuses = await worker.read_status()
    status = statuses.task_statuses(name).get(task)
    progress = await progress_of(request, name, {} if status is None else {task: status})
    return JSONResponse({"id": task, **_status_body(status, progress.get(task))})


def _task_number(request: Request) -> int:
    text = request.path_params["task"]
    if not text.isascii() or not text.isdigit():
        raise NotFoundError(f"Task {request.path_params['name']}-{text} not found")
    return int(text)


async def get_tasks(request: Request) -> Response:
    name = request.path_params["name"]
    snap = await _existing(_worker(request), name)
    cls = snap.connectors[name].get("connector.class", "")
    return JSONResponse(
        [
            {"id": {"connector": name, "task": i}, "config": hidden(c, cls)}
            for i, c in enumerate(snap.tasks(name))
        ]
    )


async def delete_connector(request: Request) -> Response:
    await _worker(request).delete_connector(request.path_params["name"])
    return Response(status_code=204)


ROUTES = [
    Route("/connectors", guard(list_connectors), methods=["GET"]),
    Route("/connectors", leader_only(guard(create_connector)), methods=["POST"]),
    Route("/connectors/{name}", guard(get_connector), methods=["GET"]),
    Route("/connectors/{name}", leader_only(guard(delete_connector)), methods=["DELETE"]),
    Route("/connectors/{name}/config", guard(get_config), methods=["GET"]),
    Route("/connectors/{name}/config", leader_only(guard(put_config)), methods=["PUT"]),
    Route("/connectors/{name}/config", leader_only(guard(patch_config)), methods=["PATCH"]),
    Route("/connectors/{name}/status", guard(get_status), methods=["GET"]),
    Route("/connectors/{name}/tasks", guard(get_tasks), methods=["GET"]),
    Route("/connectors/{name}/tasks/{task}/status", guard(get_task_status), methods=["GET"]),
]
