"""Views: the live ipywidgets view of a chat turn and the static rendering of a finished one.

Views are pure functions of session events (ARCHITECTURE §3 decision 6). ``TurnFold`` (the turn
reader, ``dsh_kernel.transcript.turn``, re-exported) reads a turn's events into a ``TurnModel``;
``TurnView`` draws it live (tool cards, approval buttons, the ask-user form, footer, Stop and steer); ``render_markdown`` / ``render_html`` draw it for saved notebooks.
``WidgetAnswerer`` and ``QuestionBroker`` connect the approval service and the ``ask_user`` tool to
the buttons. Only this package imports ipywidgets.
"""

from dsh_kernel.transcript.model import TurnModel
from dsh_kernel.transcript.turn import TurnFold, find_turn, fold_turn, turn_events
from dsh_kernel.views.approval import WidgetAnswerer
from dsh_kernel.views.question import QuestionBroker, QuestionForm
from dsh_kernel.views.render import render_html, render_markdown, static_bundle
from dsh_kernel.views.tool_card import ApprovalAnswer, ToolCardWidget
from dsh_kernel.views.turn import TurnView, ViewControls

__all__ = [
    "ApprovalAnswer",
    "QuestionBroker",
    "QuestionForm",
    "ToolCardWidget",
    "TurnFold",
    "TurnModel",
    "TurnView",
    "ViewControls",
    "WidgetAnswerer",
    "find_turn",
    "fold_turn",
    "render_html",
    "render_markdown",
    "static_bundle",
    "turn_events",
]
