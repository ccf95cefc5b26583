"""What keeps a page up to date without costing more than it shows: the requests pages hold open
while they wait for news (a bound of their own), the browser that leaves one (its wait ends at
once), the tasks a person starts elsewhere (seen within a second or two), and the listings pages
were last shown (a page's next wait starts from what it shows, not from a read of every task), and
the questions newly waiting for a person (``/decisions``). API process.

Nothing here is needed for a page to be right, only for it to be cheap: a replica that has not
seen a listing reads it from Temporal, and one that holds no place answers at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

import structlog
from starlette.requests import Request
from temporalio.service import RPCError

from longtools.decisions import Voter
from longtools.tasks import TERMINAL, Tasks, TaskView
from longtools.temporal import unreachable

__all__ = [
    "AT_BOUND_S",
    "Arrivals",
    "Asked",
    "Listing",
    "Listings",
    "PageWaits",
    "pace",
    "until_left",
    "while_here",
]

K = TypeVar("K")
T = TypeVar("T")

log = structlog.get_logger("longtools.pages")

AT_BOUND_S: Final = 5
"""How long a page answered at once (no place to hold its wait) waits before it asks again."""
_KEPT_LISTINGS: Final = 1000
_KEPT_BYTES: Final = 8 * 1024 * 1024
"""Bounds of the listings kept (each holds the views of up to a page of tasks)."""


class PageWaits:
    """The waits for news this process holds open for pages, per principal and in all.

    Apart from the MCP requests held open (``HeldRounds``): a person's open tabs never take the
    places their MCP calls wait in, and MCP calls never make a tab give up its wait. The sizes are
    the same settings' (``LONGTOOLS_MAX_HELD_ROUNDS(_PER_PRINCIPAL)``), counted separately.
    """

    def __init__(self, *, per_principal: int, total: int) -> None:
        self._per_principal = per_principal
        self._total = total
        self._held: Counter[str] = Counter()
        self._all = 0

    @contextlib.contextmanager
    def hold_if_free(self, principal: str) -> Iterator[bool]:
        """Count one wait for ``principal`` while inside if both bounds allow it; whether it was.
        A page at a bound is answered at once (and waits a while before it asks again)."""
        if self._all >= self._total or self._held[principal] >= self._per_principal:
            yield False
            return
        self._held[principal] += 1
        self._all += 1
        try:
            yield True
        finally:
            self._all -= 1
            self._held[principal] -= 1
            if not self._held[principal]:
                del self._held[principal]


async def until_left(request: Request) -> None:
    """Return once the browser that sent ``request`` has gone (its ``http.disconnect``): a page
    closed, reloaded or moved on. Only for a request whose body nobody else reads (a GET)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def while_here(request: Request, waiting: Awaitable[T]) -> T | None:
    """``await waiting``, unless the browser leaves first: then None, and the wait is cancelled at
    once (its place, and the watch it holds, are given back)."""
    work = asyncio.ensure_future(waiting)
    gone = asyncio.ensure_future(until_left(request))
    try:
        await asyncio.wait([work, gone], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in (work, gone):
            future.cancel()
        await asyncio.gather(work, gone, return_exceptions=True)
    if work.done() and not work.cancelled():
        return work.result()
    log.debug("page_wait_left")  # its place and its watches are given back
    return None


def pace(held: bool) -> dict[str, Any]:
    """What tells ``page.js`` when to ask again: at once after a held wait, or a while later when
    no place was free to hold it (a page must not ask once a second at the bound)."""
    return {} if held else {"again_s": AT_BOUND_S}


@dataclass(frozen=True)
class Listing:
    """One page of a person's tasks as it was shown."""

    version: str
    views: tuple[TaskView, ...]
    """Newest first, as shown."""
    ids: tuple[str, ...]
    """The tasks Temporal's visibility listed for it, in its order (``Arrivals`` compares them)."""
    older: str | None
    """The cursor of the next, older page."""

    @property
    def size(self) -> int:
        """About how many bytes it holds: what its open tasks ask (the ended ones' views are the
        gateway's, and held by it too)."""
        return 256 + sum(
            512 + len(str(view.input_requests or "")) for view in self.views if view.status not in TERMINAL
        )


class Listings:
    """The listings pages were last shown, by principal, page and version, most recent last: a
    page's wait for news starts from the views it shows (a wait from a view's mark misses no
    change made since), instead of reading every task of the page again. Bounded by count and
    bytes; one not kept (another replica's, or dropped) is read again."""

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[str, str, str], Listing] = OrderedDict()
        self._bytes = 0

    def get(self, principal: str, page: str, version: str) -> Listing | None:
        listing = self._kept.get((principal, page, version))
        if listing is not None:
            self._kept.move_to_end((principal, page, version))
        return listing

    def keep(self, principal: str, page: str, listing: Listing) -> None:
        key = (principal, page, listing.version)
        earlier = self._kept.pop(key, None)
        if earlier is not None:
            self._bytes -= earlier.size
        self._kept[key] = listing
        self._bytes += listing.size
        while len(self._kept) > _KEPT_LISTINGS or self._bytes > _KEPT_BYTES:
            self._bytes -= self._kept.popitem(last=False)[1].size


