"""The turn model: what one chat turn shows, as frozen data (ARCHITECTURE §2 "What a chat cell shows").

``TurnModel`` is produced by the turn reader (``dsh_kernel.transcript.turn.TurnFold``) from one turn's
session events and consumed by the live widgets (``views.turn``, ``views.tool_card``), the static
rendering (``views.render``), the footer (``views.format``) and the Markdown export
(``store.sessions.export_markdown``); it lives below ``store/`` and ``views/`` so that all of them
read a turn the same way. Items are in stream order:
reasoning and text blocks, tool cards, steering messages, retry and compaction notices, and — while
answer text is held as a possible tool call — a progress item; runtime-context messages
are not items (no view draws them) but ``context`` notes at their place, for the transcript. Card statuses are ``pending`` (the model is still writing the call) →
``running`` or ``waiting-approval`` → ``done`` / ``failed`` / ``denied`` / ``aborted``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from dsh_kernel.jsonvalue import JsonValue
from dsh_kernel.session.payloads import TurnEndReason
from dsh_kernel.session.usage import UsageSummary

CardStatus: TypeAlias = Literal[
    "pending", "waiting-approval", "running", "done", "failed", "denied", "aborted"
]
TurnState: TypeAlias = Literal["waiting", "running", "ended"]
SETTLED: frozenset[str] = frozenset({"done", "failed", "denied", "aborted"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCardModel:
    """One tool call as a card shows it: name, raw arguments, status, result, approval, duration."""

    call_id: str
    name: str
    arguments: str
    """The raw argument JSON text (while ``pending``: what has streamed so far)."""
    status: CardStatus
    step: int
    started_at: int | None = None
    ended_at: int | None = None
    duration_ms: int | None = None
    approval_id: str | None = None
    approval_reason: str | None = None
    approval_outcome: str | None = None
    result_text: str | None = None
    """The result's text blocks, one per line; ``None`` until ``tool/result``."""
    is_error: bool = False
    error_code: str | None = None
    error_name: str | None = None
    meta: JsonValue = None
    recovered: bool = False
    """The model wrote this call as answer text and it was recovered (``ToolCallBlock.recovered_from``)."""

    @property
    def settled(self) -> bool:
        return self.status in SETTLED


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningItem:
    """A reasoning block of the turn (folded away in the views)."""

    type: Literal["reasoning"] = "reasoning"
    key: str
    text: str
    done: bool
    redacted: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TextItem:
    """A text block of the answer, in stream order."""

    type: Literal["text"] = "text"
    key: str
    text: str
    done: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolItem:
    """A tool card in the turn's stream order."""

    type: Literal["tool"] = "tool"
    key: str
    card: ToolCardModel


@dataclass(frozen=True, slots=True, kw_only=True)
class SteerItem:
    """A message the user sent while the turn ran (the steer box)."""

    type: Literal["steer"] = "steer"
    key: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NoticeItem:
    """A one-line notice inside the turn (a retry, a discarded attempt, a compaction)."""

    type: Literal["notice"] = "notice"
    key: str
    text: str
    level: Literal["info", "warning"] = "warning"
    """``info``: something the harness did as it should (a compaction); ``warning`` otherwise."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldItem:
    """Answer text held back while it may be a tool call written as text (``assistant/held``):
    shown as progress until the text or the call arrives, then gone."""

    type: Literal["held"] = "held"
    key: str
    chars: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextNote:
    """A runtime-context message of the turn (sent to the model, not drawn by the views)."""

    before: int
    """Its place: before ``TurnModel.items[before]`` (``len(items)``: after the last item)."""
    text: str
    before_prompt: bool = False
    """It came before the turn's prompt (context queued ahead of the message)."""


TurnItem: TypeAlias = ReasoningItem | TextItem | ToolItem | SteerItem | NoticeItem | HeldItem


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnError:
    """How a failed turn failed: the stable code and the message."""

    code: str
    message: str
    status: int | None = None
    detail: str | None = None
    """The failure's finer reason (``LlmFailure.detail``), which picks the advice."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnModel:
    """Everything a view draws of one turn, read from its events (``transcript.turn``)."""

    turn: int | None = None
    message_id: str | None = None
    prompt: str | None = None
    items: tuple[TurnItem, ...] = ()
    context: tuple[ContextNote, ...] = ()
    interrupted_keys: frozenset[str] = frozenset()
    """Keys of text and reasoning items whose model call was cut short (a cancel, a crash): its
    message kept what had streamed."""
    unlogged_keys: frozenset[str] = frozenset()
    """Keys of text and reasoning items no assistant message holds: their call failed and the turn
    ended without a retry (the cell showed them; the model's history never had them)."""
    state: TurnState = "waiting"
    end_reason: TurnEndReason | None = None
    """How the turn ended (``None`` while it has not)."""
    error: TurnError | None = None
    provider: str | None = None
    model: str | None = None
    reasoning_effort: str | None = None
    """The effort the turn's requests sent (``None``: none was sent, or it is not known)."""
    context_window: int | None = None
    context_window_source: str | None = None
    """Where the window came from (``request/context.contextWindowSource``): ``configured``,
    ``discovered``, ``catalogue`` or ``default``; ``None`` when the turn's events do not say."""
    usage: UsageSummary = field(default_factory=UsageSummary)
    started_at: int | None = None
    ended_at: int | None = None
    ttft_ms: int | None = None

    @property
    def end_kind(self) -> str | None:
        """``end_reason``'s ``kind`` (``None`` while the turn has not ended)."""
        return self.end_reason["kind"] if self.end_reason is not None else None

    @property
    def total_ms(self) -> int | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at

    @property
    def answer(self) -> str:
        """Every text block of the turn, blank-line separated (the user-visible answer)."""
        return "\n\n".join(i.text for i in self.items if isinstance(i, TextItem) and i.text)

    @property
    def reasoning(self) -> str:
        return "\n\n".join(i.text for i in self.items if isinstance(i, ReasoningItem) and i.text)

    @property
    def cards(self) -> tuple[ToolCardModel, ...]:
        return tuple(i.card for i in self.items if isinstance(i, ToolItem))
