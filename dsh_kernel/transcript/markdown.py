"""The Markdown transcript of a session: ``export_markdown(events, header)`` (``%agent export --md``).

Each turn is read by the turn reader (``dsh_kernel.transcript.turn.fold_turn``) — the reading the cell's
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

The transcript is the human projection of the log (SPINE §1.11): it reads the appended messages and
the log-only events, never a replacement copy (a compaction's ``<compacted-summary>``, a pruned tool
result, the note standing for an overflowed turn), so every original turn stays as it was seen. Where
a compaction summarised earlier turns, one line says so at its place, the line the cell showed
(``transcript.compaction_notes``): *Compacted N earlier turns (~X → ~Y tokens)*, the size of the request
before and after; a compaction by hand, between turns, gets the same line once it ended.

Images (a tool result's, or one attached to a prompt, a steering message or a message between turns)
are written under what carries them. ``markdown_transcript(..., image_dir=)`` links each image whose
bytes the log holds (its ``image/data``, checked against its hash) as ``![description](dir/file)``
and returns the files to write beside the transcript (``Transcript.images``: file name → bytes,
named ``<sha256 prefix>.<ext>``, so the same image is one file): files, not data URLs, because a
transcript is read as text too, and a plot is tens of kilobytes of base64. Without ``image_dir``, or
when the log lacks the bytes, the image is written as its description. Every image has a line with
its size and how it was reduced; description and that line are escaped, never markup.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import quote

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.arguments import parse_tool_arguments
from dsh_kernel.llm.codec import message_from_json
from dsh_kernel.llm.types import ContentBlock, ImageBlock
from dsh_kernel.session.events import ReplaceOp, SessionEvent, SessionHeader
from dsh_kernel.session.log_images import image_blocks
from dsh_kernel.session.payloads import UserMessage, payload_of
from dsh_kernel.transcript.compaction_notes import CompactionNotes
from dsh_kernel.transcript.model import (
    HeldItem,
    NoticeItem,
    ReasoningItem,
    SteerItem,
    TextItem,
    ToolCardModel,
    ToolItem,
)
from dsh_kernel.transcript.turn import fold_turn


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


_MEDIA_EXT = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}
_ESCAPED = {ord(c): "\\" + c for c in "\\`*_[]()<>!&~|#"}


def _inline(text: str) -> str:
    """``text`` on one Markdown line, not at its start, with the characters that could make inline
    markup (emphasis, code, links, tags, entities) escaped: it renders as itself."""
    return " ".join(text.split()).translate(_ESCAPED)


def image_file_name(sha256: str, media_type: str) -> str:
    """The file an exported image is written to: its hash prefix, and the extension of its type."""
    return f"{sha256[:16]}.{_MEDIA_EXT.get(media_type, 'img')}"


@dataclass(slots=True)
class Transcript:
    """A transcript's text and the image files its links name (file name → bytes)."""

    text: str
    images: dict[str, bytes] = field(default_factory=lambda: {})


@dataclass(slots=True)
class _Images:
    """The log's image bytes by hash, and the files a transcript linked."""

    image_dir: str | None
    data: dict[str, bytes]
    linked: dict[str, bytes] = field(default_factory=lambda: {})

    def md(self, blocks: Iterable[ContentBlock]) -> list[str]:
        return [self._one(b) for b in image_blocks(blocks)]

    def _one(self, image: ImageBlock) -> str:
        kind = image.media_type.removeprefix("image/").upper()
        about = f"{image.width}×{image.height} {kind}, {image.size:,} bytes"
        if image.reduction:
            about += f"; reduced: {image.reduction}"
        raw = self.data.get(image.sha256)
        if self.image_dir is None or raw is None:
            return f"*Image ({_inline(about)}):* {_inline(image.description)}"
        name = image_file_name(image.sha256, image.media_type)
        self.linked[name] = raw
        alt = _inline(image.description) or "image"
        return f"![{alt}]({quote(self.image_dir)}/{name})\n\n*{_inline(about)}*"


def _image_bytes(events: Sequence[SessionEvent]) -> dict[str, bytes]:
    """Each ``image/data`` event's bytes, when they decode and match their hash."""
    out: dict[str, bytes] = {}
    for e in events:
        if e.type != "image/data":
            continue
        d = payload_of(e, "image/data")
        try:
            raw = base64.b64decode(d["data"], validate=True)
        except (binascii.Error, ValueError, TypeError):
            continue
        if hashlib.sha256(raw).hexdigest() == d["sha256"]:
            out.setdefault(d["sha256"], raw)
    return out


