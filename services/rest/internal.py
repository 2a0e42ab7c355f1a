"""Internal endpoints, for workers only (docs/cluster.md, "Internal requests"):

- ``PUT /connectors/{name}/fence``: a worker about to start the connector's tasks
  asks the leader for a fencing round; answered once the task count record is
  written (204), 409 if the round was cancelled (new task configs, connector
  deleted), 500 if fencing failed (with what to fix).
- ``POST /connectors/{name}/tasks``: a worker running the connector hands the
  leader its task configs (a JSON list of objects of strings); 204.

Both must be signed with the cluster's session key (400 / 403 / 503 otherwise,
see :mod:`eos.runtime.cluster.signatures`). A worker that is not the leader forwards the
request to the leader once (``?forward=false`` on the second hop); when it
cannot, it answers 503 so the caller tries again after the group has settled.
"""

from __future__ import annotations

import json

import httpx
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from eos.errors import ConfigError
from eos.runtime.cluster.signatures import ALGORITHM, SIGNATURE, TIMESTAMP
from eos.runtime.worker_api import WorkerApi
from services.http import peer_client
from services.rest.errors import error, guard

_FORWARDED_HEADERS = (SIGNATURE, ALGORITHM, TIMESTAMP, "content-type")


async def _checked(request: Request) -> tuple[WorkerApi, bytes, Response | None]:
    """The worker, the body, and the answer if the request must not go further here
    (bad signature, or forwarded to the leader)."""
    worker: WorkerApi = request.app.state.worker
    body = await request.body()
    view = worker.cluster()
    if not view.is_leader:
        return worker, body, await _forward(request, body, view.leader_url)
    rejection = worker.check_signature(request.headers, request.method, request.url.path, body)
    if rejection is not None:
        return worker, body, error(rejection.status, rejection.message)
    return worker, body, None


async def _forward(request: Request, body: bytes, leader_url: str) -> Response:
    if request.query_params.get("forward") == "false" or not leader_url:
        return error(503, "this worker is not the leader and cannot forward the request now")
    if any(h not in request.headers for h in (SIGNATURE, ALGORITHM, TIMESTAMP)):
        return error(400, f"internal request without its signature headers ({SIGNATURE})")
    headers = {h: request.headers[h] for h in _FORWARDED_HEADERS if h in request.headers}
    try:
        async with peer_client(request.app.state.worker.settings, 120) as http:
            answer = await http.request(
                request.method,
                f"{leader_url}{request.url.path}",
                params={"forward": "false"},
                content=body,
                headers=headers,
            )
    except httpx.HTTPError as exc:
        return error(503, f"the leader at {leader_url} did not answer: {exc!r}")
    return Response(answer.content, answer.status_code, media_type="application/json")


async def fence(request: Request) -> Response:
    worker, _, answered = await _checked(request)
    if answered is not None:
        return answered
    await worker.fence(request.path_params["name"])
    return Response(status_code=204)


async def put_task_configs(request: Request) -> Response:
    worker, body, answered = await _checked(request)
    if answered is not None:
        return answered
    try:
        configs = json.loads(body)
    except ValueError as exc:
        raise ConfigError("body", "<request body>", f"must be a JSON list ({exc})") from exc
    if not isinstance(configs, list) or not all(
        isinstance(c, dict) and all(isinstance(v, str) for v in c.values()) for c in configs
    ):
        raise ConfigError("body", "<request body>", "must be a list of objects of strings")
    await worker.put_task_configs(request.path_params["name"], configs)
    return Response(status_code=204)


ROUTES = [
    Route("/connectors/{name}/fence", guard(fence), methods=["PUT"]),
    Route("/connectors/{name}/tasks", guard(put_task_configs), methods=["POST"]),
]
