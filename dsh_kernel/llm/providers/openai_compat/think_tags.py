"""``<think>…</think>`` inside ``content``, split off as reasoning (the generic profile only).

Reasoning models served without a reasoning parser — Qwen3 and the DeepSeek-R1 distills on
llama.cpp (``--reasoning-format none``), Ollama's older builds, vLLM without ``--reasoning-parser``
— write their thinking into ``content`` between ``<think>`` and ``</think>``. Templates that open
the tag themselves (the R1 distills' and QwQ's put ``<think>\\n`` at the end of the prompt) leave
only the closing ``</think>`` in the output.

``ThinkTags.feed(delta)`` returns the pieces of one response's content in order, each
``("reasoning", text)``, ``("answer", text)`` or ``("unsay", "")``:

* an answer that starts (after whitespace) with ``<think>`` is reasoning up to ``</think>``, the
  tag itself and the whitespace after either tag dropped; what follows is answer. A ``<think>``
  after some answer (a small model that says a word first) starts reasoning there: the answer
  before it stands (the translator closes its block, so the answer after the reasoning is a block
  of its own, in order);
* any other answer streams as answer, but until a first ``</think>`` it may still turn out to have
  been reasoning: at that tag comes ``("unsay", "")`` — everything said as answer so far was not
  — then ``("reasoning", all of it)``, then the answer after the tag. The translator closes its
  answer block empty on ``unsay`` (the stream grammar fixes a block's type, so a text block cannot
  become reasoning) and opens a reasoning block; a live view redraws the text as a folded
  reasoning block at that moment. After ``MAX_UNSAY_CHARS`` of answer it stops looking (and
  keeping a copy);
* a tag split across deltas is recognised: a piece's end that could begin a tag is held until the
  next piece says (a few characters); ``finish()`` returns whatever is still held;
* ``unclosed`` says, at the end, that the content ended inside a ``<think>`` never closed (the
  translator then makes that reasoning the answer when nothing else was said).

A ``</think>`` in an answer about think tags would be taken for the end of reasoning; that is the
price of reading the servers that pre-fill ``<think>``, and it applies to the generic profile only.
Pure: no I/O.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

OPEN: Final = "<think>"
CLOSE: Final = "</think>"
MAX_UNSAY_CHARS: Final = 200_000
"""Answer characters after which a bare ``</think>`` is no longer looked for."""

PieceKind: TypeAlias = Literal["reasoning", "answer", "unsay"]
Piece: TypeAlias = tuple[PieceKind, str]
_Mode: TypeAlias = Literal["start", "think-lead", "think", "maybe", "after", "answer"]


def _partial_tag(text: str, tags: tuple[str, ...]) -> int:
    """Length of the longest end of ``text`` that is a proper beginning of one of ``tags`` (each has
    one ``<``, at its start: so only the last ``<`` near the end can begin one)."""
    at = text.rfind("<", max(0, len(text) - len(CLOSE) + 1))
    if at < 0:
        return 0
    end = text[at:]
    return len(end) if any(t.startswith(end) and t != end for t in tags) else 0


class ThinkTags:
    """Splits one response's content into reasoning and answer (module docstring)."""

    __slots__ = ("_carry", "_mode", "_said", "_said_len")

    def __init__(self) -> None:
        self._mode: _Mode = "start"
        self._carry = ""  # held: leading whitespace, or what may begin a tag
        self._said: list[str] = []  # the answer so far, while a bare </think> may still come
        self._said_len = 0

    @property
    def unclosed(self) -> bool:
        """Whether the content so far ends inside a ``<think>`` that was never closed."""
        return self._mode == "think" or self._mode == "think-lead"

    def plain(self, text: str) -> bool:
        """Whether ``text`` is answer just as it is, now — then it is taken, as ``feed`` would take
        it; ``False`` (nothing taken) when ``feed`` must read it. The streaming fast path."""
        mode = self._mode
        if mode == "answer":
            return True
        if mode != "maybe" or self._carry or "<" in text:
            return False
        if self._said_len + len(text) > MAX_UNSAY_CHARS:
            return False
        self._said.append(text)
        self._said_len += len(text)
        return True

    def feed(self, text: str) -> list[Piece]:
        """The pieces ``text`` yields now (possibly none: a tag may be starting)."""
        if self.plain(text):
            return [("answer", text)] if text else []
        out: list[Piece] = []
        s = self._carry + text
        self._carry = ""
        while s:
            s = self._advance(s, out)
        return out

    def finish(self) -> list[Piece]:
        """What is still held, at the end of the content."""
        held, self._carry = self._carry, ""
        if not held:
            return []
        if self._mode in ("think", "think-lead"):
            return [("reasoning", held)]
        return [("answer", held)] if self._mode != "after" else []

    def _advance(self, s: str, out: list[Piece]) -> str:
        """Consume the start of ``s`` in the current mode; returns what is left."""
        match self._mode:
            case "start":
                body = s.lstrip()
                if not body or (len(body) < len(OPEN) and OPEN.startswith(body)):
                    self._carry = s  # only whitespace, or a tag may be starting
                    return ""
                if body.startswith(OPEN):
                    self._mode = "think-lead"
                    return body[len(OPEN) :]
                self._mode = "maybe"
                return s
            case "think-lead" | "after":
                body = s.lstrip()
                if body:
                    self._mode = "think" if self._mode == "think-lead" else "answer"
                return body
            case "think":
                return self._until_close(s, out, "reasoning")
            case "maybe":
                return self._until_close(s, out, "answer")
            case "answer":
                out.append(("answer", s))
                return ""

    def _until_close(self, s: str, out: list[Piece], kind: PieceKind) -> str:
        at = s.find(CLOSE)
        if kind == "answer":
            opened = s.find(OPEN)
            if opened >= 0 and (at < 0 or opened < at):  # a think block after some answer
                if opened:
                    out.append(("answer", s[:opened]))
                self._said, self._said_len, self._mode = [], 0, "think-lead"
                return s[opened + len(OPEN) :]
        if kind == "answer" and self._said_len + (at if at >= 0 else len(s)) > MAX_UNSAY_CHARS:
            self._said, self._said_len, self._mode = [], 0, "answer"  # too long to be reasoning
            out.append(("answer", s))
            return ""
        if at >= 0:
            before, rest = s[:at], s[at + len(CLOSE) :]
            if kind == "reasoning":
                if before:
                    out.append(("reasoning", before))
            else:
                said = "".join(self._said) + before
                self._said, self._said_len = [], 0
                out.append(("unsay", ""))
                if said.strip():
                    out.append(("reasoning", said))
            self._mode = "after"
            return rest
        keep = _partial_tag(s, (OPEN, CLOSE) if kind == "answer" else (CLOSE,))
        piece = s[: len(s) - keep]
        self._carry = s[len(s) - keep :]
        if piece:
            out.append((kind, piece))
            if kind == "answer":
                self._said.append(piece)
                self._said_len += len(piece)
        return ""
