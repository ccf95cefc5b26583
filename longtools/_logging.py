"""Structured logging: JSON lines in production, readable on a terminal. Every process.

One event per HTTP request (``mcp_request``: method, tool, outcome, status, duration). The HTTP
layer owns the event; the MCP layer adds what only it knows through ``request_info()``. Bodies,
arguments, answers and ``requestState`` are never logged.

Exceptions are where values slip in: a tool's ``ValueError(f"bad {arg}")``, a pydantic error's
``input_value=...``, a Temporal activity failure. So every logged exception, from structlog's events
and from the stdlib's records alike, is written as its type chain and stack frames (file, line,
function) without any exception message; a pydantic ``ValidationError`` keeps its error types and
field locations. The SDK's own "Invalid Host/Origin header: <value>" lines lose the value.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
import traceback
from collections.abc import Callable, MutableMapping
from contextvars import ContextVar
from types import TracebackType
from typing import Any, Final

import structlog
from pydantic import ValidationError

from longtools._settings import Settings

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


REQUEST_EVENT: Final = "mcp_request"
_REQUEST_LOGGER: Final = "longtools.http"


def log_request(fields: dict[str, Any]) -> None:
    """Write the request's one event (``mcp_request``) with ``fields``; the dict is used up."""
    _request_lines[0](fields)


def _through_structlog(fields: dict[str, Any]) -> None:
    structlog.get_logger(_REQUEST_LOGGER).info(REQUEST_EVENT, **fields)


def _dropped(fields: dict[str, Any]) -> None:
    pass


def _json_fallback(value: Any) -> Any:
    # As structlog's JSONRenderer: an object's own __structlog__, else its repr.
    try:
        return value.__structlog__()
    except AttributeError:
        return repr(value)


class _JsonRequestLines:
    """The request's event as structlog's JSON pipeline (``configure_logging``) writes it, byte for
    byte: ``fields``, ``event``, bound contextvars, ``level``, ``logger``, ``timestamp``.

    Written here because the pipeline (a bound logger, a copy of the event, six processors, a new
    encoder and a new ``datetime`` per line) took about 30 µs of the API's CPU per request; this
    takes about 15.
    """

    def __init__(self) -> None:
        self._out = _Lines(_REQUEST_LOGGER)  # stderr, as for every other event
        self._encode = json.JSONEncoder(default=_json_fallback).encode
        self._second = -1
        self._stamp = ""

    def __call__(self, fields: dict[str, Any]) -> None:
        fields["event"] = REQUEST_EVENT
        structlog.contextvars.merge_contextvars(None, "info", fields)
        fields["level"] = "info"
        fields.setdefault("logger", _REQUEST_LOGGER)
        fields["timestamp"] = self._now()
        self._out.msg(self._encode(fields))

    def _now(self) -> str:
        """``datetime.now(UTC).isoformat()`` with ``Z`` for ``+00:00``, as structlog's ISO UTC
        ``TimeStamper`` writes it, with the date and time of day made once a second."""
        second, nanoseconds = divmod(time.time_ns(), 1_000_000_000)
        if second != self._second:
            self._second, self._stamp = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        micro = nanoseconds // 1000
        return f"{self._stamp}.{micro:06d}Z" if micro else f"{self._stamp}Z"


_request_lines: list[Callable[[dict[str, Any]], None]] = [_through_structlog]
"""How ``log_request`` writes (one slot: ``configure_logging`` sets it)."""


_MAX_CHAINED: Final = 8  # exceptions followed through __cause__/__context__ and exception groups
# A location part that looks like a field name is kept; anything else (a dict key, say) is input.
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _exception_of(exc_info: Any) -> BaseException | None:
    """The exception an event's ``exc_info`` means (True: the one being handled, as structlog reads it)."""
    if isinstance(exc_info, BaseException):
        return exc_info
    if isinstance(exc_info, tuple):
        value = exc_info[1] if len(exc_info) == 3 else None
        return value if isinstance(value, BaseException) else None
    return sys.exc_info()[1] if exc_info else None


def _type_name(exc: BaseException) -> str:
    kind = type(exc)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _describe(exc: BaseException, messages: bool = False) -> str:
    """The exception's type; a ValidationError adds each error's location and type, never its input.
    With ``messages`` (LONGTOOLS_LOG_EXCEPTION_MESSAGES, development only), the message too."""
    if messages:
        return "".join(traceback.format_exception_only(exc)).strip()
    if not isinstance(exc, ValidationError):
        return _type_name(exc)
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    where = "; ".join(
        ".".join(
            str(part) if isinstance(part, int) or _FIELD_NAME.fullmatch(part) else "<key>"
            for part in error["loc"]
        )
        + f" [{error['type']}]"
        for error in errors
    )
    return f"{_type_name(exc)}: {len(errors)} validation error(s) for {exc.title}: {where}"


