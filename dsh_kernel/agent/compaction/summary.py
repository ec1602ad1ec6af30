"""The summary a compaction replaces a range with: a model call, or the deterministic reduction
(``agent.compaction.run``).

``summarise(session, route, seqs, shadowed, cap)`` makes one ``purpose: "compaction"`` call: the
conversation's own system prompt and tools (so the provider's prefix cache is reused), the range's
messages (images as their logged descriptions: the call never sends image bytes), then
``INSTRUCTION`` as the final user message. Only the answer's text is kept (its reasoning and any tool
call are dropped). The call is held to the spending budget like any request (``route.spend``,
``agent.request.spend``: its cap lowered to what is left). The reduction (``compaction.range.reduce_range``)
stands in — and the result says why in ``failure`` — when the call fails, is cut off, answers no
text, would not itself fit the window (tried with the tools first, then without them), or the budget
refuses it (``BUDGET_EXCEEDED``: nothing is sent); and when an answer that came whole is set aside
(``SET_ASIDE``; the answer is kept in ``raw_output`` for the log): it does not shrink the range
(``NO_SHRINK``), or it fails the substance check (``SUMMARY_UNFIT``, ``compaction.substance``: only
the instruction's headings, too little beyond them, the range's numbers and names lost, or another
conversation's summary; the failure's message says which). A provider that declares
``summarizes = False`` is never called.

``summary_room(route, cap)`` is how much history one call can be sent (the window less the system
prompt, the instruction and the summary's cap), so the caller picks a range that fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal, TypeAlias

from dsh_kernel.agent.compaction.range import (
    PLUGIN,
    PREAMBLE,
    REDUCTION_NOTE,
    checkpoint_message,
    reduce_range,
    text_tokens,
)
from dsh_kernel.agent.compaction.substance import range_digest, unfit
from dsh_kernel.agent.request.meter import header_tokens
from dsh_kernel.agent.request.spend import SpendGate
from dsh_kernel.agent.request.window import ContextWindow
from dsh_kernel.errors import LlmError
from dsh_kernel.ids import new_message_id
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.assembler import BlockAssembler
from dsh_kernel.llm.calibration import Calibration
from dsh_kernel.llm.codec import usage_to_json
from dsh_kernel.llm.estimate import message_tokens
from dsh_kernel.llm.provider import Provider, stream_call
from dsh_kernel.llm.types import (
    FinishError,
    GenerateRequest,
    LlmCallConfig,
    LlmFailure,
    Message,
    PluginSource,
    TextBlock,
    ToolSchema,
)
from dsh_kernel.session.derive import EpochHeader, project_event
from dsh_kernel.session.log import Session

Method: TypeAlias = Literal["model", "reduction"]

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

SCAFFOLD: Final = (INSTRUCTION, PREAMBLE, REDUCTION_NOTE.format(why=""))
"""What is not content in a summary (``substance.unfit``): the instruction, the checkpoint framing."""
SET_ASIDE: Final = frozenset({"NO_SHRINK", "SUMMARY_UNFIT"})
"""Failures of a summary that came whole: the call worked, its answer was not used."""

MIN_SUMMARY_TOKENS: Final = 256
UNKNOWN_WINDOW_SUMMARY: Final = 1024
"""Summary cap (tokens) when the window is not known (an overflow on an unknown server)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """What a compaction needs of the request it makes room for."""

    provider: Provider
    config: LlmCallConfig
    window: ContextWindow | None
    system: str
    tools: tuple[ToolSchema, ...]
    spend: SpendGate | None = None
    """The spending budget the summary call is held to, like any request (``agent.request.spend``)."""
    calibration: Calibration | None = None
    """The token estimate's calibration for the route (``llm.calibration``; default: the
    log's), what the pressure on the window is measured with."""


@dataclass(slots=True)
class Summary:
    """A summary and how it was made (``called``: a model call was made, its usage and cap)."""

    text: str
    method: Method
    failure: LlmFailure | None = None
    usage: JsonObject | None = None
    max_tokens: int | None = None
    called: bool = False
    raw_output: str | None = None
    """The model's answer when it came whole but was set aside (``SET_ASIDE``)."""


def summarizes(provider: Provider) -> bool:
    """Whether ``provider`` is asked for summaries (``summarizes = False`` says it is not)."""
    return getattr(provider, "summarizes", True) is not False


