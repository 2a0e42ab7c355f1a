"""Pausing, resuming, stopping and restarting connectors and tasks (Kafka Connect's
paths and answers). All are served by the leader (forwarded there otherwise): it
writes a target state or a restart request to the config topic, and each worker
acts on what it runs as it reads the topic, without a rebalance (KIP-745). Only a
stop, and the resume after it, change the work to place and so start one.

- ``PUT /connectors/{name}/pause`` → 202: the connector and its tasks stop and
  report PAUSED; ``resume`` → 202: they start again.
- ``PUT /connectors/{name}/stop`` → 202: the tasks are shut down and removed (the
  connector keeps its config and reports STOPPED); the offsets API works only then.
- ``POST /connectors/{name}/restart[?includeTasks=&onlyFailed=]``: the connector
  alone → 204; with either flag → 202 and the planned states (RESTARTING for what
  will restart). ``POST /connectors/{name}/tasks/{task}/restart`` → 204.

A restart first reads the config topic to its end: if that times out → 500;
an unknown connector or task → 404; while a rebalance is under way, it waits for it
to end (the app's ``settle``, bounded), and → 409 if it has not.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from eos.errors import ConflictError, NotFoundError
from eos.runtime.worker_api import WorkerApi
from eos.state import State
from eos.storage.config_log import RestartRequest, TargetState
from eos.storage.status_log import Status
from services.rest.errors import guard
from services.rest.forwarding import leader_only, settled


def _worker(request: Request) -> WorkerApi:
    worker: WorkerApi = request.app.state.worker
    return worker


async def _target(request: Request, state: TargetState) -> Response:
    await _worker(request).set_target_state(request.path_params["name"], state)
    return Response(status_code=202)


async def pause(request: Request) -> Response:
    return await _target(request, TargetState.PAUSED)


async def resume(request: Request) -> Response:
    return await _target(request, TargetState.STARTED)


async def stop(request: Request) -> Response:
    return await _target(request, TargetState.STOPPED)


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").strip().lower() == "true"


async def restart_connector(request: Request) -> Response:
    worker = _worker(request)
    name = request.path_params["name"]
    include, only_failed = _flag(request, "includeTasks"), _flag(request, "onlyFailed")
    snap = await worker.snapshot()  # ReadToEndTimeout → 500 "Request timed out"
    if name not in snap.connectors:
        raise NotFoundError(f"Connector {name} not found")
    if (await settled(request)).rebalancing:
        raise ConflictError("a rebalance is under way; retry the restart shortly")
    statuses = await worker.read_status()
    await worker.restart(name, RestartRequest(include, only_failed))
    if not include and not only_failed:
        return Response(status_code=204)

    def planned(status: Status | None, restarts: bool) -> dict[str, Any]:
        state = State.RESTARTING if restarts else (status.state if status else State.UNASSIGNED)
        body: dict[str, Any] = {"state": state.value, "worker_id": status and status.worker_id}
        if status is not None and status.trace and not restarts:
            body["trace"] = status.trace
        return body

    def failed(status: Status | None) -> bool:
        return status is not None and status.state is State.FAILED

    connector = statuses.connector_status(name)
    tasks = statuses.task_statuses(name)
    body = {
        "name": name,
        "connector": planned(connector, not only_failed or failed(connector)),
        "tasks": [
            {
                "id": t,
                **planned(tasks.get(t), include and (not only_failed or failed(tasks.get(t)))),
            }
            for t in range(len(snap.tasks(name)))
        ],
        "type": "source",
    }
    return JSONResponse(body, status_code=202)


async def restart_task(request: Request) -> Response:
    worker = _worker(request)
    name, text = request.path_params["name"], request.path_params["task"]
    snap = await worker.snapshot()
    if name not in snap.connectors:
        raise NotFoundError(f"Connector {name} not found")
    if not text.isascii() or not text.isdigit() or int(text) >= len(snap.tasks(name)):
        raise NotFoundError(f"Task {name}-{text} not found")
    if (await settled(request)).rebalancing:
        raise ConflictError("a rebalance is under way; retry the restart shortly")
    await worker.restart(name, RestartRequest(task=int(text)))
    return Response(status_code=204)


ROUTES = [
    Route("/connectors/{name}/pause", leader_only(guard(pause)), methods=["PUT"]),
    Route("/connectors/{name}/resume", leader_only(guard(resume)), methods=["PUT"]),
    Route("/connectors/{name}/stop", leader_only(guard(stop)), methods=["PUT"]),
    Route("/connectors/{name}/restart", leader_only(guard(restart_connector)), methods=["POST"]),
    Route(
        "/connectors/{name}/tasks/{task}/restart",
        leader_only(guard(restart_task)),
        methods=["POST"],
    ),
]
