"""The cards and result texts of the notebook tools (issue 18): what the user sees of a
``notebook_read`` or ``notebook_insert`` call, and what an insertion's result tells the model.

Pure functions of a call's arguments or its result value (``NotebookInsert``'s fields), so the
live card, the approval card and a replayed card say the same thing. ``kernel.notebook_tools``
owns the tools and the code-cell rewriting the insert card applies first (``present_insert``).
"""

from __future__ import annotations

from typing import cast

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.tools.presentation import (
    GenericCallView,
    GenericResultView,
    ToolCallView,
    ToolResultInfo,
    ToolResultView,
)


def present_read(args: JsonObject) -> ToolCallView:
    """``notebook_read``'s card: which cells it reads."""
    first, last = args.get("first"), args.get("last")
    what = "the notebook"
    if first is not None or last is not None:
        what = f"notebook cells {first or 1}..{last if last is not None else 'end'}"
    return GenericCallView(title=f"read {what}", kind="read", raw_input=None)


def cells_text(cells: object) -> str:
    """The cells of an insertion as the card shows them, numbered, each source whole (to copy)."""
    items = cast("list[object]", cells) if isinstance(cells, list) else []
    parts: list[str] = []
    for n, c in enumerate(items, 1):
        d = cast("dict[str, object]", c) if isinstance(c, dict) else {}
        parts.append(f"── cell {n} · {d.get('cell_type')} ──\n{d.get('source')}")
    return "\n\n".join(parts)


def present_insert_result(args: JsonObject, info: ToolResultInfo) -> ToolResultView | None:
    """``notebook_insert``'s result card (an error keeps the default card)."""
    del args
    if info.is_error:
        return None
    return GenericResultView(content=insert_text(info.meta, for_model=False))


def insert_text(value: JsonValue, *, for_model: bool) -> str:
    """What an insertion's result says: to the model (``for_model``), or in its card."""
    d = value if isinstance(value, dict) else {}
    cells = d.get("cells")
    n = len(cells) if isinstance(cells, list) else 0
    what = f"{n} cell{'s' if n != 1 else ''}"
    are = "are" if n != 1 else "is"
    inserted = d.get("inserted")
    ids = ", ".join(str(i) for i in inserted) if isinstance(inserted, list) else ""
    after = d.get("after")
    below = f" below cell {after}" if isinstance(after, str) else ""
    replay = " (replayed: as recorded, not inserted again)" if d.get("replayed") else ""
    applied = d.get("applied")
    if applied == "extension":
        tail = (
            "; they are marked as written by you until the user runs or edits them"
            if for_model
            else ""
        )
        return f"inserted {what}{below} in {d.get('notebook')}: ids {ids}{tail}{replay}"
    if applied == "set_next_input":
        return (
            "no notebook extension serves this cell: the first cell is offered to the frontend "
            "with set_next_input at the end of the turn, below the chat cell; the kernel cannot "
            "know whether this frontend honours it"
            + (
                f"; all {what} are shown to the user in the card to copy"
                if for_model
                else "; copy the cells above"
            )
            + replay
        )
    if applied == "card" and d.get("console"):
        return (
            f"this chat cell ran in a console, not a notebook cell, and no notebook extension "
            f"serves it: nothing is added anywhere (set_next_input would overwrite the console's "
            f"input); the {what} {are} only shown to the user in the card to copy" + replay
        )
    if applied == "card":
        return (
            f"no notebook extension serves this cell and the turn's one set_next_input is taken: "
            f"the {what} {are} only shown to the user in the card to copy" + replay
        )
    return f"nothing inserted{replay}"
