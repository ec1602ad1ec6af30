"""``sigint_calls``: the Jupyter interrupt routed to a callback while a cell awaits on the loop.

ipykernel delivers "Interrupt" as SIGINT. While a chat cell's turn or a ``%%sql`` query is awaited
on the kernel's event loop, the default handler would raise ``KeyboardInterrupt`` inside the loop's
machinery and kill the kernel (PLATFORM.md); so for that time the loop's own signal handler calls
``fn`` instead (the turn is cancelled, the query interrupted). Afterwards the handler in place before
is restored, whatever it was — as ipykernel does around its own handlers — not a fixed default.
Where the loop cannot take a signal handler (not the main thread, no signals), nothing is installed:
the Stop button still works and the query is not interruptible.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Generator


@contextlib.contextmanager
def sigint_calls(fn: Callable[[], None]) -> Generator[None, None, None]:
    """While the block runs, SIGINT calls ``fn`` on the running loop; the previous handler is
    restored after (a no-op where the loop cannot take signal handlers; see the module docstring)."""
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGINT)
    try:
        loop.add_signal_handler(signal.SIGINT, fn)
    except (ValueError, RuntimeError, NotImplementedError):
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
