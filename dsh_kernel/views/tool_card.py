"""The live card of one tool call, drawn from its ``ToolCardModel``.

Layout (a ``VBox`` with class ``dsh-card``):

* a header line — icon by kind, title, the tool's name when the title differs, a status pill
  (``dsh-status-<status>``), a note (``dsh-card-note``: "recovered from text"), the duration;
* the images its result put in front of the model (``dsh-images``: a small thumbnail of each image
  the model was sent and one line on it, or that it went as its description to a text-only model;
  ``views.image_note``), outside the Details so it reads at a glance; hidden when there are none;
* while the call waits for approval: Allow once / Deny / Always allow buttons with the reason. A click
  disables the three at once and calls ``on_approval(approval_id, outcome)``; once ``approval/decided``
  is logged (or the call settled unanswered) the buttons go and the outcome is written in their place,
  so a view drawn later — a tab reopened after the approval timed out — never reads as waiting;
* for ``ask_user`` calls, the question form (``views.question``) while the call runs, then the logged
  answers, disabled;
* a "Details" accordion holding one ``Output`` widget: the arguments as Markdown fenced code (Python
  highlighted by the frontend) and the result — text, or the rich nbformat outputs of
  ``meta["outputs"]`` (tables, plots) rendered by the frontend. It opens by itself once the call
  asks for approval (the person must see what they allow) and once rich outputs arrive; after that,
  whatever the person chose stands. Both triggers are facts of the model, not of the moment it was
  drawn, so a replay drawn once at the end opens the same accordions.

  The arguments are shown whole, however long (``card_content.card_view`` never cuts them): what runs is
  exactly what the person can read before allowing it. Cutting the code, or refusing code above a
  size, was the other choice; a cut would let code run that nobody saw, and a refusal would block
  legitimate long cells. So the box scrolls instead (``BODY_MAX_HEIGHT``, ``overflow: auto``), which
  keeps a 50,000-character call as compact on screen as a short one.

``update(card, images)`` may be called on every flush: unchanged traits send nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Literal, TypeAlias

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.markup.safe_html import code_html, escape
from dsh_kernel.tools.questions import answers_from_json, parse_questions
from dsh_kernel.transcript.model import ToolCardModel
from dsh_kernel.views import _ipw
from dsh_kernel.views.card_content import (
    APPROVAL_LABELS,
    ASK_USER_TOOL,
    RECOVERED_TITLE,
    CardView,
    ToolLookup,
    card_view,
    lookup,
)
from dsh_kernel.views.image_note import images_html
from dsh_kernel.views.outputs import reduced
from dsh_kernel.views.question import QuestionForm
from dsh_kernel.views.shown_images import MessageImages

BODY_MAX_HEIGHT = "32em"
"""Height of the Details box beyond which it scrolls (it is never cut)."""

LIVE_OUTPUT_TOOLS = frozenset({"python"})
"""Tools whose rich outputs come from code run in this kernel (shown whole when the view is live)."""

ApprovalAnswer: TypeAlias = Literal["allowed-once", "rejected", "allowed-always"]
ApprovalCallback = Callable[[str, ApprovalAnswer], None]
AnswerCallback = Callable[[str, JsonObject], None]


def body_html(view: CardView) -> str:
    """The Details box's sections as HTML: each argument and result section under its label, code
    highlighted by its language, every text shown as itself (``markup.safe_html``)."""
    parts: list[str] = []
    for s in (*view.args, *view.result):
        if s.label:
            parts.append(f'<div class="dsh-label">{escape(s.label)}</div>')
        parts.append(code_html(s.text, s.lang))
    return "".join(parts)


def body_outputs(view: CardView, *, live: bool) -> list[JsonObject]:
    """The Details ``Output`` widget's outputs: the rich outputs of the call. ``live``: the code
    ran in this kernel now, so its outputs are shown as a cell's would be; otherwise (a journal,
    another process) they are reduced to images and text (``views.outputs.reduced``)."""
    return list(view.outputs) if live else [reduced(o) for o in view.outputs]


def header_html(view: CardView, status_key: str) -> str:
    """The card's header line: icon, title, name, status pill (by ``status_key``) and duration."""
    name = (
        f'<span class="dsh-card-name">{escape(view.name)}</span>' if view.name != view.title else ""
    )
    dur = f'<span class="dsh-dur">{escape(view.duration)}</span>' if view.duration else ""
    note = (
        f'<span class="dsh-card-note" title="{escape(RECOVERED_TITLE)}">{escape(view.note)}</span>'
        if view.note
        else ""
    )
    return (
        f'<div class="dsh-card-head"><span class="dsh-icon">{view.icon}</span>'
        f'<span class="dsh-card-title">{escape(view.title)}</span>{name}'
        f'<span class="dsh-pill dsh-status-{status_key}">{escape(view.status)}</span>{note}{dur}'
        "</div>"
    )


