"""Who hears of a notice, and through what: the deployment's routes (``LONGTOOLS_NOTIFY_*``,
``LONGTOOLS_WEBHOOKS``) applied to a notice. Worker process (the notify workflow's activities)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import SecretStr

from longtools._settings import Settings, parse_groups, parse_routes
from longtools.decisions import name_of, names_of
from longtools.notify._notices import Channel, Delivery, Link, Notice

__all__ = ["RouteGone", "Routes"]


class RouteGone(Exception):
    """A delivery's address is no longer in the settings (they changed since it was planned)."""


class Routes:
    def __init__(self, settings: Settings) -> None:
        self._people = _routes(settings.notify_people, "LONGTOOLS_NOTIFY_PEOPLE")
        self._channels = _routes(settings.notify_groups, "LONGTOOLS_NOTIFY_GROUPS")
        self._members = parse_groups(settings.groups) if settings.groups else {}
        self._webhooks = list(settings.webhooks)
        self._email = None if settings.notify_email is None else settings.notify_email.get_secret_value()

    def plan(self, notice: Notice, signed_in: dict[str, str] | None = None) -> list[Delivery]:
        """Every message ``notice`` makes. ``signed_in``: the verified email of people who signed in
        (by the name ``unaddressed`` gave), for those the settings give no address."""
        deliveries: list[Delivery] = []
        for group in self._groups(notice):
            deliveries += [
                Delivery(channel="apprise", to=f"group {group}", route=f"group:{group}:{n}", link="shared")
                for n, _ in enumerate(self._channels.get(group, ()))
            ]
        for name, link in self._people_of(notice):
            deliveries += self._person(name, link, signed_in)
        deliveries += [
            Delivery(channel="webhook", to=f"webhook {n + 1}", route=f"webhook:{n}", link="shared")
            for n in range(len(self._webhooks))
        ]
        return deliveries

    def unaddressed(self, notice: Notice) -> list[str]:
        """The people ``notice`` reaches whom the settings give no address (the requester's principal,
        approvers by the name their rule or group gives): those a signed-in email may reach. None
        without an email server."""
        if self._email is None:
            return []
        return [name for name, _ in self._people_of(notice) if not self._addresses(name)]

    def _groups(self, notice: Notice) -> list[str]:
        rule = notice.approvers()
        if notice.kind == "ended" or rule is None:
            return []
        groups = list(notice.widened) if notice.kind == "escalated" else list(rule.groups)
        if notice.kind == "reminder" and rule.escalate is not None and notice.widened:
            groups += notice.widened
        return groups

    def _people_of(self, notice: Notice) -> list[tuple[str, Link]]:
        """Who ``notice`` is for, by name, and the link each gets."""
        rule = notice.approvers()
        if notice.kind == "ended" or rule is None:
            return [(notice.requester, "task" if notice.kind == "ended" else "own")]
        names = set() if notice.kind == "escalated" else set(rule.principals)
        for group in self._groups(notice):
            names |= self._members.get(group, frozenset())
        voted = {name for principal in notice.voted for name in names_of(principal)}
        return [
            (name, "approver")
            for name in sorted(names)
            if name not in voted and not (rule.exclude_requester and name in names_of(notice.requester))
        ]

    def _person(self, name: str, link: Link, signed_in: dict[str, str] | None) -> list[Delivery]:
        addresses = self._addresses(name)
        found = [
            Delivery(channel=channel, to=name_of(name), route=f"person:{key}:{n}", link=link, name=name)
            for key, n, address in addresses
            if (channel := self._channel_of(address)) != "email" or self._email is not None
        ]
        email = (signed_in or {}).get(name)
        if not addresses and email is not None and self._email is not None:
            found.append(
                Delivery(channel="email", to=name_of(name), route=f"signed-in:{name}", link=link, name=name)
            )
        return found

    def _addresses(self, name: str) -> list[tuple[str, int, str]]:
        for key in (name, name_of(name)):
            if key in self._people:
                return [(key, n, address) for n, address in enumerate(self._people[key])]
        return []

    @staticmethod
    def _channel_of(address: str) -> Channel:
        return "apprise" if "://" in address else "email"

    def target(self, delivery: Delivery, signed_in: str | None = None) -> str:
        """The Apprise URL or webhook URL ``delivery`` goes to, from the settings as they are now.

        Raises:
            RouteGone: its address is no longer there.
        """
        kind, _, rest = delivery.route.partition(":")
        address: str | None = None
        if kind == "webhook":
            n = int(rest)
            address = self._webhooks[n] if n < len(self._webhooks) else None
        elif kind in ("person", "group"):
            key, _, n_text = rest.rpartition(":")
            found = (self._people if kind == "person" else self._channels).get(key, ())
            address = found[int(n_text)] if int(n_text) < len(found) else None
        elif kind == "signed-in":
            address = signed_in
        if address is None:
            raise RouteGone(delivery.route)
        if delivery.channel == "email":
            if self._email is None or self._channel_of(address) != "email":
                raise RouteGone(delivery.route)
            return _mail_to(self._email, address)
        return address


def _routes(raw: SecretStr | None, variable: str) -> dict[str, tuple[str, ...]]:
    return {} if raw is None else parse_routes(raw.get_secret_value(), variable)


def _mail_to(server: str, address: str) -> str:
    """The Apprise mail URL of ``server`` with ``address`` as its one recipient."""
    parts = urlsplit(server)
    query = [(name, value) for name, value in parse_qsl(parts.query) if name != "to"] + [("to", address)]
    return urlunsplit(parts._replace(query=urlencode(query)))
