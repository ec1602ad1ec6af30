"""The turn as plain text: what a frontend that renders no widgets shows of a chat turn.

``jupyter console``, qtconsole, an editor's REPL and a plain ``jupyter_client`` script print a cell's
``stream`` output and a display's ``text/plain``, but never apply ``update_display_data``, so the
live widget view (one display, updated in place) shows them nothing of the answer. For them the
kernel streams the turn as text instead (``kernel.host.viewing`` decides which frontend gets which).
What is written, in stream order:

* the answer, as it arrives (raw Markdown, as the model wrote it);
* each tool call as a line when it starts (``▸ python: <title>``) and a line with its outcome when
  it settles (``✓ python: done in 0.3 s, 3 lines of output``, ``✗ sql failed (CODE): …``,
  ``✗ python denied: …`` with how to allow it);
* reasoning as one note of its length (``(reasoning: 1,234 chars)``), never its text;
* steering messages (``↳ You: …``) and the turn's notices (a retry, a compaction);
* answer text held as a possible tool call as one line (``✍️ writing a tool call…``) when the hold
  starts — a terminal cannot redraw a count — followed by the text once released, or the call's
  line;
* at the end: how a turn that did not simply complete ended (``format.end_notice``), and the footer
  (``format.footer_parts``, the facts the widget footer shows) as the last line.

It is a pure function of session events, like every view: ``TextTurn`` binds to one turn the way
``TurnView`` does (the turn whose ``user/message`` has ``message_id``), folds its events with the
one turn reader (``transcript.turn.TurnFold``), and ``take()`` returns the text not yet written.
A terminal cannot take text back, so what was written stays: a retry's discarded attempt is followed
by the retry notice and the new attempt's text, and a block whose final text is not an extension of
what streamed (rare) is not written twice.

Safety: everything ``take()`` returns passes through ``terminal_text``, so no escape sequence a model,
tool or server wrote reaches a terminal (C0/C1 control characters become visible symbols; carriage
returns are dropped). Frontends print ``stream`` text as text, so HTML stays inert. ``TextStream``
redacts what it writes (``llm.secrets``) as the log does.

Rate: ``TextStream`` writes at most ``max_rate_hz`` times a second from the running loop (structural
events and an item's first appearance — the answer's first words — at once), like the widget view;
every write takes everything new, so no text is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Final

from dsh_kernel.llm.secrets import redact
from dsh_kernel.llm.types import ModelInfo
from dsh_kernel.runtime.types import read_python_meta
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.session.payloads import payload_of
from dsh_kernel.transcript.model import (
    HeldItem,
    NoticeItem,
    ReasoningItem,
    SteerItem,
    TextItem,
    ToolCardModel,
    ToolItem,
    TurnModel,
)
from dsh_kernel.transcript.turn import URGENT_TYPES, TurnFold
from dsh_kernel.views.card_content import ToolLookup, card_view, lookup
from dsh_kernel.views.format import (
    ModelInfoLookup,
    duration,
    end_notice,
    footer_parts,
    notice_icon,
)
from dsh_kernel.views.replayed import as_drawn

_log = logging.getLogger(__name__)

ALLOW_HINT: Final = "`%agent approve auto` lets tools run without asking"
"""What a refused approval's line says to do: a text frontend has no buttons to click."""
LINE_CHARS: Final = 160
"""Characters of one tool line's message (an error's first line) before it is cut."""

_CONTROL: Final[dict[int, int | None]] = {
    **{c: 0x2400 + c for c in range(0x20) if c not in (0x09, 0x0A, 0x0D)},
    0x0D: None,
    0x7F: 0x2421,
    **{c: 0xFFFD for c in range(0x80, 0xA0)},
}


def terminal_text(text: str) -> str:
    """``text`` safe for a terminal: tabs and newlines kept, carriage returns dropped, every other
    C0 control (ESC, BEL, backspace …) and DEL shown as its Unicode control picture (``␛``), and C1
    controls (``U+009B`` is CSI to some terminals) as ``�`` — no escape sequence survives."""
    return text.translate(_CONTROL)