class ToolCardWidget:
    """The live card of one tool call, redrawn from each new ``ToolCardModel`` (module docstring)."""

    def __init__(
        self,
        *,
        tools: ToolLookup | None = None,
        on_approval: ApprovalCallback | None = None,
        on_answer: AnswerCallback | None = None,
        live_outputs: bool = False,
    ) -> None:
        self._tools = tools
        self._live_outputs = live_outputs
        self._on_approval = on_approval
        self._on_answer = on_answer
        self.head = _ipw.HTML()
        self.images = _ipw.HTML()
        _ipw.set_visible(self.images, False)
        self.allow = _ipw.Button(description="Allow once", button_style="success", icon="check")
        self.deny = _ipw.Button(description="Deny", button_style="danger", icon="times")
        self.always = _ipw.Button(
            description="Always allow", tooltip="Allow this tool without asking for this session"
        )
        _ipw.on_click(self.allow, lambda: self._clicked("allowed-once"))
        _ipw.on_click(self.deny, lambda: self._clicked("rejected"))
        _ipw.on_click(self.always, lambda: self._clicked("allowed-always"))
        self.approval_note = _ipw.HTML()
        _ipw.add_class(self.approval_note, "dsh-approval-note")
        self.approval_row = _ipw.HBox([self.allow, self.deny, self.always, self.approval_note])
        _ipw.set_visible(self.approval_row, False)
        self.sections = _ipw.HTML()
        self.body = _ipw.Output()
        self.details_box = _ipw.VBox(
            [self.sections, self.body],
            layout={"max_height": BODY_MAX_HEIGHT, "overflow": "auto"},
        )
        self.details = _ipw.Accordion(children=[self.details_box], selected_index=None)
        _ipw.set_titles(self.details, ["Details"])
        self.question: QuestionForm | None = None
        self.widget = _ipw.VBox([self.head, self.images, self.approval_row, self.details])
        _ipw.add_class(self.widget, "dsh-card")
        self.card: ToolCardModel | None = None
        self.sent: MessageImages | None = None
        """The images of the result as last drawn (``views.shown_images``)."""
        self._clicked_approval: str | None = None
        self._opened_for: set[str] = set()

    def _clicked(self, outcome: ApprovalAnswer) -> None:
        card = self.card
        if card is None or card.approval_id is None or self._clicked_approval is not None:
            return
        if card.approval_outcome is not None:
            return
        self._clicked_approval = card.approval_id
        for b in (self.allow, self.deny, self.always):
            b.disabled = True
        if self._on_approval is not None:
            self._on_approval(card.approval_id, outcome)

    def update(self, card: ToolCardModel, images: MessageImages | None = None) -> None:
        """Redraw from ``card`` and the images its result carried to the model."""
        if card == self.card and images == self.sent:
            return
        self.card, self.sent = card, images
        defn = lookup(self._tools, card.name)
        view = card_view(card, defn)
        self.head.value = header_html(view, card.status)
        self.images.value = images_html(images)
        _ipw.set_visible(self.images, bool(self.images.value))
        self._update_approval(card)
        self.sections.value = body_html(view)
        live = self._live_outputs and card.name in LIVE_OUTPUT_TOOLS
        _ipw.set_outputs(self.body, body_outputs(view, live=live))
        if card.approval_id is not None:
            self._open_once("approval")
        if view.outputs:
            self._open_once("outputs")
        if card.name == ASK_USER_TOOL:
            self._update_question(card)

    def _open_once(self, reason: str) -> None:
        if reason not in self._opened_for:
            self._opened_for.add(reason)
            self.details.selected_index = 0

    def _update_approval(self, card: ToolCardModel) -> None:
        if card.approval_id is None:
            return
        _ipw.set_visible(self.approval_row, True)
        decided = card.approval_outcome is not None
        clicked = self._clicked_approval == card.approval_id
        for b in (self.allow, self.deny, self.always):
            b.disabled = decided or clicked or card.settled
            _ipw.set_visible(b, not (decided or card.settled))
        if decided:
            outcome = card.approval_outcome or ""
            note = escape(APPROVAL_LABELS.get(outcome, outcome))
        elif card.settled:
            note = "not answered"
        else:
            reason = f" {card.approval_reason}" if card.approval_reason else ""
            note = f"Allow <code>{escape(card.name)}</code> to run?{escape(reason)}"
        self.approval_note.value = note

    def _update_question(self, card: ToolCardModel) -> None:
        if self.question is None:
            try:
                questions = parse_questions(_loads(card.arguments))
            except Exception:
                return  # malformed or still streaming: the card shows the raw arguments
            if card.status == "pending":
                return
            self.question = QuestionForm(card.call_id, questions, self._answered)
            _ipw.set_children(
                self.widget,
                [self.head, self.images, self.approval_row, self.question.widget, self.details],
            )
        if card.settled:
            answers = ()
            if not card.is_error and card.result_text:
                try:
                    answers = answers_from_json(card.result_text)
                except ValueError:
                    answers = ()
            self.question.show_answers(answers)

    def _answered(self, call_id: str, answers: JsonObject) -> None:
        if self._on_answer is not None:
            self._on_answer(call_id, answers)


def _loads(text: str) -> JsonValue:
    value: JsonValue = json.loads(text) if text.strip() else {}
    return value
