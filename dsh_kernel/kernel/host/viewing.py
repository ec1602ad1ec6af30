"""The live view of one chat cell: a ``TurnView`` subscribed to the session, shown in the cell's
output while the turn runs, and replaced at the end by the static rendering of the finished turn —
or, for a frontend that renders no widgets (``kernel.host.frontends`` decides), the turn as text.

The output is one display with a display id: while the turn runs it carries the widget view (live
text, cards, approval buttons, Stop, steer); at the end ``update_display`` gives it ``text/html``,
``text/markdown`` and ``text/plain`` of the finished turn. A saved notebook therefore shows the
conversation everywhere — JupyterLab with no kernel and no saved widget state, nbconvert, GitHub,
nbviewer, a console client — with no "model not found" widget errors.

The first chat cell of a kernel may show one more line above the view while its turn runs: that this
notebook has an earlier session and how to continue it (``AgentHost.earlier_session_hint``). It is a
display of its own that the finished turn blanks, so it is seen live but never saved (nbclient, nor a
notebook saved from JupyterLab after the turn, has it).

While the turn runs, the view's Stop and Send are also heard on ipykernel's shell channel thread
(``kernel.host.busy``), so they work while the agent's ``python`` code holds the main thread.

The text view (``TextCellView``, for ``jupyter console`` and the like) displays no widget and no
display at all: it writes the turn as ``stream`` text as it arrives (``views.text_turn``), the
earlier-session hint as its first line, and the footer as its last. It leaves ``host.view`` empty,
so an approval that needs a click is refused at once and ``ask_user`` fails at once, as in a headless
run (``kernel.host.bridge``): the refusal's line says how to allow (``%agent approve auto``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dsh_kernel.abort import USER_CANCEL
from dsh_kernel.errors import LlmError
from dsh_kernel.kernel._ipy import display_raw, update_raw
from dsh_kernel.kernel.host.busy import watch
from dsh_kernel.views import TurnView, ViewControls
from dsh_kernel.views.shown_images import route_takes_images
from dsh_kernel.views.text_turn import TextStream, TextTurn

if TYPE_CHECKING:
    from dsh_kernel.agent.agent import Agent
    from dsh_kernel.kernel.host.agent_host import AgentHost


class CellView:
    """The live ``TurnView`` of one chat cell's turn, shown under one display id (module docstring)."""

    def __init__(
        self, host: AgentHost, message_id: str, *, silent: bool, kernel: object = None
    ) -> None:
        agent = host.agent
        self.host = host
        self.silent = silent
        self.view = TurnView(
            ViewControls(
                on_stop=lambda: agent.cancel(USER_CANCEL),
                on_steer=self._steer,
                on_approval=host.resolve_approval,
            ),
            message_id=message_id,
            session_id=agent.session.id,
            tools=agent.registry.get,
            model_info=host.model_info,
            reasoning_effort=_effort_in_force(agent),
            images_in_force=_images_in_force(agent),
            image_data=agent.session.image_data,
            budget=host.budgets.footer_text,
            live_outputs=True,
            max_rate_hz=host.settings.redraw_rate,
        )
        self._dispose = agent.session.subscribe(self.view.observe)
        # Stop and Send must work while the agent's code holds the main thread (kernel.busy).
        self._unwatch = watch(kernel, self.view, on_steer=self._steer)
        host.view = self.view
        self.display_id = uuid.uuid4().hex
        self.hint_id: str | None = None
        if not silent:
            hint = host.earlier_session_hint()
            if hint:
                self.hint_id = uuid.uuid4().hex
                display_raw({"text/plain": hint}, display_id=self.hint_id)
            display_raw(self._bundle(None), display_id=self.display_id)

    def _steer(self, text: str) -> None:
        self.host.agent.steer(text)

    def _bundle(self, static: dict[str, str] | None) -> dict[str, Any]:
        bundle: dict[str, Any] = dict(self.view.widget._repr_mimebundle_())  # type: ignore[attr-defined]
        if static:
            bundle.update(static)
        return bundle

    def close(self) -> None:
        self._unwatch()
        self._dispose()
        if self.host.view is self.view:
            self.host.view = None
        static = self.view.finish()
        if not self.silent:
            # The finished turn is shown as its static rendering only: a saved notebook then reads
            # the same in JupyterLab without a kernel (a widget view would show "model not found"),
            # nbconvert, GitHub and nbviewer. The widgets stay in the kernel (and in saved widget
            # state); the text/plain copy serves console clients.
            final: dict[str, Any] = {"text/plain": static["text/markdown"], **static}
            # The turn itself travels with it (``capsule``): a shared notebook is the conversation.
            update_raw(final, display_id=self.display_id, metadata=self._capsule())
            if self.hint_id is not None:  # live only: the saved notebook never holds the hint
                update_raw({"text/plain": ""}, display_id=self.hint_id)

    def _capsule(self) -> dict[str, Any]:
        """The saved output's metadata: the turn's capsule, unless ``DSH_CAPSULE=off`` or the turn
        has none (``capsule.format``)."""
        turn = self.view.model.turn
        if not self.host.settings.capsule or turn is None:
            return {}
        from dsh_kernel.capsule.format import CAPSULE_KEY, capsule_of
        from dsh_kernel.store.replay import ReplayProvider

        session = self.host.agent.session
        provider = self.host.agent.provider
        if isinstance(provider, ReplayProvider):
            # A replay saves the recording's turn: the same bytes every run, and the notebook goes
            # on carrying the conversation it replays.
            recording = provider.recording()
            if recording is None or provider.turn is None:
                return {}
            session, turn = recording, provider.turn
        capsule = capsule_of(session, turn)
        return {} if capsule is None else {CAPSULE_KEY: capsule}


