"""The fold: one turn's session events into a ``TurnModel``.

Views are pure functions of logged data (ARCHITECTURE §3 decision 6): ``TurnFold.apply`` takes the
events of one turn in log order and ``snapshot()`` returns a frozen ``TurnModel``. The live view and
the static rendering both draw from that model, so a turn replayed from the store draws the same.

What the fold derives, and from which events:

* items in stream order — reasoning and text blocks (``assistant/chunk`` deltas, made
  authoritative by ``block-end``), tool cards (from the first ``tool-call-delta``: a card exists while
  the model is still writing its arguments), steering messages (``user/message`` with a user source
  after the prompt) and retry notices (``llm/retry``, which also discards the failed attempt's
  partial blocks: the call is streamed again);
* card status: ``pending`` (streamed, not started) → ``running`` (``tool/call``) or
  ``waiting-approval`` (``approval/asked`` with its ``callId``) → ``running`` / ``denied`` /
  ``aborted`` (``approval/decided``) → ``done`` / ``failed`` / ``denied`` / ``aborted``
  (``tool/result``: its error code decides). A card still open at ``turn/end`` is ``aborted``;
* usage summed over every attempt of the turn (``usage`` chunks; ``assistant/message.usage`` when an
  attempt logged none), the context used by the last request, the route (``request/context``,
  ``request/header``, else the assistant message's model source) and the reasoning effort (the
  header's, else the one the fold was started with);
* times: time to first token (first text or reasoning delta minus the start of the request that
  produced it: the latest ``step/start``, ``request/*`` or ``llm/retry-started``), total time
  (``turn/end`` minus ``turn/start``), per-card durations (``durationMs`` or result minus call time);
* the end: ``turn/end.reason`` kind, the error (code and message) or the abort cause.

Events of other turns must not be fed in (``turn_events`` slices them out of a log).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, TypeAlias

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.views.model import (
    SETTLED,
    CardStatus,
    NoticeItem,
    ReasoningItem,
    SteerItem,
    TextItem,
    ToolCardModel,
    ToolItem,
    TurnError,
    TurnItem,
    TurnModel,
    TurnState,
    UsageSummary,
)

_ABORT_CODES: frozenset[str] = frozenset({"ABORTED", "ABORTED_BEFORE_DISPATCH"})


# --- the fold ---------------------------------------------------------------------------------------


class _Stream:
    """A text or reasoning block being streamed; parts are joined lazily (amortised O(n))."""

    __slots__ = ("done", "key", "kind", "parts", "redacted")

    def __init__(self, key: str, kind: Literal["text", "reasoning"]) -> None:
        self.key = key
        self.kind: Literal["text", "reasoning"] = kind
        self.parts: list[str] = []
        self.done = False
        self.redacted = False

    def text(self) -> str:
        if len(self.parts) > 1:
            self.parts[:] = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""

    def item(self) -> TurnItem:
        if self.kind == "text":
            return TextItem(key=self.key, text=self.text(), done=self.done)
        return ReasoningItem(key=self.key, text=self.text(), done=self.done, redacted=self.redacted)


class _Card:
    __slots__ = (
        "approval_id",
        "approval_outcome",
        "approval_reason",
        "args",
        "call_id",
        "duration_ms",
        "ended_at",
        "error_code",
        "error_name",
        "is_error",
        "key",
        "meta",
        "name",
        "result_text",
        "started_at",
        "status",
        "step",
    )

    def __init__(self, key: str, call_id: str, name: str, step: int) -> None:
        self.key = key
        self.call_id = call_id
        self.name = name
        self.step = step
        self.args: list[str] = []
        self.status: CardStatus = "pending"
        self.started_at: int | None = None
        self.ended_at: int | None = None
        self.duration_ms: int | None = None
        self.approval_id: str | None = None
        self.approval_reason: str | None = None
        self.approval_outcome: str | None = None
        self.result_text: str | None = None
        self.is_error = False
        self.error_code: str | None = None
        self.error_name: str | None = None
        self.meta: JsonValue = None

    @property
    def settled(self) -> bool:
        return self.status in SETTLED

    def arguments(self) -> str:
        if len(self.args) > 1:
            self.args[:] = ["".join(self.args)]
        return self.args[0] if self.args else ""

    def item(self) -> ToolItem:
        card = ToolCardModel(
            call_id=self.call_id,
            name=self.name,
            arguments=self.arguments(),
            status=self.status,
            step=self.step,
            started_at=self.started_at,
            ended_at=self.ended_at,
            duration_ms=self.duration_ms,
            approval_id=self.approval_id,
            approval_reason=self.approval_reason,
            approval_outcome=self.approval_outcome,
            result_text=self.result_text,
            is_error=self.is_error,
            error_code=self.error_code,
            error_name=self.error_name,
            meta=self.meta,
        )
        return ToolItem(key=self.key, card=card)


_Entry: TypeAlias = _Stream | _Card | SteerItem | NoticeItem

URGENT_TYPES: frozenset[str] = frozenset(
    {
        "turn/start",
        "turn/end",
        "tool/call",
        "tool/result",
        "approval/asked",
        "approval/decided",
        "llm/retry",
        "user/message",
    }
)
"""Events a live view should show at once rather than at the next streaming tick."""


class TurnFold:
    """Folds one turn's events; ``snapshot()`` may be taken at any point (live views do)."""

    def __init__(
        self, *, message_id: str | None = None, reasoning_effort: str | None = None
    ) -> None:
        """``reasoning_effort``: the effort in force when the turn starts (a turn logs a
        ``request/header`` only when the request settings change)."""
        self._message_id = message_id
        self._effort = reasoning_effort
        self._entries: list[_Entry] = []
        self._open: dict[int, _Stream | _Card] = {}
        self._cards: dict[str, _Card] = {}
        self._by_approval: dict[str, _Card] = {}
        self._attempt = 0
        self._attempt_entries: list[_Entry] = []
        self._usage: dict[int, JsonObject] = {}
        self._step = 0
        self._request_at: int | None = None
        self._turn: int | None = None
        self._started_at: int | None = None
        self._ended_at: int | None = None
        self._provider: str | None = None
        self._model: str | None = None
        self._context_window: int | None = None
        self._ttft_ms: int | None = None
        self._prompt: str | None = None
        self._prompt_id: str | None = None
        self._end_reason: JsonObject | None = None
        self._error: TurnError | None = None
        self._state: TurnState = "waiting"

    # -- feeding -----------------------------------------------------------------------------------

    def apply(self, event: SessionEvent) -> None:
        d = event.data
        match event.type:
            case "assistant/chunk":
                chunk = d.get("chunk")
                if isinstance(chunk, dict):
                    self._chunk(chunk, event.time)
            case "turn/start":
                self._turn = _i(d.get("turn"))
                self._started_at = event.time
                self._state = "running"
            case "step/start":
                self._step = _i(d.get("step")) or self._step + 1
                self._new_attempt(event.time)
            case "user/message":
                self._user_message(d, event.seq)
            case "request/header":
                header = d.get("header")
                config = header.get("config") if isinstance(header, dict) else None
                if isinstance(config, dict):
                    self._route(config.get("provider"), config.get("model"))
                    effort = config.get("reasoningEffort")
                    self._effort = effort if isinstance(effort, str) else None
                self._request_at = event.time
            case "request/context":
                self._route(d.get("provider"), d.get("model"))
                window = _i(d.get("contextWindow"))
                if window is not None:
                    self._context_window = window
                self._request_at = event.time
            case "llm/retry-started":
                self._new_attempt(event.time)
            case "llm/retry":
                self._retry(d, event.seq)
            case "assistant/message":
                self._assistant_message(d)
            case "tool/call":
                self._tool_call(d, event.time)
            case "approval/asked":
                self._approval_asked(d)
            case "approval/decided":
                self._approval_decided(d)
            case "tool/result":
                self._tool_result(d, event.time)
            case "turn/end":
                self._turn_end(d, event.time)
            case _:
                pass  # other events do not change what a turn shows

    def _new_attempt(self, at: int) -> None:
        self._attempt += 1
        self._attempt_entries = []
        self._open = {}
        self._request_at = at

    def _route(self, provider: JsonValue, model: JsonValue) -> None:
        if isinstance(provider, str):
            self._provider = provider
        if isinstance(model, str):
            self._model = model

    def _add(self, entry: _Entry) -> None:
        self._entries.append(entry)
        self._attempt_entries.append(entry)

    def _stream(self, index: int, kind: Literal["text", "reasoning"]) -> _Stream:
        cur = self._open.get(index)
        if isinstance(cur, _Stream) and cur.kind == kind:
            return cur
        s = _Stream(f"{kind}-{self._step}-{self._attempt}-{index}", kind)
        self._open[index] = s
        self._add(s)
        return s

    def _chunk(self, c: JsonObject, at: int) -> None:
        kind = c.get("type")
        index = _i(c.get("index")) or 0
        if kind == "text-delta" or kind == "reasoning-delta":
            text = c.get("text")
            if isinstance(text, str) and text:
                self._stream(index, "text" if kind == "text-delta" else "reasoning").parts.append(
                    text
                )
                if self._ttft_ms is None and self._request_at is not None:
                    self._ttft_ms = at - self._request_at
        elif kind == "tool-call-delta":
            cid = c.get("id")
            if isinstance(cid, str):
                card = self._card(cid, _opt_s(c.get("name")) or "tool")
                self._open[index] = card
                if card.status == "pending":
                    delta = c.get("argumentsDelta")
                    if isinstance(delta, str):
                        card.args.append(delta)
        elif kind == "block-start":
            match c.get("blockType"):
                case "text":
                    self._stream(index, "text")
                case "reasoning":
                    self._stream(index, "reasoning")
                case _:
                    pass  # a tool-call card is created by its first delta, which carries the id
        elif kind == "block-end":
            self._block_end(index, c.get("block"))
        elif kind == "usage":
            usage = c.get("usage")
            if isinstance(usage, dict):
                self._usage[self._attempt] = usage

    def _block_end(self, index: int, block: JsonValue) -> None:
        if not isinstance(block, dict):
            return
        cur = self._open.get(index)
        match block.get("type"):
            case "text" | "reasoning" as kind:
                s = cur if isinstance(cur, _Stream) else self._stream(index, kind)
                text = block.get("text")
                if isinstance(text, str):
                    s.parts[:] = [text]
                s.redacted = isinstance(block.get("redacted"), str)
                s.done = True
            case "tool-call":
                cid = block.get("id")
                if isinstance(cid, str):
                    card = self._card(cid, _opt_s(block.get("name")) or "tool")
                    args = block.get("arguments")
                    if isinstance(args, str) and card.status == "pending":
                        card.args[:] = [args]
            case _:
                pass

    def _card(self, call_id: str, name: str) -> _Card:
        card = self._cards.get(call_id)
        if card is None:
            card = _Card(f"tool-{call_id}", call_id, name, self._step)
            self._cards[call_id] = card
            self._add(card)
        elif name != "tool":
            card.name = name
        return card

    def _user_message(self, d: JsonObject, seq: int) -> None:
        source = d.get("source")
        if not isinstance(source, dict) or source.get("kind") != "user":
            return  # runtime context, injected snapshots: for the model, not the transcript
        text = _text_of(d.get("content"))
        mid = d.get("id")
        is_prompt = self._prompt is None and (self._message_id is None or mid == self._message_id)
        if is_prompt:
            self._prompt = text
            self._prompt_id = _opt_s(mid)
        else:
            self._entries.append(SteerItem(key=f"steer-{seq}", text=text))

    def _retry(self, d: JsonObject, seq: int) -> None:
        # The failed attempt's partial blocks are streamed again by the retry: drop them.
        dropped = {id(e) for e in self._attempt_entries if isinstance(e, _Stream)}
        for e in self._attempt_entries:
            if isinstance(e, _Card) and e.status == "pending":
                dropped.add(id(e))
                self._cards.pop(e.call_id, None)
        self._entries = [e for e in self._entries if id(e) not in dropped]
        self._attempt_entries = []
        failure = d.get("failure")
        code = message = ""
        if isinstance(failure, dict):
            code = _opt_s(failure.get("code")) or ""
            message = _opt_s(failure.get("message")) or ""
        delay = _i(d.get("delayMs")) or 0
        n = _i(d.get("retry"))
        cap = _i(d.get("maxRetries"))
        count = f" {n}/{cap}" if n is not None and cap is not None else (f" {n}" if n else "")
        text = f"Retry{count} in {delay / 1000:.1f} s after {code or 'an error'}"
        self._entries.append(NoticeItem(key=f"retry-{seq}", text=f"{text}: {message}"))

    def _assistant_message(self, d: JsonObject) -> None:
        usage = d.get("usage")
        if isinstance(usage, dict) and self._attempt not in self._usage:
            self._usage[self._attempt] = usage
        message = d.get("message")
        source = message.get("source") if isinstance(message, dict) else None
        if isinstance(source, dict) and self._model is None:
            self._route(source.get("provider"), source.get("model"))
        for entry in self._open.values():
            if isinstance(entry, _Stream):
                entry.done = True

    def _tool_call(self, d: JsonObject, at: int) -> None:
        cid = d.get("callId")
        if not isinstance(cid, str):
            return
        card = self._card(cid, _opt_s(d.get("name")) or "tool")
        args = d.get("arguments")
        if isinstance(args, str):
            card.args[:] = [args]
        card.started_at = at
        card.step = _i(d.get("step")) or self._step
        if card.status == "pending":
            card.status = "running"

    def _approval_asked(self, d: JsonObject) -> None:
        aid = _opt_s(d.get("id"))
        if aid is None:
            return
        cid = _opt_s(d.get("callId"))
        name = _opt_s(d.get("toolName")) or "tool"
        card = self._card(cid if cid is not None else f"approval:{aid}", name)
        card.status = "waiting-approval"
        card.approval_id = aid
        card.approval_reason = _opt_s(d.get("reason"))
        self._by_approval[aid] = card

    def _approval_decided(self, d: JsonObject) -> None:
        card = self._by_approval.get(_opt_s(d.get("id")) or "")
        if card is None:
            return
        outcome = _opt_s(d.get("outcome")) or "unavailable"
        card.approval_outcome = outcome
        if card.settled:
            return
        if outcome in ("allowed-once", "allowed-always"):
            card.status = "running"
        elif outcome == "cancelled":
            card.status = "aborted"
        else:
            card.status = "denied"

    def _tool_result(self, d: JsonObject, at: int) -> None:
        message = d.get("message")
        if not isinstance(message, dict):
            return
        content = message.get("content")
        block = content[0] if isinstance(content, list) and content else None
        cid = block.get("toolCallId") if isinstance(block, dict) else None
        if not isinstance(cid, str) or not isinstance(block, dict):
            return
        card = self._card(cid, "tool")
        card.result_text = _text_of(block.get("content"), sep="\n")
        card.is_error = block.get("isError") is True
        error = d.get("error")
        if isinstance(error, dict):
            card.error_code = _opt_s(error.get("code"))
            card.error_name = _opt_s(error.get("name"))
        card.meta = d.get("meta")
        card.ended_at = at
        duration = _i(d.get("durationMs"))
        if duration is None and card.started_at is not None:
            duration = at - card.started_at
        card.duration_ms = duration
        code = card.error_code
        if not card.is_error:
            card.status = "done"
        elif code == "DENIED":
            card.status = "denied"
        elif code in _ABORT_CODES:
            card.status = "aborted"
        else:
            card.status = "failed"

    def _turn_end(self, d: JsonObject, at: int) -> None:
        self._state = "ended"
        self._ended_at = at
        reason = d.get("reason")
        if isinstance(reason, dict):
            self._end_reason = reason
            error = reason.get("error")
            if isinstance(error, dict):
                self._error = TurnError(
                    code=_opt_s(error.get("code")) or "UNKNOWN",
                    message=_opt_s(error.get("message")) or "the turn failed",
                    status=_i(error.get("status")),
                )
        for card in self._cards.values():
            if not card.settled:
                card.status = "aborted"
        for entry in self._entries:
            if isinstance(entry, _Stream):
                entry.done = True

    # -- reading -----------------------------------------------------------------------------------

    def snapshot(self) -> TurnModel:
        items: list[TurnItem] = []
        for e in self._entries:
            items.append(e.item() if isinstance(e, _Stream | _Card) else e)
        reason = self._end_reason
        return TurnModel(
            turn=self._turn,
            message_id=self._prompt_id,
            prompt=self._prompt,
            items=tuple(items),
            state=self._state,
            end_kind=_opt_s(reason.get("kind")) if reason is not None else None,
            end_reason=reason,
            error=self._error,
            provider=self._provider,
            model=self._model,
            reasoning_effort=self._effort,
            context_window=self._context_window,
            usage=self._usage_summary(),
            started_at=self._started_at,
            ended_at=self._ended_at,
            ttft_ms=self._ttft_ms,
        )

    def _usage_summary(self) -> UsageSummary:
        totals = dict.fromkeys(
            ("inputTokens", "cacheReadTokens", "cacheWriteTokens", "outputTokens"), 0
        )
        reasoning = 0
        last: JsonObject | None = None
        for attempt in sorted(self._usage):
            u = self._usage[attempt]
            for k in totals:
                totals[k] += _i(u.get(k)) or 0
            reasoning += _i(u.get("reasoningTokens")) or 0
            last = u
        context = None
        if last is not None:
            context = sum(
                _i(last.get(k)) or 0
                for k in ("inputTokens", "cacheReadTokens", "cacheWriteTokens", "outputTokens")
            )
        return UsageSummary(
            requests=len(self._usage),
            input_tokens=totals["inputTokens"],
            cache_read_tokens=totals["cacheReadTokens"],
            cache_write_tokens=totals["cacheWriteTokens"],
            output_tokens=totals["outputTokens"],
            reasoning_tokens=reasoning,
            context_tokens=context,
        )


