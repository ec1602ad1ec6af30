"""Reading a turn: one turn's session events into a ``TurnModel`` — the one reading every consumer shares.

The live view (``views.turn``), the static rendering (``views.render``), the footer
(``views.format``), the Markdown export (``store.sessions.export_markdown``) and the kernel's
"how did this cell's turn end" (``turn_end``) all read a turn here, so they cannot disagree. It sits
below ``store/`` and ``views/`` and imports only ``llm`` and ``session``.

``TurnFold.apply`` takes the events of one turn in log order and ``snapshot()`` returns a frozen
``TurnModel`` at any point (a live view takes one per tick). What it derives, and from which events:

* items in stream order — reasoning and text blocks and the tool cards' streamed calls, assembled
  by the canonical ``llm.assembler.BlockAssembler`` (one per model attempt; ``partial(index)`` shows
  a block while it streams, ``block-end`` makes it authoritative), steering messages (``user/message``
  with a user source after the prompt) and retry notices (``llm/retry``, which also drops the failed
  attempt's partial blocks and pending cards: the call is streamed again). A card exists from the
  first ``tool-call-delta`` (which carries the id), while the model is still writing its arguments;
  from ``tool/call`` on, its name and arguments are the call's;
* runtime-context messages (``user/message`` of any other source with text): not items — no view
  draws them — but kept in ``TurnModel.context`` at their place for the transcript export;
* a card whose call was recovered from answer text (its ``block-end`` block has ``recovered_from``)
  is marked ``recovered``; while answer text is held as a possible call (``assistant/held``), a
  ``HeldItem`` with its length stands where the answer will be, until the attempt's next text or
  tool-call chunk, a note of 0 characters, its end, a retry or the turn's end;
* a text block marked ``unclosed_reasoning`` (reasoning never closed, made the answer) gets a
  one-line notice before it; a reasoning block that ended empty (one made the answer) shows
  nothing;
* card status: ``pending`` (streamed, not started) → ``running`` (``tool/call``) or
  ``waiting-approval`` (``approval/asked`` with its ``callId``) → ``running`` / ``denied`` /
  ``aborted`` (``approval/decided``) → ``done`` / ``failed`` / ``denied`` / ``aborted``
  (``tool/result``: its error code decides). A card still open at ``turn/end`` is ``aborted``; a
  call the repeated-call guard did not run (error code ``REPEATED_CALL``) also adds a notice item;
* usage: ``session.usage.UsageReader.summary()`` over the turn (the same reading as ``%agent cost``:
  what the servers reported, summed over every attempt), the context window of the last request,
  the route (``request/context``, ``request/header``, else the assistant message's model source) and
  the reasoning effort (the header's, else the one the fold was started with); a context warning
  (``context/warning``) is a notice item, and so is a compaction in the turn (``compaction_notes``),
  whose model-only copies (``surfaceOp: replace``) change nothing the turn shows;
* times: time to first token (first text or reasoning delta minus the start of the request that
  produced it: the latest ``step/start``, ``request/*`` or ``llm/retry-started``), total time
  (``turn/end`` minus ``turn/start``), per-card durations (``durationMs`` or result minus call time);
* the end: ``turn/end.reason`` kind, the error (code and message) or the abort cause;
* ``appeared``: how many items have come to show something — a text or reasoning block at its
  first non-empty delta, a tool card when it is first streamed or logged. A live view draws at once
  an event that raises it (with ``URGENT_TYPES``), so the answer's first words are never held back
  by the view's rate limit, which then paces only how they grow.

A chunk the codec cannot read (``llm.codec.chunk_from_json`` refuses it) changes nothing: a view
shows what it can. Events of other turns must not be fed in (``turn_events`` slices them out of a
log); ``find_turn`` and ``turn_end`` find the turn of a message.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Final, TypeAlias

from dsh_kernel.jsonvalue import JsonValue
from dsh_kernel.llm.assembler import BlockAssembler
from dsh_kernel.llm.codec import chunk_from_json
from dsh_kernel.llm.types import ReasoningBlock, TextBlock, ToolCallBlock
from dsh_kernel.session.events import ReplaceOp, SessionEvent
from dsh_kernel.session.payloads import (
    ApprovalAsked,
    ApprovalDecided,
    AssistantMessage,
    ContextWarning,
    LlmRetry,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnEndReason,
    UserMessage,
    payload_of,
)
from dsh_kernel.session.usage import UsageReader
from dsh_kernel.transcript.compaction_notes import CompactionNotes
from dsh_kernel.transcript.model import (
    CardStatus,
    ContextNote,
    HeldItem,
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
)
from dsh_kernel.transcript.rewind_note import rewind_notice

_ABORT_CODES: frozenset[str] = frozenset({"ABORTED", "ABORTED_BEFORE_DISPATCH"})
_REPEATED_CALL = "REPEATED_CALL"
"""The code of a call the repeated-call guard did not run (``agent.repeats``)."""

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
        "compaction/start",
        "compaction/end",
    }
)
"""Events a live view should show at once rather than at the next streaming tick. So is an event
that makes something appear (``TurnFold.appeared`` grows): a view's rate limit paces how a shown
item grows, never when it first shows."""


UNCLOSED_NOTE: Final = (
    "The model never closed its reasoning (<think> without </think>): it is shown as the answer"
)
"""The notice before a text block marked ``unclosed_reasoning``."""


class _Attempt:
    """One model call: its assembler, whether its message ended it, and its held-text note."""

    __slots__ = ("assembler", "ended", "held", "interrupted", "number", "step")

    def __init__(self, number: int, step: int) -> None:
        self.number = number
        self.step = step
        self.assembler = BlockAssembler()
        self.ended = False
        self.interrupted = False
        self.held: _Held | None = None  # shown while not None


class _Held:
    """The held-text progress of an attempt: drawn while it is the attempt's current one."""

    __slots__ = ("attempt", "chars", "key")

    def __init__(self, attempt: _Attempt, key: str) -> None:
        self.attempt = attempt
        self.key = key
        self.chars = 0

    def item(self, turn_ended: bool) -> HeldItem | None:
        if turn_ended or self.attempt.held is not self or self.attempt.ended:
            return None
        return HeldItem(key=self.key, chars=self.chars)


