"""Small helpers for agent tests: event-type listings and turn-end reasons."""

from __future__ import annotations

from collections.abc import Sequence

from dsh_kernel.session.events import SessionEvent


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
