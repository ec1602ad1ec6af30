"""Stop and the steer box while the agent's ``python`` code holds the kernel's main thread.

The ``python`` tool runs the model's code synchronously on the main thread (where signals and user
code belong), so while it runs the main thread's event loop reads no message: a Stop or Send click
(an ipywidgets ``comm_msg`` on the shell channel) would reach the view only when the code ends —
after a 20 s sleep, with its side effects done, and a steer too late for the next model request.

**The hook.** ipykernel 7 reads the shell socket on a separate *shell channel* thread, and for every
``comm_msg``/``comm_close`` calls ``comm._reply_subshell_for(data, subshell_id)`` there (when the comm
has it) before forwarding the message, unchanged, to the main thread
(``ipykernel.kernelbase.Kernel.shell_channel_thread_main``; the method routes widget replies to
subshells). That thread is not blocked by user code. ``watch`` wraps that method on the comms of
the view's Stop button, steer box and Send button — never any other comm — so this module hears
their messages as they arrive, then lets ipykernel route them as before:

* **Stop** while code runs: ``runtime.running.interrupt()`` sends ``SIGINT`` to the main thread,
  exactly what the Jupyter interrupt does there: the code stops with failure ``abort``, the call's
  result is ``ABORTED`` with the output so far, and the turn is cancelled (click → cell reply: median
  25 ms, ``benchmarks/kernel.py``). When no code runs the click is left to the view (it is handled
  at once anyway: the loop is free).
* **Steer box**: each ``update`` of its ``value`` is mirrored here (what the frontend last sent).
* **Send** while code runs: the mirrored text is handed to ``runtime.running.after_run``, so it is
  steered on the main thread the moment the code ends — before the call's result is logged and
  before the next model request is built. The view still receives the same click later; one entry
  per Send click goes into ``TurnView.handled_sends`` (``True`` when steered here), in message order
  (the shell channel thread forwards messages in the order it reads them), and the view skips the
  click that was already steered — so a steer is never sent twice, nor lost.

**A private hook, feature-detected.** ``_reply_subshell_for`` is not public API. ``watch`` installs
nothing (and Stop/steer behave as before: handled once the code ends) when the kernel has no shell
channel thread (ipykernel < 7, in-process kernels) or a comm lacks the method.
``tests/unit/kernel/test_busy.py`` fails loudly if the installed ipykernel stops calling it.
Everything run on the shell channel thread is guarded: an exception there would make ipykernel drop
the message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from dsh_kernel.runtime import running

if TYPE_CHECKING:
    from dsh_kernel.views import TurnView

_log = logging.getLogger(__name__)

HOOK = "_reply_subshell_for"
"""The comm method ipykernel 7's shell channel thread calls for each ``comm_msg``/``comm_close``."""


def available(kernel: object) -> bool:
    """True when ``kernel`` reads its shell socket on a shell channel thread (ipykernel ≥ 7)."""
    return getattr(kernel, "shell_channel_thread", None) is not None


def watch(kernel: object, view: TurnView, *, on_steer: Callable[[str], None]) -> Callable[[], None]:
    """Hear ``view``'s Stop, steer box and Send on the shell channel thread (see the module
    docstring). Returns the disposer that removes the hooks; a no-op when the hook is absent."""
    if not available(kernel):
        return lambda: None
    watcher = _Watcher(view, on_steer)
    undo = [
        _hook(view.stop, watcher.on_stop),
        _hook(view.steer, watcher.on_typed),
        _hook(view.send, watcher.on_send),
    ]

    def dispose() -> None:
        watcher.closed = True
        for fn in undo:
            fn()

    return dispose


class _Watcher:
    """Runs on the shell channel thread. ``typed`` is read and written there only."""

    def __init__(self, view: TurnView, on_steer: Callable[[str], None]) -> None:
        self.view = view
        self.on_steer = on_steer
        self.typed = ""
        self.closed = False

    def on_stop(self, data: object) -> None:
        if not self.closed and not self.view.ended and _is_click(data) and running.interrupt():
            _log.debug("turn view: Stop interrupted the running code")

    def on_typed(self, data: object) -> None:
        if _field(data, "method") == "update":
            value = _field(_field(data, "state"), "value")
            if isinstance(value, str):
                self.typed = value

    def on_send(self, data: object) -> None:
        if not _is_click(data):
            return
        text = self.typed.strip()
        steered = False
        if text and not self.closed and not self.view.ended:
            on_steer = self.on_steer
            steered = running.after_run(lambda: on_steer(text))
        if steered:
            self.typed = ""  # a second click before the box is cleared must not steer it again
        self.view.handled_sends.append(steered)


def _field(data: object, key: str) -> object:
    """``data[key]`` when ``data`` is a JSON object, else ``None``."""
    return cast("dict[str, object]", data).get(key) if isinstance(data, dict) else None


def _is_click(data: object) -> bool:
    """The ipywidgets 8 button click: ``{"method": "custom", "content": {"event": "click"}}``."""
    return (
        _field(data, "method") == "custom" and _field(_field(data, "content"), "event") == "click"
    )


def _hook(widget: object, on_data: Callable[[object], None]) -> Callable[[], None]:
    """Wrap ``widget.comm._reply_subshell_for`` so ``on_data(data)`` hears each message first."""
    comm: Any = getattr(widget, "comm", None)
    original: Any = getattr(comm, HOOK, None)
    if comm is None or not callable(original):
        return lambda: None

    def route(data: object, default: object) -> object:
        try:
            on_data(data)
        except Exception:  # never let ipykernel drop the click
            _log.exception("turn view: the shell channel hook failed")
        return original(data, default)

    setattr(comm, HOOK, route)

    def undo() -> None:
        if getattr(comm, "__dict__", {}).get(HOOK) is route:
            delattr(comm, HOOK)

    return undo
