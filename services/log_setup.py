"""Logging for the ``eos`` processes: structlog to stderr, as key=value text or as one JSON
object per line (``--log-format``, ``EOS_LOG_FORMAT``, or the worker setting
``log.format``: ``text``, the default, or ``json``). A JSON line has Connect-like fields:
``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message``, the context bound where it
was logged (``connector``, ``task``, ``generation``), any other key the event carries,
and ``exception`` (the traceback as text) when there is one.

Library code only logs; this is the one place that configures output. Levels are
the stdlib loggers' (one per module, named after it: ``eos.runtime.worker``), so
they can be changed per logger while the worker runs (``/admin/loggers``);
``--log-level`` / ``EOS_LOG_LEVEL`` set the root's. aiokafka's own stdlib logging
goes through the same renderer, at ERROR unless the root level is higher; httpx's (one
line per request: schema registry, REST client) at WARNING. py4j
(PySpark's bridge to its JVM) is shown from WARNING up: below that it logs every closed
connection, and a traceback per connection when the JVM stops first (Ctrl-C, or a
service manager signalling the whole process group) — partly through the root logger,
so this is a filter on the handler, not a logger level.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Any

import structlog

from eos.errors import ConfigError

_METHOD_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
}


class LevelFilteringLogger(structlog.stdlib.BoundLogger):
    """structlog's stdlib logger that asks its stdlib logger's level first: a debug call
    below the level costs about what a fixed-level structlog logger's does, not the
    processor chain up to a dropped event (``structlog.stdlib.filter_by_level``, ~20x)."""

    def debug(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        if self._logger.isEnabledFor(logging.DEBUG):  # the hot path's only level
            return super()._proxy_to_logger("debug", event, *args, **kw)
        return None

    def _proxy_to_logger(
        self, method_name: str, event: str | None = None, *event_args: str, **event_kw: Any
    ) -> Any:
        if not self._logger.isEnabledFor(_METHOD_LEVELS.get(method_name, logging.CRITICAL)):
            return None
        return super()._proxy_to_logger(method_name, event, *event_args, **event_kw)


LOG_FORMATS = ("text", "json")


def log_format(given: str | None, environ: Mapping[str, str] = os.environ) -> str | None:
    """The format asked for (``--log-format``, else ``EOS_LOG_FORMAT``), lower-cased;
    None if neither says; :class:`ConfigError` naming ``log.format`` for another value."""
    value = given or environ.get("EOS_LOG_FORMAT")
    if value is None or not value.strip():
        return None
    if value.strip().lower() not in LOG_FORMATS:
        raise ConfigError("log.format", value, "must be text or json (EOS_LOG_FORMAT too)")
    return value.strip().lower()


def configure(level: str | None = None, *, json: bool = False) -> None:
    name = (level or os.environ.get("EOS_LOG_LEVEL") or "INFO").upper()
    numeric = logging.getLevelNamesMapping().get(name, logging.INFO)
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]  # the same in both formats: loggers cached before a change keep working
    named: list[structlog.types.Processor] = [structlog.stdlib.add_logger_name] if json else []
    renderer: list[structlog.types.Processor] = (
        [
            structlog.processors.EventRenamer("message"),
            _json_fields,
            structlog.processors.JSONRenderer(default=str),
        ]
        if json
        else [structlog.dev.ConsoleRenderer(colors=False, pad_event_to=0)]
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=LevelFilteringLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_not_py4j_chatter)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(processors=[
            *named, structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer
        ], foreign_pre_chain=shared)
    )  # fmt: skip
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    logging.getLogger("aiokafka").setLevel(max(numeric, logging.ERROR))
    # httpx logs every request at INFO (the schema registry's, the REST client's).
    logging.getLogger("httpx").setLevel(max(numeric, logging.WARNING))


def _json_fields(logger: Any, method: str, event: Any) -> Any:
    """``time`` first, then ``level``, ``logger``, ``message``, the rest; ``exception``:
    the traceback of ``exc_info`` (or of ``log.exception``) as text."""
    event = structlog.processors.format_exc_info(logger, method, event)
    event["time"] = event.pop("timestamp", None)
    ordered: dict[str, Any] = {
        k: event[k] for k in ("time", "level", "logger", "message") if k in event
    }
    ordered.update((k, v) for k, v in event.items() if k not in ordered)
    return ordered


_PY4J = f"{os.sep}py4j{os.sep}"


def _not_py4j_chatter(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING or _PY4J not in record.pathname