@dataclass
class _Poll:
    ids: tuple[str, ...] = ()
    reads: int = 0
    """Reads done so far: a waiter heeds only those begun after it came (``ids`` may be older than
    the listing it waits from)."""
    reading: bool = False
    waiters: int = 0
    news: asyncio.Event = field(default_factory=asyncio.Event)
    runner: asyncio.Task[None] | None = None


class _Polls(Generic[K]):
    """News of tasks new to a list of ids that Temporal's visibility gives for a key (``_ids``),
    read every ``every_s`` for each key a page waits for, however many pages wait on it on this
    replica (one read for all of them)."""

    def __init__(self, tasks: Tasks, every_s: float) -> None:
        self._tasks = tasks
        self._every_s = every_s
        self._polls: dict[K, _Poll] = {}
        self._failing = False

    async def _ids(self, key: K) -> list[str]:
        raise NotImplementedError

    async def after(self, key: K, known: tuple[str, ...], within_s: float) -> bool:
        """Wait until visibility lists a task for ``key`` that is not one of ``known`` (True), or
        ``within_s`` seconds pass or the process stops (False). A task that only moved (it ended,
        or left the list) is no news: its page follows it already."""
        poll = self._polls.get(key)
        if poll is None:
            poll = self._polls[key] = _Poll()
        poll.waiters += 1
        heeded = poll.reads + (1 if poll.reading else 0)  # a read in flight began before this wait
        if poll.runner is None:
            poll.runner = asyncio.create_task(self._run(key, poll))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within_s
        try:
            while True:
                news = poll.news  # before the check: news after it sets this one
                if poll.reads > heeded and not set(poll.ids) <= set(known):
                    return True
                left = deadline - loop.time()
                if left <= 0 or self._tasks.stopping:
                    return False
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        await news.wait()
        finally:
            poll.waiters -= 1

    async def aclose(self) -> None:
        for poll in list(self._polls.values()):
            if poll.runner is not None:
                poll.runner.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await poll.runner

    async def _run(self, key: K, poll: _Poll) -> None:
        try:
            while poll.waiters > 0 and not self._tasks.stopping:
                poll.reading = True
                try:
                    ids = await self._ids(key)
                except (RPCError, RuntimeError) as exc:  # Temporal out of reach: the waits time out
                    if isinstance(exc, RuntimeError) and not unreachable(exc):
                        raise
                    if not self._failing:
                        log.warning("page_arrivals_failed", error=type(exc).__name__)
                    self._failing = True
                else:
                    self._failing = False
                    poll.ids = tuple(ids)
                    poll.reads += 1
                    news, poll.news = poll.news, asyncio.Event()
                    news.set()
                finally:
                    poll.reading = False
                await asyncio.sleep(self._every_s)
        finally:
            poll.runner = None
            if poll.waiters == 0 and self._polls.get(key) is poll:
                del self._polls[key]


class Arrivals(_Polls[str]):
    """News of a person's new tasks, for their pages: the first page of their tasks as Temporal's
    visibility lists them (a task started since is on it: first if it runs, first of the ended
    ones if it has ended already), read every ``every_s`` for each principal a page waits for.

    No change of a task a page follows tells of a task started since (on any replica), and the
    start itself is no event a page can wait on: this one visibility read a second shows it.
    """

    def __init__(self, tasks: Tasks, every_s: float, page_size: int) -> None:
        super().__init__(tasks, every_s)
        self._page_size = page_size

    async def _ids(self, key: str) -> list[str]:
        ids, _ = await self._tasks.owned(key, self._page_size, b"")
        return ids


class Asked(_Polls[Voter]):
    """News of questions newly waiting for a person, for their ``/decisions``: the tasks
    ``Tasks.deciding`` finds for them (their name's and groups' tags), read every ``every_s`` for
    each person a page of decisions waits for. A question starts waiting on a person with no
    change of any task their page follows."""

    async def _ids(self, key: Voter) -> list[str]:
        return await self._tasks.deciding(key)
