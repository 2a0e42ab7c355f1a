"""Logging for the ``eos`` processes: structlog, key=value, to stderr.

Library code only logs; this is the one place that configures output. aiokafka's
own stdlib logging is routed through the same renderer, at WARNING unless
``EOS_LOG_LEVEL`` says otherwise for eos itself.
"""

from __future__ import annotations

import logging
import os
import sys

import structlog


def configure(level: str | None = None, *, json: bool = False) -> None:
    name = (level or os.environ.get("EOS_LOG_LEVEL") or "INFO").upper()
    numeric = logging.getLevelNamesMapping().get(name, logging.INFO)
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(colors=False, pad_event_to=0)
    )
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer
        ], foreign_pre_chain=shared)
    )  # fmt: skip
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    logging.getLogger("aiokafka").setLevel(max(numeric, logging.ERROR))