class _Block:
    """A text or reasoning block of an attempt, read from its assembler when drawn."""

    __slots__ = ("attempt", "index", "key")

    def __init__(self, attempt: _Attempt, index: int, key: str) -> None:
        self.attempt = attempt
        self.index = index
        self.key = key

    def item(self, turn_ended: bool) -> TurnItem | None:
        read = self.attempt.assembler.partial(self.index)
        if read is None:
            return None
        block, closed = read
        done = closed or self.attempt.ended or turn_ended
        if isinstance(block, TextBlock):
            return TextItem(key=self.key, text=block.text, done=done)
        if isinstance(block, ReasoningBlock):
            if closed and not block.text and block.redacted is None:
                return None  # emptied: it was made the answer (or nothing was said)
            redacted = block.redacted is not None
            return ReasoningItem(key=self.key, text=block.text, done=done, redacted=redacted)
        return None


class _Card:
    """A tool card: its model so far, and the streamed call while the arguments are not logged."""

    __slots__ = ("args", "attempt", "index", "m")

    def __init__(self, call_id: str, name: str, step: int) -> None:
        self.m = ToolCardModel(
            call_id=call_id, name=name, arguments="", status="pending", step=step
        )
        self.attempt: _Attempt | None = None
        self.index = 0
        self.args: str | None = None  # the logged arguments (``tool/call``)

    @property
    def key(self) -> str:
        return f"tool-{self.m.call_id}"

    @property
    def status(self) -> CardStatus:
        return self.m.status

    def streamed(self) -> ToolCallBlock | None:
        read = self.attempt.assembler.partial(self.index) if self.attempt is not None else None
        block = read[0] if read is not None else None
        return block if isinstance(block, ToolCallBlock) else None

    def item(self) -> ToolItem:
        args = self.args
        if args is None:  # not called yet: what has streamed so far
            block = self.streamed()
            args = block.arguments if block is not None else ""
        return ToolItem(key=self.key, card=replace(self.m, arguments=args))


class _Context:
    __slots__ = ("before_prompt", "text")

    def __init__(self, text: str, *, before_prompt: bool) -> None:
        self.text = text
        self.before_prompt = before_prompt


_Entry: TypeAlias = _Block | _Card | _Held | SteerItem | NoticeItem | _Context


