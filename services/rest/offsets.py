"""A connector's offsets (Kafka Connect's KIP-875 paths and bodies):

- ``GET /connectors/{name}/offsets`` → ``{"offsets": [{"partition": {…}, "offset": {…}}]}``
  (any worker, any state);
- ``PATCH /connectors/{name}/offsets`` with ``{"offsets": [{"partition": {…}, "offset":
  {…} | null}]}`` alters them (null resets that partition);
- ``DELETE /connectors/{name}/offsets`` resets them all.

Changes need the connector STOPPED (409 otherwise) and are made by the leader: the
last task generation is fenced first, the connector may refuse (400), and the
write is one transaction (:mod:`eos.runtime.cluster.coordinator.offset_changes`). Resuming continues
exactly from the new offsets.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from eos.errors import ConfigError
from eos.runtime.cluster.coordinator.offset_changes import Offsets
from eos.runtime.worker_api import WorkerApi
from eos.storage.offset_log import canonical_partition
from services.rest.errors import guard, json_object
from services.rest.forwarding import leader_only


def _worker(request: Request) -> WorkerApi:
    worker: WorkerApi = request.app.state.worker
    return worker


async def get_offsets(request: Request) -> Response:
    offsets = await _worker(request).offsets(request.path_params["name"])
    return JSONResponse(
        {"offsets": [{"partition": json.loads(p), "offset": o} for p, o in offsets.items()]}
    )


def _changes(body: dict[str, Any]) -> Offsets:
    entries = body.get("offsets")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(
            "offsets", entries, 'must be a non-empty list of {"partition": {…}, "offset": {…}}'
        )
    changes: Offsets = {}
    for entry in entries:
        partition = entry.get("partition") if isinstance(entry, dict) else None
        offset = entry.get("offset") if isinstance(entry, dict) else None
        if not isinstance(partition, dict) or not (offset is None or isinstance(offset, dict)):
            raise ConfigError(
                "offsets", entry, "each entry needs a partition object and an offset object or null"
            )
        changes[canonical_partition(partition)] = offset
    return changes


async def alter_offsets(request: Request) -> Response:
    changes = _changes(await json_object(request))
    await _worker(request).change_offsets(request.path_params["name"], changes)
    return JSONResponse(
        {"message": "The offsets for this connector have been altered successfully"}
    )


async def reset_offsets(request: Request) -> Response:
    await _worker(request).change_offsets(request.path_params["name"], None)
    return JSONResponse({"message": "The offsets for this connector have been reset successfully"})


ROUTES = [
    Route("/connectors/{name}/offsets", guard(get_offsets), methods=["GET"]),
    Route("/connectors/{name}/offsets", leader_only(guard(alter_offsets)), methods=["PATCH"]),
    Route("/connectors/{name}/offsets", leader_only(guard(reset_offsets)), methods=["DELETE"]),
]
