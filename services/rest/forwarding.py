"""Writes go to the leader (docs/rest.md, "Forwarding").

A request that only the leader may serve (creating, changing, deleting, pausing,
resuming, stopping or restarting a connector, altering offsets) that reaches
another worker is sent on to the leader it knows, at most twice: the first hop
adds ``forward=true``, the second ``forward=false``, and a worker that receives
``forward=false`` but is not the leader answers 409. While no leader is known,
or a rebalance is under way on a worker that would have to forward, the answer is
409 with a message saying so: the write was not made, retry it. A worker whose
app has a ``settle`` hook (:meth:`~eos.runtime.worker.Worker.settled`) first waits
for the rebalance under way to end, within a bound, and answers 409 only if it
has not. Of the caller's headers only ``Authorization`` (and the body's
``Content-Type``) travel along.
"""

from __future__ import annotations

import httpx
import structlog
from starlette.requests import Request
from starlette.responses import Response

from eos.runtime.cluster.coordinator import ClusterView
from eos.runtime.worker_api import WorkerApi
from services.http import peer_client
from services.rest.errors import Handler, error

log = structlog.get_logger(__name__)

FORWARD_TIMEOUT = 120.0
"""Seconds a forwarded request may take (a restart or a fencing round can be slow)."""
_PASSED_ON = ("authorization", "content-type")


def leader_only(handler: Handler) -> Handler:
    """Serve ``handler`` on the leader; on any other worker, forward the request."""

    async def routed(request: Request) -> Response:
        worker: WorkerApi = request.app.state.worker
        view = worker.cluster()
        if view.is_leader:
            return await handler(request)
        hop = request.query_params.get("forward")
        if hop == "false":
            return error(409, "this worker is not the leader and the request already made two hops")
        if view.rebalancing or not view.leader_url:
            view = await settled(request)
            if view.is_leader:
                return await handler(request)
        if not view.leader_url:
            return error(409, "no leader is known yet (the cluster is forming); retry shortly")
        if view.rebalancing:
            return error(409, "a rebalance is under way, so the leader may change; retry shortly")
        return await forward(request, view.leader_url, "true" if hop is None else "false")

    return routed


async def settled(request: Request) -> ClusterView:
    """The worker's view of the cluster, once the rebalance under way ended if the app
    waits for that (its ``settle`` hook, bounded)."""
    settle = request.app.state.settle
    if settle is not None:
        view: ClusterView = await settle()
        return view
    worker: WorkerApi = request.app.state.worker
    return worker.cluster()


async def forward(request: Request, base_url: str, hop: str) -> Response:
    params: list[tuple[str, str | int | float | bool | None]] = [
        (k, v) for k, v in request.query_params.multi_items() if k != "forward"
    ]
    params.append(("forward", hop))
    headers = {k: v for k, v in request.headers.items() if k.lower() in _PASSED_ON}
    body = await request.body()
    try:
        async with peer_client(request.app.state.worker.settings, FORWARD_TIMEOUT) as http:
            answer = await http.request(
                request.method,
                f"{base_url}{request.url.path}",
                params=params,
                content=body,
                headers=headers,
            )
    except httpx.HTTPError as exc:
        log.info("forwarding failed", url=base_url, path=request.url.path, error=repr(exc))
        return error(409, f"the leader at {base_url} did not answer ({exc!r}); retry shortly")
    media = answer.headers.get("content-type")
    return Response(answer.content, answer.status_code, media_type=media)
