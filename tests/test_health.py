"""Liveness and readiness, apart: a Temporal that does not answer makes an API replica unready
(taken out of rotation), never dead (restarted), and the readiness probe answers within its bound."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import URL_LINE, Served, spawn, wait_for_line
from tests.wire import error, headers_for, meta


@pytest.fixture
def silent_temporal() -> Iterator[str]:
    """A Temporal address that accepts TCP connections and never says a word (a hung frontend)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)  # the kernel completes handshakes; nothing ever reads or answers
        yield f"127.0.0.1:{listener.getsockname()[1]}"


def test_a_temporal_that_hangs_leaves_the_api_live_and_unready_within_the_probe_bound(
    tmp_path: Path, silent_temporal: str
) -> None:
    """Ours (issue 12): /readyz gives up on GetSystemInfo after 2 s; the client's timeout here only
    bounds the test, which would otherwise hang with the probe."""
    args = [
        "api",
        "--port",
        "0",
        "--no-auth",
        "--conformance-fixtures",
        "--temporal-address",
        silent_temporal,
    ]
    process, log_path = spawn(tmp_path, args, None)
    api = Served(process=process, url=wait_for_line(process, log_path, URL_LINE, 30), log_path=log_path)
    try:
        ready = httpx.get(f"{api.base}/readyz", timeout=15)
        assert ready.status_code == 503 and ready.json() == {"status": "temporal unavailable"}
        live = httpx.get(f"{api.base}/livez", timeout=15)
        assert live.status_code == 200 and live.json() == {"status": "ok"}
        # A call that needs Temporal is "unavailable" at once too: the API connects in the
        # background, so no request waits on a connection that never completes (it did, 30 s).
        call = {"name": "slow_compute", "arguments": {"seconds": 1}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {**call, "_meta": meta()}}
        answered = httpx.post(api.url, json=body, headers=headers_for("tools/call", call), timeout=15)
        assert error(answered, 200)["message"] == "The task service is unavailable; try again shortly"
    finally:
        api.stop()
    assert "Traceback" not in api.log_text()
