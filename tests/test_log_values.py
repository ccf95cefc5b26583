"""No argument, result or header value reaches a log line, not even riding on an exception.

One ``serve`` per log format with the tools of ``tests/leaky_tools.py``, each failing with a
distinctive value in its exception; the log then holds every event and exception type, and none
of the values. The renderer itself is checked in process below.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from longtools._logging import render_exception
from tests.conftest import Served, start_server
from tests.leaky_tools import KEY_CANARY
from tests.wire import TASKS_EXTENSION, post, result

REPO = Path(__file__).resolve().parents[1]
TASK_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}


def _canary(kind: str) -> str:
    return f"canary-{kind}-{secrets.token_hex(6)}"


def _wait_for_log(served: Served, text: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while text not in served.log_text():
        assert time.monotonic() < deadline, f"{text!r} never logged:\n{served.log_text()}"
        time.sleep(0.1)


@pytest.mark.parametrize("log_format", ["json", "console"])
def test_values_in_exceptions_and_refused_headers_never_reach_the_log(
    tmp_path: Path, log_format: str
) -> None:
    """Ours (issue 12): the log keeps the event, the exception types and the frames, not the values."""
    env = {
        "LONGTOOLS_LOG_FORMAT": log_format,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    served = start_server(tmp_path, "--no-examples", "--tools", "tests.leaky_tools", env=env)
    canaries = {kind: _canary(kind) for kind in ("raised", "result", "activity", "workflow")}
    host, origin = _canary("host") + ".example", "https://" + _canary("origin") + ".example"
    try:
        for tool, kind in (("crash", "raised"), ("bad_result", "result")):
            called = result(
                post(served.url, "tools/call", {"name": tool, "arguments": {"text": canaries[kind]}})
            )
            assert called["isError"] is True
            assert called["content"][0]["text"] == f"Error executing tool {tool}"
        assert post(served.url, "server/discover", headers={"host": host}).status_code == 421
        assert post(served.url, "server/discover", headers={"origin": origin}).status_code == 403
        for tool, kind in (("failing_activity_job", "activity"), ("crashing_workflow", "workflow")):
            params = {"name": tool, "arguments": {"text": canaries[kind]}}
            assert result(post(served.url, "tools/call", params, caps=TASK_CAPS))["resultType"] == "task"
        _wait_for_log(served, "Completing activity as failed")
        _wait_for_log(served, "Failed activation on workflow")
    finally:
        served.stop()
    log = served.log_text()
    for value in (*canaries.values(), host, origin, KEY_CANARY):
        assert value not in log, value
    assert "tool_crashed" in log and "ValueError" in log and "KeyError" in log
    assert "The above exception was the direct cause of the following exception:" in log
    assert "ValidationError: 1 validation error(s) for Count: count [int_parsing]" in log
    assert "Invalid Host header (value not logged)" in log
    assert "Invalid Origin header (value not logged)" in log
    if log_format == "json":
        crashed = [json.loads(line) for line in log.splitlines() if '"tool_crashed"' in line]
        assert {event["tool"] for event in crashed} == {"crash", "bad_result"}
        assert all(event["exception"].startswith("Traceback (most recent call last):") for event in crashed)
        assert any(", in crash\n" in event["exception"] for event in crashed)


def test_the_development_setting_logs_a_failed_activity_and_a_crash_with_their_messages(
    tmp_path: Path,
) -> None:
    """Ours (issue 25): LONGTOOLS_LOG_EXCEPTION_MESSAGES=true, for a developer's machine, puts what
    the default keeps out (above) in the log: why the activity failed, what the tool raised."""
    env = {
        "LONGTOOLS_LOG_EXCEPTION_MESSAGES": "true",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    served = start_server(tmp_path, "--no-examples", "--tools", "tests.leaky_tools", env=env)
    canaries = {kind: _canary(kind) for kind in ("raised", "activity")}
    try:
        called = result(
            post(served.url, "tools/call", {"name": "crash", "arguments": {"text": canaries["raised"]}})
        )
        assert called["content"][0]["text"] == "Error executing tool crash"  # the client still gets no detail
        params = {"name": "failing_activity_job", "arguments": {"text": canaries["activity"]}}
        assert result(post(served.url, "tools/call", params, caps=TASK_CAPS))["resultType"] == "task"
        _wait_for_log(served, canaries["activity"])
    finally:
        served.stop()
    failed = [json.loads(line) for line in served.log_text().splitlines() if canaries["activity"] in line]
    assert any(line["event"].startswith("Completing activity as failed") for line in failed), failed
    assert canaries["raised"] in served.log_text()


# --- the renderer, in process ----------------------------------------------------------------------


class _Out(BaseModel):
    count: int
    tags: dict[str, int]


def _caught(fail: Any) -> BaseException:
    try:
        fail()
    except BaseException as exc:  # whatever it raised is what the test renders
        return exc
    raise AssertionError("did not raise")


def test_an_exception_is_rendered_as_types_and_frames_without_messages() -> None:
    def inner() -> None:
        raise KeyError("secret-key")

    def outer() -> None:
        try:
            inner()
        except KeyError:
            raise RuntimeError("secret-message") from None

    def handled() -> None:
        try:
            inner()
        except KeyError:
            raise ValueError("another-secret")  # noqa: B904 - the implicit context is the point

    suppressed = render_exception(_caught(outer))
    assert "secret" not in suppressed and "KeyError" not in suppressed  # `from None` hides the context
    assert suppressed.splitlines()[-1] == "RuntimeError"
    assert ", in outer" in suppressed
    implicit = render_exception(_caught(handled))
    assert "secret" not in implicit
    assert "During handling of the above exception, another exception occurred:" in implicit
    assert implicit.index("KeyError") < implicit.index("ValueError")
    assert ", in inner" in implicit


def test_a_validation_error_keeps_locations_and_types_but_no_input_and_no_free_form_key() -> None:
    exc = _caught(lambda: _Out.model_validate({"count": "secret-input", "tags": {"secret key!": "x"}}))
    rendered = render_exception(exc)
    assert "secret" not in rendered
    assert rendered.splitlines()[-1].endswith(
        "2 validation error(s) for _Out: count [int_parsing]; tags.<key> [int_parsing]"
    )


def test_an_exception_group_renders_each_member_without_messages() -> None:
    def fail() -> None:
        raise ExceptionGroup("secret-group", [ValueError("secret-a"), KeyError("secret-b")])

    rendered = render_exception(_caught(fail))
    assert "secret" not in rendered
    assert "ExceptionGroup" in rendered and "| ValueError" in rendered and "| KeyError" in rendered
