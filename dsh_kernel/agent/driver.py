"""The driver of an agent: the one task that runs its turns, its status, and waiting for idle
(SPINE §1.3).

A wake starts the driver task on the running event loop (or, with no loop yet, when ``when_idle``
first runs one); it runs turns while they leave work pending, each under a fresh
``AbortController`` whose abort cancels the task. A turn cancelled by its abort ends the driver
unless input arrived during the abort (``latch``), which then starts a fresh turn. A turn that
fails has already logged ``turn/end{error}``; its exception is kept as ``last_error`` and pending
work waits for the next wake. ``when_idle`` re-raises an ``InvariantError`` (a bug of ours, never of
the user's). A maintenance task (``run_maintenance``) runs only while idle, keeps the status
``idle``, and holds back wakes until it ends. Status changes (``idle``/``running``) are reported
through ``on_status``; ``on_first_start`` runs once, before the first turn's task starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Literal

from dsh_kernel.abort import AbortCause, AbortController, AbortSignal
from dsh_kernel.errors import InvariantError, UsageError

Status = Literal["idle", "running"]


class Driver:
    """See the module docstring."""

    def __init__(
        self,
        *,
        run_turn: Callable[[AbortSignal], Awaitable[bool]],
        has_pending: Callable[[], bool],
        on_status: Callable[[Status], None],
        on_first_start: Callable[[], None],
        name: str,
    ) -> None:
        self._run_turn = run_turn
        self._has_pending = has_pending
        self._on_status = on_status
        self._on_first_start = on_first_start
        self._name = name
        self.status: Status = "idle"
        self.last_error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None
        self._controller: AbortController | None = None
        self._wake_pending = False
        self._wake_latched = False
        self._maintenance: AbortController | None = None
        self._started = False
        self._idle_waiters: list[asyncio.Future[None]] = []

    def aborting(self) -> bool:
        """Whether a running turn's abort is in flight (new input then waits for a fresh turn)."""
        ctl = self._controller
        return ctl is not None and ctl.signal.aborted and self.status == "running"

    def latch(self) -> None:
        """Start a fresh turn once the aborted one ends, unless the abort was a dispose."""
        reason = self._controller.signal.reason if self._controller is not None else None
        if not (reason and reason.kind == "disposed"):
            self._wake_latched = True

    def abort(self, cause: AbortCause, *, keep_pending: bool) -> None:
        """Abort the running activity; without ``keep_pending`` no queued wake survives it."""
        if not keep_pending:
            self._wake_latched = False
            self._wake_pending = False
        if self._controller is not None:
            self._controller.abort(cause)

    def wake(self) -> None:
        if self._task is not None:
            return
        self._wake_pending = True
        if self._maintenance is not None:
            return  # started when the maintenance task ends
        self._set_status("running")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # started by when_idle() once a loop runs
        self._start()

    async def when_idle(self) -> None:
        """Resolve once no driver remains (following any queued work)."""
        if self._wake_pending and self._task is None and self._maintenance is None:
            self._start()
        if self._task is None and self._maintenance is None:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._idle_waiters.append(fut)
        await fut
        if isinstance(self.last_error, InvariantError):
            raise self.last_error

    async def run_maintenance(self, task: Callable[[AbortSignal], Awaitable[None]]) -> None:
        if self._task is not None or self._maintenance is not None or self._wake_pending:
            raise UsageError("run_maintenance needs an idle agent")
        ctl = AbortController()
        self._controller = ctl
        self._maintenance = ctl
        try:
            await task(ctl.signal)
        finally:
            self._maintenance = None
            self._controller = None
            if self._wake_pending:
                self._start()
            else:
                self._resolve_idle()

    def _start(self) -> None:
        self._wake_pending = False
        if not self._started:
            self._started = True
            self._on_first_start()
        self._set_status("running")
        self._task = asyncio.get_running_loop().create_task(self._drive(), name=self._name)

    def _set_status(self, status: Status) -> None:
        if status != self.status:
            self.status = status
            self._on_status(status)

    def _resolve_idle(self) -> None:
        self._set_status("idle")
        waiters, self._idle_waiters = self._idle_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def _drive(self) -> None:
        task = asyncio.current_task()
        try:
            while True:
                ctl = AbortController()
                self._controller = ctl
                ctl.signal.add_callback(lambda _c, t=task: t.cancel() if t is not None else None)
                more = False
                try:
                    more = await self._run_turn(ctl.signal)
                except asyncio.CancelledError:
                    if not ctl.signal.aborted:
                        raise
                    if task is not None:
                        task.uncancel()
                except Exception as exc:
                    self.last_error = exc
                    more = False
                if ctl.signal.aborted:
                    more = self._wake_latched and self._has_pending()
                    self._wake_latched = False
                if not more:
                    break
        finally:
            self._controller = None
            self._task = None
            self._resolve_idle()
