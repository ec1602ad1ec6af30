"""Compaction: older turns become one summary, so a long session never hits the context window
(SPINE §7.1, ported from the harness's compaction seam).

**When.** ``Compaction.auto`` (on by default; the kernel's ``DSH_COMPACTION``) compacts

* on **pressure** — before a request is built, when the token meter says the history would fill at
  least ``threshold`` (0.8) of a window that is not merely assumed (configured, discovered or from
  the catalogue);
* on **overflow** — once per step, when the request was refused for its size (by us before it was
  sent, or by the server): compact as much as possible, then retry the request once;
* by hand — ``Agent.compact()`` (``%agent compact``), between turns, even below the threshold.

**What.** The surface is cut into *units* that must stay together: an assistant message that called
tools with all of its results, or any other single message. The newest unit, every unit from the
first unanswered tool call on, and a recent tail of about ``retain`` (0.16) of the window stay
verbatim; everything before is the range. A tool result bigger than a quarter of the window is first
cut to its head and tail (``compaction/prune`` + a one-node ``tool/result`` replacement; inside a
turn only, where the invariants allow it). Then the range is summarised and replaced.

**How it is summarised.** A model call like any other, with ``purpose: "compaction"``: the same
system prompt and tools (so a provider's prefix cache is reused), the range's messages (images as
their logged descriptions), and a final instruction; only its text is kept. When the call fails,
answers nothing, does not shrink the range, or would not itself fit the window, a deterministic
*reduction* stands in (old tool outputs cut to their first lines; when that is still too long, each
turn to its first and last messages; then a hard cut), and the summary says so. A provider that
declares ``summarizes = False`` (the offline demo model) is never asked: it always gets the
reduction, so it compacts deterministically.

**The log.** Only events are added (``compaction/start`` · [``compaction/prune`` · ``tool/result``]* ·
``compaction/summary`` · ``user/message`` (the ``<compacted-summary>``, ``surfaceOp: replace`` citing
every node it shadows) · ``compaction/end``); the end is written last, so a crash leaves an orphan
start, and the surface it would have changed stays in force (the replacement had not landed, or it
had and is complete). A live orphan holds the lock (``Session.compaction_open``); one in a seed is
stale. Every request after a compaction derives from the new surface, and the human transcript still
shows every original turn.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

from dsh_kernel.agent.meter import header_tokens, measure, message_tokens
from dsh_kernel.agent.window import ContextWindow
from dsh_kernel.errors import UsageError
from dsh_kernel.ids import new_message_id
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.assembler import BlockAssembler
from dsh_kernel.llm.codec import failure_to_json, message_from_json, message_to_json, usage_to_json
from dsh_kernel.llm.provider import Provider, stream_call
from dsh_kernel.llm.types import (
    FinishError,
    GenerateRequest,
    LlmCallConfig,
    LlmFailure,
    Message,
    PluginSource,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSchema,
    UserSource,
)
from dsh_kernel.session.derive import EpochHeader, project_event
from dsh_kernel.session.events import ReplaceOp
from dsh_kernel.session.log import Session
from dsh_kernel.session.payloads import (
    CompactionEnd,
    CompactionPrune,
    CompactionStart,
    CompactionSummary,
    payload_of,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

Trigger: TypeAlias = Literal["pressure", "overflow", "manual"]
Method: TypeAlias = Literal["model", "reduction"]

PLUGIN: Final = "dsh/compaction"
"""The source plugin of a ``<compacted-summary>`` message."""

PREAMBLE: Final = (
    "[The earlier part of this conversation was condensed into the checkpoint below to keep it "
    "within the context window. Take it as established context; continue from the messages after "
    "it, without mentioning the checkpoint.]"
)

INSTRUCTION: Final = """\
Write a checkpoint of the conversation above, so that the work can go on from it with nothing \
essential lost: it will replace those messages. Write only the checkpoint, in terse Markdown bullets \
under these headings, each kept (write "(none)" under an empty one):

## Goal
## Notebook state
(variables, data, files and results that exist now, with their names and key values)
## Done so far
## Errors and how they were resolved
## Open questions and next step

Keep exact names, numbers, code, paths and error messages. Quote the user's instructions where the \
wording matters. If the conversation holds an earlier <compacted-summary>, merge what is still true \
into this one. Do not call tools."""

REDUCTION_NOTE: Final = "(A deterministic reduction, not a model's summary: {why}.)"