def one_line(text: str, limit: int = LINE_CHARS) -> str:
    """The first non-blank line of ``text``, cut at ``limit`` characters with ``…``."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}" if n == 1 else f"{n:,} {what}s"


def _lines(text: str) -> int:
    return len(text.splitlines())


def card_start(card: ToolCardModel, tools: ToolLookup | None = None) -> str:
    """The line a tool call gets when it starts: ``▸ python: <its title>``."""
    title = one_line(card_view(card, lookup(tools, card.name)).title)
    return f"▸ {card.name}: {title}" if title and title != card.name else f"▸ {card.name}"


def _facts(card: ToolCardModel) -> list[str]:
    """What a finished call produced, in a few words."""
    meta = read_python_meta(card.meta)
    if meta is not None:
        facts: list[str] = []
        written = _lines(meta["stdout"]) + _lines(meta["stderr"])
        if written:
            facts.append(_count(written, "line") + " of output")
        shown = sum(1 for o in meta["outputs"] if o.get("output_type") == "display_data")
        if shown:
            facts.append(_count(shown, "display"))
        if meta["result"] is not None:
            facts.append(f"Out: {one_line(meta['result'], 60)}")
        return facts or ["no output"]
    text = card.result_text or ""
    if not text.strip():
        return ["no result"]
    if _lines(text) == 1 and len(text) <= 80:
        return [f"→ {text.strip()}"]
    return [_count(_lines(text), "line") + " of result"]


def card_outcome(card: ToolCardModel) -> str:
    """The line a settled tool call gets: done (with what it produced), failed (code and first
    line), denied (why, and how to allow) or aborted."""
    name = card.name
    took = duration(card.duration_ms)
    match card.status:
        case "done":
            head = f"  ✓ {name}: done" + (f" in {took}" if took else "")
            return f"{head}, {', '.join(_facts(card))}"
        case "failed":
            code = f" ({card.error_code})" if card.error_code else ""
            said = one_line(card.result_text or "")
            return f"  ✗ {name} failed{code}" + (f": {said}" if said else "")
        case "denied":
            match card.approval_outcome:
                case "unavailable":
                    why = f"it needs approval and no one can click here; {ALLOW_HINT}"
                case "timeout":
                    why = f"no answer in time; {ALLOW_HINT}"
                case "rejected":
                    why = "you denied it"
                case _:
                    why = one_line(card.result_text or "") or "it did not run"
            return f"  ✗ {name} denied: {why}"
        case "aborted":
            return f"  ✗ {name} aborted" + (f" after {took}" if took else "")
        case "pending" | "running" | "waiting-approval":
            return f"  … {name} {card.status}"


def reasoning_note(item: ReasoningItem) -> str:
    """One line for a reasoning block: its length, never its text."""
    if item.redacted and not item.text:
        return "(reasoning: redacted)"
    return f"(reasoning: {len(item.text):,} chars)"


def footer_line(
    model: TurnModel,
    *,
    session_id: str | None = None,
    info: ModelInfo | None = None,
    budget: str | None = None,
) -> str:
    """The footer as one line: the widget footer's parts (``format.footer_parts``)."""
    return "— " + " · ".join(footer_parts(model, session_id=session_id, info=info, budget=budget))


