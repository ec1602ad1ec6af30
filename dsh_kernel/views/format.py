"""The words and numbers of a turn's footer and end notice, for the live view and the static rendering.

Everything here is a pure function of a ``TurnModel`` (and, for prices, of the model info the kernel
passes in), so the live widgets and the saved rendering of a finished turn agree: ``footer_parts``
(model, tokens, context, cost, times, session), ``end_notice`` (how a turn that did not simply
complete ended, and what to do), ``notice_icon`` and ``notice_classes`` (a notice's level), and the number formats they use (``duration``, ``tokens``,
``cost``). A tool card's contents are ``views.card_content``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias, assert_never

from dsh_kernel.failures import advice_sentence
from dsh_kernel.llm.types import ModelInfo
from dsh_kernel.transcript.model import NoticeItem, TurnModel
from dsh_kernel.views.replayed import replayed

ModelInfoLookup: TypeAlias = Callable[[str, str], ModelInfo | None]
"""``(provider, model) -> ModelInfo``: context window and prices for the footer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EndNotice:
    """What a view says under a turn that did not simply complete."""

    level: str
    """``error``, ``warning`` or ``info``."""
    title: str
    hint: str | None = None


def notice_icon(item: NoticeItem) -> str:
    """The icon a notice inside a turn is drawn with: ℹ️ for ``info`` (a compaction), else ⚠️."""
    return "ℹ️" if item.level == "info" else "⚠️"


def notice_classes(item: NoticeItem) -> tuple[str, ...]:
    """The classes of a notice's element: ``dsh-notice``, and ``dsh-info`` for an ``info`` one."""
    return ("dsh-notice", "dsh-info") if item.level == "info" else ("dsh-notice",)


def held_note(chars: int) -> str:
    """The progress line of answer text held as a possible tool call (``HeldItem``)."""
    return f"writing a tool call… ({chars:,} character{'' if chars == 1 else 's'})"


# --- numbers -----------------------------------------------------------------------------------------


def duration(ms: int | None) -> str | None:
    """``ms`` for people (``320 ms``, ``1.4 s``, ``2 min 5 s``); ``None`` stays ``None``."""
    if ms is None:
        return None
    if ms < 1000:
        return f"{max(ms, 0)} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(round(ms / 1000), 60)
    return f"{minutes} min {seconds} s"


def tokens(n: int) -> str:
    """A token count for people (``9,812``, ``12.3k``, ``1.20M``)."""
    if n < 10_000:
        return f"{n:,}"
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.2f}M"


def cost(model: TurnModel, info: ModelInfo | None) -> float | None:
    """The turn's cost in the price's currency, or ``None`` when the price is unknown. Cache reads
    and writes without a price of their own are billed as input (as SQL's ``usage.cost``)."""
    if info is None or info.input_price_per_mtok is None or info.output_price_per_mtok is None:
        return None
    u = model.usage
    inp = info.input_price_per_mtok
    cached = info.cached_input_price_per_mtok
    write = info.cache_write_price_per_mtok
    total = (
        u.input_tokens * inp
        + u.cache_write_tokens * (write if write is not None else inp)
        + u.cache_read_tokens * (cached if cached is not None else inp)
        + u.output_tokens * info.output_price_per_mtok
    )
    return total / 1_000_000