def _content(message: JsonValue) -> tuple[ContentBlock, ...]:
    try:
        return message_from_json(message).content
    except ValueError:  # a message its readers cannot decode: the text fallback shows what it can
        return ()


def export_markdown(events: Sequence[SessionEvent], header: SessionHeader | None = None) -> str:
    """A readable Markdown transcript of a session log (what a person saw, not the raw stream);
    images are written as their descriptions (``markdown_transcript`` links their files)."""
    return markdown_transcript(events, header).text


def markdown_transcript(
    events: Sequence[SessionEvent],
    header: SessionHeader | None = None,
    *,
    image_dir: str | None = None,
) -> Transcript:
    """A readable Markdown transcript of a session log, and the image files it links.

    Each turn is read by the turn reader (``dsh_kernel.transcript.turn.fold_turn``), the reading the
    cell's live view and static rendering draw from, and written as a transcript: prompts and
    steering, runtime context folded into ``<details>``, reasoning folded, answers, each tool call
    with its arguments and, right under it, its result; how the turn ended unless it completed.
    A message logged outside any turn (context injected between turns) is written where it is.
    ``image_dir`` is the folder, relative to the transcript, the image files go to (module
    docstring)."""
    images = _Images(image_dir=image_dir, data=_image_bytes(events))
    events = [e for e in events if not isinstance(e.surface_op, ReplaceOp)]  # model-only copies
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
            how = {
                "rewind": "a re-run chat cell's branch of",
                "import": "imported from a notebook's capsules (self-reported), continuing",
                "policy": "forked for a new AI policy from",
            }.get(header.parent_kind or "fork", "forked from")
            meta.append(
                f"{how} {_code_span(header.parent_session)} after {header.seed_length} events"
            )
        out.append(" · ".join(meta))
    turn: list[SessionEvent] | None = None
    notes, standalone = CompactionNotes(), list[NoticeItem]()
    for e in events:
        if e.type == "turn/start":
            if turn is not None:
                out += _turn_md(turn, images)  # a turn the log never closed
            turn = [e]
        elif turn is not None:
            turn.append(e)
            if e.type == "turn/end":
                out += _turn_md(turn, images)
                turn = None
        elif e.type == "user/message":
            out += _message_md(payload_of(e, "user/message"), images.md(_content(e.data)))
        elif e.type.startswith("compaction/"):  # a compaction by hand, between turns
            notes.apply(e, standalone)
            if e.type == "compaction/end":
                out += [f"*{n.text}*" for n in standalone]
                notes, standalone = CompactionNotes(), []
    if turn is not None:
        out += _turn_md(turn, images)
    return Transcript(text="\n\n".join(out).strip() + "\n", images=images.linked)


def _message_md(d: UserMessage, pictures: list[str]) -> list[str]:
    """A message logged outside a turn (and its images): a person's, or context for the model."""
    text = _text_of(_blocks(d["content"]))
    if d["source"].get("kind") == "user":
        return ["**User:**\n\n" + text, *pictures]
    return ([_context_md(text)] if text else []) + pictures


def _context_md(text: str) -> str:
    return "<details><summary>Context</summary>\n\n" + text + "\n\n</details>"


def _turn_md(events: list[SessionEvent], images: _Images) -> list[str]:
    model = fold_turn(events)
    by_message: dict[str, tuple[ContentBlock, ...]] = {}
    by_seq: dict[str, tuple[ContentBlock, ...]] = {}
    by_call: dict[str, list[ContentBlock]] = {}
    for e in events:
        if e.type == "user/message":
            content = _content(e.data)
            by_message[str(e.data.get("id"))] = by_seq[f"steer-{e.seq}"] = content
        elif e.type == "tool/result" and e.surface_op == "append":
            call = payload_of(e, "tool/result")["message"]
            source = call.get("source")
            call_id = source.get("callId") if isinstance(source, dict) else None
            by_call.setdefault(str(call_id), []).extend(_content(call))
    out = [f"\n## Turn {model.turn}"]
    notes = list(model.context)
    out += [_context_md(n.text) for n in notes if n.before_prompt]
    if model.prompt is not None:
        out.append("**User:**\n\n" + model.prompt)
        out += images.md(by_message.get(str(model.message_id), ()))
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
                out += images.md(by_call.get(item.card.call_id, ()))
            case SteerItem():
                out.append("**User:**\n\n" + item.text)
                out += images.md(by_seq.get(item.key, ()))
            case NoticeItem():
                if item.level == "info":  # a compaction's line, as the cell shows it
                    out.append(f"*{item.text}*")
                # a retry notice: the retried call is what the transcript shows
            case HeldItem():
                pass  # progress while text was held: the text or the call itself follows
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
