"""The code run holding the main thread, as other threads see it: stop it, or leave it a job.

``CodeRunner.run`` on the main thread opens a ``RunWindow`` for as long as the code executes with
``SIGINT`` raising ``KeyboardInterrupt`` (see ``runner``'s "Interrupt"). While a window is open,
another thread may call:

* ``interrupt()`` — send ``SIGINT`` to the main thread (``signal.pthread_kill``), exactly what the
  Jupyter interrupt does to the code: it becomes failure ``abort`` with the output so far. A signal
  aimed at the main thread also ends a blocking call there at once (``time.sleep``, a socket read),
  which ``_thread.interrupt_main`` would not (measured: during a ``time.sleep(3)``, a thread's
  ``interrupt_main()`` landed when the sleep ended, 2.5 s later; ``pthread_kill`` in 0.7 ms).
  Returns ``False``, sending nothing, when no code runs.
* ``after_run(fn)`` — run ``fn()`` on the main thread as soon as the code ends, before the run
  returns its result (so before the tool call's result is logged and before the agent's next step).
  Returns ``False`` when no code runs; the caller then does the work its usual way.

Why a lock and why closing retries: the signal is sent *under* the lock, and the main thread closes
the window under the same lock, so a signal is only ever sent while the window is open — never to a
kernel that has moved on (where ``SIGINT`` might raise into ipykernel's own loop). A signal sent just
before the close can still raise ``KeyboardInterrupt`` inside the close (lock waits are interrupted
by signals); closing is idempotent and retried, so the window always closes, and the interrupt is
re-raised for the runner to report as the user's abort.

Nothing here runs on import or holds state between runs beyond the open windows. Windows nest (code
that runs code): jobs go to the outermost, and the main thread counts as running until the last one
closes.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable

_log = logging.getLogger(__name__)

_lock = threading.Lock()
_open: dict[RunWindow, None] = {}  # insertion-ordered: the first is the outermost run


class RunWindow:
    """One run's window. ``open()``/``close()`` on the main thread; ``run_after()`` once the code's
    output capture has ended (jobs must not print into the code's output)."""

    __slots__ = ("_jobs",)

    def __init__(self) -> None:
        self._jobs: list[Callable[[], None]] = []

    def open(self) -> None:
        with _lock:
            _open[self] = None

    def close(self) -> None:
        interrupted: KeyboardInterrupt | None = None
        while True:
            try:
                with _lock:
                    _open.pop(self, None)
                break
            except KeyboardInterrupt as exc:  # a Stop signal sent just before we took the lock
                interrupted = exc
        if interrupted is not None:
            raise interrupted

    def run_after(self) -> None:
        """Run the jobs other threads left (each at most once; a failing job is logged)."""
        with _lock:
            jobs, self._jobs = self._jobs, []
        for job in jobs:
            try:
                job()
            except Exception:
                _log.exception("a job left for the end of a code run failed")


def running() -> bool:
    """True while code runs on the main thread with ``SIGINT`` raising ``KeyboardInterrupt``."""
    return bool(_open)


def interrupt() -> bool:
    """Interrupt the running code (from any thread); ``False`` when none runs."""
    main = threading.main_thread().ident
    with _lock:
        if not _open or main is None:
            return False
        signal.pthread_kill(main, signal.SIGINT)
        return True


def after_run(job: Callable[[], None]) -> bool:
    """Have ``job()`` run on the main thread when the running code ends; ``False`` when none runs."""
    with _lock:
        if not _open:
            return False
        next(iter(_open))._jobs.append(job)  # pyright: ignore[reportPrivateUsage]
        return True
