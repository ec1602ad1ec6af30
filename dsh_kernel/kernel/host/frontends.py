"""Which view a chat cell gets: the live widget view, or the turn as text (``views.text_turn``).

A frontend that renders no widgets (``jupyter console``, qtconsole, an editor's REPL, a plain
``jupyter_client`` script) prints ``stream`` text and a display's ``text/plain`` but never applies
``update_display_data``, so the widget view shows it nothing. The kernel cannot ask a client what it
renders; it reads what the request says (ipykernel 7.4, jupyter_client 8.10, jupyter_console 6.6,
nbclient 0.11, ipywidgets 8.1: read in their sources, and held by the kernel tier's
``test_text_frontends`` and ``test_console``):

* JupyterLab's notebook and code console, Notebook 7 and VS Code send the cell's id
  (``metadata.cellId``, which ipykernel passes to ``do_execute`` as ``cell_id``): widgets.
* nbclient (papermill, ``jupyter execute``, ``nbconvert --execute``) sends no cell id but sets
  ``allow_stdin`` false, and applies display updates: it saves the final static rendering of the
  widget view, as it always did — so it keeps the widget view.
* ``jupyter console``, qtconsole and ``kc.execute(...)`` of a client with its stdin channel started
  send no cell id and allow stdin: text.
* The classic Notebook (6) sends no cell id and allows stdin, but renders widgets: its widget
  manager (``@jupyter-widgets/base-manager``, as JupyterLab's) opens ipywidgets'
  ``jupyter.widget.control`` comm when it connects to the kernel.
  A client session (the header's ``session``, the same on every message of one connection) that
  opened that comm, or our own ``dsh.notebook`` comm (``kernel.notebook.comm``), keeps the widgets.

``wants_text`` is that rule; ``WidgetClients`` records the sessions that opened the control comm.
It registers the ``jupyter.widget.control`` target at kernel start, notes the session, and hands the
comm to ipywidgets' own handler (importing ipywidgets when the first one comes: the import registers
ipywidgets' targets, so ours is put back). A later import of ipywidgets (the first chat cell's view,
or the user's) replaces it again: ``ensure`` (called before every chat cell) puts it back in front of
ipywidgets' handler. A control comm opened between such an import and the next chat cell is not
seen; its client still gets widgets if it sends cell ids.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container
from typing import Final, Protocol, cast

from dsh_kernel.kernel.notebook.comm import client_session

_log = logging.getLogger(__name__)

CONTROL_TARGET: Final = "jupyter.widget.control"
"""ipywidgets' control comm, which a widget manager opens when it connects to a kernel."""

Handler = Callable[[object, dict[str, object]], object]


class TargetManager(Protocol):
    """What this module uses of ipykernel's ``CommManager``."""

    targets: dict[str, Callable[..., object]]

    def register_target(self, target_name: str, f: Callable[..., object]) -> None: ...


def wants_text(
    *, cell_id: str | None, allow_stdin: bool, session: str | None, widget_sessions: Container[str]
) -> bool:
    """Whether a chat cell's request gets the turn as text rather than the widget view: it names no
    cell, allows stdin, and its client session opened no widget-capable comm (module docstring)."""
    if cell_id or not allow_stdin:
        return False
    return session is None or session not in widget_sessions


def _ipywidgets_handler() -> Handler:
    from ipywidgets import Widget  # pyright: ignore[reportMissingTypeStubs]

    return cast("Handler", Widget.handle_control_comm_opened)  # pyright: ignore[reportUnknownMemberType]


class WidgetClients:
    """The client sessions that opened ``jupyter.widget.control`` (module docstring)."""

    def __init__(self, delegate: Callable[[], Handler] = _ipywidgets_handler) -> None:
        """``delegate``: ipywidgets' control-comm handler, found when first needed."""
        self.sessions: set[str] = set()
        self._find = delegate
        self._delegate: Handler | None = None
        self._manager: TargetManager | None = None

    def __contains__(self, session: object) -> bool:
        return session in self.sessions

    def ensure(self, manager: TargetManager | None) -> None:
        """Register (or put back) this target in front of whatever handles it now."""
        if manager is None:
            return
        self._manager = manager
        current = manager.targets.get(CONTROL_TARGET)
        if current == self.opened:
            return
        if current is not None:
            self._delegate = current
        manager.register_target(CONTROL_TARGET, self.opened)

    def opened(self, comm: object, msg: dict[str, object]) -> None:
        """The target's handler: note the session, then let ipywidgets answer the comm."""
        session = client_session(msg)
        if session:
            self.sessions.add(session)
        handler = self._delegate
        if handler is None:
            handler = self._delegate = self._find()
            self.ensure(self._manager)  # the import registered ipywidgets' own handler
        handler(comm, msg)
