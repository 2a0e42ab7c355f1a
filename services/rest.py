"""The worker's REST API: Kafka Connect's paths, verbs, bodies and error shape.

Errors are mapped to HTTP in one place (:func:`_error_response`) and always
answer ``{"error_code": <http status>, "message": "..."}``, as Connect does.
Handlers never touch cluster state: they ask the worker, whose coordinator
actor owns it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import eos
from eos.errors import (
    ConfigError,
    ConflictError,
    EosError,
    NotFoundError,
    PluginError,
    ReadToEndTimeout,
    ValidationError,
)
from eos.runtime.plugins import available_connectors
from eos.runtime.worker import Worker
from eos.storage.status_log import Status

log = structlog.get_logger(__name__)

Handler = Callable[[Request], Awaitable[Response]]


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error_code": status, "message": message}, status_code=status)


def _error_response(exc: Exception) -> JSONResponse:
    if isinstance(exc, NotFoundError):
        return _error(404, str(exc))
    if isinstance(exc, ConflictError):
        return _error(409, str(exc))
    if isinstance(exc, ValidationError | ConfigError | PluginError):
        return _error(400, str(exc))
    if isinstance(exc, ReadToEndTimeout):
        return _error(500, f"Request timed out: {exc}")
    if isinstance(exc, EosError):
        return _error(500, str(exc))
    log.error("request failed", error=repr(exc), exc_info=exc)
    return _error(500, f"{type(exc).__name__}: {exc}")


def _guard(handler: Handler) -> Handler:
    async def guarded(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception as exc:
            return _error_response(exc)

    return guarded


def _status_body(status: Status | None, worker_id: str) -> dict[str, Any]:
    if status is None:
        return {"state": "UNASSIGNED", "worker_id": worker_id}
    body: dict[str, Any] = {"state": status.state.value, "worker_id": status.worker_id}
    if status.trace:
        body["trace"] = status.trace
    return body


def build_app(worker: Worker, extra_routes: list[Route] | None = None) -> Starlette:
    worker_id = worker.settings.worker_id

    async def root(request: Request) -> Response:
        return JSONResponse(
            {"version": eos.__version__, "commit": "", "kafka_cluster_id": None, "eos": True}
        )

    async def list_connectors(request: Request) -> Response:
        snap = await worker.coordinator.snapshot()
        names = sorted(snap.connectors)
        expand = request.query_params.getlist("expand")
        if not expand:
            return JSONResponse(names)
        body: dict[str, Any] = {}
        for name in names:
            entry: dict[str, Any] = {}
            if "status" in expand:
                entry["status"] = await _status(name)
            if "info" in expand:
                entry["info"] = _info(name, snap)
            body[name] = entry
        return JSONResponse(body)

    def _info(name: str, snap: Any) -> dict[str, Any]:
        return {
            "name": name,
            "config": dict(snap.connectors[name]),
            "tasks": [{"connector": name, "task": i} for i in range(len(snap.tasks(name)))],
            "type": "source",
        }

    async def _existing(name: str) -> Any:
        snap = await worker.coordinator.snapshot()
        if name not in snap.connectors:
            raise NotFoundError(f"Connector {name} not found")
        return snap

    async def _status(name: str) -> dict[str, Any]:
        snap = await _existing(name)
        statuses = await worker.read_status()
        tasks = statuses.task_statuses(name)
        return {
            "name": name,
            "connector": _status_body(statuses.connector_status(name), worker_id),
            "tasks": [
                {"id": i, **_status_body(tasks.get(i), worker_id)}
                for i in range(len(snap.tasks(name)))
            ],
            "type": "source",
        }

    async def get_connector(request: Request) -> Response:
        name = request.path_params["name"]
        return JSONResponse(_info(name, await _existing(name)))

    async def get_config(request: Request) -> Response:
        name = request.path_params["name"]
        return JSONResponse(dict((await _existing(name)).connectors[name]))

    async def get_status(request: Request) -> Response:
        return JSONResponse(await _status(request.path_params["name"]))

    async def get_tasks(request: Request) -> Response:
        name = request.path_params["name"]
        snap = await _existing(name)
        return JSONResponse(
            [
                {"id": {"connector": name, "task": i}, "config": dict(c)}
                for i, c in enumerate(snap.tasks(name))
            ]
        )

    async def create_connector(request: Request) -> Response:
        body = await _json(request)
        name = body.get("name")
        config = body.get("config") or {}
        if not isinstance(name, str) or not name:
            raise ConfigError("name", name, "the request body needs a non-empty string 'name'")
        if not isinstance(config, dict):
            raise ConfigError("config", config, "'config' must be an object of settings")
        props = {str(k): str(v) for k, v in config.items()}
        if "name" in props and props["name"] != name:
            raise ConfigError("name", props["name"], f"must match the connector name {name!r}")
        snap = await worker.coordinator.snapshot()
        if name in snap.connectors:
            raise ConflictError(f"Connector {name} already exists")
        await worker.put_connector(name, props)
        return JSONResponse(_info(name, await worker.coordinator.snapshot()), status_code=201)

    async def put_config(request: Request) -> Response:
        name = request.path_params["name"]
        config = await _json(request)
        props = {str(k): str(v) for k, v in config.items()}
        created = await worker.put_connector(name, props)
        snap = await worker.coordinator.snapshot()
        return JSONResponse(_info(name, snap), status_code=201 if created else 200)

    async def delete_connector(request: Request) -> Response:
        await worker.coordinator.delete_connector(request.path_params["name"])
        return Response(status_code=204)

    async def plugins(request: Request) -> Response:
        return JSONResponse(
            [
                {"class": target, "alias": alias, "type": "source", "version": eos.__version__}
                for alias, target in sorted(available_connectors().items())
            ]
        )

    routes = [
        Route("/", _guard(root)),
        Route("/connectors", _guard(list_connectors), methods=["GET"]),
        Route("/connectors", _guard(create_connector), methods=["POST"]),
        Route("/connectors/{name}", _guard(get_connector), methods=["GET"]),
        Route("/connectors/{name}", _guard(delete_connector), methods=["DELETE"]),
        Route("/connectors/{name}/config", _guard(get_config), methods=["GET"]),
        Route("/connectors/{name}/config", _guard(put_config), methods=["PUT"]),
        Route("/connectors/{name}/status", _guard(get_status), methods=["GET"]),
        Route("/connectors/{name}/tasks", _guard(get_tasks), methods=["GET"]),
        Route("/connector-plugins", _guard(plugins), methods=["GET"]),
        *(extra_routes or []),
    ]
    return Starlette(routes=routes)


async def _json(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError as exc:
        raise ConfigError("body", "<request body>", f"must be a JSON object ({exc})") from exc
    if not isinstance(body, dict):
        raise ConfigError("body", body, "must be a JSON object")
    return body
