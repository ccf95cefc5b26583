"""A rotation of the state key ring, as operations.md describes it, against real ``longtools serve``
processes on one data directory (REVIEW 8): what the old first key made stays the principal's
(listed, counted against the bound, read by its id, its list cursors) once a new key leads the
ring, and is unknown once the old key has left it.
"""

from __future__ import annotations

import base64
import secrets
from pathlib import Path
from typing import Any

from tests.conftest import Served, start_server
from tests.wire import TASKS_EXTENSION, Legacy, error, eventually, post, result

OLD = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
NEW = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
TOKEN = secrets.token_urlsafe(24)
WHO = {"authorization": f"Bearer {TOKEN}"}
TASKS: dict[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
LEGACY_TASKS: dict[str, Any] = {"elicitation": {"form": {}}, "tasks": {"list": {}, "cancel": {}}}
ACTIVE = 3


def _serve(tmp: Path, ring: str) -> Served:
    env = {
        "LONGTOOLS_STATE_KEYS": ring,
        "LONGTOOLS_AUTH_TOKENS": f"{TOKEN}=ann",
        "LONGTOOLS_TASK_LIST_PAGE_SIZE": "1",
        "LONGTOOLS_MAX_ACTIVE_TASKS_PER_PRINCIPAL": str(ACTIVE),
    }
    return start_server(tmp, "--conformance-fixtures", env=env)


def _start(served: Served) -> dict[str, Any]:
    params = {"name": "confirm_delete", "arguments": {"filename": "f"}}
    return result(post(served.url, "tools/call", params, caps=TASKS, headers=WHO))


def _listed(served: Served) -> tuple[list[str], str | None]:
    session = Legacy(served.url, caps=LEGACY_TASKS, headers=WHO)
    session.open()
    first = result(session.request("tasks/list"))
    ids = [task["taskId"] for task in first["tasks"]]
    cursor = first.get("nextCursor")
    while cursor:
        page = result(session.request("tasks/list", {"cursor": cursor}))
        ids += [task["taskId"] for task in page["tasks"]]
        cursor = page.get("nextCursor")
    return ids, first.get("nextCursor")


def test_a_rotated_ring_keeps_the_old_keys_tasks_until_the_old_key_leaves(tmp_path: Path) -> None:
    before = _serve(tmp_path, OLD)
    try:
        made = [_start(before)["taskId"] for _ in range(2)]
        listed, cursor = eventually(lambda: _listed(before), lambda got: len(got[0]) == 2, within=10)
        assert sorted(listed) == sorted(made) and cursor is not None
    finally:
        before.stop()

    rotated = _serve(tmp_path, f"{NEW},{OLD}")  # step 2: the new key leads
    try:
        assert sorted(_listed(rotated)[0]) == sorted(made)
        session = Legacy(rotated.url, caps=LEGACY_TASKS, headers=WHO)
        session.open()
        assert result(session.request("tasks/list", {"cursor": cursor}))["tasks"]  # an old cursor
        for task_id in made:
            got = post(rotated.url, "tasks/get", {"taskId": task_id}, caps=TASKS, headers=WHO)
            assert result(got)["status"] == "input_required"
        # The old tasks still count: one more fits under the bound, then no more.
        newer = _start(rotated)["taskId"]
        refused = post(
            rotated.url,
            "tools/call",
            {"name": "confirm_delete", "arguments": {"filename": "g"}},
            caps=TASKS,
            headers=WHO,
        )
        assert "LONGTOOLS_MAX_ACTIVE_TASKS_PER_PRINCIPAL" in refused.text
    finally:
        rotated.stop()

    after = _serve(tmp_path, NEW)  # step 3: the old key has left
    try:
        assert _listed(after)[0] == [newer]
        gone = post(after.url, "tasks/get", {"taskId": made[0]}, caps=TASKS, headers=WHO)
        assert error(gone, 400)["code"] == -32602
    finally:
        after.stop()