class TurnFold:
    """Reads one turn's events; ``snapshot()`` may be taken at any point (live views do)."""

    def __init__(
        self, *, message_id: str | None = None, reasoning_effort: str | None = None
    ) -> None:
        """``reasoning_effort``: the effort in force when the turn starts (a turn logs a
        ``request/header`` only when the request settings change)."""
        self._message_id = message_id
        self._effort = reasoning_effort
        self._entries: list[_Entry] = []
        self._cards: dict[str, _Card] = {}
        self._compactions = CompactionNotes()
        self._by_approval: dict[str, _Card] = {}
        self._step = 0
        self._attempt = _Attempt(0, 0)
        self._seen: set[int] = set()  # indices of the current attempt that have an entry
        self._shown: set[int] = set()  # indices of the current attempt that have shown text
        self._appeared = 0
        self._usage = UsageReader()
        self._request_at: int | None = None
        self._turn: int | None = None
        self._started_at: int | None = None
        self._ended_at: int | None = None
        self._provider: str | None = None
        self._model: str | None = None
        self._context_window: int | None = None
        self._window_source: str | None = None
        self._ttft_ms: int | None = None
        self._prompt: str | None = None
        self._prompt_id: str | None = None
        self._end_reason: TurnEndReason | None = None
        self._error: TurnError | None = None
        self._state: TurnState = "waiting"

    # -- feeding -----------------------------------------------------------------------------------

    def apply(self, event: SessionEvent) -> None:
        self._usage.apply(event)
        match event.type:
            case "assistant/chunk":
                # The hot path (one event per streamed chunk): the chunk is JSON for the codec, so
                # there is nothing to narrow, and payload_of's call (~70 ns) is 3% of the read.
                self._chunk(event.data["chunk"], event.time)
            case "turn/start":
                self._turn = payload_of(event, "turn/start")["turn"]
                self._started_at = event.time
                self._state = "running"
            case "step/start":
                self._step = payload_of(event, "step/start")["step"] or self._step + 1
                self._new_attempt(event.time)
            case "user/message" if not isinstance(event.surface_op, ReplaceOp):
                # (a replacement is a model-only copy, a compaction's: the turn shows the original)
                self._user_message(payload_of(event, "user/message"), event.seq)
            case "request/header":
                config = payload_of(event, "request/header")["header"].get("config")
                if isinstance(config, dict):
                    self._route(_opt_s(config.get("provider")), _opt_s(config.get("model")))
                    self._effort = _opt_s(config.get("reasoningEffort"))
                self._request_at = event.time
            case "request/context":
                route = payload_of(event, "request/context")
                self._route(route["provider"], route["model"])
                window = route.get("contextWindow")
                if window is not None:
                    self._context_window = window
                    self._window_source = route.get("contextWindowSource")
                self._request_at = event.time
            case "context/warning" | "assistant/held":
                self._informational(event)
            case "llm/retry-started":
                self._new_attempt(event.time)
            case "llm/retry":
                self._retry(payload_of(event, "llm/retry"), event.seq)
            case "assistant/message":
                self._assistant_message(payload_of(event, "assistant/message"))
            case "tool/call":
                self._tool_call(payload_of(event, "tool/call"), event.time)
            case "approval/asked":
                self._approval_asked(payload_of(event, "approval/asked"))
            case "approval/decided":
                self._approval_decided(payload_of(event, "approval/decided"))
            case "tool/result" if not isinstance(event.surface_op, ReplaceOp):
                self._tool_result(payload_of(event, "tool/result"), event.time)
            case "turn/end":
                self._compactions.close(self._entries)
                self._turn_end(payload_of(event, "turn/end"), event.time)
            case _:  # compaction/* are notices; other events do not change what a turn shows
                self._compactions.apply(event, self._entries)

    def _informational(self, event: SessionEvent) -> None:
        if event.type == "assistant/held":
            self._held(payload_of(event, "assistant/held")["chars"])
        else:
            text = _pressure(payload_of(event, "context/warning"))
            self._entries.append(NoticeItem(key=f"context-{event.seq}", text=text))

    def _held(self, chars: int) -> None:
        attempt = self._attempt
        held = attempt.held
        if chars == 0:  # nothing held any more
            attempt.held = None
            return
        if held is None:
            key = f"held-{self._step}-{attempt.number}-{len(self._entries)}"
            held = attempt.held = _Held(attempt, key)
            self._entries.append(held)
            self._appeared += 1  # the progress line shows at once, like an answer's first words
        held.chars = chars

    def _new_attempt(self, at: int) -> None:
        self._attempt.held = None
        self._attempt = _Attempt(self._attempt.number + 1, self._step)
        self._seen = set()
        self._shown = set()
        self._request_at = at

    def _route(self, provider: str | None, model: str | None) -> None:
        if provider is not None:
            self._provider = provider
        if model is not None:
            self._model = model

    def _chunk(self, raw: JsonValue, at: int) -> None:
        try:
            chunk = chunk_from_json(raw)
        except ValueError:
            return  # not a chunk the codec reads: nothing to show
        attempt = self._attempt
        attempt.assembler.push(chunk)
        match chunk.type:
            case "text-delta" | "reasoning-delta":
                if not chunk.text:
                    return  # an empty delta shows nothing yet
                if chunk.index not in self._shown:
                    self._shown.add(chunk.index)
                    self._appeared += 1
                if chunk.type == "text-delta":
                    attempt.held = None  # the held text, released (or text after the calls)
                if self._ttft_ms is None and self._request_at is not None:
                    self._ttft_ms = at - self._request_at
            case "tool-call-delta":
                attempt.held = None
                self._streamed_card(chunk.index, chunk.id, chunk.name)
                return
            case "block-end" if isinstance(chunk.block, ToolCallBlock):
                card = self._streamed_card(chunk.index, chunk.block.id, chunk.block.name)
                if chunk.block.recovered_from is not None:
                    card.m = replace(card.m, recovered=True)
                return
            case "block-end" if (
                isinstance(chunk.block, TextBlock) and chunk.block.unclosed_reasoning
            ):
                self._unclosed_note(attempt, chunk.index)
            case "block-start" | "block-end":
                pass
            case "finish":
                attempt.held = None
                return  # read by the usage reader
            case "usage":
                return  # read by the usage reader
        index = chunk.index
        if index in self._seen:
            return
        read = attempt.assembler.partial(index)
        if read is not None and isinstance(read[0], TextBlock | ReasoningBlock):
            self._seen.add(index)
            key = f"{read[0].type}-{self._step}-{attempt.number}-{index}"
            self._entries.append(_Block(attempt, index, key))

    def _unclosed_note(self, attempt: _Attempt, index: int) -> None:
        """The notice before the text block that is reasoning never closed (once)."""
        at = next(
            (
                n
                for n, e in enumerate(self._entries)
                if isinstance(e, _Block) and e.attempt is attempt and e.index == index
            ),
            len(self._entries),
        )
        key = f"unclosed-{self._step}-{attempt.number}-{index}"
        if not any(isinstance(e, NoticeItem) and e.key == key for e in self._entries):
            self._entries.insert(at, NoticeItem(key=key, text=UNCLOSED_NOTE))

    def _streamed_card(self, index: int, call_id: str, name: str | None) -> _Card:
        card = self._card(call_id, name or "tool")
        if index not in self._seen and card.attempt is None and card.status == "pending":
            self._seen.add(index)
            card.attempt, card.index = self._attempt, index
        return card

    def _card(self, call_id: str, name: str) -> _Card:
        card = self._cards.get(call_id)
        if card is None:
            card = self._cards[call_id] = _Card(call_id, name, self._step)
            self._entries.append(card)
            self._appeared += 1
        elif name != "tool":
            card.m = replace(card.m, name=name)
        return card

    def _user_message(self, d: UserMessage, seq: int) -> None:
        text = _text_of(d["content"])
        if d["source"].get("kind") != "user":
            if text:  # runtime context, injected snapshots: for the model and the transcript
                self._entries.append(_Context(text, before_prompt=self._prompt is None))
            return
        mid = d["id"]
        is_prompt = self._prompt is None and (self._message_id is None or mid == self._message_id)
        if is_prompt:
            self._prompt = text
            self._prompt_id = mid
            notice = rewind_notice(d["source"])
            if notice is not None:
                self._entries.append(NoticeItem(key=f"rewind-{seq}", text=notice, level="info"))
        else:
            self._entries.append(SteerItem(key=f"steer-{seq}", text=text))

    def _retry(self, d: LlmRetry, seq: int) -> None:
        # The failed attempt's partial blocks are streamed again by the retry: drop them.
        failed = self._attempt
        kept: list[_Entry] = []
        for e in self._entries:
            if isinstance(e, _Block) and e.attempt is failed:
                continue
            if isinstance(e, _Card) and e.attempt is failed and e.status == "pending":
                self._cards.pop(e.m.call_id, None)
                continue
            if isinstance(e, _Held) and e.attempt is failed:
                continue
            kept.append(e)
        self._entries = kept
        failure = d["failure"]
        code = _opt_s(failure.get("code")) or ""
        message = _opt_s(failure.get("message")) or ""
        delay, n, cap = d["delayMs"], d["retry"], d.get("maxRetries")
        count = f" {n}/{cap}" if cap is not None else (f" {n}" if n else "")
        text = f"Retry{count} in {delay / 1000:.1f} s after {code or 'an error'}"
        self._entries.append(NoticeItem(key=f"retry-{seq}", text=f"{text}: {message}"))

    def _assistant_message(self, d: AssistantMessage) -> None:
        source = d["message"].get("source")
        if isinstance(source, dict) and self._model is None:
            self._route(_opt_s(source.get("provider")), _opt_s(source.get("model")))
        self._attempt.ended = True
        self._attempt.interrupted = d.get("interrupted", False)

    def _tool_call(self, d: ToolCall, at: int) -> None:
        card = self._card(d["callId"], d["name"] or "tool")
        card.args = d["arguments"]
        m = card.m
        status: CardStatus = "running" if m.status == "pending" else m.status
        card.m = replace(m, started_at=at, step=d["step"] or self._step, status=status)

    def _approval_asked(self, d: ApprovalAsked) -> None:
        aid = d["id"]
        cid = d.get("callId")
        card = self._card(cid if cid is not None else f"approval:{aid}", d["toolName"] or "tool")
        reason = d.get("reason")
        card.m = replace(card.m, status="waiting-approval", approval_id=aid, approval_reason=reason)
        self._by_approval[aid] = card

    def _approval_decided(self, d: ApprovalDecided) -> None:
        card = self._by_approval.get(d["id"])
        if card is None:
            return
        outcome = d["outcome"] or "unavailable"
        status: CardStatus = card.m.status
        if card.m.settled:
            pass
        elif outcome in ("allowed-once", "allowed-always"):
            status = "running"
        else:
            status = "aborted" if outcome == "cancelled" else "denied"
        card.m = replace(card.m, approval_outcome=outcome, status=status)

    def _tool_result(self, d: ToolResult, at: int) -> None:
        content = d["message"].get("content")
        block = content[0] if isinstance(content, list) and content else None
        cid = block.get("toolCallId") if isinstance(block, dict) else None
        if not isinstance(cid, str) or not isinstance(block, dict):
            return
        card = self._card(cid, "tool")
        m = card.m
        error = d.get("error")
        code, name = m.error_code, m.error_name
        if error is not None:
            code, name = error["code"], error["name"]
        duration = d.get("durationMs")
        if duration is None and m.started_at is not None:
            duration = at - m.started_at
        is_error = block.get("isError") is True
        status: CardStatus = "done"
        if is_error:
            status = (
                "denied" if code == "DENIED" else "aborted" if code in _ABORT_CODES else "failed"
            )
        card.m = replace(
            m,
            result_text=_text_of(block.get("content"), sep="\n"),
            is_error=is_error,
            error_code=code,
            error_name=name,
            meta=d.get("meta"),
            ended_at=at,
            duration_ms=duration,
            status=status,
        )
        if code == _REPEATED_CALL and is_error:
            self._entries.append(NoticeItem(key=f"repeat-{cid}", text=_repeat_notice(card.m.name)))

    def _turn_end(self, d: TurnEnd, at: int) -> None:
        self._state = "ended"
        self._ended_at = at
        reason = self._end_reason = d["reason"]
        if reason["kind"] == "error" and (error := reason.get("error")) is not None:
            self._error = TurnError(
                code=error["code"] or "UNKNOWN",
                message=error["message"] or "the turn failed",
                status=error.get("status"),
                detail=error.get("detail"),
            )
        for card in self._cards.values():
            if not card.m.settled:
                card.m = replace(card.m, status="aborted")

    # -- reading -----------------------------------------------------------------------------------

    @property
    def appeared(self) -> int:
        """How many items have come to show something (module docstring): a live view compares it
        before and after ``apply`` to draw an item's first appearance at once."""
        return self._appeared

    def snapshot(self) -> TurnModel:
        items: list[TurnItem] = []
        context: list[ContextNote] = []
        interrupted: set[str] = set()
        unlogged: set[str] = set()
        ended = self._state == "ended"
        for e in self._entries:
            if isinstance(e, _Block):
                item = e.item(ended)
                if item is not None:
                    items.append(item)
                    if e.attempt.interrupted:
                        interrupted.add(e.key)
                    elif ended and not e.attempt.ended:
                        unlogged.add(e.key)
            elif isinstance(e, _Card):
                items.append(e.item())
            elif isinstance(e, _Held):
                held = e.item(ended)
                if held is not None:
                    items.append(held)
            elif isinstance(e, _Context):
                note = ContextNote(before=len(items), text=e.text, before_prompt=e.before_prompt)
                context.append(note)
            else:
                items.append(e)
        reason = self._end_reason
        return TurnModel(
            turn=self._turn,
            message_id=self._prompt_id,
            prompt=self._prompt,
            items=tuple(items),
            context=tuple(context),
            interrupted_keys=frozenset(interrupted),
            unlogged_keys=frozenset(unlogged),
            state=self._state,
            end_reason=reason,
            error=self._error,
            provider=self._provider,
            model=self._model,
            reasoning_effort=self._effort,
            context_window=self._context_window,
            context_window_source=self._window_source,
            usage=self._usage.summary(),
            started_at=self._started_at,
            ended_at=self._ended_at,
            ttft_ms=self._ttft_ms,
        )


