"""The worker's REST API: Kafka Connect's paths, verbs, bodies and error shape
(``{"error_code": <http status>, "message": "..."}``), one module per resource
group. Handlers never touch cluster state: they ask the worker, through
:class:`~eos.runtime.worker_api.WorkerApi`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from eos.runtime.cluster.coordinator import ClusterView
from eos.runtime.worker_api import WorkerApi
from services.rest import (
    connectors,
    health,
    internal,
    lifecycle,
    loggers,
    offsets,
    openapi,
    plugins,
    root,
    task_progress,
    topics,
)
from services.rest.auth import AuthMiddleware, AuthProvider
from services.rest.errors import http_exception
from services.rest.limits import BodyLimitMiddleware


def build_app(
    worker: WorkerApi,
    extra_routes: Sequence[BaseRoute] = (),
    *,
    auth: AuthProvider | None = None,
    open_routes: Sequence[BaseRoute] = (),
    settle: Callable[[], Awaitable[ClusterView]] | None = None,
) -> Starlette:
    """The REST app of ``worker`` (docs/rest.md). Bodies over ``rest.max.request.bytes``
    are refused (413) before any route reads them. With ``auth``, every request but the
    internal ones (checked by their signature), ``GET /health`` and ``open_routes`` must
    satisfy it
    (docs/security.md). With ``settle`` (:meth:`Worker.settled`), a write that meets a
    rebalance waits for it to end, within a bound, before it is refused."""
    routes = [
        *root.ROUTES,
        *health.ROUTES,
        *connectors.ROUTES,
        *task_progress.ROUTES,
        *lifecycle.ROUTES,
        *offsets.ROUTES,
        *internal.ROUTES,
        *topics.ROUTES,
        *plugins.ROUTES,
        *loggers.ROUTES,
        *openapi.ROUTES,
        *extra_routes,
    ]
    middleware = []
    if auth is not None:
        unchecked = [*internal.ROUTES, *health.ROUTES, *open_routes]
        middleware.append(Middleware(AuthMiddleware, provider=auth, open_routes=unchecked))
    max_bytes = worker.settings.max_request_bytes
    middleware.append(Middleware(BodyLimitMiddleware, max_bytes=max_bytes))
    app = Starlette(
        routes=routes, middleware=middleware, exception_handlers={HTTPException: http_exception}
    )
    app.state.worker = worker
    app.state.settle = settle
    return app