def footer_parts(
    model: TurnModel,
    *,
    session_id: str | None = None,
    info: ModelInfo | None = None,
    budget: str | None = None,
) -> list[str]:
    """The footer's parts, in order: route, reasoning effort, tokens, context, cost, the daily
    budget left (``budget``, as the kernel passes it in: ``kernel.course.budgets``), times, session."""
    parts: list[str] = []
    if model.model is not None:
        name = f"{model.provider}:{model.model}" if model.provider else model.model
        label = info.label if info is not None else None
        parts.append(f"{name} — {label}" if label else name)
    if model.reasoning_effort is not None:
        parts.append(f"reasoning {model.reasoning_effort}")
    u = model.usage
    if u.requests:
        # One meaning per label, as in SQL: "in" is uncached input (``usage.input_tokens``),
        # "cached" the cache reads, "cache write" the tokens written to the cache.
        parts.append(f"in {tokens(u.input_tokens)}")
        if u.cache_read_tokens:
            parts.append(f"cached {tokens(u.cache_read_tokens)}")
        if u.cache_write_tokens:
            parts.append(f"cache write {tokens(u.cache_write_tokens)}")
        out = f"out {tokens(u.output_tokens)}"
        if u.reasoning_tokens:
            out += f" (reasoning {tokens(u.reasoning_tokens)})"
        parts.append(out)
    window = model.context_window or (info.context_window if info is not None else None)
    if u.context_tokens is not None:
        ctx = f"context {tokens(u.context_tokens)}"
        if window:
            ctx += f" / {tokens(window)} ({100 * u.context_tokens / window:.0f}%)"
        parts.append(ctx)
    price = cost(model, info)
    if price is not None:
        parts.append(f"${price:.4f}" if price < 1 else f"${price:.2f}")
    elif u.requests and info is not None and info.label is None:
        parts.append("price unknown")  # never $0 for a model without a price
    if budget:
        parts.append(budget)
    if replayed(model):  # neither times nor the session id: see ``views.replayed``
        return [*parts, "replayed"]
    if model.ttft_ms is not None:
        parts.append(f"first token {duration(model.ttft_ms)}")
    if model.total_ms is not None:
        parts.append(f"total {duration(model.total_ms)}")
    if session_id:
        parts.append(f"session {session_id[:8]}")
    return parts


# --- how a turn ended ----------------------------------------------------------------------------


def _cut_off_hint(model: TurnModel) -> str:
    """What to do after a cut-off answer. A catalogue model has a real output limit, so it can go
    on; on any other server the limit is the room left in the context window (the cap the agent
    sends, or the server's own when no window is known), so the window is probably full."""
    if model.context_window_source in (None, "catalogue"):
        return "Ask the agent to continue."
    window = f" ({model.context_window:,} tokens)" if model.context_window else ""
    return (
        f"The model's context window{window} is probably full, so asking it to continue would not "
        "fit: `%agent compact` summarises the earlier turns (then ask it to continue), "
        "`%agent new` starts a new session, `%agent fork <turn>` keeps the start of this one."
    )


def end_notice(model: TurnModel) -> EndNotice | None:
    """What to tell the user about how the turn ended; ``None`` for a normal completion."""
    reason = model.end_reason
    if reason is None:
        return None
    match reason["kind"]:
        case "completed":
            match reason.get("note"):
                case "no-reply":
                    return EndNotice(
                        level="info",
                        title="The model ended without a reply; the tool results above stand.",
                    )
                case "repeated-call":
                    return EndNotice(
                        level="warning",
                        title="Stopped: the model kept repeating a tool call with the same "
                        "result; the results above stand.",
                        hint="Ask again more precisely, or try a larger model.",
                    )
                case _:
                    return None
        case "error":
            err = model.error
            code = err.code if err is not None else "UNKNOWN"
            message = err.message if err is not None else "the turn failed"
            message = message.removeprefix(f"{code}: ")  # the code shows once
            detail = err.detail if err is not None else None
            hint = advice_sentence(code, detail)
            return EndNotice(level="error", title=f"{code}: {message}", hint=hint)
        case "aborted":
            cause = reason.get("reason") or {}
            kind = cause.get("kind")
            who = {"user": "by you", "parent": "by the parent agent", "hook": "by a hook"}.get(
                kind if isinstance(kind, str) else "", ""
            )
            return EndNotice(level="warning", title=f"Stopped {who}".strip() + ".")
        case "max-tokens":
            return EndNotice(
                level="warning",
                title="The answer was cut off at the output token limit.",
                hint=_cut_off_hint(model),
            )
        case "max-steps":
            return EndNotice(
                level="warning",
                title=f"Stopped after {reason['limit']} steps.",
                hint="Ask the agent to continue if it was making progress.",
            )
        case "blocked":
            return EndNotice(level="warning", title="A hook blocked this turn.")
        case "interrupted":
            return EndNotice(
                level="warning",
                title="The kernel stopped during this turn; it was closed on restart.",
            )
        case _:
            assert_never(reason)
