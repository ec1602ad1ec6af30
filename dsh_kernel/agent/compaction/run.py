"""Compaction: older turns become one summary, so a long session never hits the context window
(SPINE §7.1, ported from the harness's compaction seam).

**When.** ``Compaction.auto`` (on by default) compacts

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
answers nothing, or would not itself fit the window — or its answer does not shrink the range, or
fails the substance check (``compaction.substance``: it must carry content beyond the instruction's
headings and keep a share of the numbers and names the user gave and the names the turns defined) —
a deterministic *reduction* stands in (old tool outputs cut to their first lines; when that is still
too long, each turn to its first and last messages; then a hard cut), and the summary, its
``compaction/summary`` (``method``, ``failure``, and the unused answer as ``rawOutput``) and the
notice say so. A provider that
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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

from dsh_kernel.agent.compaction.range import (
    PLUGIN,
    checkpoint_message,
    select_range,
    turn_of,
)
from dsh_kernel.agent.compaction.summary import (
    INSTRUCTION,
    Method,
    Route,
    Summary,
    reduction_why,
    summarise,
    summary_room,
)
from dsh_kernel.agent.request.fit import MIN_ANSWER_TOKENS
from dsh_kernel.agent.request.meter import measure
from dsh_kernel.errors import UsageError
from dsh_kernel.ids import new_message_id
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.codec import failure_to_json, message_from_json, message_to_json
from dsh_kernel.llm.estimate import message_tokens
from dsh_kernel.llm.types import LlmFailure, PluginSource
from dsh_kernel.session.derive import EpochHeader, project_event
from dsh_kernel.session.events import ReplaceOp
from dsh_kernel.session.log import Session
from dsh_kernel.session.payloads import (
    CompactionEnd,
    CompactionPrune,
    CompactionStart,
    CompactionSummary,
)

__all__ = [
    "INSTRUCTION",
    "PLUGIN",
    "ROUNDS",
    "Compaction",
    "CompactionResult",
    "CompactionSettings",
    "Method",
    "Route",
    "Trigger",
    "select_range",
]

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

Trigger: TypeAlias = Literal["pressure", "overflow", "manual"]

MIN_RANGE_TOKENS: Final = 200
"""A range this small is not worth a summary (the checkpoint's own framing is about half that)."""
ROUNDS: Final = 3
"""At most this many compactions make room for one request."""


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
        if self.method == "model":
            text += " by a model summary"
        elif self.method == "reduction":
            text += f" by a deterministic reduction ({reduction_why(self.failure)})"
        return text


class Compaction:
    """The compaction of one agent's session (module docstring)."""

    def __init__(self, session: Session, settings: CompactionSettings | None = None) -> None:
        self.session = session
        self.settings = settings or CompactionSettings()
        self.before_call: Callable[[], Awaitable[None]] | None = None
        """Awaited before a summary call is sent: the agent's ``before-request`` checkpoint (so the
        ``compaction/start`` is durable before the model is asked)."""

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
        # The cheap check first: under no pressure (every request of an ordinary session) the
        # history is not walked at all.
        if trigger == "pressure" and self.pressing(route) is None:
            return None
        if self._futile(route):
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
        if self._tokens(seqs) <= MIN_RANGE_TOKENS and not oversized:
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
            summary: Summary | None = None
            shadowed = summary_tokens = 0
            turns: list[int] = []
            seqs = select_range(
                session, retain, max_tokens=summary_room(route, self.settings.summary_tokens)
            )
            if seqs and (trigger != "pressure" or not oversized or self.pressing(route)):
                shadowed = self._tokens(seqs)
                if self.before_call is not None:
                    await self.before_call()
                summary = await summarise(
                    session, route, seqs, shadowed, self.settings.summary_tokens
                )
                turns = sorted({t for s in seqs for t in turn_of(session, s)})
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

    def why_nothing(self, window: int | None, *, compacted: bool) -> str:
        """Why ``run`` found nothing to replace, for people (``window``: the one it was given;
        ``compacted``: whether an earlier compaction did): what it always keeps, or a range too
        small to be worth a summary."""
        session = self.session
        if not session.last_turn:
            return "there is no conversation yet"
        earlier = sum(
            message_tokens(msg)
            for seq in select_range(session, None)
            if (msg := session.projection(seq)) is not None
            and not (isinstance(msg.source, PluginSource) and msg.source.plugin == PLUGIN)
        )  # the earlier checkpoints aside: they are summaries already
        if not earlier:
            if compacted:
                return "everything before the latest exchange is summarised already"
            return "the history holds only the latest exchange, which is always kept as it is"
        share = self.settings.retain
        kept = (
            f"the recent part kept as it is ({share:.0%} of the {window:,}-token window)"
            if window is not None
            else "the latest turn, which is kept as it is"
        )
        if window is None or not select_range(session, int(window * share)):
            return f"what came before the latest exchange (~{earlier:,} tokens) is all in {kept}"
        return (
            f"what lies before {kept} is too little to be worth a summary (at most "
            f"~{MIN_RANGE_TOKENS} tokens)"
        )

    # --- the parts ---------------------------------------------------------------------------------

    def _measure(self, route: Route) -> int:
        header = EpochHeader(
            config=route.config, system=route.system or None, tools=route.tools
        ).canonical()
        return measure(self.session, header=header, calibration=route.calibration).total_tokens

    def _tokens(self, seqs: Sequence[int]) -> int:
        events = self.session.events
        return sum(message_tokens(m) for s in seqs if (m := project_event(events[s])) is not None)

    def _futile(self, route: Route) -> bool:
        """Whether, with the window known, even replacing everything that may be replaced would
        leave a request too big for it (one huge message): then nothing is summarised in vain, and
        the request is refused (or the turn fails) as it would be without compaction."""
        window = route.window
        if window is None or window.source == "default" or self._oversized(window.tokens):
            return False
        remaining = self._measure(route) - self._tokens(select_range(self.session, None))
        return remaining + MIN_ANSWER_TOKENS > window.tokens

    def _last_turn_tokens(self) -> int:
        """The size of the newest turn's messages (what a compaction by hand keeps when the window
        is not known)."""
        session = self.session
        total = 0
        for seq in reversed(session.surface):
            if session.last_turn not in turn_of(session, seq):
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

    def _replace(
        self,
        cid: str,
        seqs: list[int],
        summary: Summary,
        shadowed: int,
        turns: list[int],
        route: Route,
    ) -> int:
        """Log the summary and the message that replaces ``seqs``; returns its tokens."""
        session = self.session
        current = set(session.surface)
        if not set(seqs) <= current:
            raise UsageError("the history changed while it was being summarised: nothing replaced")
        msg = checkpoint_message(summary.text, cid, turns)
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
        if summary.raw_output is not None:
            data["rawOutput"] = summary.raw_output
        session.append("compaction/summary", data)
        session.append(
            "user/message",
            message_to_json(msg),
            surface_op=ReplaceOp(start=seqs[0], end=seqs[-1]),
            source_event_seqs=seqs,
        )
        return tokens
