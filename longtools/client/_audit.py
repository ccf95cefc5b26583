"""``longtools task audit``: a task's ledger, as its server's ``GET /tasks/<id>/ledger`` gives it.
CLI process.

The lines are printed as they came, one signed entry a line, oldest first: what ``longtools audit
verify`` checks offline. Not an MCP request: the ledger is served beside the endpoint, on the pages'
routes, which take the same bearer token.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import quote

from longtools.client._terminal import Terminal
from longtools.client._wire import ClientError, Connection

__all__ = ["task_audit"]

_LEDGER_TYPE: Final = "application/x-ndjson"


def task_audit(url: str, task_id: str, token: str | None, terminal: Terminal) -> int:
    """Print the task's ledger on stdout; 0, or a ``ClientError`` naming what went wrong."""
    connection = Connection(url, token)
    try:
        status, kind, body = connection.get(f"tasks/{quote(task_id, safe='')}/ledger", _LEDGER_TYPE)
    finally:
        connection.close()
    if status == 200 and kind.split(";")[0].strip() == _LEDGER_TYPE:
        text = body.decode()
        if text.strip():
            terminal.out(text.rstrip("\n"))
        else:
            terminal.say(f"task {task_id} has no ledger entries (it started before ledgers were kept)")
        return 0
    raise _refused(status, url, task_id, token)


def _refused(status: int, url: str, task_id: str, token: str | None) -> ClientError:
    if status == 404:
        return ClientError(
            f"task {task_id} not found: unknown, expired, or neither yours nor waiting for your decision"
        )
    if status == 401 and token:
        return ClientError("the server refused the token (HTTP 401); check --token or LONGTOOLS_TOKEN")
    if status == 401 or 300 <= status < 400:  # the pages send a person without a session to sign in
        return ClientError("the server needs a token; pass --token or set LONGTOOLS_TOKEN")
    if status == 403:
        return ClientError(
            "the server refused this request (HTTP 403): it serves its pages to this computer only"
        )
    if status == 421:
        return ClientError("the server does not accept this host name (HTTP 421); use the name it serves")
    if status == 503:
        return ClientError("the server cannot reach Temporal now (HTTP 503); try again shortly")
    return ClientError(f"{url} did not answer with a ledger (HTTP {status}); is it a longtools server?")
