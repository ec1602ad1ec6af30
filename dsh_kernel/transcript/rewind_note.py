"""The notice a re-asked turn shows (``kernel.rewind``): read from its prompt's source's
``context`` (``session.payloads.CellContext``), so a replay draws the same."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, cast

from dsh_kernel.jsonvalue import JsonObject, JsonValue

_WHY: Final[dict[str, str]] = {
    "rerun": "this cell's earlier answer",
    "below": "its cell is below this one",
    "deleted": "its cell was deleted",
    "after": "it came after the re-run point",
}


def _turns(items: Sequence[JsonValue]) -> list[tuple[int, str, bool]]:
    out: list[tuple[int, str, bool]] = []
    for item in items:
        if isinstance(item, dict):
            turn, why = item.get("turn"), item.get("why")
            if isinstance(turn, int) and isinstance(why, str):
                out.append((turn, why, item.get("summary") is True))
    return out


def _span(turns: Sequence[int]) -> str:
    if len(turns) == 1:
        return f"turn {turns[0]}"
    if list(turns) == list(range(turns[0], turns[-1] + 1)):
        return f"turns {turns[0]}–{turns[-1]}"
    return "turns " + ", ".join(str(t) for t in turns)


def rewind_notice(source: JsonValue) -> str | None:
    """The one-line notice for a prompt whose source (as logged) is ``source``, or ``None``."""
    if not isinstance(source, dict):
        return None
    ctx = source.get("context")
    if not isinstance(ctx, dict):
        return None
    parts: list[str] = []
    branch = ctx.get("branch")
    if isinstance(branch, dict):
        b = cast("JsonObject", branch)
        dropped = b.get("dropped")
        gone = [t for t, _, _ in _turns(dropped if isinstance(dropped, list) else [])]
        session = b.get("session")
        where = f" (kept in session {session[:8]})" if isinstance(session, str) else ""
        if gone:
            verb = "is" if len(gone) == 1 else "are"
            parts.append(
                f"Re-asked from here on a new branch: {_span(gone)} of the earlier branch {verb} "
                f"no longer in the model's context{where}"
            )
        else:
            parts.append(f"Asked on a new branch of the conversation{where}")
    left = ctx.get("left")
    items = _turns(left if isinstance(left, list) else [])
    cut = [f"turn {t} ({_WHY.get(why, why)})" for t, why, summary in items if not summary]
    if cut:
        parts.append("Left out of the model's context: " + ", ".join(cut))
    kept = [t for t, _, summary in items if summary]
    if kept:
        parts.append(f"{_span(kept)} stay in the context inside a compaction summary")
    names = ctx.get("names")
    shown = [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
    if shown:
        parts.append(
            "Not rolled back: the namespace still holds "
            + ", ".join(shown)
            + " as the turns left out made them"
        )
    return ". ".join(parts) + "." if parts else None