def _pressure(d: ContextWarning) -> str:
    """A ``context/warning`` as its one-line notice."""
    tokens, window = d["tokens"], d["contextWindow"]
    how = "measured" if d["measured"] else "estimated"
    assumed = " (assumed: the server did not say)" if d["source"] == "default" else ""
    share = f", {100 * tokens / window:.0f}% of" if window else " of"
    return (
        f"This request is ~{tokens:,} tokens ({how}){share} a {window:,}-token context window"
        f"{assumed}: the next messages may not fit — %agent compact summarises the older turns, "
        "%agent new starts afresh"
    )


def _repeat_notice(name: str) -> str:
    """The notice of a call the repeated-call guard did not run."""
    return (
        f"The model repeated its call of {name} with the same arguments and the same result: not "
        "run again; the model was told to answer with the result it has"
    )


def fold_turn(events: Iterable[SessionEvent], *, message_id: str | None = None) -> TurnModel:
    """The ``TurnModel`` of one turn's events (``turn_events``)."""
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


def _opt_s(v: object) -> str | None:
    return v if isinstance(v, str) else None


# --- slicing a log by turn ------------------------------------------------------------------


def turn_events(events: Iterable[SessionEvent], turn: int) -> list[SessionEvent]:
    """The events of turn ``turn``: from its ``turn/start`` through its ``turn/end`` (or the end of
    the log while it is open). Turns never overlap, so everything between the brackets belongs."""
    out: list[SessionEvent] = []
    inside = False
    for ev in events:
        if ev.type == "turn/start":
            inside = payload_of(ev, "turn/start")["turn"] == turn
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
            current = payload_of(ev, "turn/start")["turn"]
        elif ev.type == "turn/end":
            current = None
        elif ev.type == "user/message" and payload_of(ev, "user/message")["id"] == message_id:
            return current
    return None


def turn_end(events: Sequence[SessionEvent], message_id: str) -> TurnEndReason | None:
    """The ``turn/end`` reason of the turn that carried ``message_id`` (``None`` if it never ran or
    has not ended).

    One read from the end of the log (message ids are unique): the kernel asks about the turn that
    just ran, so this reads that turn, not the session."""
    reason: TurnEndReason | None = None  # of the first turn/end after the message, in its turn
    found = False
    for ev in reversed(events):
        kind = ev.type
        if not found:
            if kind == "turn/end":
                reason = payload_of(ev, "turn/end")["reason"]
            elif kind == "turn/start":
                reason = None  # that end belongs to a turn that started after the message
            elif kind == "user/message" and payload_of(ev, "user/message")["id"] == message_id:
                found = True
        elif kind == "turn/start":
            return reason
        elif kind == "turn/end":
            return None  # the message came between turns
    return None
