"""``GET /health``: Kafka Connect's health check (KIP-1017), ``{"status": "healthy" |
"starting" | "unhealthy", "message": ...}`` with 200, 503 or 500
(:mod:`eos.runtime.health` says when). It asks no actor and reads no topic: the
answer is what the worker's health monitor last saw, so it is never slow. It needs
no credentials (probes call it; it says nothing a log line would not)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from eos.runtime.health import Health
from eos.runtime.worker_api import WorkerApi


def health_response(health: Health) -> JSONResponse:
    return JSONResponse(
        {"status": health.status, "message": health.message}, status_code=health.code
    )


async def health(request: Request) -> Response:
    worker: WorkerApi = request.app.state.worker
    return health_response(worker.health.health())


ROUTES = [Route("/health", health, methods=["GET"])]
