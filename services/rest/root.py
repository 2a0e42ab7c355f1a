"""``GET /``: the worker's version, its Kafka cluster, and the cluster of workers as
this one sees it (leader, generation, members, and why it cannot join, if so)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import eos
from eos.runtime.worker_api import WorkerApi


async def root(request: Request) -> Response:
    worker: WorkerApi = request.app.state.worker
    view = worker.cluster()
    return JSONResponse(
        {
            "version": eos.__version__,
            "commit": "",
            "kafka_cluster_id": worker.kafka_cluster_id,
            "eos": True,
            "worker_id": worker.settings.worker_id,
            "exactly_once_source_support": worker.settings.exactly_once,
            "connectors_dir": worker.declared_connectors(),
            "cluster": {
                "group_id": worker.settings.group_id,
                "leader": view.is_leader,
                "leader_url": view.leader_url or None,
                "generation": view.generation,
                "protocol": view.protocol or None,
                "assignor": view.assignor,
                "members": [
                    {
                        "member_id": m.member_id,
                        "url": m.url,
                        "worker_id": m.worker_id,
                        "exactly_once_source_support": m.exactly_once or None,
                    }
                    for m in view.members
                ],
                "error": view.error,
                "assigned": {
                    "connectors": sorted(view.assigned.connectors),
                    "tasks": [
                        {"connector": t.connector, "task": t.task}
                        for t in sorted(view.assigned.tasks)
                    ],
                },
            },
        }
    )


ROUTES = [Route("/", root, methods=["GET"])]
