"""Log levels, changed while the worker runs (Kafka Connect's ``/admin/loggers``):

- ``GET /admin/loggers`` → ``{"root": {"level": "INFO", "last_modified": null}, …}``:
  the root logger and every logger whose level is set (not inherited);
- ``GET /admin/loggers/{name}`` → ``{"level": "DEBUG", "last_modified": 1700000000000}``:
  the level the logger works at (its own or inherited); 404 for a logger nothing
  has created;
- ``PUT /admin/loggers/{name}`` with ``{"level": "DEBUG"}`` → 200 and the sorted
  names of the loggers it changed: the logger and every existing logger below it
  (``eos.runtime`` also sets ``eos.runtime.worker``), as Connect does.

Loggers are the stdlib ones eos logs through (structlog over stdlib logging, one per
module: ``eos.runtime.worker``); ``root`` is the root logger. Levels are Connect's
names (TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF; Python's WARNING and CRITICAL are
accepted too) and ``last_modified`` is when a PUT last set it, in ms since the epoch.

Each worker answers for itself and nothing is forwarded or stored: a level lasts
until the worker stops. Connect's ``?scope=cluster`` (KIP-976) is not supported and
answers 400; set each worker (``GET /`` lists them).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from eos.errors import ConfigError, NotFoundError
from services.rest.errors import guard, json_object

ROOT = "root"

_LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "CRITICAL": logging.CRITICAL,
    "OFF": logging.CRITICAL + 10,
}
_NAMES = {
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    logging.WARNING: "WARN",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "FATAL",
    logging.CRITICAL + 10: "OFF",
}

_last_modified: dict[str, int] = {}
"""Logger name → when a PUT last set its level (ms since the epoch), in this process."""


def level_name(level: int) -> str:
    """Connect's name of a stdlib level (a custom level by its stdlib name)."""
    return _NAMES.get(level) or logging.getLevelName(level)


def _logger(name: str) -> logging.Logger | None:
    """The existing logger ``name`` (``root`` is the root logger), or None."""
    if name == ROOT:
        return logging.getLogger()
    found = logging.Logger.manager.loggerDict.get(name)
    return found if isinstance(found, logging.Logger) else None


def _describe(name: str, logger: logging.Logger) -> dict[str, Any]:
    return {
        "level": level_name(logger.getEffectiveLevel()),
        "last_modified": _last_modified.get(name),
    }


def loggers() -> dict[str, dict[str, Any]]:
    """The root logger and every logger with a level of its own, by name."""
    listed = {ROOT: _describe(ROOT, logging.getLogger())}
    for name in sorted(logging.Logger.manager.loggerDict):
        logger = _logger(name)
        if logger is not None and logger.level != logging.NOTSET:
            listed[name] = _describe(name, logger)
    return listed


def set_level(name: str, level: int) -> list[str]:
    """Set ``name`` (created if need be) and every existing logger below it to
    ``level``; the names of those changed, sorted."""
    changed = [ROOT] if name == ROOT else [name]
    prefix = "" if name == ROOT else f"{name}."
    changed += [
        other
        for other, logger in logging.Logger.manager.loggerDict.items()
        if isinstance(logger, logging.Logger) and other.startswith(prefix) and other != name
    ]
    now = int(time.time() * 1000)
    for each in changed:
        (logging.getLogger() if each == ROOT else logging.getLogger(each)).setLevel(level)
        _last_modified[each] = now
    return sorted(changed)


def parse_level(value: object) -> int:
    if not isinstance(value, str) or value.strip().upper() not in _LEVELS:
        raise ConfigError(
            "level", value, "must be one of TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF"
        )
    return _LEVELS[value.strip().upper()]


async def list_loggers(request: Request) -> Response:
    return JSONResponse(loggers())


async def get_logger(request: Request) -> Response:
    name = request.path_params["name"]
    logger = _logger(name)
    if logger is None:
        raise NotFoundError(f"Logger {name} not found.")
    return JSONResponse(_describe(name, logger))


async def put_logger(request: Request) -> Response:
    name = request.path_params["name"]
    scope = request.query_params.get("scope", "worker").strip().lower()
    if scope != "worker":
        raise ConfigError(
            "scope", scope, "only scope=worker is supported: set the level on each worker"
        )
    body = await json_object(request)
    if "level" not in body:
        raise ConfigError("level", None, 'the body needs a "level", e.g. {"level": "DEBUG"}')
    if not name.strip():
        raise ConfigError("name", name, "a logger name must not be blank")
    return JSONResponse(set_level(name, parse_level(body["level"])))


ROUTES = [
    Route("/admin/loggers", guard(list_loggers), methods=["GET"]),
    Route("/admin/loggers/{name}", guard(get_logger), methods=["GET"]),
    Route("/admin/loggers/{name}", guard(put_logger), methods=["PUT"]),
]
