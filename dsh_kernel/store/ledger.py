"""The budgets' ledger: what one user used today (UTC), across every session of the store.

``DailyLedger(store, user).usage(live)`` is today's ``UsageTotals`` by ``(provider, model)`` over the
store's journals whose header names ``user`` — or names no one (sessions written before the header
recorded the user: in one's own store they are one's own; counting them leans strict) — plus the
live session ``live``, read from memory (its journal may lag it by a write-behind window; the live
session's own journal is skipped). It is the kernel's ``UsageSource`` for ``agent.request.spend``, so
neither ``%agent new`` nor a restart resets a budget: the sessions they leave behind are journals
like any other.

**Journals are the source of truth, not ``sessions.duckdb``.** The database may be held by another
kernel (a second writer's open fails at once, PLATFORM.md) and lags the journals, and a budget check
must never wait. The ledger reads journals directly and incrementally: for each file it remembers
the bytes read (to the last complete line — a torn or half-written tail is read when it is
finished), the file's size and time, and a ``DailyUsage`` (``session.daily_usage``: the one usage
reading, split by day and route) fed the events so far. A call stats the journal files, skips those
not modified today (UTC) and those unchanged since, and reads only what was appended. A file that
shrank (a crash repair cut its torn tail) is read again from the start. A file that cannot be read
(damaged, another user's, not a journal) is left out and, when damaged, logged once.

Cost: one ``stat`` per journal file per call, and the new lines of the files that grew.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

from dsh_kernel.errors import DshError
from dsh_kernel.session.check.payload import problem as payload_problem
from dsh_kernel.session.codec import decode_event, header_from_json, loads
from dsh_kernel.session.daily_usage import DAY_MS, DailyUsage, Route, add_into, utc_day
from dsh_kernel.session.events import EVENT_CATALOG
from dsh_kernel.session.log import Clock, Session, wall_clock_ms
from dsh_kernel.session.usage import UsageTotals
from dsh_kernel.store.layout import JOURNAL_SUFFIX, Store

_log = logging.getLogger(__name__)

_KNOWN = frozenset(EVENT_CATALOG)


@dataclass(slots=True)
class _Journal:
    """What the ledger knows of one journal file."""

    offset: int = 0
    """Bytes read: up to and including the last complete line."""
    signature: tuple[int, int] = (-1, -1)
    """``(size, mtime_ns)`` when last read."""
    tally: DailyUsage | None = None
    """``None`` until the header is read."""
    counts: bool = True
    """False for another user's session, or a file that could not be read."""
    lines: int = 0


@dataclass(slots=True)
class _Live:
    session: Session
    tally: DailyUsage
    read: int = 0


@dataclass(slots=True)
class DailyLedger:
    """Today's usage of ``user`` in ``store`` (module docstring). ``store=None``: the live session
    alone (a kernel whose store cannot be written)."""

    store: Store | None
    user: str | None
    clock: Clock = wall_clock_ms
    _files: dict[str, _Journal] = field(default_factory=dict[str, _Journal])
    _live: _Live | None = None
    _day: int = -1

    def usage(self, live: Session | None = None) -> dict[Route, UsageTotals]:
        """Today's usage by ``(provider, model)``: the store's journals of this user and ``live``."""
        now = self.clock()
        today = utc_day(now)
        if today != self._day:
            self._day = today
            for j in self._files.values():
                if j.tally is not None:
                    j.tally.forget_before(today)
            if self._live is not None:
                self._live.tally.forget_before(today)
        sums: dict[Route, UsageTotals] = {}
        live_id = self._follow(live)
        if self.store is not None:
            for sid, path in self._journals(today * DAY_MS, skip=live_id):
                tally = self._read(sid, path)
                if tally is not None:
                    add_into(sums, tally.on(today))
        if self._live is not None:
            add_into(sums, self._catch_up_live().on(today))
        return sums

    # --- the live session ---------------------------------------------------------------------

    def _follow(self, live: Session | None) -> str | None:
        """Make ``live`` the session read from memory; the one it replaces goes back to being read
        from its journal (from the start: its memory reading stops here)."""
        current = self._live
        if live is None:
            if current is not None:
                self._files.pop(current.session.id, None)
                self._live = None
            return None
        if current is None or current.session is not live:
            if current is not None:
                self._files.pop(current.session.id, None)
            self._files.pop(live.id, None)
            self._live = _Live(live, DailyUsage(seed_length=live.header.seed_length or 0))
        return live.id

    def _catch_up_live(self) -> DailyUsage:
        live = self._live
        assert live is not None
        events = live.session.events
        for i in range(live.read, len(events)):
            live.tally.apply(events[i])
        live.read = len(events)
        return live.tally

    # --- the journals --------------------------------------------------------------------------

    def _journals(self, since_ms: int, *, skip: str | None) -> list[tuple[str, os.DirEntry[str]]]:
        """The journal files modified at or after ``since_ms`` (and any already being read), but
        ``skip``'s."""
        assert self.store is not None
        root = self.store.journals_dir
        out: list[tuple[str, os.DirEntry[str]]] = []
        try:
            days = [d for d in os.scandir(root) if d.is_dir()]
        except OSError:
            return out
        since_ns = since_ms * 1_000_000
        for day in days:
            try:
                entries = list(os.scandir(day.path))
            except OSError:
                continue
            for entry in entries:
                if not entry.name.endswith(JOURNAL_SUFFIX):
                    continue
                sid = entry.name.removesuffix(JOURNAL_SUFFIX)
                if sid == skip:
                    continue
                try:
                    modified = entry.stat().st_mtime_ns
                except OSError:
                    continue
                if modified >= since_ns:
                    out.append((sid, entry))
        return out

    def _read(self, sid: str, entry: os.DirEntry[str]) -> DailyUsage | None:
        """``sid``'s tally after reading what its journal gained; ``None`` when it does not count."""
        j = self._files.get(sid)
        try:
            st = entry.stat()
        except OSError:
            return j.tally if j is not None and j.counts else None
        signature = (st.st_size, st.st_mtime_ns)
        if j is None or st.st_size < j.offset:
            j = self._files[sid] = _Journal()
        if not j.counts:
            return None
        if signature == j.signature:
            return j.tally
        j.signature = signature
        try:
            self._take(j, entry.path)
        except (DshError, OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            j.counts = False
            _log.warning("dsh: the budget leaves out %s, which cannot be read: %s", entry.path, exc)
            return None
        return j.tally if j.counts else None

    def _take(self, j: _Journal, path: str) -> None:
        with open(path, "rb") as f:
            f.seek(j.offset)
            data = f.read()
        cut = data.rfind(b"\n") + 1
        if not cut:
            return
        j.offset += cut
        for line in data[:cut].decode("utf-8").split("\n")[:-1]:
            j.lines += 1
            where = f"{path}:{j.lines}"
            if j.tally is None:
                header = header_from_json(loads(line), where=where)
                if header.user is not None and header.user != self.user:
                    j.counts = False
                    return
                j.tally = DailyUsage(seed_length=header.seed_length or 0)
                continue
            ev = decode_event(line, _KNOWN, where=where)
            if ev is None:  # unknown but ignorable
                continue
            wrong = payload_problem(ev.type, ev.data)
            if wrong is not None:
                raise ValueError(f"{where}: {wrong}")
            j.tally.apply(ev)
