"""The shipper: a kernel's journals sent to the shared store from a thread of their own.

``Shipper(target)`` owns one daemon thread and one connection. ``follow(writer, hooks)`` adds a live
journal: its ``checkpoint`` listener (registered after the journal writer's, so it runs once the
flush is durable) records how many events are durable — only those are ever shipped, so after a
power cut the server never holds an event the journal lost — and *pokes* the thread — it never does I/O and never waits, so a slow or absent
server can never delay a checkpoint, a turn or the kernel. The thread ships at most every
``interval_s`` (2 s) after a poke, and at once for a ``turn-end`` checkpoint; each round sends, per
journal, the lines past its shipped offset (``send.JournalTail``) in one transaction per batch.

When the server is away: the round fails, nothing is marked shipped, the connection is dropped and
the next attempt waits 1 s, 2 s, 4 s … up to ``max_backoff_s`` (60 s); a poke does not cut a backoff
short. After every (re)connect the thread asks the server for each session's ``max(seq)`` and resends
from there (``send.resync``), so a batch lost with the server, or committed just before a crash, is
neither lost nor duplicated. ``status()`` says how far behind shipping is, for ``%agent status``.

The connection is opened when there is something to send and closed after ``idle_close_s`` (30 s)
without any, so a class of idle kernels holds no server connections (``max_connections``).

``close(timeout_s)`` makes a last attempt (at most ``timeout_s``), then stops the thread; what is not
shipped then is still in the journal, for the next kernel or ``python -m dsh_kernel ship``.
Failures are logged once per change of reason (the reason never carries a password: the target
holds none, and server messages go through the redactor).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsh_kernel.errors import DshError, StoreError
from dsh_kernel.store.shared.connection import (
    Connection,
    check_target,
    connect,
    describe_target,
    migrate,
)
from dsh_kernel.store.shared.send import JournalTail, resync, send

if TYPE_CHECKING:
    from dsh_kernel.agent.hooks import AgentHooks, Checkpoint
    from dsh_kernel.store.journal import JournalWriter

__all__ = ["DEFAULT_INTERVAL_S", "IDLE_CLOSE_S", "MAX_BACKOFF_S", "Shipper", "ShipperStatus"]

_log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 2.0
MAX_BACKOFF_S = 60.0
IDLE_CLOSE_S = 30.0
"""A connection unused this long is closed: 300 idle kernels must not hold 300 server connections."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShipperStatus:
    """What ``%agent status`` shows of the shipper."""

    target: str
    connected: bool
    behind: int
    """Durable events of the followed journals the server does not hold yet."""
    shipped: int
    """Events this shipper has sent since the kernel started."""
    error: str | None
    """Why the last attempt failed (``None`` after a success)."""
    retry_in_s: float | None

    def line(self) -> str:
        """One line: where, and how far behind."""
        if self.error is None and self.shipped == 0 and self.behind == 0 and not self.connected:
            # nothing was asked of the server yet: "up to date" would claim it answered
            return f"shared store {self.target}: not contacted yet (nothing to send so far)"
        if self.error is None:
            state = (
                "up to date"
                if self.behind == 0
                else f"{self.behind} event{'' if self.behind == 1 else 's'} to send"
            )
            return f"shared store {self.target}: {state} ({self.shipped} events shipped)"
        retry = f"; next try in {self.retry_in_s:.0f} s" if self.retry_in_s is not None else ""
        return (
            f"shared store {self.target}: {self.behind} events behind — {self.error}{retry} "
            "(nothing is lost: the journal keeps them)"
        )


