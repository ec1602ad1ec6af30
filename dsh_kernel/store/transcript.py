"""The Markdown transcript of a session: ``export_markdown(events, header)`` (``%agent export --md``).

Each turn is read by the turn reader (``dsh_kernel.session.turn.fold_turn``) — the reading the cell's
live view, static rendering and footer draw from — and written as a transcript: the title and the
session line, then per turn its prompt and steering, runtime context folded into ``<details>``,
reasoning folded, the answers, each tool call with its arguments (``python`` code fenced as Python,
other arguments as indented JSON, text that is not JSON as it was sent) and right under it its result
text and error code, and how the turn ended unless it completed. A retry notice is left out (the
retried call is what shows), and so is a call the model wrote that never started, or text of a model
call that failed without a retry (no message of the log holds it). A message logged outside any turn
(context injected between turns) is written where it is.

What came from a tool or the model's call (a name, arguments, result text, an error code) is fenced
in a fence its content cannot close, or put in a code span, so it renders as text, never as markup;
the title is written as plain text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.arguments import parse_tool_arguments
from dsh_kernel.session.events import SessionEvent, SessionHeader
from dsh_kernel.session.payloads import UserMessage, payload_of
from dsh_kernel.session.turn import fold_turn
from dsh_kernel.session.turn_model import (
    NoticeItem,
    ReasoningItem,
    SteerItem,
    TextItem,
    ToolCardModel,
    ToolItem,
)


def _blocks(content: list[JsonValue]) -> list[JsonObject]:
    return [b for b in content if isinstance(b, dict)]


def _text_of(blocks: list[JsonObject], kind: str = "text") -> str:
    return "".join(str(b.get("text", "")) for b in blocks if b.get("type") == kind)


def _fence(body: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in body:
        ticks += "`"
    return f"{ticks}{lang}\n{body}\n{ticks}"


def _code_span(text: str) -> str:
    """``text`` as an inline code span its content cannot close (a tool's name, an error code)."""
    flat = " ".join(text.split())
    ticks = "`"
    while ticks in flat:
        ticks += "`"
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{ticks}{pad}{flat}{pad}{ticks}" if flat else "``"


def _plain(text: str) -> str:
    """``text`` for a Markdown line that must not become markup (a title): no tag, no entity, no
    link."""
    flat = " ".join(text.split())
    return flat.replace("&", "&amp;").replace("<", "&lt;").replace("[", "\\[")


def export_markdown(events: Sequence[SessionEvent], header: SessionHeader | None = None) -> str:
    """A readable Markdown transcript of a session log (what a person saw, not the raw stream).

    Each turn is read by the turn reader (``dsh_kernel.session.turn.fold_turn``), the reading the
    cell's live view and static rendering draw from, and written as a transcript: prompts and
    steering, runtime context folded into ``<details>``, reasoning folded, answers, each tool call
    with its arguments and, right under it, its result; how the turn ended unless it completed.
    A message logged outside any turn (context injected between turns) is written where it is."""
    out: list[str] = []
    title = next(
        (
            payload_of(e, "session/title")["title"]
            for e in reversed(events)
            if e.type == "session/title"
        ),
        None,
    )
    out.append(f"# {_plain(title or 'Session ' + (header.id if header else ''))}".rstrip())
    if header is not None:
        created = datetime.fromtimestamp(header.created_at / 1000, tz=UTC).strftime(
            "%Y-%m-%d %H:%M UTC"
        )
        meta = [f"session {_code_span(header.id)}", f"created {created}"]
        if header.notebook:
            meta.append(f"notebook {_code_span(header.notebook)}")
        if header.parent_session:
            meta.append(
                f"forked from {_code_span(header.parent_session)} after {header.seed_length} events"
            )
        out.append(" · ".join(meta))
    turn: list[SessionEvent] | None = None
    for e in events:
        if e.type == "turn/start":
            if turn is not None:
                out += _turn_md(turn)  # a turn the log never closed
            turn = [e]
        elif turn is not None:
            turn.append(e)
            if e.type == "turn/end":
                out += _turn_md(turn)
                turn = None
        elif e.type == "user/message":
            out += _message_md(payload_of(e, "user/message"))
    if turn is not None:
        out += _turn_md(turn)
    return "\n\n".join(out).strip() + "\n"


def _message_md(d: UserMessage) -> list[str]:
    """A message logged outside a turn: a person's, or context for the model."""
    text = _text_of(_blocks(d["content"]))
    if d["source"].get("kind") == "user":
        return ["**User:**\n\n" + text]
    return [_context_md(text)] if text else []


def _context_md(text: str) -> str:
    return "<details><summary>Context</summary>\n\n" + text + "\n\n</details>"


def _turn_md(events: list[SessionEvent]) -> list[str]:
    model = fold_turn(events)
    out = [f"\n## Turn {model.turn}"]
    notes = list(model.context)
    out += [_context_md(n.text) for n in notes if n.before_prompt]
    if model.prompt is not None:
        out.append("**User:**\n\n" + model.prompt)
    notes = [n for n in notes if not n.before_prompt]
    for at, item in enumerate(model.items):
        out += [_context_md(n.text) for n in notes if n.before == at]
        if item.type in ("text", "reasoning") and item.key in model.unlogged_keys:
            continue  # the call failed: no message holds it
        match item:
            case ReasoningItem():
                if item.text:
                    out.append(
                        "<details><summary>Reasoning</summary>\n\n" + item.text + "\n\n</details>"
                    )
            case TextItem():
                cut = item.key in model.interrupted_keys
                if item.text.strip() if cut else item.text:
                    suffix = " *(interrupted)*" if cut else ""
                    out.append("**Assistant:**" + suffix + "\n\n" + item.text)
            case ToolItem():
                out += _tool_md(item.card)
            case SteerItem():
                out.append("**User:**\n\n" + item.text)
            case NoticeItem():
                pass  # a retry notice: the retried call is what the transcript shows
    out += [_context_md(n.text) for n in notes if n.before >= len(model.items)]
    if model.end_kind not in (None, "completed"):
        out.append(f"*Turn ended: {model.end_kind}*")
    return out


def _tool_md(card: ToolCardModel) -> list[str]:
    """A call as it ran (none for a call the model wrote but that never started), then its result."""
    out: list[str] = []
    if card.started_at is not None:
        out.append(_tool_call_md(card.name, card.arguments))
    if card.result_text is not None:
        label = "Tool error" if card.is_error else "Tool result"
        if card.error_code:
            label += f" ({_code_span(card.error_code)})"
        out.append(f"**{label}:**\n\n" + _fence(card.result_text))
    return out


def _tool_call_md(name: str, raw: str) -> str:
    try:
        args: JsonValue = parse_tool_arguments(raw)
    except ValueError:  # too deep or not JSON: shown as the text the model sent
        args = raw
    if name == "python" and isinstance(args, dict) and isinstance(args.get("code"), str):
        body = _fence(str(args["code"]), "python")
    else:
        body = _fence(
            json.dumps(args, indent=2, ensure_ascii=False) if not isinstance(args, str) else args,
            "json",
        )
    return f"**Tool call {_code_span(name)}:**\n\n{body}"
