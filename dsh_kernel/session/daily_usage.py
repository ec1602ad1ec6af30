"""Usage by UTC day and route: one session's model calls, split by the day they ran on and the
``(provider, model)`` they went to (the budgets' reading, ``dsh_kernel.agent.request.spend``).

``DailyUsage`` is fed a session's events in log order (``apply``) — from a journal read a piece at a
time, or from a live ``Session`` — and answers ``on(day)``: that day's ``UsageTotals`` by route. It
adds no accounting of its own: it drives one ``UsageReader`` (``session.usage``, the one reading of
usage, estimates included) over the whole log and cuts its running totals into *segments* — a
segment ends where the route changes (a ``request/header`` naming another provider or model; a
compaction's summary call, which names its own route) or an event's time falls on another UTC day —
so a segment's share is the difference of the reader's totals at its two ends. The whole log is read
either way, because an estimated call's input is the history before it.

What counts: every call the reader counts (reported usage; estimated counts for a server that sent
none, SPINE §1.11), by event time. A fork's seeded events (``seq < seed_length``: copies of its
parent's, which the parent's own journal already counts) are read, for the history, but not counted.
A day is ``utc_day(ms)``: whole days since the epoch, UTC.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Final, TypeAlias

from dsh_kernel.session.events import SessionEvent
from dsh_kernel.session.payloads import payload_of
from dsh_kernel.session.usage import UsageReader, UsageTotals

DAY_MS: Final = 86_400_000
Route: TypeAlias = tuple[str, str]
"""``(provider, model)``."""

_NO_USAGE: Final = UsageTotals()


def utc_day(ms: int) -> int:
    """The UTC day of epoch milliseconds ``ms`` (days since 1970-01-01)."""
    return ms // DAY_MS


def plus(a: UsageTotals, b: UsageTotals) -> UsageTotals:
    """``a + b``, field by field."""
    return UsageTotals(**{f.name: getattr(a, f.name) + getattr(b, f.name) for f in fields(a)})


def minus(a: UsageTotals, b: UsageTotals) -> UsageTotals:
    """``a − b``, field by field (``b`` is an earlier reading of the same running totals)."""
    return UsageTotals(**{f.name: getattr(a, f.name) - getattr(b, f.name) for f in fields(a)})


def add_into(sums: dict[Route, UsageTotals], more: Mapping[Route, UsageTotals]) -> None:
    """Add ``more`` into ``sums``, route by route."""
    for route, totals in more.items():
        sums[route] = plus(sums.get(route, _NO_USAGE), totals)


class DailyUsage:
    """One session's usage by UTC day and route (module docstring)."""

    __slots__ = ("_base", "_day", "_reader", "_route", "_seed", "_sums")

    def __init__(self, *, seed_length: int = 0) -> None:
        self._reader = UsageReader()
        self._seed = seed_length
        self._route: Route | None = None
        self._day: int | None = None
        self._base = _NO_USAGE
        """The reader's totals where the open segment began."""
        self._sums: dict[tuple[int, Route], UsageTotals] = {}

    def _cut(self) -> None:
        """End the open segment: its share of the totals goes to its day and route."""
        now = self._reader.totals()
        if self._route is not None and self._day is not None and now != self._base:
            key = (self._day, self._route)
            self._sums[key] = plus(self._sums.get(key, _NO_USAGE), minus(now, self._base))
        self._base = now

    def apply(self, ev: SessionEvent) -> None:
        """Read the next event of the log."""
        if ev.seq < self._seed:
            self._reader.apply(ev)
            self._base = self._reader.totals() if ev.seq == self._seed - 1 else self._base
            self._route = _route_of(ev) or self._route
            return
        day = utc_day(ev.time)
        if day != self._day:
            self._cut()
            self._day = day
        if ev.type == "compaction/summary":
            d = payload_of(ev, "compaction/summary")
            own = (d["provider"], d.get("model", "")) if "provider" in d else None
            if own is not None and own != self._route:
                self._cut()
                self._reader.apply(ev)
                outer, self._route = self._route, own
                self._cut()
                self._route = outer
                return
        route = _route_of(ev)
        if route is not None and route != self._route:
            self._cut()
            self._route = route
        self._reader.apply(ev)

    def on(self, day: int) -> dict[Route, UsageTotals]:
        """Day ``day``'s usage by route, the open segment included."""
        out = {route: t for (d, route), t in self._sums.items() if d == day}
        if self._day == day and self._route is not None:
            open_share = minus(self._reader.totals(), self._base)
            if open_share != _NO_USAGE:
                out[self._route] = plus(out.get(self._route, _NO_USAGE), open_share)
        return out

    def forget_before(self, day: int) -> None:
        """Drop what is kept of the days before ``day`` (a long-lived reader crossing midnight)."""
        self._sums = {k: v for k, v in self._sums.items() if k[0] >= day}


def _route_of(ev: SessionEvent) -> Route | None:
    """The route a ``request/header`` puts in force, else ``None``."""
    if ev.type != "request/header":
        return None
    config = payload_of(ev, "request/header")["header"].get("config")
    if not isinstance(config, dict):
        return None
    provider, model = config.get("provider"), config.get("model")
    if isinstance(provider, str) and isinstance(model, str):
        return provider, model
    return None
