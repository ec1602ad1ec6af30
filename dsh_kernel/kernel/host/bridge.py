"""``ViewBridge``: the agent's approvals and ``ask_user`` questions, taken to the view of the running
cell and answered there.

``view`` is the ``TurnView`` of the chat cell that is running (``None`` between cells, and while a
cell's turn is written as text for a frontend without widgets: ``kernel.host.viewing``, where no
one can click, so an approval is ``"unavailable"`` and a question fails at once). Approvals
fail closed. While a frontend displays the view, an approval waits up to ``approval_timeout``
seconds for a click (``"timeout"`` after); when no frontend has rendered the view within
``headless_approval_timeout`` seconds (nbclient, a headless run) the call is denied at once
(``"unavailable"``), and the pipeline's message says how to allow it (``%agent approve auto``). A
click that arrives while its approval still waits for the view to be drawn is kept and used. A
question needs a frontend too: with none, or with no answer in time, the ``ask_user`` call fails with
a ``ToolError`` the model reads (``NO_PROVIDER``, ``TIMEOUT``). The timeouts are read from the host's
settings at each call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from dsh_kernel.abort import AbortSignal
from dsh_kernel.errors import ToolError
from dsh_kernel.ids import ApprovalRequestId, CallId
from dsh_kernel.kernel.host.settings import HostSettings
from dsh_kernel.tools.approval import ApprovalRequest
from dsh_kernel.tools.questions import Answer, Question
from dsh_kernel.views import WidgetAnswerer
from dsh_kernel.views.approval import ANSWERS

if TYPE_CHECKING:
    from dsh_kernel.views.turn import TurnView


class ViewBridge:
    """See the module docstring."""

    def __init__(self, settings: Callable[[], HostSettings]) -> None:
        self._settings = settings
        self.view: TurnView | None = None
        self.approvals = WidgetAnswerer()
        self._early_answers: dict[str, str] = {}
        """Clicks that came while their approval still waited for the view to be drawn."""

    async def answer_approval(
        self, request_id: ApprovalRequestId, request: ApprovalRequest
    ) -> object:
        """The agent's ``Answerer``: the outcome of one approval (module docstring)."""
        view = self.view
        # The buttons show before this waits on the answerer, so a quick click may come first: it
        # is kept and used here (no await in between).
        self._early_answers[request_id] = ""
        try:
            shown = view is not None and await self._frontend_shows(view)
        finally:
            early = self._early_answers.pop(request_id, "")
        if early:
            return early
        if not shown:
            return "unavailable"
        try:
            async with asyncio.timeout(self._settings().approval_timeout):
                return await self.approvals(request_id, request)
        except TimeoutError:
            return "timeout"

    def resolve_approval(self, request_id: str, outcome: str) -> None:
        """A click on an approval button of the view."""
        taken = self.approvals.resolve(request_id, outcome)
        if not taken and request_id in self._early_answers and outcome in ANSWERS:
            self._early_answers[request_id] = outcome

    async def ask_user(
        self, questions: tuple[Question, ...], signal: AbortSignal, *, call_id: CallId
    ) -> tuple[Answer, ...]:
        """The ``ask_user`` tool's asker: the view's form, answered by the user."""
        view = self.view
        if view is None or not await self._frontend_shows(view):
            raise ToolError(
                "no frontend can show the question here (a headless run, or a console that "
                "draws no forms), so the user cannot be asked; continue without the answer or "
                "say what you need in your reply",
                code="NO_PROVIDER",
            )
        timeout = self._settings().approval_timeout
        try:
            async with asyncio.timeout(timeout):
                return await view.ask(questions, signal, call_id=call_id)
        except TimeoutError as exc:
            raise ToolError(
                f"the user did not answer within {timeout:g} s", code="TIMEOUT"
            ) from exc

    async def _frontend_shows(self, view: TurnView) -> bool:
        """Whether a frontend renders ``view``, giving it a moment to draw (headless runs: no)."""
        if view.rendered:
            return True
        try:
            async with asyncio.timeout(self._settings().headless_approval_timeout):
                while not view.rendered:  # noqa: ASYNC110 - a synced widget trait, no event
                    await asyncio.sleep(0.05)
        except TimeoutError:
            return False
        return True