ROUNDS: Final = 3
"""At most this many compactions make room for one request."""
_MIN_SUMMARY_TOKENS: Final = 256
_UNKNOWN_WINDOW_SUMMARY: Final = 1024
"""Summary budget (tokens) when the window is not known (an overflow on an unknown server)."""


@dataclass(slots=True, kw_only=True)
class CompactionSettings:
    """How automatic compaction behaves (the module docstring)."""

    auto: bool = True
    threshold: float = 0.8
    """Compact when the next request would fill this fraction of the window."""
    retain: float = 0.16
    """The recent tail kept verbatim, as a fraction of the window."""
    summary_tokens: int = 2048
    """The summary's output cap (lowered to fit a small window)."""
    prune: float = 0.25
    """A tool result bigger than this fraction of the window is cut to its head and tail first."""

    def __post_init__(self) -> None:
        if not 0 < self.threshold <= 1:
            raise UsageError(f"compaction threshold must be in (0, 1], not {self.threshold}")
        if not 0 <= self.retain < self.threshold:
            raise UsageError(
                f"compaction retain ({self.retain}) must be at least 0 and below the threshold "
                f"({self.threshold})"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """What a compaction needs of the request it makes room for."""

    provider: Provider
    config: LlmCallConfig
    window: ContextWindow | None
    system: str
    tools: tuple[ToolSchema, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionResult:
    """What one compaction did (``None`` from the entry points when it did nothing)."""

    compaction_id: str
    trigger: Trigger
    method: Method | None
    """``None`` when pruning alone made enough room."""
    turns: tuple[int, ...]
    shadowed_tokens: int
    summary_tokens: int
    pruned: int
    context_before: int
    context_after: int
    failure: LlmFailure | None = None
    """Why a model summary was not used (the reduction stood in)."""

    def describe(self) -> str:
        """One line for people: ``compacted 4 earlier turns (9,812 → 1,240 tokens)``."""
        n = len(self.turns)
        what = f"compacted {n} earlier turn{'s' if n != 1 else ''}" if n else "compacted"
        if self.method is None:
            what = f"cut {self.pruned} long tool output{'s' if self.pruned != 1 else ''}"
        text = f"{what} (~{self.context_before:,} → ~{self.context_after:,} tokens)"
        if self.method == "reduction":
            text += " by a deterministic reduction"
            if self.failure is not None:
                text += f" ({self.failure.code}: {self.failure.message})"
        return text


@dataclass(slots=True)
class _Unit:
    seqs: list[int] = field(default_factory=list[int])
    tokens: int = 0
    pending: set[str] = field(default_factory=set[str])
    """Tool-call ids of this unit not answered yet."""


def _units(session: Session) -> list[_Unit]:
    """The surface cut into units that stay together (module docstring)."""
    events = session.events
    out: list[_Unit] = []
    for seq in session.surface:
        msg = project_event(events[seq])
        tokens = message_tokens(msg) if msg is not None else 0
        ev = events[seq]
        if ev.type == "tool/result" and out and out[-1].pending:
            unit = out[-1]
            for block in msg.content if msg is not None else ():
                if isinstance(block, ToolResultBlock):
                    unit.pending.discard(block.tool_call_id)
        else:
            unit = _Unit()
            out.append(unit)
            if msg is not None and ev.type == "assistant/message":
                unit.pending = {b.id for b in msg.content if isinstance(b, ToolCallBlock)}
        unit.seqs.append(seq)
        unit.tokens += tokens
    return out


def select_range(
    session: Session, retain_tokens: int | None, *, max_tokens: int | None = None
) -> list[int]:
    """The surface nodes to summarise: everything before the kept tail (``retain_tokens`` of recent
    units; ``None``: keep only the newest unit), never the newest unit nor anything from the first
    unanswered tool call on; with ``max_tokens``, only the oldest whole units that fit in it (what
    a summary call can be sent; at least one). Empty when nothing useful would be replaced."""
    units = _units(session)
    if len(units) < 2:
        return []
    keep = len(units) - 1
    for i, unit in enumerate(units):
        if unit.pending:
            keep = min(keep, i)
            break
    if retain_tokens is not None:
        kept = sum(u.tokens for u in units[keep:])
        while keep > 0 and kept + units[keep - 1].tokens <= retain_tokens:
            keep -= 1
            kept += units[keep].tokens
    head = units[:keep]
    if max_tokens is not None:
        total = 0
        for n, unit in enumerate(head):
            total += unit.tokens
            if total > max_tokens and n > 0:
                head = head[:n]
                break
    seqs = [s for u in head for s in u.seqs]
    if len(seqs) == 1 and _is_summary(session, seqs[0]):
        return []  # only an earlier summary: replacing it with itself frees nothing
    return seqs


def _is_summary(session: Session, seq: int) -> bool:
    msg = project_event(session.events[seq])
    return msg is not None and isinstance(msg.source, PluginSource) and msg.source.plugin == PLUGIN


def _summary_inner(msg: Message) -> str:
    text = "".join(b.text for b in msg.content if isinstance(b, TextBlock))
    start, end = text.find("<compacted-summary>"), text.rfind("</compacted-summary>")
    if start < 0 or end < start:
        return text
    return text[start + len("<compacted-summary>") : end].strip()


def _turn_of(session: Session, seq: int) -> list[int]:
    """The turn(s) a surface node belongs to."""
    events = session.events
    ev = events[seq]
    if ev.type in ("assistant/message", "tool/result"):
        turn = ev.data.get("turn")
        return [turn] if isinstance(turn, int) else []
    msg = project_event(ev)
    if msg is not None and isinstance(msg.source, PluginSource) and msg.source.form:
        turns = msg.source.form.get("turns")
        if isinstance(turns, list):
            return [t for t in turns if isinstance(t, int)]
    for before in reversed(events[:seq]):
        if before.type == "turn/start":
            return [payload_of(before, "turn/start")["turn"]]
        if before.type == "turn/end":
            return []
    return []


def _text_of(msg: Message) -> str:
    parts: list[str] = []
    for block in msg.content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolResultBlock):
            parts.extend(b.text for b in block.content if isinstance(b, TextBlock))
    return "\n".join(parts).strip()


def _first_line(text: str, limit: int = 200) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return _clip(line, limit)


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _reduction_lines(session: Session, seqs: Sequence[int]) -> list[tuple[int | None, str]]:
    """``(turn, line)`` per message of the range: old tool outputs cut to their first lines."""
    events = session.events
    out: list[tuple[int | None, str]] = []
    for seq in seqs:
        msg = project_event(events[seq])
        if msg is None:
            continue
        turns = _turn_of(session, seq)
        turn = turns[0] if turns else None
        source = msg.source
        if isinstance(source, PluginSource):
            if source.plugin == PLUGIN:
                out.append((turn, "Earlier checkpoint:\n" + _summary_inner(msg)))
            continue  # runtime snapshots and notes: stale by now
        if msg.role == "assistant":
            text = _text_of(msg)
            if text:
                out.append((turn, f"Assistant: {_clip(text, 600)}"))
            for b in msg.content:
                if isinstance(b, ToolCallBlock):
                    out.append((turn, f"Called {b.name}: {_first_line(b.arguments)}"))
        elif any(isinstance(b, ToolResultBlock) for b in msg.content):
            failed = any(isinstance(b, ToolResultBlock) and b.is_error for b in msg.content)
            label = "Tool error" if failed else "Tool output"
            out.append((turn, f"{label}: {_first_line(_text_of(msg))}"))
        else:
            who = "User" if isinstance(source, UserSource) else "Message"
            out.append((turn, f"{who}: {_clip(_text_of(msg), 600)}"))
    return out


def reduce_range(session: Session, seqs: Sequence[int], budget_tokens: int, why: str) -> str:
    """The deterministic summary of ``seqs``, within about ``budget_tokens`` (module docstring)."""
    lines = _reduction_lines(session, seqs)
    limit = max(400, budget_tokens * 4)
    note = REDUCTION_NOTE.format(why=why)

    def render(items: list[tuple[int | None, str]]) -> str:
        body: list[str] = [note]
        last: int | None = None
        for turn, line in items:
            if turn is not None and turn != last:
                body.append(f"\nTurn {turn}:")
                last = turn
            body.append(f"- {line}")
        return "\n".join(body)

    text = render(lines)
    if len(text) > limit:  # each turn to its first and last messages
        by_turn: dict[int | None, list[tuple[int | None, str]]] = {}
        for item in lines:
            by_turn.setdefault(item[0], []).append(item)
        kept: list[tuple[int | None, str]] = []
        for items in by_turn.values():
            kept.extend(items if len(items) <= 2 else [items[0], items[-1]])
        text = render(kept)
    return _clip(text, limit)


@dataclass(slots=True)
class _Summary:
    text: str
    method: Method
    failure: LlmFailure | None = None
    usage: JsonObject | None = None
    max_tokens: int | None = None
    called: bool = False


class Compaction:
    """The compaction of one agent's session (module docstring)."""

    def __init__(self, session: Session, settings: CompactionSettings | None = None) -> None:
        self.session = session
        self.settings = settings or CompactionSettings()

    @property
    def auto(self) -> bool:
        return self.settings.auto

    @auto.setter
    def auto(self, value: bool) -> None:
        self.settings.auto = value

    # --- the triggers ------------------------------------------------------------------------------

    def pressing(self, route: Route) -> tuple[int, int] | None:
        """``(the next request's tokens, the window)`` when it passes the threshold of a window
        that is not merely assumed; else ``None``."""
        window = route.window
        if window is None or window.source == "default":
            return None
        size = self._measure(route)
        return (size, window.tokens) if size >= self.settings.threshold * window.tokens else None

    async def relieve(
        self, route: Route, *, turn: int | None, trigger: Trigger = "pressure"
    ) -> CompactionResult | None:
        """Compact until the next request is below the threshold (``pressure``: the automatic
        check before a request) or as far as possible (``overflow``), in up to ``ROUNDS``
        compactions (a small window's summary call can only take part of the history at once);
        the last one's result, or ``None`` when nothing was done."""
        if not self.auto or self.session.compaction_open is not None:
            return None
        last: CompactionResult | None = None
        for _ in range(ROUNDS):
            if trigger == "pressure" and self.pressing(route) is None:
                break
            done = await self.run(route, trigger=trigger, turn=turn)
            if done is None:
                break
            last = done
            if trigger == "overflow" and (
                route.window is None or self._measure(route) < route.window.tokens
            ):
                break
        return last

    async def run(
        self, route: Route, *, trigger: Trigger, turn: int | None
    ) -> CompactionResult | None:
        """One compaction (module docstring); ``None`` when there was nothing useful to replace.
        Raises ``UsageError`` when another compaction holds the lock."""
        session = self.session
        if session.compaction_open is not None:
            raise UsageError(
                "a compaction is already under way in this session: wait for it to finish"
            )
        window = route.window.tokens if route.window is not None else None
        if trigger == "overflow":
            retain = None
        elif window is None:
            retain = self._last_turn_tokens()
        else:
            retain = int(window * self.settings.retain)
        prunable = turn is not None and session.open_turn is not None
        seqs = select_range(session, retain)
        oversized = self._oversized(window) if prunable else []
        if not seqs and not oversized:
            return None
        before = self._measure(route)
        cid = f"cmp_{new_message_id().removeprefix('msg_')}"
        start = CompactionStart(compactionId=cid, turn=turn, trigger=trigger, tokens=before)
        if window is not None:
            start["contextWindow"] = window
        session.append("compaction/start", start)
        end = CompactionEnd(compactionId=cid, turn=turn)
        try:
            for seq in oversized:
                self._prune(cid, seq, window)
            method: Method | None = None
            summary: _Summary | None = None
            shadowed = summary_tokens = 0
            turns: list[int] = []
            seqs = select_range(session, retain, max_tokens=self._room(route))
            if seqs and (trigger != "pressure" or not oversized or self.pressing(route)):
                shadowed = self._tokens(seqs)
                summary = await self._summarise(route, seqs, shadowed)
                turns = sorted({t for s in seqs for t in _turn_of(session, s)})
                summary_tokens = self._replace(cid, seqs, summary, shadowed, turns, route)
                method = summary.method
            after = self._measure(route)
            return CompactionResult(
                compaction_id=cid,
                trigger=trigger,
                method=method,
                turns=tuple(turns),
                shadowed_tokens=shadowed,
                summary_tokens=summary_tokens,
                pruned=len(oversized),
                context_before=before,
                context_after=after,
                failure=summary.failure if summary is not None else None,
            )
        except asyncio.CancelledError:
            end["error"] = {"code": "ABORTED", "message": "the compaction was cancelled"}
            raise
        except Exception as exc:
            end["error"] = {"code": str(getattr(exc, "code", "UNKNOWN")), "message": str(exc)}
            raise
        finally:
            session.append("compaction/end", end)

    # --- the parts ---------------------------------------------------------------------------------

    def _measure(self, route: Route) -> int:
        header = EpochHeader(
            config=route.config, system=route.system or None, tools=route.tools
        ).canonical()
        return measure(self.session, header=header).total_tokens

    def _tokens(self, seqs: Sequence[int]) -> int:
        events = self.session.events
        return sum(message_tokens(m) for s in seqs if (m := project_event(events[s])) is not None)

    def _last_turn_tokens(self) -> int:
        """The size of the newest turn's messages (what a compaction by hand keeps when the window
        is not known)."""
        session = self.session
        total = 0
        for seq in reversed(session.surface):
            if session.last_turn not in _turn_of(session, seq):
                break
            total += self._tokens([seq])
        return total

    def _oversized(self, window: int | None) -> list[int]:
        limit = max(1000, int(window * self.settings.prune)) if window else 8000
        events = self.session.events
        return [
            s
            for s in self.session.surface
            if events[s].type == "tool/result" and self._tokens([s]) > limit
        ]

    def _prune(self, cid: str, seq: int, window: int | None) -> None:
        """Cut tool result ``seq`` to its head and tail (module docstring)."""
        session = self.session
        old = session.events[seq]
        keep_chars = (max(1000, int(window * self.settings.prune)) if window else 8000) * 2
        message = old.data["message"]
        assert isinstance(message, dict)
        content = message["content"]
        assert isinstance(content, list) and isinstance(content[0], dict)
        inner = content[0]["content"]
        assert isinstance(inner, list)
        cut: list[JsonObject] = []
        for block in inner:
            if isinstance(block, dict) and block.get("type") == "text":
                text = str(block.get("text", ""))
                if len(text) > keep_chars:
                    head, tail = text[: keep_chars * 2 // 3], text[-(keep_chars // 3) :]
                    gone = len(text) - len(head) - len(tail)
                    text = (
                        f"{head}\n[… {gone:,} characters of this output left out to save context; "
                        f"they stay in the session log …]\n{tail}"
                    )
                cut.append({**block, "text": text})
            elif isinstance(block, dict):
                cut.append(block)
        data: JsonObject = {
            **old.data,
            "message": {**message, "content": [{**content[0], "content": list(cut)}]},
        }
        before = self._tokens([seq])
        new_msg = message_from_json(data["message"])
        session.append(
            "compaction/prune",
            CompactionPrune(
                compactionId=cid,
                shadowedRange={"start": seq, "end": seq},
                shadowedSeqs=[seq],
                shadowedTokenCount=before,
                prunedTokenCount=message_tokens(new_msg),
            ),
        )
        session.append(
            "tool/result", data, surface_op=ReplaceOp(start=seq, end=seq), source_event_seqs=[seq]
        )

    def _room(self, route: Route) -> int | None:
        """How much history one summary call can be sent (the window less the system prompt, the
        instruction and the summary's cap); ``None`` when the window is not known or the model is
        not asked."""
        if route.window is None or not getattr(route.provider, "summarizes", True):
            return None
        header = EpochHeader(config=route.config, system=route.system or None).canonical()
        fixed = header_tokens(header) + _chars_tokens(INSTRUCTION) + self._budget(route, 10**9)
        return max(0, route.window.tokens - fixed)

    def _budget(self, route: Route, shadowed: int) -> int:
        window = route.window.tokens if route.window is not None else None
        cap = self.settings.summary_tokens
        if window is not None:
            cap = min(cap, max(_MIN_SUMMARY_TOKENS, int(window * 0.15)))
        else:
            cap = min(cap, _UNKNOWN_WINDOW_SUMMARY)
        return max(_MIN_SUMMARY_TOKENS, min(cap, shadowed // 2))

    async def _summarise(self, route: Route, seqs: Sequence[int], shadowed: int) -> _Summary:
        budget = self._budget(route, shadowed)
        if not getattr(route.provider, "summarizes", True):
            why = "this model does not write summaries"
            return _Summary(reduce_range(self.session, seqs, budget, why), "reduction")
        failure: LlmFailure | None = None
        answer: _Summary | None = None
        request = self._request(route, seqs, budget)
        if request is None:
            failure = LlmFailure(
                code="CONTEXT_WINDOW_EXCEEDED",
                message="the summary request itself would not fit the context window",
            )
        else:
            answer = await self._call(route.provider, request)
            failure = answer.failure
            if failure is None and message_tokens(_checkpoint(answer.text)) >= shadowed:
                failure = LlmFailure(
                    code="NO_SHRINK", message="the summary was not shorter than what it summarised"
                )
        if failure is None and answer is not None:
            return answer
        why = f"the summary call failed — {failure.code}" if failure else "no summary"
        reduced = _Summary(
            reduce_range(self.session, seqs, budget, why), "reduction", failure=failure
        )
        if answer is not None:
            reduced.usage, reduced.max_tokens, reduced.called = (
                answer.usage,
                answer.max_tokens,
                True,
            )
        return reduced

    def _request(self, route: Route, seqs: Sequence[int], budget: int) -> GenerateRequest | None:
        """The summary call: the conversation's own system prompt and tools (its provider's prefix
        cache), the range, the instruction; without the tools when they would not fit; ``None``
        when even that would not fit the window."""
        events = self.session.events
        messages = [m for s in seqs if (m := project_event(events[s])) is not None]
        messages.append(
            Message(
                id=new_message_id(),
                role="user",
                content=(TextBlock(text=INSTRUCTION),),
                source=PluginSource(plugin=PLUGIN, form={"kind": "compaction-instruction"}),
            )
        )
        cfg = route.config
        window = route.window.tokens if route.window is not None else None
        body = sum(message_tokens(m) for m in messages)
        for tools in (route.tools, ()):
            header = EpochHeader(config=cfg, system=route.system or None, tools=tools)
            if window is not None and header_tokens(header) + body + budget > window:
                continue
            return GenerateRequest(
                provider=cfg.provider,
                model=cfg.model,
                messages=tuple(messages),
                system=route.system or None,
                tools=tools,
                reasoning_effort=cfg.reasoning_effort,
                temperature=cfg.temperature,
                max_tokens=budget,
                stop=cfg.stop,
                reasoning_passback=cfg.reasoning_passback,
                images=False,  # images in the range are summarised from their descriptions
                session_id=self.session.id,
                purpose="compaction",
            )
        return None

    async def _call(self, provider: Provider, request: GenerateRequest) -> _Summary:
        assembler = BlockAssembler()
        async for chunk in stream_call(provider, request):
            assembler.push(chunk)
        finish = assembler.finish
        usage = usage_to_json(assembler.usage) if assembler.usage is not None else None
        text = "".join(b.text for b in assembler.blocks() if isinstance(b, TextBlock)).strip()
        out = _Summary(text, "model", usage=usage, max_tokens=request.max_tokens, called=True)
        if isinstance(finish, FinishError):
            out.failure = finish.failure
        elif finish.kind == "max-tokens":
            out.failure = LlmFailure(
                code="MAX_TOKENS", message="the summary was cut off at its length limit"
            )
        elif not text:
            out.failure = LlmFailure(
                code="EMPTY_SUMMARY", message="the model wrote no summary text"
            )
        return out

    def _replace(
        self,
        cid: str,
        seqs: list[int],
        summary: _Summary,
        shadowed: int,
        turns: list[int],
        route: Route,
    ) -> int:
        """Log the summary and the message that replaces ``seqs``; returns its tokens."""
        session = self.session
        current = set(session.surface)
        if not set(seqs) <= current:
            raise UsageError("the history changed while it was being summarised: nothing replaced")
        msg = _checkpoint(summary.text, cid, turns)
        tokens = message_tokens(msg)
        data = CompactionSummary(
            compactionId=cid,
            summary=summary.text,
            method=summary.method,
            shadowedRange={"start": seqs[0], "end": seqs[-1]},
            shadowedSeqs=list(seqs),
            shadowedTokenCount=shadowed,
            summaryTokenCount=tokens,
            turns=list(turns),
        )
        if summary.called:
            data["provider"] = route.config.provider
            data["model"] = route.config.model
            if summary.max_tokens is not None:
                data["maxTokens"] = summary.max_tokens
            if summary.usage is not None:
                data["usage"] = summary.usage
        if summary.failure is not None:
            data["failure"] = failure_to_json(summary.failure)
        session.append("compaction/summary", data)
        session.append(
            "user/message",
            message_to_json(msg),
            surface_op=ReplaceOp(start=seqs[0], end=seqs[-1]),
            source_event_seqs=seqs,
        )
        return tokens


def _chars_tokens(text: str) -> int:
    return message_tokens(
        Message(id="", role="user", content=(TextBlock(text=text),), source=UserSource())
    )


def _checkpoint(summary: str, cid: str = "", turns: Sequence[int] = ()) -> Message:
    """The ``<compacted-summary>`` message that stands for a range."""
    return Message(
        id=new_message_id(),
        role="user",
        content=(
            TextBlock(text=f"{PREAMBLE}\n\n<compacted-summary>\n{summary}\n</compacted-summary>"),
        ),
        source=PluginSource(
            plugin=PLUGIN,
            form={"kind": "compacted-summary", "compactionId": cid, "turns": list(turns)},
        ),
    )