def _frames(tb: TracebackType | None) -> list[str]:
    # lookup_lines=False: no source is read, and no frame's locals are ever looked at.
    stack = traceback.StackSummary.extract(traceback.walk_tb(tb), lookup_lines=False)
    return [f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}' for frame in stack]


_CAUSE = "The above exception was the direct cause of the following exception:"
_CONTEXT = "During handling of the above exception, another exception occurred:"


def _chain(exc: BaseException) -> list[tuple[BaseException, str | None]]:
    """``exc`` and the exceptions it came from, oldest first, each with the line leading to the next."""
    chain: list[tuple[BaseException, str | None]] = [(exc, None)]
    current = exc
    while len(chain) < _MAX_CHAINED:
        link = _CAUSE if current.__cause__ is not None else _CONTEXT
        older = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
        if older is None or any(older is seen for seen, _ in chain):
            break
        chain.append((older, link))
        current = older
    return chain[::-1]


def render_exception(exc: BaseException, messages: bool = False) -> str:
    """``exc`` as a traceback without any message: types, files, lines and functions only (with
    ``messages``, each exception's message too)."""
    lines: list[str] = []
    for item, link in _chain(exc):
        lines.append("Traceback (most recent call last):")
        lines.extend(_frames(item.__traceback__))
        lines.append(_describe(item, messages))
        if isinstance(item, BaseExceptionGroup):
            for index, inner in enumerate(item.exceptions[:_MAX_CHAINED], 1):
                lines.append(f"+---- {index} ----")
                lines.extend(f"| {line}" for line in render_exception(inner, messages).splitlines())
        if link is not None:
            lines.extend(["", link, ""])
    return "\n".join(lines)


def _exception_without_values(
    logger: Any, method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Replaces ``exc_info`` with a message-free ``exception`` string that both renderers print."""
    if "exc_info" not in event:  # the path of every request's line: one lookup
        return event
    exc = _exception_of(event.pop("exc_info"))
    if exc is not None:
        event["exception"] = render_exception(exc)
    return event


def _exception_with_messages(
    logger: Any, method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """``_exception_without_values`` with each exception's message (development only)."""
    if "exc_info" in event:
        exc = _exception_of(event.pop("exc_info"))
        if exc is not None:
            event["exception"] = render_exception(exc, messages=True)
    return event


class _DropHeaderValue(logging.Filter):
    """The SDK's transport security logs a refused Host or Origin header with its value, uncapped
    (``mcp.server.transport_security``); the line keeps which header, not what a client sent."""

    _PREFIXES: Final = ("Invalid Host header: ", "Invalid Origin header: ")

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith(self._PREFIXES):
            record.msg = record.msg.split(":", 1)[0] + " (value not logged)"
            record.args = ()
        return True


_DROP_HEADER_VALUE = _DropHeaderValue()


class _OnceForBothManagers(logging.Filter):
    """The API runs two of the SDK's session managers (``server/_app.py``: one streams, one answers
    in JSON), and each logs "StreamableHTTP session manager started" and "... shutting down" on the
    same logger (``mcp.server.streamable_http_manager``); a person reads each line once. A line is
    dropped only when it repeats the one this logger passed just before, so a later start (an app
    made again in the same process) still says so."""

    _LIFECYCLE: Final = frozenset(
        {"StreamableHTTP session manager started", "StreamableHTTP session manager shutting down"}
    )

    def __init__(self) -> None:
        super().__init__()
        self._last: object = None

    def filter(self, record: logging.LogRecord) -> bool:
        repeated = record.msg in self._LIFECYCLE and record.msg == self._last
        self._last = record.msg
        return not repeated


_ONCE_FOR_BOTH_MANAGERS = _OnceForBothManagers()


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
    # Rendered by us, for both renderers: structlog's own formatters would print exception messages.
    tracebacks: list[Any] = [
        _exception_with_messages if settings.log_exception_messages else _exception_without_values
    ]
    level = logging.getLevelNamesMapping()[settings.log_level.upper()]
    if level > logging.INFO:
        _request_lines[0] = _dropped
    elif use_json:
        _request_lines[0] = _JsonRequestLines()
    else:
        _request_lines[0] = _through_structlog
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
    logging.getLogger("mcp.server.transport_security").addFilter(_DROP_HEADER_VALUE)  # added once
    logging.getLogger("mcp.server.streamable_http_manager").addFilter(_ONCE_FOR_BOTH_MANAGERS)
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
