"""``TurnView``: the live ipywidgets view of one chat turn (ARCHITECTURE §2 "What a chat cell shows").

The kernel subscribes ``observe`` to the session. The view binds to one turn — the turn whose
``user/message`` has ``message_id`` (events from that turn's ``turn/start`` on are buffered until the
message shows which turn it is), or the next turn to start when ``message_id`` is ``None`` — and
ignores every other event. Bound events go into a ``TurnFold``; the widgets are redrawn from its
snapshot, so the same events, live or replayed from the store, draw the same widgets. A turn answered
by ``%agent replay`` is drawn through ``replayed.as_drawn`` (no times, no session id): its saved output
is the same on every run.

Streaming without losing text: events only mark the view dirty. A redraw ("flush") runs from the
running asyncio loop's ``call_later`` at most ``max_rate_hz`` times a second (default 20 Hz);
structural events (a tool call starting, an approval asked or decided, a result, the turn ending)
and the first appearance of an item (``TurnFold.appeared``: the answer's first words, a reasoning
block's, a tool card's) are drawn at the next loop iteration — so the first words of an answer are
on IOPub as soon as the network read that brought them is logged, and only their growth is paced.
Every flush draws the *whole* current model, so nothing between two flushes is lost. With no
running loop (a replay in plain code) drawing waits for ``flush()`` or ``finish()``.

What is sent: the answer is split into Markdown pieces (``views.segments``), each an ``HTML``
widget holding that piece rendered to sanitised HTML by the kernel (``markup.safe_html``: the
frontend is never asked to interpret outside text); only the last, growing piece is rendered and
sent again. Reasoning, rendered the same way, sits in a collapsed ``Accordion`` whose title
carries its length; its text is sent only while the accordion is open and once the block ends.
While answer text is held as a possible tool call, one line says so and counts its characters
(``HeldItem``), redrawn at the streaming rate. Tool cards are ``ToolCardWidget``s, each with the images its result carried to the model; the
images of the prompt and of steering messages are one small note each (``views.shown_images`` reads them
from the same events, ``views.image_note`` says them). Below: how the turn ended (error code and what to do), the
footer, and — while the turn runs — Stop and a steer box with Send.

Clicks that another thread saw first: while the agent's code holds the main thread, the kernel
hears Stop and Send on ipykernel's shell channel thread (``kernel.host.busy``) and may steer at once; it
then appends one flag per Send click to ``handled_sends`` (``True``: already steered), and the view,
receiving the same click later, consumes one flag per click and skips the ones already steered.

Code output while it runs: the agent's ``python`` code holds the main thread, so this loop cannot
draw meanwhile; ``live_output(call_id)`` (the tool asks, just before the code starts) draws the view
once more and gives that call's card's ``views.live_output.LiveOutput``, which pushes the output
from the code's own write path at this view's rate.

Questions: the ``ask_user`` form is drawn in its call's card; ``ask`` is an ``Asker`` for that tool
that waits for the form's Submit (``on_answer`` is told too, for a kernel that wants to log it).

``finish()`` draws a last time, hides Stop and the steer box and returns the static bundle
``{"text/markdown": …, "text/html": …}`` for the cell's saved output. ``rendered`` turns true once a
frontend has shown the view (``_view_count`` is synced from the frontend): the kernel uses it to
refuse approvals at once when no one can see the buttons.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from dsh_kernel.abort import AbortSignal
from dsh_kernel.ids import CallId
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.types import ModelInfo
from dsh_kernel.markup.safe_html import escape, markdown_html
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.session.payloads import payload_of
from dsh_kernel.tools.questions import Answer, Question
from dsh_kernel.transcript.model import (
    HeldItem,
    NoticeItem,
    ReasoningItem,
    SteerItem,
    TextItem,
    ToolItem,
    TurnItem,
    TurnModel,
)
from dsh_kernel.transcript.turn import URGENT_TYPES, TurnFold
from dsh_kernel.views import _ipw
from dsh_kernel.views.card_content import ToolLookup
from dsh_kernel.views.format import (
    ModelInfoLookup,
    end_notice,
    footer_parts,
    held_note,
    notice_classes,
    notice_icon,
    tokens,
)
from dsh_kernel.views.image_note import images_html
from dsh_kernel.views.live_output import LiveOutput
from dsh_kernel.views.question import QuestionBroker
from dsh_kernel.views.render import static_bundle
from dsh_kernel.views.replayed import as_drawn
from dsh_kernel.views.segments import split_segments
from dsh_kernel.views.shown_images import NO_IMAGES, ImageDataLookup, ImageReader
from dsh_kernel.views.style import style_widget
from dsh_kernel.views.tool_card import ApprovalAnswer, ToolCardWidget

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewControls:
    """What the view's buttons do; the kernel wires these to the agent. ``None`` hides nothing but
    makes the control do nothing (a replayed view)."""

    on_stop: Callable[[], None] | None = None
    on_steer: Callable[[str], None] | None = None
    on_approval: Callable[[str, ApprovalAnswer], None] | None = None
    on_answer: Callable[[str, JsonObject], None] | None = None


def _guard(what: str, fn: Callable[[], None]) -> None:
    """A control's callback must not break the widget's message handler."""
    try:
        fn()
    except Exception:
        _log.exception("turn view: the %s callback failed", what)


class _TextBlock:
    """The answer as HTML widgets, one per ``split_segments`` piece: only the growing last piece
    is rendered and sent again."""

    def __init__(self) -> None:
        self.widget = _ipw.VBox()
        self._pieces: list[_ipw.HTML] = []
        self._raw: list[str] = []

    def update(self, text: str) -> None:
        pieces = split_segments(text)
        while len(self._pieces) < len(pieces):
            self._pieces.append(_ipw.HTML())
            self._raw.append("\0")  # never equal to a real piece: forces the first draw
        for i, piece in enumerate(pieces):
            if self._raw[i] != piece:
                self._raw[i] = piece
                self._pieces[i].value = markdown_html(piece)
        _ipw.set_children(self.widget, self._pieces[: len(pieces)])


class _ReasoningBlock:
    def __init__(self) -> None:
        self.content = _ipw.HTML()
        _ipw.add_class(self.content, "dsh-reasoning")
        self.widget = _ipw.Accordion(children=[self.content], selected_index=None)
        self._text = ""

    def update(self, item: ReasoningItem, final: bool) -> None:
        state = "" if item.done else " …"
        title = "Reasoning (redacted)" if item.redacted and not item.text else "Reasoning"
        _ipw.set_titles(self.widget, [f"💭 {title} · {tokens(len(item.text))} chars{state}"])
        self._text = item.text
        if self.widget.selected_index is not None or item.done or final:
            self.show()

    def show(self) -> None:
        self.content.value = markdown_html(self._text)


class TurnView:
    """The live view of one turn; see the module docstring.

    ``controls``: what Stop, Send, the approval buttons and the question forms do. ``message_id``:
    the prompt whose turn to show (``None``: the next turn). ``clock``: monotonic seconds, for the
    redraw rate. ``session_id``, ``tools`` (name → ``ToolDefinition``, for presenters) and
    ``model_info`` (``(provider, model)`` → ``ModelInfo``, for the context window and prices) feed
    the cards and the footer; ``reasoning_effort`` is the effort in force as the turn starts (for
    the footer, until the turn logs a request header of its own). ``budget(fresh)``: the daily budget's
    footer part (``kernel.course.budgets``). ``images_in_force``: whether the
    request header in force as the turn starts sends images (``views.shown_images.route_takes_images``
    of the log), and ``image_data`` the session's image index (``Session.image_data``), for what
    the images line says and draws. ``max_rate_hz``: redraws per second while streaming.
    ``live_outputs``: the events are this kernel's own, as they happen, so a ``python`` card's
    rich outputs came from code run here and are shown whole; otherwise (the default: a replayed
    or imported journal) they are reduced to images and text (``views.outputs``).
    """

    def __init__(
        self,
        controls: ViewControls | None = None,
        *,
        message_id: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        session_id: str | None = None,
        tools: ToolLookup | None = None,
        model_info: ModelInfoLookup | None = None,
        reasoning_effort: str | None = None,
        images_in_force: bool | None = None,
        image_data: ImageDataLookup | None = None,
        max_rate_hz: float = 20.0,
        budget: Callable[[bool], str | None] | None = None,
        live_outputs: bool = False,
    ) -> None:
        self.controls = controls or ViewControls()
        self._live_outputs = live_outputs
        self.message_id = message_id
        self.session_id = session_id
        self._tools = tools
        self._model_info = model_info
        self._budget = budget
        self._clock = clock
        self._interval = 1.0 / max_rate_hz
        self._fold = TurnFold(message_id=message_id, reasoning_effort=reasoning_effort)
        self._images = ImageReader(
            message_id=message_id, images_in_force=images_in_force, image_data=image_data
        )
        self._seen_images = NO_IMAGES
        self._buffer: list[SessionEvent] | None = None
        self._bound = False
        self._ended = False
        self._finished = False
        self._dirty = False
        self._handle: asyncio.TimerHandle | asyncio.Handle | None = None
        self._last_flush = float("-inf")
        self.flushes = 0
        """How many times the widgets were redrawn (tests and benchmarks read it)."""
        self._rendered = False
        self.questions = QuestionBroker()
        """Resolved by this view's question forms; ``ask`` waits on it."""
        self._blocks: dict[str, _TextBlock | _ReasoningBlock | ToolCardWidget | _ipw.HTML] = {}
        self.handled_sends: deque[bool] = deque()
        """One flag per Send click another thread saw first (``True``: it already steered that
        text); appended there, consumed here in click order (both ends of a deque are thread-safe)."""

        self.attached = _ipw.HTML()
        """The prompt's images (hidden when it has none)."""
        _ipw.set_visible(self.attached, False)
        self.items = _ipw.VBox()
        self.end = _ipw.HTML()
        self.footer = _ipw.HTML()
        _ipw.add_class(self.footer, "dsh-footer")
        self.stop = _ipw.Button(description="Stop", button_style="warning", icon="stop")
        self.steer = _ipw.Text(placeholder="Tell the agent something now…")
        self.send = _ipw.Button(description="Send", icon="paper-plane")
        _ipw.on_click(self.stop, self._stop_clicked)
        _ipw.on_click(self.send, self._send_clicked)
        self.control_row = _ipw.HBox([self.stop, self.steer, self.send])
        _ipw.add_class(self.control_row, "dsh-controls")
        self.widget = _ipw.VBox(
            [style_widget(), self.attached, self.items, self.end, self.footer, self.control_row]
        )
        _ipw.add_class(self.widget, "dsh-turn")
        _ipw.track_views(self.widget)
        _ipw.observe(self.widget, "_view_count", self._views_changed)

    # -- state ------------------------------------------------------------------------------------

    @property
    def bound(self) -> bool:
        return self._bound

    @property
    def ended(self) -> bool:
        return self._ended

    @property
    def rendered(self) -> bool:
        """True once any frontend has shown this view (stays true)."""
        return self._rendered

    @property
    def model(self) -> TurnModel:
        return self._fold.snapshot()

    def _views_changed(self) -> None:
        if _ipw.view_count(self.widget) > 0:
            self._rendered = True

    # -- input ------------------------------------------------------------------------------------

    def observe(self, event: SessionEvent) -> None:
        """Feed one session event (the kernel subscribes this to the session)."""
        if self._ended:
            return
        if event.type == "image/data":
            self._images.apply(event)  # a prompt's bytes are logged before its turn starts
        if not self._bound:
            if event.type == "turn/start":
                self._buffer = [event]
                if self.message_id is None:
                    self._bind()
                return
            if self._buffer is None:
                return  # between turns
            self._buffer.append(event)
            if (
                event.type == "user/message"
                and payload_of(event, "user/message")["id"] == self.message_id
            ):
                self._bind()
            elif event.type == "turn/end":
                self._buffer = None
            return
        fold = self._fold
        appeared = fold.appeared
        fold.apply(event)
        self._images.apply(event)
        if event.type == "turn/end":
            self._ended = True
        self._schedule(urgent=event.type in URGENT_TYPES or fold.appeared != appeared)

    def _bind(self) -> None:
        self._bound = True
        for ev in self._buffer or ():
            self._fold.apply(ev)
            self._images.apply(ev)
        self._buffer = None
        self._schedule(urgent=True)

    def _schedule(self, *, urgent: bool) -> None:
        self._dirty = True
        if self._finished:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # drawn by flush() or finish()
        if self._handle is not None:
            if not urgent:
                return
            self._handle.cancel()
        delay = 0.0 if urgent else max(0.0, self._last_flush + self._interval - self._clock())
        self._handle = loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._handle = None
        if self._dirty and not self._finished:
            self.flush()

    # -- controls ---------------------------------------------------------------------------------

    def _stop_clicked(self) -> None:
        if self.controls.on_stop is not None and not self._ended:
            self.stop.disabled = True
            _guard("stop", self.controls.on_stop)

    def _send_clicked(self) -> None:
        if self.handled_sends and self.handled_sends.popleft():
            self.steer.value = ""  # steered already, while code held the main thread
            return
        text = self.steer.value.strip()
        on_steer = self.controls.on_steer
        if not text or on_steer is None or self._ended:
            return
        self.steer.value = ""
        _guard("steer", lambda: on_steer(text))

    def _approval(self, approval_id: str, outcome: ApprovalAnswer) -> None:
        on_approval = self.controls.on_approval
        if on_approval is not None:
            _guard("approval", lambda: on_approval(approval_id, outcome))

    def _answer(self, request_id: str, answers: JsonObject) -> None:
        self.questions.resolve(request_id, answers)
        on_answer = self.controls.on_answer
        if on_answer is not None:
            _guard("answer", lambda: on_answer(request_id, answers))

    async def ask(
        self, questions: tuple[Question, ...], signal: AbortSignal, *, call_id: CallId
    ) -> tuple[Answer, ...]:
        """An ``Asker`` for the ``ask_user`` tool: waits for the Submit of the form this view draws
        in that call's card (``questions``, a ``QuestionBroker``, resolves it)."""
        return await self.questions(questions, signal, call_id=call_id)

    # -- drawing ----------------------------------------------------------------------------------

    def _info(self, model: TurnModel) -> ModelInfo | None:
        if self._model_info is None or model.provider is None or model.model is None:
            return None
        try:
            return self._model_info(model.provider, model.model)
        except Exception:
            _log.warning("model_info lookup failed", exc_info=True)
            return None

    def _left(self, fresh: bool) -> str | None:
        """The daily budget's part of the footer (``fresh``: read now, not the latest reading)."""
        if self._budget is None:
            return None
        try:
            return self._budget(fresh)
        except Exception:
            _log.warning("budget lookup failed", exc_info=True)
            return None

    def flush(self, *, final: bool = False) -> TurnModel:
        """Redraw every widget from the current model (the timer calls this; so does ``finish``)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._dirty = False
        self._last_flush = self._clock()
        self.flushes += 1
        model = as_drawn(self._fold.snapshot())
        self._seen_images = self._images.snapshot()
        self.attached.value = images_html(self._seen_images.prompt, attached=True)
        _ipw.set_visible(self.attached, bool(self.attached.value))
        widgets = [self._draw(item, final) for item in model.items]
        _ipw.set_children(self.items, widgets)
        notice = end_notice(model)
        if notice is None:
            self.end.value = ""
        else:
            hint = markdown_html(notice.hint) if notice.hint else ""
            self.end.value = (
                f'<div class="dsh-end dsh-{notice.level}"><strong>{escape(notice.title)}</strong>'
                f"{hint}</div>"
            )
        _ipw.set_visible(self.end, notice is not None)
        parts = footer_parts(
            model, session_id=self.session_id, info=self._info(model), budget=self._left(final)
        )
        if model.state != "ended" and not final:
            parts.insert(0, "working…")
        self.footer.value = escape(" · ".join(parts))
        running = not (final or self._finished or model.state == "ended")
        _ipw.set_visible(self.control_row, running)
        return model

    def _draw(self, item: TurnItem, final: bool) -> _ipw.DOMWidget:
        block = self._blocks.get(item.key)
        match item:
            case TextItem():
                if not isinstance(block, _TextBlock):
                    block = self._blocks[item.key] = _TextBlock()
                block.update(item.text)
                return block.widget
            case ReasoningItem():
                if not isinstance(block, _ReasoningBlock):
                    block = self._blocks[item.key] = _ReasoningBlock()
                    _ipw.observe(block.widget, "selected_index", block.show)
                block.update(item, final)
                return block.widget
            case ToolItem():
                if not isinstance(block, ToolCardWidget):
                    block = self._blocks[item.key] = ToolCardWidget(
                        tools=self._tools,
                        on_approval=self._approval,
                        on_answer=self._answer,
                        live_outputs=self._live_outputs,
                        live_interval_s=self._interval,
                        clock=self._clock,
                    )
                block.update(item.card, self._seen_images.item(item.key))
                return block.widget
            case SteerItem() | NoticeItem():
                if not isinstance(block, _ipw.HTML):
                    block = self._blocks[item.key] = _ipw.HTML()
                if isinstance(item, SteerItem):
                    attached = images_html(self._seen_images.item(item.key), attached=True)
                    block.value = (
                        f'<div class="dsh-steer">↳ <strong>You:</strong> {escape(item.text)}'
                        f"{attached}</div>"
                    )
                else:
                    block.value = (
                        f'<div class="{" ".join(notice_classes(item))}">{notice_icon(item)} '
                        f"{escape(item.text)}</div>"
                    )
                return block
            case HeldItem():
                if not isinstance(block, _ipw.HTML):
                    block = self._blocks[item.key] = _ipw.HTML()
                block.value = (
                    f'<div class="dsh-notice dsh-held">✍️ {escape(held_note(item.chars))}</div>'
                )
                return block

    def live_output(self, call_id: str) -> LiveOutput | None:
        """The live output of the card of ``call_id``, a ``python`` call about to run (module
        docstring); ``None`` when this view has no such card or has finished. Draws the view first
        when it is behind, so the card is on the page before the code holds the loop."""
        if self._finished or not self._bound:
            return None
        if self._dirty:
            self.flush()
        for block in self._blocks.values():
            if isinstance(block, ToolCardWidget) and block.card and block.card.call_id == call_id:
                return block.live_output()
        return None

    def finish(self) -> dict[str, str]:
        """Draw the final state, hide Stop and the steer box, and return the static bundle."""
        model = self.flush(final=True)
        self._finished = True
        return static_bundle(
            model,
            tools=self._tools,
            session_id=self.session_id,
            model_info=self._info(model),
            images=self._seen_images,
            budget=self._left(False),
        )