def summary_budget(route: Route, shadowed: int, cap: int) -> int:
    """The summary's output cap: ``cap``, at most 15 % of a known window (1,024 tokens when the
    window is unknown), at most half of what it summarises, never below 256."""
    window = route.window.tokens if route.window is not None else None
    if window is not None:
        cap = min(cap, max(MIN_SUMMARY_TOKENS, int(window * 0.15)))
    else:
        cap = min(cap, UNKNOWN_WINDOW_SUMMARY)
    return max(MIN_SUMMARY_TOKENS, min(cap, shadowed // 2))


def summary_room(route: Route, cap: int) -> int | None:
    """How much history one summary call can be sent; ``None`` when the window is not known or
    the model is not asked."""
    if route.window is None or not summarizes(route.provider):
        return None
    header = EpochHeader(config=route.config, system=route.system or None).canonical()
    fixed = header_tokens(header) + text_tokens(INSTRUCTION) + summary_budget(route, 10**9, cap)
    return max(0, route.window.tokens - fixed)


async def summarise(
    session: Session, route: Route, seqs: Sequence[int], shadowed: int, cap: int
) -> Summary:
    """The summary of the surface nodes ``seqs`` (``shadowed`` tokens) — module docstring."""
    budget = summary_budget(route, shadowed, cap)
    if not summarizes(route.provider):
        why = "this model does not write summaries"
        return Summary(reduce_range(session, seqs, budget, why), "reduction")
    answer: Summary | None = None
    failure: LlmFailure | None = None
    request = _request(session, route, seqs, budget)
    if request is None:
        failure = LlmFailure(
            code="CONTEXT_WINDOW_EXCEEDED",
            message="the summary request itself would not fit the context window",
        )
    elif route.spend is not None:
        try:
            request = _within_budget(route.spend, request)
        except LlmError as exc:
            failure, request = exc.failure, None
    if request is not None:
        answer = await _call(route.provider, request)
        failure = answer.failure
        if failure is None and message_tokens(checkpoint_message(answer.text)) >= shadowed:
            failure = LlmFailure(
                code="NO_SHRINK", message="the summary was not shorter than what it summarised"
            )
        if failure is None:
            facts = range_digest(session, seqs, shadowed)
            if (why := unfit(answer.text, facts, SCAFFOLD)) is not None:
                failure = LlmFailure(code="SUMMARY_UNFIT", message=why.reason)
    if failure is None and answer is not None:
        return answer
    reduced = Summary(
        reduce_range(session, seqs, budget, set_aside(failure)), "reduction", failure=failure
    )
    if answer is not None:
        reduced.usage, reduced.max_tokens, reduced.called = answer.usage, answer.max_tokens, True
        if failure is not None and failure.code in SET_ASIDE:
            reduced.raw_output = answer.text
    return reduced


def set_aside(failure: LlmFailure | None) -> str:
    """Why the model's summary is not the one used, in a few words (the reduction's note)."""
    if failure is None:
        return "no summary"
    if failure.code in SET_ASIDE:
        return f"the model's summary was not used — {failure.code}"
    return f"the summary call failed — {failure.code}"


def reduction_why(failure: LlmFailure | None) -> str:
    """Why a reduction stood in, for people: the failure's code and message, or that the model
    writes no summaries (``CompactionResult.describe``; the turn's notice says the same from the
    log, ``transcript.compaction_notes``)."""
    if failure is None:
        return "this model does not write summaries"
    if failure.code in SET_ASIDE:
        return f"the model's summary was not used — {failure.code}: {failure.message}"
    return f"the summary call failed — {failure.code}: {failure.message}"


def _request(
    session: Session, route: Route, seqs: Sequence[int], budget: int
) -> GenerateRequest | None:
    """The summary call, with the tools when they fit, else without; ``None`` when even that
    would not fit the window."""
    events = session.events
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
            seed=cfg.seed,
            max_tokens=budget,
            stop=cfg.stop,
            reasoning_passback=cfg.reasoning_passback,
            images=False,  # images in the range are summarised from their descriptions
            session_id=session.id,
            purpose="compaction",
        )
    return None


def _within_budget(spend: SpendGate, request: GenerateRequest) -> GenerateRequest:
    """``request`` with its cap lowered to what the spending budget leaves (at least
    ``MIN_SUMMARY_TOKENS``), or the budget's ``LlmError``."""
    header = EpochHeader(
        config=LlmCallConfig(provider=request.provider, model=request.model),
        system=request.system,
        tools=request.tools,
    )
    tokens = header_tokens(header) + sum(message_tokens(m) for m in request.messages)
    cap = spend.cap(
        request.provider, request.model, tokens, request.max_tokens, least=MIN_SUMMARY_TOKENS
    )
    return request if cap == request.max_tokens else replace(request, max_tokens=cap)


async def _call(provider: Provider, request: GenerateRequest) -> Summary:
    assembler = BlockAssembler()
    async for chunk in stream_call(provider, request):
        assembler.push(chunk)
    finish = assembler.finish
    usage = usage_to_json(assembler.usage) if assembler.usage is not None else None
    text = "".join(b.text for b in assembler.blocks() if isinstance(b, TextBlock)).strip()
    out = Summary(text, "model", usage=usage, max_tokens=request.max_tokens, called=True)
    if isinstance(finish, FinishError):
        out.failure = finish.failure
    elif finish.kind == "max-tokens":
        out.failure = LlmFailure(
            code="MAX_TOKENS", message="the summary was cut off at its length limit"
        )
    elif not text:
        out.failure = LlmFailure(code="EMPTY_SUMMARY", message="the model wrote no summary text")
    return out
