"""Answer links: a sealed URL that lets one person answer one question of one task. Made by the API
(``tasks/get``, the pages) and by the worker (a notification's link: ``longtools.notify``).

A link is sealed (``longtools._sealing``, its own label) over the task, the question's key and an
expiry, and bound to the principal who owns the task: only that principal's sign-in opens it, and
to anyone else it reads as unknown, like a made-up one. A decision's question (approvers, a
quorum: ``longtools.decisions``) has one link for all its approvers instead, bound to no one: it
opens for anyone signed in, and the page then shows it only to those the question's rule admits
(to anyone else it reads as unknown, the same page). A notification sends each approver a link of
their own instead: an approvers' link bound to that approver's name, which opens for them only.
Links carry no answer and no secret of the task; what a leaked link gives is a page that asks its
finder to sign in as its owner.

The API seals its links under the state key ring. A worker has no state keys (they open requestState
and page sessions, which a worker has no business with), so the links it mails are sealed under the
payload ring, which every process has, with a label of their own; the API opens both. Minting a link
gives its maker nothing: opening it still takes its person's sign-in.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol

from longtools._sealing import Sealer, Unsealable
from longtools._settings import Settings

__all__ = ["ANSWER_PATH", "AnswerLink", "AnswerLinks", "LinkExpired", "LinkUnknown", "public_base"]

ANSWER_PATH: Final = "/answer/"
_LABEL: Final = "longtools answer links"
_MAILED: Final = "longtools answer links, mailed"
"""The label of links a worker seals under the payload ring (``AnswerLinks.mailed``)."""
_APPROVERS: Final = "\x00approvers"
"""What an approvers' link is bound to: no principal has this name (they are ``token:``, ``jwt:``,
or ``anonymous``)."""


_APPROVER: Final = "\x00approver:"
"""What an approver's own link (a notification's) is bound to, followed by their name in the rule."""


class Linked(Protocol):
    """What a link is made of: the task, when it started and how long it lives (a ``TaskView``)."""

    @property
    def task_id(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def ttl_ms(self) -> int: ...


class LinkUnknown(Exception):
    """Not a link this server made for this principal (tampered, made up, another's)."""


class LinkExpired(Exception):
    """A link of this principal's whose time has run out."""


@dataclass(frozen=True)
class AnswerLink:
    task_id: str
    key: str
    """The question's key in the task's ``inputRequests``."""
    expires_at: float
    """Unix time."""
    approvers: bool = False
    """An approvers' link: whoever opens it must be admitted by the question's rule."""


class AnswerLinks:
    """Makes and opens answer links under the state key ring (the first key seals, any opens); opens
    a worker's too (:meth:`mailed`)."""

    def __init__(self, settings: Settings, *, sealer: Sealer | None = None) -> None:
        self._sealer = sealer or Sealer(settings.require_state_keys(), _LABEL)
        payload = settings.payload_key_ring()
        self._openers = [self._sealer, *([Sealer(payload, _MAILED)] if payload and sealer is None else [])]
        self._ttl_s = settings.answer_link_ttl_s

    @classmethod
    def mailed(cls, settings: Settings) -> AnswerLinks | None:
        """A worker's links, sealed under the payload ring (none without one): they open on the API."""
        payload = settings.payload_key_ring()
        return None if not payload else cls(settings, sealer=Sealer(payload, _MAILED))

    def path(self, principal: str, view: Linked, key: str) -> str:
        """The link to ``view``'s question ``key`` for ``principal``, as a path of this server. The
        same on every call for the same question (one link per question, shown alike on every
        poll), unless ``answer_link_ttl_s`` shortens it: then a new one each minute (or half the TTL,
        if shorter), valid for at least that long."""
        value = {"t": view.task_id, "k": key, "e": self._expiry(view)}
        return ANSWER_PATH + self._sealer.seal(value, principal, deterministic=True)

    def approvers_path(self, view: Linked, key: str) -> str:
        """The link to a decision's question for every approver its rule admits (see above)."""
        return self.path(_APPROVERS, view, key)

    def approver_path(self, name: str, view: Linked, key: str) -> str:
        """The link to a decision's question for one approver, ``name`` as the rule or a group names
        them (``bob`` or ``token:bob``): it opens only for a principal that goes by that name."""
        return self.path(_APPROVER + name, view, key)

    def _expiry(self, view: Linked) -> int:
        expires = view.created_at.timestamp() + view.ttl_ms / 1000
        if self._ttl_s is not None:
            # A new link each step (a minute, or half a short TTL), valid at least the TTL from now.
            now, step = time.time(), min(60.0, max(1.0, self._ttl_s / 2))
            expires = min(expires, now - now % step + step + self._ttl_s)
        return int(expires)

    def open(self, token: str, principal: str, names: Iterable[str] = ()) -> AnswerLink:
        """``names``: every name ``principal`` goes by in rules, for an approver's own link.

        Raises:
            LinkUnknown: not a link of ``principal``'s, nor an approvers' link, nor one of theirs.
            LinkExpired: such a link, past its expiry."""
        value, bound = self._opened(token, (principal, _APPROVERS, *(_APPROVER + name for name in names)))
        approvers = bound != principal
        task_id, key, expires = value.get("t"), value.get("k"), value.get("e")
        if not isinstance(task_id, str) or not isinstance(key, str) or not isinstance(expires, int):
            raise LinkUnknown
        if time.time() > expires:
            raise LinkExpired
        return AnswerLink(task_id=task_id, key=key, expires_at=float(expires), approvers=approvers)

    def _opened(self, token: str, bounds: Iterable[str]) -> tuple[dict[str, Any], str]:
        """What ``token`` holds, and which of ``bounds`` it is bound to. Raises: LinkUnknown."""
        for sealer in self._openers:
            for bound in bounds:
                try:
                    return sealer.open(token, bound), bound
                except Unsealable:
                    continue
        raise LinkUnknown


def public_base(settings: Settings, request_base: str) -> str:
    """Where a person's browser reaches this server: ``public_url``, else ``resource_url``'s origin,
    else ``request_base``, the scheme and ``Host`` the request came with (which the transport guard
    has already checked against the allowed hosts)."""
    if settings.public_url is not None:
        return settings.public_url
    if settings.resource_url is not None:
        scheme, _, rest = settings.resource_url.partition("://")
        return f"{scheme}://{rest.split('/', 1)[0]}"
    return request_base.rstrip("/")
