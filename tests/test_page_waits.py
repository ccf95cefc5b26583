"""What the person's open pages hold on the server while they wait for news of a task: places of
their own, apart from the MCP requests the person's clients hold (two tabs once refused the
person's MCP calls), and nothing once the browser has left (a closed tab kept its place 25 s).
Against a real ``longtools serve`` whose bound is two held requests per person. Ours (review
S-L3).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Served, bearer
from tests.page_server import HeldGet, call, first_answered, link_of, signed_in, start_pages_server
from tests.pages import PageClient
from tests.wire import eventually, post, result


@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Two held requests per person, and the debug log that says when a page's browser left."""
    env = {"LONGTOOLS_MAX_HELD_ROUNDS_PER_PRINCIPAL": "2", "LONGTOOLS_LOG_LEVEL": "debug"}
    served = start_pages_server(tmp_path_factory.mktemp("tight"), **env)
    try:
        yield served
    finally:
        served.stop()


def _following(served: Served, browser: PageClient) -> tuple[str, str]:
    """A task of ann's that waits for her, and the version its page shows."""
    task_id = str(call(served.url, "approve_change", {})["taskId"])
    link_of(served.url, task_id)
    page = browser.get(f"/tasks/{task_id}")
    found = re.search(r'data-version="([^"]+)"', page.text)
    assert found is not None, page.text
    return task_id, found.group(1)


def _tabs(served: Served, browser: PageClient, task_id: str, version: str, n: int) -> list[HeldGet]:
    return [HeldGet(served.base, f"/tasks/{task_id}/live?v={version}", browser) for _ in range(n)]


def _two_held(
    served: Served, browser: PageClient, task_id: str, version: str
) -> tuple[list[HeldGet], dict[str, Any]]:
    """Three tabs ask for news of an unchanging task: the server holds two (its bound) and answers
    the third at once, unchanged. Returns the two it holds, and what the third was told."""
    tabs = _tabs(served, browser, task_id, version, 3)
    at_once = first_answered(tabs)
    status, news = at_once.answer()
    assert (status, news["v"]) == (200, version)  # nothing changed: answered only for the bound
    return [tab for tab in tabs if tab is not at_once], news


def test_a_persons_open_task_pages_leave_their_mcp_calls_the_places_they_wait_in(tight: Served) -> None:
    with signed_in(tight, "ann") as ann:
        task_id, version = _following(tight, ann)
        held, third = _two_held(tight, ann, task_id, version)
        try:
            # The person's bound is full of page waits: an MCP call that waits still gets its place.
            params = {"name": "task_status", "arguments": {"taskId": task_id}}
            said = result(post(tight.url, "tools/call", params, caps={}, headers=bearer("ann")))
            assert said.get("isError") is not True, said
        finally:
            for tab in held:
                tab.leave()
        # The tab past the pages' bound is told to wait a while before it asks again (not to spin).
        assert third.get("again_s", 0) >= 1


def test_a_page_whose_browser_left_gives_its_place_back_at_once(tight: Served) -> None:
    with signed_in(tight, "ann") as ann:
        task_id, version = _following(tight, ann)
        left = tight.log_text().count('"page_wait_left"')
        for tab in _two_held(tight, ann, task_id, version)[0]:
            tab.leave()
        # The server notices each browser go (no waiting out the 25 s the page asked for) ...
        eventually(tight.log_text, lambda text: text.count('"page_wait_left"') >= left + 2, within=10)
        # ... and its places are free: two new tabs are held again, a third answered at once.
        for tab in _two_held(tight, ann, task_id, version)[0]:
            tab.leave()