class TextTurn:
    """One turn's text, taken piece by piece (module docstring). No loop, no I/O."""

    def __init__(
        self,
        *,
        message_id: str | None = None,
        session_id: str | None = None,
        tools: ToolLookup | None = None,
        model_info: ModelInfoLookup | None = None,
        reasoning_effort: str | None = None,
        budget: Callable[[bool], str | None] | None = None,
    ) -> None:
        """Arguments as ``TurnView``'s: ``message_id`` picks the turn (``None``: the next to start),
        ``model_info`` and ``budget`` feed the footer."""
        self.message_id = message_id
        self.session_id = session_id
        self._tools = tools
        self._model_info = model_info
        self._budget = budget
        self._fold = TurnFold(message_id=message_id, reasoning_effort=reasoning_effort)
        self._buffer: list[SessionEvent] | None = None
        self._bound = False
        self._ended = False
        self._finished = False
        self._texts: dict[str, str] = {}
        """What was written of each text item, by key."""
        self._lines: set[str] = set()
        """The one-off lines written (reasoning notes, card starts and outcomes, notices)."""
        self._last_key: str | None = None
        self._last_kind: str | None = None
        self._at_line_start = True

    @property
    def bound(self) -> bool:
        return self._bound

    @property
    def ended(self) -> bool:
        return self._ended

    @property
    def model(self) -> TurnModel:
        return self._fold.snapshot()

    @property
    def appeared(self) -> int:
        """``TurnFold.appeared`` of the bound turn: how many items have come to show something."""
        return self._fold.appeared

    def observe(self, event: SessionEvent) -> None:
        """Feed one session event (bound as ``TurnView.observe`` binds)."""
        if self._ended:
            return
        if self._bound:
            self._fold.apply(event)
            self._ended = event.type == "turn/end"
            return
        if event.type == "turn/start":
            self._buffer = [event]
            if self.message_id is None:
                self._bind()
        elif self._buffer is not None:
            self._buffer.append(event)
            if (
                event.type == "user/message"
                and payload_of(event, "user/message")["id"] == self.message_id
            ):
                self._bind()
            elif event.type == "turn/end":
                self._buffer = None

    def _bind(self) -> None:
        self._bound = True
        for ev in self._buffer or ():
            self._fold.apply(ev)
            self._ended = ev.type == "turn/end"
        self._buffer = None

    # -- writing ----------------------------------------------------------------------------------

    def take(self, *, final: bool = False) -> str:
        """Everything not written yet, terminal-safe; with ``final``, also how the turn ended and
        the footer (once: later calls return ``""``)."""
        if self._finished:
            return ""
        out: list[str] = []
        model = as_drawn(self._fold.snapshot())
        for item in model.items:
            match item:
                case TextItem():
                    said = self._texts.get(item.key, "")
                    if len(item.text) > len(said) and item.text.startswith(said):
                        self._enter(out, item.key, "text")
                        self._put(out, item.text[len(said) :])
                        self._texts[item.key] = item.text
                case ReasoningItem():
                    if item.done or final or model.state == "ended":
                        self._line(out, item.key, reasoning_note(item))
                case ToolItem():
                    card = item.card
                    if card.status != "pending":
                        self._line(out, f"{item.key}:start", card_start(card, self._tools))
                    if card.settled:
                        self._line(out, f"{item.key}:end", card_outcome(card))
                case SteerItem():
                    self._line(out, item.key, f"↳ You: {item.text}")
                case NoticeItem():
                    self._line(out, item.key, f"{notice_icon(item)} {item.text}")
                case HeldItem():
                    self._line(out, item.key, "✍️ writing a tool call…")
        if final:
            self._finished = True
            notice = end_notice(model)
            if notice is not None:
                self._line(out, "end", notice.title)
                if notice.hint:
                    self._line(out, "end:hint", notice.hint)
            if model.state != "waiting" or model.usage.requests:
                info = self._info(model)
                budget = self._left()
                self._line(
                    out,
                    "footer",
                    footer_line(model, session_id=self.session_id, info=info, budget=budget),
                )
        return terminal_text("".join(out))

    def _enter(self, out: list[str], key: str, kind: str) -> None:
        """Start writing item ``key``: a new item starts on a new line, and a blank line parts the
        answer's text from the lines around it."""
        if key != self._last_key and not self._at_line_start:
            self._put(out, "\n")
        if self._last_kind is not None and kind != self._last_kind:
            self._put(out, "\n")
        self._last_key, self._last_kind = key, kind

    def _put(self, out: list[str], text: str) -> None:
        if text:
            out.append(text)
            self._at_line_start = text.endswith("\n")

    def _line(self, out: list[str], key: str, text: str) -> None:
        """Write ``text`` as one line of its own, once per ``key``."""
        if key in self._lines:
            return
        self._lines.add(key)
        self._enter(out, key, "line")
        self._put(out, text.rstrip("\n") + "\n")

    def _info(self, model: TurnModel) -> ModelInfo | None:
        if self._model_info is None or model.provider is None or model.model is None:
            return None
        try:
            return self._model_info(model.provider, model.model)
        except Exception:
            _log.warning("model_info lookup failed", exc_info=True)
            return None

    def _left(self) -> str | None:
        if self._budget is None:
            return None
        try:
            return self._budget(False)
        except Exception:
            _log.warning("budget lookup failed", exc_info=True)
            return None


class TextStream:
    """A ``TextTurn`` written as it streams: ``observe`` events, ``write`` receives the text at most
    ``max_rate_hz`` times a second (structural events at once), redacted; ``finish`` writes the
    rest, the end notice and the footer."""

    def __init__(
        self,
        turn: TextTurn,
        write: Callable[[str], None],
        *,
        clock: Callable[[], float] = time.monotonic,
        max_rate_hz: float = 20.0,
    ) -> None:
        self.turn = turn
        self._write = write
        self._clock = clock
        self._interval = 1.0 / max_rate_hz
        self._handle: asyncio.TimerHandle | asyncio.Handle | None = None
        self._last = float("-inf")
        self._finished = False
        self.writes = 0
        """How many times text was written (tests read it)."""

    def observe(self, event: SessionEvent) -> None:
        turn = self.turn
        appeared = turn.appeared
        turn.observe(event)
        if turn.bound and not self._finished:
            self._schedule(urgent=event.type in URGENT_TYPES or turn.appeared != appeared)

    def _schedule(self, *, urgent: bool) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # written by flush() or finish()
        if self._handle is not None:
            if not urgent:
                return
            self._handle.cancel()
        delay = 0.0 if urgent else max(0.0, self._last + self._interval - self._clock())
        self._handle = loop.call_later(delay, self.flush)

    def write_line(self, text: str) -> None:
        """Write one line of the kernel's own (the earlier-session hint) at once, terminal-safe."""
        self._emit(terminal_text(text.rstrip("\n") + "\n"))

    def flush(self) -> None:
        """Write everything new now."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._last = self._clock()
        self._emit(self.turn.take())

    def finish(self) -> None:
        """Write the rest, how the turn ended and the footer; nothing is written after this."""
        if self._finished:
            return
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._finished = True
        self._emit(self.turn.take(final=True))

    def _emit(self, text: str) -> None:
        if not text:
            return
        self.writes += 1
        try:
            self._write(redact(text))
        except Exception:  # a closed socket must not break the session's observers
            _log.warning("text view: writing failed", exc_info=True)
