"""Small helpers for agent tests: an agent on a configured window, event-type listings and
turn-end reasons."""

from __future__ import annotations

from collections.abc import Sequence

from dsh_kernel import Agent
from dsh_kernel.agent.request.window import ContextWindows
from dsh_kernel.llm.provider import Provider
from dsh_kernel.session.events import SessionEvent


async def no_sleep(_s: float) -> None:
    return None


def agent_with(provider: Provider, *, window: int | None = None, **kw: object) -> Agent:
    """An agent of model ``m1`` on ``provider`` with a configured ``window`` (``None``: none), dev
    invariants on and retries that do not wait."""
    return Agent(
        provider=provider,
        model="m1",
        context_windows=ContextWindows(configured=window),
        check_invariants=True,
        sleep=no_sleep,
        **kw,  # type: ignore[arg-type]
    )


async def run(agent: Agent, *messages: str) -> None:
    """Send each of ``messages`` in turn, waiting for the agent to go idle after each."""
    for m in messages:
        agent.followup(m)
        await agent.when_idle()


def types(
    events: Sequence[SessionEvent], *, skip: Sequence[str] = ("assistant/chunk",)
) -> list[str]:
    return [e.type for e in events if e.type not in skip]


def turn_ends(events: Sequence[SessionEvent]) -> list[dict[str, object]]:
    return [dict(e.data["reason"]) for e in events if e.type == "turn/end"]  # type: ignore[arg-type]


def of_type(events: Sequence[SessionEvent], type: str) -> list[SessionEvent]:
    return [e for e in events if e.type == type]


def result_texts(events: Sequence[SessionEvent]) -> list[str]:
    out: list[str] = []
    for e in of_type(events, "tool/result"):
        block = e.data["message"]["content"][0]  # type: ignore[index]
        out.append("".join(b["text"] for b in block["content"] if b["type"] == "text"))  # type: ignore[index]
    return out