# --- slicing a log ----------------------------------------------------------------------------------


def turn_events(events: Iterable[SessionEvent], turn: int) -> list[SessionEvent]:
    """The events of turn ``turn``: from its ``turn/start`` through its ``turn/end`` (or the end of
    the log while it is open). Turns never overlap, so everything between the brackets belongs."""
    out: list[SessionEvent] = []
    inside = False
    for ev in events:
        if ev.type == "turn/start":
            inside = ev.data.get("turn") == turn
        if inside:
            out.append(ev)
            if ev.type == "turn/end":
                break
    return out


def find_turn(events: Iterable[SessionEvent], message_id: str) -> int | None:
    """The turn whose ``user/message`` has id ``message_id`` (``None`` if it is in no turn)."""
    current: int | None = None
    for ev in events:
        if ev.type == "turn/start":
            current = _i(ev.data.get("turn"))
        elif ev.type == "turn/end":
            current = None
        elif ev.type == "user/message" and ev.data.get("id") == message_id:
            return current
    return None


def fold_turn(events: Sequence[SessionEvent], *, message_id: str | None = None) -> TurnModel:
    fold = TurnFold(message_id=message_id)
    for ev in events:
        fold.apply(ev)
    return fold.snapshot()


# --- JSON helpers -------------------------------------------------------------------------------------


def _text_of(content: JsonValue, sep: str = "") -> str:
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for b in content:
        if isinstance(b, dict) and b.get("type") == "text":
            t = b.get("text")
            if isinstance(t, str):
                parts.append(t)
    return sep.join(parts)


def _i(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _opt_s(v: object) -> str | None:
    return v if isinstance(v, str) else None
