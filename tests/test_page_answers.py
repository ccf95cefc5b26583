"""Answers sent on the page, over plain HTTP against a real ``longtools serve``: two answers to
one question at once (exactly one is taken, and the other sender is told so), and options that
are numbers. Ours (review S-L2, S-L6); the looks are in test_page_flows_browser.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.conftest import Served
from tests.page_server import call, ended, link_of, signed_in, start_pages_server
from tests.pages import Page, PageClient

SENT = "Your answer was sent"
LOST = "Another answer to this question came first, so yours was not sent."


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = start_pages_server(tmp_path_factory.mktemp("page-answers"))
    try:
        yield served
    finally:
        served.stop()


def _at_once(sends: dict[str, tuple[PageClient, str, Page, dict[str, object], str]]) -> dict[str, Page]:
    """Each send of ``sends`` (who: browser, link, the opened form, fields, action), all released
    together: what each sender's browser shows after."""
    start = threading.Barrier(len(sends))
    shown: dict[str, Page] = {}
    failed: list[BaseException] = []

    def send(who: str) -> None:
        browser, link, opened, fields, action = sends[who]
        try:
            start.wait(timeout=30)
            shown[who] = browser.send(link, opened, fields, action=action)
        except BaseException as exc:  # handed to the test's thread
            failed.append(exc)

    threads = [threading.Thread(target=send, args=(who,)) for who in sends]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    if failed:
        raise failed[0]
    return shown


@pytest.mark.parametrize("round_", range(4))
def test_of_two_answers_sent_at_once_exactly_one_is_taken_and_the_other_sender_is_told_so(
    served: Served, round_: int
) -> None:
    task_id = str(call(served.url, "approve_change", {})["taskId"])
    link = link_of(served.url, task_id)
    with signed_in(served, "ann") as tab, signed_in(served, "ann") as phone:
        accept: dict[str, object] = {"change_ticket": f"CHG-{round_}", "reason": "window"}
        shown = _at_once(
            {
                "tab": (tab, link, tab.get(link), accept, "accept"),
                "phone": (phone, link, phone.get(link), {}, "decline"),
            }
        )
    told = {who: (SENT in page.text, LOST in page.text) for who, page in shown.items()}
    # One sender reads that it was sent, the other that another answer came first: never both sent.
    assert sorted(told.values()) == [(False, True), (True, False)], told
    [winner] = [who for who, (sent, _) in told.items() if sent]
    loser = shown["phone" if winner == "tab" else "tab"]
    assert loser.status == 409 and loser.heading == "Already answered"
    assert f'href="/tasks/{task_id}"' in loser.text  # and what the task did, with a way to it
    outcome = ended(served.url, task_id)["result"]["structuredContent"]
    if winner == "tab":
        assert outcome == {"action": "accept", "change": {**accept, "urgent": False, "priority": 2}}
    else:
        assert outcome == {"action": "decline", "change": None}


def test_the_same_answer_sent_again_reads_sent_and_another_one_sent_later_reads_that_one_came_first(
    served: Served,
) -> None:
    task_id = str(call(served.url, "approve_change", {})["taskId"])
    link = link_of(served.url, task_id)
    with signed_in(served, "ann") as tab:
        opened = tab.get(link)
        fields: dict[str, object] = {"change_ticket": "CHG-9"}
        # A double click: two sends of one form, at once.
        shown = _at_once(
            {"first": (tab, link, opened, fields, "accept"), "again": (tab, link, opened, fields, "accept")}
        )
        assert all(SENT in page.text for page in shown.values()), shown
        ended(served.url, task_id)
        # Once the task has taken it: the same form again is still the answer that was sent ...
        assert SENT in tab.send(link, opened, fields).text
        # ... and another answer is told that one came first.
        late = tab.send(link, opened, {"change_ticket": "CHG-10"})
        assert (late.status, late.heading) == (409, "Already answered") and LOST in late.text
    assert ended(served.url, task_id)["result"]["structuredContent"]["change"]["change_ticket"] == "CHG-9"


def test_options_that_are_numbers_are_answered_as_the_numbers_they_are(served: Served) -> None:
    task_id = str(call(served.url, "pick_numbers", {})["taskId"])
    link = link_of(served.url, task_id)
    with signed_in(served, "ann") as ann:
        opened = ann.get(link)
        sent = ann.send(link, opened, {"level": "3", "factor": "0.5"})
        assert sent.status == 200 and SENT in sent.text, sent.forms().errors
    assert ended(served.url, task_id)["result"]["structuredContent"] == {
        "numbers": {"level": 3, "factor": 0.5}
    }
    # Each option posts its JSON, and a number's default is the option ticked at first.
    assert '<input type="radio" id="f-level-2" name="level" value="2">' in opened.text
    assert '<input type="radio" id="f-factor-2" name="factor" value="1.5" checked>' in opened.text
