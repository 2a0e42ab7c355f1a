"""A running task's progress, in its status (eos's own field, docs/rest.md).

A connector's task counts and sets figures of its own (``context.count``,
``context.gauge``: PostgresCdcSource's ``snapshot_rows``, ``snapshot_chunks``,
``snapshot_tables_done``, ``slot_lag_bytes``, ...). The worker that runs the task holds
them, so the status answers (``GET /connectors/{name}/status``,
``.../tasks/{task}/status``, ``GET /connectors?expand=status``) add them as
``"progress"`` to each RUNNING task: from this worker's own tasks directly, and for a
task on another worker by asking that worker's ``GET
/connectors/{name}/tasks/{task}/progress`` (the caller's ``Authorization`` passed on,
answered within :data:`PEER_TIMEOUT`). A worker that does not answer in time leaves
``progress`` out of that task; the status itself, read from the status topic, never
waits on it.
"""

from __future__ import annotations

from collections.abc import Mapping

import anyio
import httpx
import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from eos.errors import NotFoundError
from eos.runtime.worker_api import WorkerApi
from eos.state import State
from eos.storage.status_log import Status
from services.http import peer_client
from services.rest.errors import guard

log = structlog.get_logger(__name__)

PEER_TIMEOUT = 2.0
"""Seconds another worker gets to answer for the progress of its tasks."""
Progress = dict[str, float]


async def progress_of(
    request: Request, name: str, statuses: Mapping[int, Status]
) -> dict[int, Progress]:
    """The progress of each RUNNING task of ``name`` whose worker answers."""
    worker: WorkerApi = request.app.state.worker
    found: dict[int, Progress] = {}
    urls = {member.worker_id: member.url for member in worker.cluster().members}
    elsewhere: list[tuple[int, str]] = []
    for task, status in statuses.items():
        if status.state is not State.RUNNING:
            continue
        if status.worker_id == worker.settings.worker_id:
            local = worker.task_progress(name, task)
            if local is not None:
                found[task] = local
        elif status.worker_id in urls:
            elsewhere.append((task, urls[status.worker_id]))
    if elsewhere:
        headers = {k: v for k, v in request.headers.items() if k.lower() == "authorization"}
        async with (
            peer_client(worker.settings, PEER_TIMEOUT) as http,
            anyio.create_task_group() as group,
        ):
            for task, url in elsewhere:
                group.start_soon(_ask, http, f"{url}/connectors/{name}/tasks/{task}/progress",
                                 headers, task, found)  # fmt: skip
    return found


async def _ask(
    http: httpx.AsyncClient, url: str, headers: dict[str, str], task: int,
    found: dict[int, Progress],
) -> None:  # fmt: skip
    try:
        answer = await http.get(url, headers=headers)
        if answer.status_code == 200:
            body = answer.json()
            if isinstance(body, dict):
                found[task] = {str(k): v for k, v in body.items() if isinstance(v, int | float)}
    except (httpx.HTTPError, ValueError) as exc:
        log.info("task progress not read", url=url, error=repr(exc))


async def get_task_progress(request: Request) -> Response:
    """``GET /connectors/{name}/tasks/{task}/progress``: the figures of a task that runs on
    this worker; 404 otherwise."""
    worker: WorkerApi = request.app.state.worker
    name, text = request.path_params["name"], request.path_params["task"]
    progress = worker.task_progress(name, int(text)) if text.isascii() and text.isdigit() else None
    if progress is None:
        raise NotFoundError(f"Task {name}-{text} does not run on this worker")
    return JSONResponse(progress)


ROUTES = [
    Route("/connectors/{name}/tasks/{task}/progress", guard(get_task_progress), methods=["GET"]),
]