class TextCellView:
    """The turn of one chat cell written as text, for a frontend without widgets (module docstring)."""

    def __init__(
        self, host: AgentHost, message_id: str, *, silent: bool, write: Callable[[str], None]
    ) -> None:
        agent = host.agent
        out: Callable[[str], None] = _nowhere if silent else write
        turn = TextTurn(
            message_id=message_id,
            session_id=agent.session.id,
            tools=agent.registry.get,
            model_info=host.model_info,
            reasoning_effort=_effort_in_force(agent),
            budget=host.budgets.footer_text,
        )
        self.stream = TextStream(turn, out, max_rate_hz=host.settings.redraw_rate)
        host.view = None  # no one can click: approvals and questions are refused at once
        if not silent:
            hint = host.earlier_session_hint()
            if hint:
                self.stream.write_line(hint)
        self._dispose = agent.session.subscribe(self.stream.observe)

    def close(self) -> None:
        self._dispose()
        self.stream.finish()


def open_view(
    host: AgentHost,
    message_id: str,
    *,
    silent: bool,
    kernel: object = None,
    write: Callable[[str], None] | None = None,
) -> CellView | TextCellView:
    """The cell's view: with ``write`` (a frontend without widgets: ``kernel.host.frontends``), the
    turn as text given to ``write``; else the live widget view, whose Stop and Send, with ``kernel``
    (the running ipykernel), also work while the agent's code holds the main thread."""
    if write is not None:
        return TextCellView(host, message_id, silent=silent, write=write)
    return CellView(host, message_id, silent=silent, kernel=kernel)


def _nowhere(text: str) -> None:
    """Where a silent request's text goes: a silent request shows nothing."""


def _images_in_force(agent: Agent) -> bool | None:
    """``route_takes_images`` of the log, read from its latest ``request/header`` alone (the log
    indexes it): a cell's view costs the same at turn 1,000 as at turn 1."""
    latest = agent.session.latest("request/header")
    return route_takes_images((latest,) if latest is not None else ())


def _effort_in_force(agent: Agent) -> str | None:
    """The effort the turn's first request will send (its header, if it logs one, then says)."""
    try:
        return agent.effective_reasoning()[0]
    except LlmError:  # an effort this model does not take: the turn fails and says so
        return None
