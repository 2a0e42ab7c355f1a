"""A connector's active topics (Kafka Connect's KIP-558 paths, bodies and codes):

- ``GET /connectors/{name}/topics`` → ``{"<name>": {"topics": ["t1", "t2"]}}``: the
  topics its tasks have written to since the last reset, sorted; empty for a
  connector that never wrote, and for one that does not exist (as in Connect).
- ``PUT /connectors/{name}/topics/reset`` → 202: the set is emptied; it fills again
  as the tasks write.

Any worker answers both (nothing is forwarded). With ``topic.tracking.enable=false``
both answer 403, and the reset does with ``topic.tracking.allow.reset=false``.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from eos.runtime.worker_api import WorkerApi
from services.rest.errors import error, guard


def _worker(request: Request) -> WorkerApi:
    worker: WorkerApi = request.app.state.worker
    return worker


async def get_topics(request: Request) -> Response:
    worker = _worker(request)
    if not worker.settings.topic_tracking:
        return error(403, "Topic tracking is disabled.")
    name = request.path_params["name"]
    return JSONResponse({name: {"topics": await worker.active_topics(name)}})


async def reset_topics(request: Request) -> Response:
    worker = _worker(request)
    if not worker.settings.topic_tracking:
        return error(403, "Topic tracking is disabled.")
    if not worker.settings.topic_tracking_reset:
        return error(403, "Topic tracking reset is disabled.")
    await worker.reset_active_topics(request.path_params["name"])
    return Response(status_code=202)


ROUTES = [
    Route("/connectors/{name}/topics", guard(get_topics), methods=["GET"]),
    Route("/connectors/{name}/topics/reset", guard(reset_topics), methods=["PUT"]),
]
