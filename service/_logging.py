"""Structured logging: JSON lines in production, readable on a terminal. API process.

One event per HTTP request (``mcp_request``: method, tool, outcome, status, duration). The HTTP
layer owns the event; the MCP layer adds what only it knows through ``request_info()``. Bodies,
arguments, answers and ``requestState`` are never logged.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
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


class _Lines(structlog.WriteLogger):
    """structlog's line writer on stderr, knowing its logger's name (``get_logger(name)``)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(sys.stderr)
        self.name = str(args[0]) if args else ""


def _add_logger_name(logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    event.setdefault("logger", getattr(logger, "name", ""))
    return event


def configure_logging(settings: Settings) -> None:
    """One renderer on stderr for structlog's events and the stdlib's (SDK, uvicorn, Temporal).

    structlog's own events skip the stdlib: a request's log line through ``logging`` (record,
    handler lock, formatter) was 10% of a plain ``tools/call``'s CPU; written directly, about 6%.
    """
    use_json = settings.log_format == "json" or (settings.log_format == "auto" and not sys.stderr.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    # JSON lines carry a traceback as one string field; the console renderer prints it itself.
    tracebacks: list[Any] = [structlog.processors.format_exc_info] if use_json else []
    level = logging.getLevelNamesMapping()[settings.log_level.upper()]
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            _add_logger_name,
            timestamper,
            *tracebacks,
            renderer,
        ],
        logger_factory=_Lines,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        cache_logger_on_first_use=True,
    )
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        timestamper,
    ]
    handler = logging.StreamHandler(sys.stderr)
    final: list[Any] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta, *tracebacks, renderer]
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(foreign_pre_chain=shared, processors=final))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # uvicorn's access log would be a second line per request; ours carries more.
    logging.getLogger("uvicorn.access").disabled = True
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
