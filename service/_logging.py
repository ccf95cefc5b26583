"""Structured logging: JSON lines in production, readable on a terminal. API process.

One event per HTTP request (``mcp_request``: method, tool, outcome, status, duration). The HTTP
layer owns the event; the MCP layer adds what only it knows through ``request_info()``. Bodies,
arguments, answers and ``requestState`` are never logged.
"""

from __future__ import annotations

import logging
import sys
from contextvars import ContextVar
from typing import Any

import structlog

from service._settings import Settings

_REQUEST_INFO: ContextVar[dict[str, Any] | None] = ContextVar("longtools_request_info", default=None)


def request_info() -> dict[str, Any]:
    """The mutable fields of the current request's log event (a throwaway dict outside a request)."""
    info = _REQUEST_INFO.get()
    return info if info is not None else {}


def bind_request_info(info: dict[str, Any]) -> None:
    """Start collecting fields for the current request (the dict is shared with child tasks)."""
    _REQUEST_INFO.set(info)


def configure_logging(settings: Settings) -> None:
    """Route structlog and the stdlib (SDK, uvicorn) through one renderer on stderr."""
    use_json = settings.log_format == "json" or (settings.log_format == "auto" and not sys.stderr.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    # JSON lines carry a traceback as one string field; the console renderer prints it itself.
    final: list[Any] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if use_json:
        final.append(structlog.processors.format_exc_info)
    final.append(renderer)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(foreign_pre_chain=shared, processors=final))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    # uvicorn's access log would be a second line per request; ours carries more.
    logging.getLogger("uvicorn.access").disabled = True
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