class Shipper:
    """See the module docstring."""

    def __init__(
        self,
        target: str,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        max_backoff_s: float = MAX_BACKOFF_S,
        idle_close_s: float = IDLE_CLOSE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.target = check_target(target)
        self.interval_s = interval_s
        self.max_backoff_s = max_backoff_s
        self.idle_close_s = idle_close_s
        self._clock = clock
        self._tails: list[JournalTail] = []
        self._lock = threading.Lock()  # guards _tails and the poke state
        self._wake = threading.Condition(self._lock)
        self._poked = False
        self._urgent = False
        self._stop = False
        self._conn: Connection | None = None
        self._synced = False
        self._last_round = -1e9
        self._backoff = 0.0
        self._retry_at: float | None = None
        self._error: str | None = None
        self._shipped = 0
        self._disposers: list[Callable[[], None]] = []
        self._closers: list[Callable[[], None]] = []
        """Move each journal's durable mark to its end (``close`` runs after the journal's own)."""
        self._thread = threading.Thread(target=self._run, name="dsh-shipper", daemon=True)
        self._thread.start()

    # --- what to ship ------------------------------------------------------------------------------

    def follow(self, writer: JournalWriter, hooks: AgentHooks | None = None) -> None:
        """Ship ``writer``'s journal from now on, as far as its last durable checkpoint: with
        ``hooks``, each of its checkpoints moves that mark to what the journal holds (the writer's
        flush ran first) and pokes the thread; without, everything written is taken as durable."""
        from dsh_kernel.session.codec import header_to_json

        mark = [writer.committed]  # a resumed journal's events were fsynced by an earlier kernel

        def durable() -> int:
            return mark[0] if hooks is not None else writer.committed

        tail = JournalTail(
            path=writer.path,
            session_id=writer.header.id,
            header=header_to_json(writer.header),
            durable=durable,
        )

        async def on_checkpoint(checkpoint: Checkpoint) -> None:
            mark[0] = writer.committed
            self.poke(now=checkpoint.reason in ("turn-end", "shutdown"))

        with self._lock:
            self._tails = [t for t in self._tails if t.session_id != tail.session_id]
            self._tails.append(tail)
            self._closers.append(lambda: mark.__setitem__(0, writer.committed))
            self._synced = False
        if hooks is not None:
            self._disposers.append(hooks.checkpoint.on(on_checkpoint))
        self.poke()

    def poke(self, *, now: bool = False) -> None:
        """Ask for a round: within ``interval_s``, or as soon as possible with ``now``. Never blocks
        on the server (it takes only a lock the thread never holds while doing I/O)."""
        with self._wake:
            self._poked = True
            self._urgent = self._urgent or now
            self._wake.notify()

    # --- state -------------------------------------------------------------------------------------

    def status(self) -> ShipperStatus:
        """A snapshot for ``%agent status``."""
        with self._lock:
            behind = sum(t.behind() for t in self._tails)
            retry = self._retry_at
        return ShipperStatus(
            target=describe_target(self.target),
            connected=self._conn is not None,
            behind=behind,
            shipped=self._shipped,
            error=self._error,
            retry_in_s=None if retry is None else max(0.0, retry - self._clock()),
        )

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until every followed journal's durable events are on the server (tests, ``close``)."""
        deadline = self._clock() + timeout_s
        while self._clock() < deadline:
            if self.status().behind == 0 and self._error is None:
                return True
            self.poke(now=True)
            time.sleep(0.02)
        return False

    def close(self, timeout_s: float = 2.0) -> None:
        """A last round (at most ``timeout_s``), then stop the thread and drop the connection. Call it
        after closing the journals: what they flushed at close is shipped too."""
        for dispose in self._disposers:
            dispose()
        self._disposers.clear()
        with self._lock:
            for mark_end in self._closers:
                mark_end()
        if self._error is None:
            self.wait_idle(timeout_s)
        with self._wake:
            self._stop = True
            self._wake.notify()
        self._thread.join(timeout_s + 1.0)

    # --- the thread --------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            idle = False
            with self._wake:
                while not self._stop:
                    now = self._clock()
                    due = self._due(now)
                    if due is not None and due <= now:
                        break
                    if due is None and self._conn is not None:
                        close_at = self._last_round + self.idle_close_s
                        if close_at <= now:
                            idle = True
                            break
                        due = close_at
                    self._wake.wait(None if due is None else due - now)
                if self._stop:
                    break
                tails: list[JournalTail] = []
                if not idle:
                    self._poked = self._urgent = False
                    tails = list(self._tails)
            if idle:
                self._drop()  # a kernel holds a server connection only while it has work
                continue
            self._round(tails)
        self._drop()

    def _due(self, now: float) -> float | None:
        """When the next round may start (``None``: not until poked)."""
        if self._retry_at is not None:
            return self._retry_at  # a failed round always comes back: its events are still due
        if not self._poked:
            return None
        return now if self._urgent else self._last_round + self.interval_s

    def _round(self, tails: list[JournalTail]) -> None:
        self._last_round = self._clock()
        try:
            conn = self._connection(tails)
            for tail in tails:
                self._ship(conn, tail)
        except Exception as exc:  # DshError, OSError, and the driver's errors (no common base here)
            self._failed(exc)
            return
        if self._error is not None:
            _log.info("dsh: the shared store %s is back", describe_target(self.target))
        self._error = None
        self._retry_at = None
        self._backoff = 0.0

    def _connection(self, tails: list[JournalTail]) -> Connection:
        if self._conn is None:
            self._conn = connect(self.target)
            migrate(self._conn)
            self._synced = False
        if not self._synced:
            resync(self._conn, tails)
            self._synced = True
        return self._conn

    def _ship(self, conn: Connection, tail: JournalTail) -> None:
        while True:
            batch = tail.read()
            if not batch.rows and batch.offset == tail.offset:
                return
            if batch.rows or tail.next_seq == 0:
                send(conn, tail, batch.rows)
            with self._lock:
                tail.advance(batch)
            self._shipped += len(batch.rows)

    def _failed(self, exc: BaseException) -> None:
        reason = exc.message if isinstance(exc, DshError) else f"{type(exc).__name__}: {exc}"
        from dsh_kernel.llm.secrets import REDACTOR

        reason = REDACTOR.redact(" ".join(reason.split())[:300])
        if isinstance(exc, StoreError) and exc.code in ("SHARED_STORE_DRIVER",):
            self._backoff = self.max_backoff_s
        else:
            self._backoff = min(self.max_backoff_s, max(1.0, self._backoff * 2))
        if reason != self._error:
            _log.warning("dsh: shipping to the shared store failed (%s); retrying", reason)
        self._error = reason
        self._retry_at = self._clock() + self._backoff
        self._drop()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        self._synced = False
        if conn is not None:
            try:
                conn.close()
            except Exception:  # a connection to a dead server may fail to close; it is gone anyway
                _log.debug("closing the shared store connection failed", exc_info=True)
