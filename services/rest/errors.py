"""Errors as HTTP answers, in one place, always in Kafka Connect's shape:
``{"error_code": <http status>, "message": "..."}``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from eos.acls.denied import explain, refused
from eos.acls.rules import output_topics
from eos.errors import (
    AccessDenied,
    ConfigError,
    ConflictError,
    EosError,
    NotFoundError,
    PluginError,
    ReadToEndTimeout,
    ValidationError,
    WorkerStartingError,
)

log = structlog.get_logger(__name__)

Handler = Callable[[Request], Awaitable[Response]]


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error_code": status, "message": message}, status_code=status)


def error_response(exc: Exception) -> JSONResponse:
    if isinstance(exc, NotFoundError):
        return error(404, str(exc))
    if isinstance(exc, ConflictError):
        return error(409, str(exc))
    if isinstance(exc, ValidationError | ConfigError | PluginError):
        return error(400, str(exc))
    if isinstance(exc, WorkerStartingError):
        return error(503, str(exc))
    if isinstance(exc, AccessDenied):
        return error(403, str(exc))
    if isinstance(exc, ReadToEndTimeout):
        return error(500, f"Request timed out: {exc}")
    if isinstance(exc, EosError):
        return error(500, str(exc))
    log.error("request failed", error=repr(exc), exc_info=exc)
    return error(500, f"{type(exc).__name__}: {exc}")


def guard(handler: Handler) -> Handler:
    """The handler, with every exception answered by :func:`error_response`."""

    async def guarded(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception as exc:
            if refused(exc):  # an authorization error: the ACLs that are missing
                worker = request.app.state.worker
                connectors = (await worker.snapshot()).connectors
                explained = await explain(worker.settings, connectors, output_topics, exc)
                return error_response(explained if isinstance(explained, Exception) else exc)
            return error_response(exc)

    return guarded


async def http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 (no route) and 405 (wrong verb), in the JSON shape."""
    assert isinstance(exc, HTTPException)
    return error(exc.status_code, str(exc.detail))


async def json_object(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError as exc:
        raise ConfigError("body", "<request body>", f"must be a JSON object ({exc})") from exc
    if not isinstance(body, dict):
        raise ConfigError("body", body, "must be a JSON object")
    return body
