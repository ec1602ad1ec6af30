"""The surface rules an append obeys (SPINE §1.11): which event types carry a surface operation and
source seqs, what a replacement may shadow and must cite, what a ``tool/result`` replacement may
change.

``check_surface`` raises ``SurfaceError`` naming the rule broken; ``Session`` runs it for every
append that touches the surface, and for every seed event, before anything commits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dsh_kernel.errors import SurfaceError
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.session.events import SURFACE_TYPES, ReplaceOp, SessionEvent, SurfaceOp


def check_surface(
    type: str,
    op: SurfaceOp | None,
    seqs: tuple[int, ...] | None,
    data: JsonObject,
    seq: int,
    *,
    surface: Sequence[int],
    index_of: Callable[[int], int | None],
    event_at: Callable[[int], SessionEvent],
) -> None:
    """Raise ``SurfaceError`` unless event ``seq`` of ``type`` (``data``, ``op``, ``seqs``) obeys the
    surface rules against the current ``surface`` (``index_of``: a node's position on it;
    ``event_at``: the log's events)."""
    is_surface = type in SURFACE_TYPES
    if op is not None and op != "append" and not isinstance(op, ReplaceOp):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise SurfaceError(f"{type}: surface_op must be 'append' or a ReplaceOp, not {op!r}")
    if is_surface and op is None:
        raise SurfaceError(f"{type} is a surface event and needs a surface_op")
    if not is_surface and op is not None:
        raise SurfaceError(f"{type} is not a surface event; surface_op is forbidden on it")
    if seqs is not None:
        if not is_surface:
            raise SurfaceError(f"{type} is not a surface event; sourceEventSeqs is forbidden on it")
        if not seqs and type != "assistant/message":
            raise SurfaceError(f"{type}: sourceEventSeqs must be non-empty when present")
        if len(set(seqs)) != len(seqs):
            raise SurfaceError(f"{type}: sourceEventSeqs must be distinct")
        for s in seqs:
            if s.__class__ is not int or not 0 <= s < seq:
                raise SurfaceError(f"{type}: sourceEventSeqs cites {s!r}, not an earlier seq")
    if not isinstance(op, ReplaceOp):
        return
    i, j = index_of(op.start), index_of(op.end)
    if i is None or j is None or i > j:
        raise SurfaceError(
            f"{type}: replace range {op.start}..{op.end} is not a range of current surface nodes"
        )
    shadowed = surface[i : j + 1]
    if seqs is None or not set(shadowed) <= set(seqs):
        raise SurfaceError(f"{type}: a replacement must cite every node it shadows {shadowed}")
    if type == "tool/result":
        old = event_at(shadowed[0])
        if len(shadowed) != 1 or old.type != "tool/result":
            raise SurfaceError("a tool/result replacement shadows exactly one tool/result")
        if not same_but_content(old.data, data):
            raise SurfaceError("a tool/result replacement may change only the nested content")


def same_but_content(old: JsonObject, new: JsonObject) -> bool:
    """True when ``new`` differs from ``old`` at most in the tool-result block's nested ``content``."""

    def strip(d: JsonObject) -> tuple[JsonObject, JsonObject, JsonObject] | None:
        msg = d.get("message")
        if not isinstance(msg, dict):
            return None
        content = msg.get("content")
        if not (isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict)):
            return None
        block = content[0]
        if not isinstance(block.get("content"), list):
            return None
        return (
            {k: v for k, v in d.items() if k != "message"},
            {k: v for k, v in msg.items() if k != "content"},
            {k: v for k, v in block.items() if k != "content"},
        )

    stripped = strip(old)
    return stripped is not None and stripped == strip(new)
