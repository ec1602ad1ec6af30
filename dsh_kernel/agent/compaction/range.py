"""What a compaction replaces, and the messages that stand for it (``agent.compaction.run``).

* ``select_range`` cuts the surface into *units* that must stay together — an assistant message
  that called tools with all of its results, the user messages that end the surface (the newest
  step's prompt and context), or any other single message — and picks the oldest
  ones: never the newest unit, nor anything from the first unanswered tool call on, nor the recent
  tail the caller keeps; with a token limit, only the oldest whole units that fit it (what one
  summary call can be sent).
* ``checkpoint_message`` is the ``<compacted-summary>`` user message that replaces a range
  (source plugin ``PLUGIN``), ``summary_inner`` reads a summary back out of one.
* ``reduce_range`` is the deterministic summary: each message of the range on a line (old tool
  outputs cut to their first lines, images as their logged descriptions, runtime snapshots left
  out, an earlier checkpoint kept); when
  that is over budget, each turn to its first and last messages; then a hard cut.
* ``turn_of`` says which turn(s) a surface node belongs to (a checkpoint: the turns it stands for).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from dsh_kernel.ids import new_message_id
from dsh_kernel.llm.estimate import message_tokens
from dsh_kernel.llm.types import (
    ImageBlock,
    Message,
    PluginSource,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserSource,
)
from dsh_kernel.session.derive import project_event
from dsh_kernel.session.log import Session

PLUGIN: Final = "dsh/compaction"
"""The source plugin of a ``<compacted-summary>`` message."""

PREAMBLE: Final = (
    "[The earlier part of this conversation was condensed into the checkpoint below to keep it "
    "within the context window. Take it as established context; continue from the messages after "
    "it, without mentioning the checkpoint.]"
)

REDUCTION_NOTE: Final = "(A deterministic reduction, not a model's summary: {why}.)"


def checkpoint_message(summary: str, cid: str = "", turns: Sequence[int] = ()) -> Message:
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


def text_tokens(text: str) -> int:
    """The meter's estimate of a user message of ``text``."""
    return message_tokens(
        Message(
            id=new_message_id(), role="user", content=(TextBlock(text=text),), source=UserSource()
        )
    )


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
    # The newest step's input — its prompt, runtime context, steering: the user messages at the
    # end — is one unit, so the question being asked is never summarised away under it.
    while len(out) >= 2 and _step_input(session, out[-1]) and _step_input(session, out[-2]):
        last = out.pop()
        out[-1].seqs.extend(last.seqs)
        out[-1].tokens += last.tokens
    return out


def _step_input(session: Session, unit: _Unit) -> bool:
    return all(
        session.events[s].type == "user/message" and not _is_summary(session, s) for s in unit.seqs
    )


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


def summary_inner(msg: Message) -> str:
    """The summary text inside a checkpoint message (all of its text when it has no tags)."""
    text = "".join(b.text for b in msg.content if isinstance(b, TextBlock))
    start, end = text.find("<compacted-summary>"), text.rfind("</compacted-summary>")
    if start < 0 or end < start:
        return text
    return text[start + len("<compacted-summary>") : end].strip()


def turn_of(session: Session, seq: int) -> list[int]:
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
    turn = session.turn_at(seq)  # the log's index: no walk back to the turn's start
    return [turn] if turn is not None else []


def _text_of(msg: Message) -> str:
    parts: list[str] = []
    for block in msg.content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolResultBlock):
            parts.extend(b.text for b in block.content if isinstance(b, TextBlock))
    return "\n".join(parts).strip()


def _images_of(msg: Message) -> str:
    """`` [image: <description>]`` for each image of ``msg`` (its logged description)."""
    blocks = [b for b in msg.content if isinstance(b, ImageBlock)]
    for block in msg.content:
        if isinstance(block, ToolResultBlock):
            blocks.extend(b for b in block.content if isinstance(b, ImageBlock))
    return "".join(f" [image: {_clip(b.description, 300)}]" for b in blocks)


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
        turns = turn_of(session, seq)
        turn = turns[0] if turns else None
        source = msg.source
        if isinstance(source, PluginSource):
            if source.plugin == PLUGIN:
                out.append((turn, "Earlier checkpoint:\n" + summary_inner(msg)))
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
            out.append((turn, f"{label}: {_first_line(_text_of(msg))}{_images_of(msg)}"))
        else:
            who = "User" if isinstance(source, UserSource) else "Message"
            out.append((turn, f"{who}: {_clip(_text_of(msg), 600)}{_images_of(msg)}"))
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
