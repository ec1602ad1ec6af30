"""Tool calls a model wrote as answer text, recovered as tool calls (the generic profile only).

A server that does not parse the model's tool-call syntax out of its output — llama-cpp-python's
server with the model's own chat template, vLLM without ``--tool-call-parser``, ``llama-server``
without ``--jinja`` — passes the call on as ``content`` with ``finish_reason: stop``. Shown as the
answer, it runs nothing, and because it stays in the history the model goes on answering in JSON.
``TextToolCalls`` watches the answer text of one response and, when the whole answer *is* tool
calls, hands back the calls instead:

* one or more ``<tool_call>{…}</tool_call>`` blocks (Hermes, Qwen), with only whitespace around and
  between them; or
* one JSON object, bare or in a ```` ``` ```` / ```` ```json ```` fence, with only whitespace around it.

The object is ``{"name": <tool>, "arguments": {…}}``. ``arguments`` may be a JSON string holding
the object (some templates write it so); ``"parameters"`` is read as ``"arguments"`` because Llama
3.x's JSON tool format asks for it (vLLM's ``llama3_json`` parser reads both for that reason) —
never both, and no other key. A call counts only when its name is one the request offered and its
arguments are a JSON object (read by ``arguments.parse_tool_arguments``, with its limits). Anything else
leaves the whole answer text, exactly as it came: prose before or after (so a call quoted in an
explanation stays text), an unknown name, arguments that do not parse, a second bare object, a
fence in another language. It is all or nothing: an answer that is partly calls is not half run.

**Holding back.** The decision needs the whole answer, yet a text answer must stream. ``feed(delta)``
returns the text that may be shown now. Leading whitespace is held until the next character; an
answer that starts with anything but ``{``, a backtick or ``<`` passes through from then on. A
candidate is held, and released as text the moment it cannot be a call: a first key other than
``name``/``arguments``/``parameters``, a name not offered, a tag that is not ``<tool_call>``, a
fence in another language, a closed object or block followed by anything but whitespace (or, in a
fence, its closing backticks), a block whose content is not a valid call — or when it has not
become calls within the bounds: more than ``MAX_HELD_CHARS`` held, or a piece arriving more than
``MAX_HELD_SECONDS`` after the first held character of the call being read when that call is longer
than ``SHORT_CALL_CHARS`` (``feed``'s ``now``; the bound is checked as text arrives, there is no
timer). Otherwise ``finish()`` decides at the end of the answer:
``(text, calls)`` with exactly one of the two non-empty (or both empty for an empty answer).
``release()`` gives up at once and returns what was held (the server sent tool calls of its own, or
the response did not end with a stop); everything after passes through. Released text is the held
text exactly, in order, once: nothing is lost or repeated, and from then on the answer streams.

While a candidate is held, ``held`` is its length (0 otherwise, leading whitespace included once a
candidate starts): the adapter reports it so a view can say a tool call is being written
(``llm.types.HeldText``).

Each ``RecoveredCall`` keeps its own source — the ``<tool_call>`` block, or the object with its
fence — which the translator records on the tool-call block (``ToolCallBlock.recovered_from``):
on the block, not on the message, because the card of each call says it was recovered and the
block is what reaches the card (through its ``block-end`` chunk), the log and the message without a
new path. What the next request sends is the normal ``tool_calls`` message and the ``tool``
results, so the history shows proper tool use.

``call_id(seed, index, source)``: ``call_`` and 24 hex digits of a SHA-256 over the adapter's seed
(the response id and the length of the history), the call's position and its text — the same answer
to the same history gets the same ids, so a re-run is stable, and two calls of one session do not
collide even on a server whose response ids never change.

Pure: no I/O, no clock; the translator (``translate.py``) owns the chunks.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from dsh_kernel.llm.arguments import parse_tool_arguments

MAX_HELD_CHARS: Final = 4_096
"""Characters held back at most while an answer might be a tool call; beyond, it is shown as text.

A call written as text is short — the calls small models write are a name and a few lines of
arguments, a few hundred characters — while a model looping inside an unclosed JSON string (Qwen
2.5-Coder-0.5B did, for 2,869 tokens) passes 4 kB within about a thousand tokens. A longer genuine
call is shown as text and not run: the model sees its own text answer, as with any other text."""
MAX_HELD_SECONDS: Final = 8.0
"""Seconds after its first character that a call being read, once longer than
``SHORT_CALL_CHARS``, is released as text if it has not closed.

On a slow server the character bound takes minutes (a small model on one CPU thread writes ~50
characters a second, a shared machine far fewer), and until then the view can only count
characters. A loop passes ``SHORT_CALL_CHARS`` within seconds and is then shown as the text it is,
so the user can read it and stop it."""
SHORT_CALL_CHARS: Final = 512
"""Characters a call being read may reach and still be held past ``MAX_HELD_SECONDS``.

What small models write as text calls is short — ``{"name": "python", "arguments": {"code": …}}``
with a line or two of code is ~100 characters — and on a slow server it can take longer than the
time bound to write (Qwen2.5-Coder-0.5B wrote ~7 characters a second on a loaded 2-core machine):
such a call is still held, with its progress shown, until it closes."""
_MAX_OPENING: Final = 512
"""Characters of an object's opening within which its first key (and name) must be readable."""
_OPEN_TAG: Final = "<tool_call>"
_CLOSE_TAG: Final = "</tool_call>"
_FENCE_LANGS: Final = ("", "json")
_KEYS: Final = frozenset({"name", "arguments", "parameters"})
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_COLON = re.compile(r"\s*:\s*")

_Mode: TypeAlias = Literal[
    "lead",  # only whitespace so far
    "tag",  # reading "<tool_call>"
    "tag-body",  # inside a <tool_call> block
    "between",  # after a closed block: whitespace, another block, or the end
    "fence",  # reading the opening fence and its language
    "fence-lead",  # after the fence line, before the object
    "json",  # inside the object
    "after-json",  # the object closed: whitespace (and a closing fence) only
    "fence-close",  # reading the closing backticks
    "after-fence",  # the fence closed: whitespace only
    "pass",  # decided: text
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveredCall:
    """One call read from the answer text."""

    name: str
    arguments: str
    """The arguments as JSON text (an object)."""
    source: str
    """The text it was read from: its ``<tool_call>`` block, or the object with its fence."""


def call_id(seed: str, index: int, source: str) -> str:
    """The deterministic id of recovered call ``index`` (module docstring)."""
    digest = hashlib.sha256(f"{seed}\x00{index}\x00{source}".encode()).hexdigest()
    return f"call_{digest[:24]}"


def read_call(text: str, offered: Collection[str]) -> RecoveredCall | None:
    """The call one JSON object's text describes, or ``None`` when it is not a valid call."""
    try:
        value = parse_tool_arguments(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    name = value.get("name")
    if not isinstance(name, str) or name not in offered or not set(value) <= _KEYS:
        return None
    given = [k for k in ("arguments", "parameters") if k in value]
    if len(given) != 1:
        return None
    args = value[given[0]]
    if isinstance(args, str):
        try:
            parsed = parse_tool_arguments(args)
        except ValueError:
            return None
        if not isinstance(parsed, dict):
            return None
        arguments = args if args.strip() else "{}"
    elif isinstance(args, dict):
        arguments = json.dumps(args, ensure_ascii=False)
    else:
        return None
    return RecoveredCall(name=name, arguments=arguments, source=text)


def _opening(text: str, offered: Collection[str]) -> bool | None:
    """Whether an object's opening ``text`` (from its ``{``) can still be a call: ``False`` as soon
    as it cannot, ``True`` once its first key (and, if that is ``name``, the name) is read and fine,
    ``None`` while undecided."""
    rest = text[1:].lstrip()
    if not rest:
        return None
    if rest[0] != '"':
        return False
    m = _STRING.match(rest)
    if m is None:
        return None
    key = _decoded(m.group())
    if key not in _KEYS:
        return False
    if key != "name":
        return True
    rest = rest[m.end() :]
    colon = _COLON.match(rest)
    if colon is None or colon.end() == len(rest):
        return None if rest.strip() in ("", ":") else False
    rest = rest[colon.end() :]
    if rest[0] != '"':
        return False
    m = _STRING.match(rest)
    if m is None:
        return None
    name = _decoded(m.group())
    return name is not None and name in offered


def _decoded(literal: str) -> str | None:
    try:
        value = json.loads(literal)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


class TextToolCalls:
    """The tool calls of one answer's text, decided as it streams (module docstring)."""

    __slots__ = (
        "_calls",
        "_depth",
        "_escape",
        "_fenced",
        "_held",
        "_held_len",
        "_held_since",
        "_in_string",
        "_mode",
        "_offered",
        "_opening_ok",
        "_segment",
        "_token",
    )

    def __init__(self, offered: Collection[str]) -> None:
        self._offered = offered
        self._mode: _Mode = "lead" if offered else "pass"
        self._held: list[str] = []
        self._held_len = 0
        self._held_since: float | None = None  # when the first candidate character came
        self._calls: list[RecoveredCall] = []
        self._token = ""  # the tag or fence being read
        self._segment: list[str] = []  # the current block's or object's text
        self._fenced = False
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._opening_ok = False

    @property
    def passing(self) -> bool:
        """Whether the answer is decided as text (everything fed now passes through)."""
        return self._mode == "pass"

    @property
    def held(self) -> int:
        """Characters held while the answer may be calls (0 while only whitespace came, or once
        decided as text)."""
        return 0 if self._mode == "lead" or self._mode == "pass" else self._held_len

    def feed(self, text: str, now: float = 0.0) -> str:
        """Take the next piece of answer text, arrived at ``now`` (seconds, any monotonic clock);
        returns what may be shown now."""
        if self._mode == "pass":
            return text
        self._held.append(text)
        self._held_len += len(text)
        for c in text:
            if not self._step(c):
                return self.release()
        if self._mode == "lead":
            return ""
        if not self._undecided():
            self._held_since = None  # calls closed: the next one, if any, gets its own clock
        elif self._held_since is None:
            self._held_since = now
        elif now - self._held_since > MAX_HELD_SECONDS and len(self._segment) > SHORT_CALL_CHARS:
            return self.release()
        if self._mode == "json" and not self._opening_ok:
            segment = "".join(self._segment)
            opening = _opening(segment[segment.index("{") :], self._offered)
            if opening is False or (opening is None and len(self._segment) > _MAX_OPENING):
                return self.release()
            self._opening_ok = opening is True
        if self._held_len > MAX_HELD_CHARS and self._undecided():
            return self.release()
        return ""

    def _undecided(self) -> bool:
        """Whether the held text is still short of calls (not just closed ones and whitespace)."""
        return self._mode not in ("between", "after-json", "after-fence")

    def release(self) -> str:
        """Give up: the held text, to be shown as text; all later text passes through."""
        # A release inside ``feed`` holds the current piece too: the held text is all of it.
        held = "".join(self._held)
        self._held = []
        self._held_len = 0
        self._calls = []
        self._mode = "pass"
        return held

    def finish(self) -> tuple[str, tuple[RecoveredCall, ...]]:
        """At the end of the answer: ``(text to show, ())`` or ``("", the calls)``."""
        mode = self._mode
        if mode == "pass":
            return "", ()
        if mode == "between" or mode == "after-json" or mode == "after-fence":
            calls = tuple(self._calls)
            self._held, self._held_len, self._calls, self._mode = [], 0, [], "pass"
            return "", calls
        return self.release(), ()

    # -- the character steps; each returns False when the answer cannot be calls any more ----------

    def _step(self, c: str) -> bool:
        match self._mode:
            case "lead" | "between" | "after-fence" if c.isspace():
                return True
            case "after-json" if c.isspace():
                self._segment.append(c)  # inside a fence, part of the call's source
                return True
            case "lead" | "between" if c == "<":
                self._mode, self._token, self._segment = "tag", c, [c]
                return True
            case "lead" if c == "`":
                self._mode, self._token, self._segment, self._fenced = "fence", c, [c], True
                return True
            case "lead" if c == "{":
                self._segment = []
                return self._open_object(c)
            case "tag":
                self._token += c
                self._segment.append(c)
                if not _OPEN_TAG.startswith(self._token):
                    return False
                if self._token == _OPEN_TAG:
                    self._mode = "tag-body"
                return True
            case "tag-body":
                return self._tag_body(c)
            case "fence":
                return self._fence(c)
            case "fence-lead" if c.isspace():
                self._segment.append(c)
                return True
            case "fence-lead" if c == "{":
                return self._open_object(c)
            case "json":
                return self._json(c)
            case "after-json" if self._fenced and c == "`":
                self._mode, self._token = "fence-close", c
                self._segment.append(c)
                return True
            case "fence-close" if c == "`":
                self._token += c
                self._segment.append(c)
                if len(self._token) == 3:
                    self._mode = "after-fence"
                    self._calls[-1] = _with_source(self._calls[-1], "".join(self._segment))
                return True
            case _:
                return False

    def _open_object(self, c: str) -> bool:
        self._mode, self._depth, self._in_string, self._escape = "json", 1, False, False
        self._opening_ok = False
        self._segment.append(c)
        return True

    def _tag_body(self, c: str) -> bool:
        segment = self._segment  # one character per item
        segment.append(c)
        if c != ">" or len(segment) < len(_OPEN_TAG) + len(_CLOSE_TAG):
            return True
        if "".join(segment[-len(_CLOSE_TAG) :]) != _CLOSE_TAG:
            return True
        text = "".join(segment)
        inner = text[len(_OPEN_TAG) : -len(_CLOSE_TAG)].strip()
        call = read_call(inner, self._offered)
        if call is None:
            return False
        self._calls.append(_with_source(call, text))
        self._mode, self._segment, self._held_since = "between", [], None
        return True

    def _fence(self, c: str) -> bool:
        self._segment.append(c)
        if len(self._token) < 3:
            self._token += c
            return c == "`"
        if c == "\n":
            if self._token[3:].strip().lower() not in _FENCE_LANGS:
                return False
            self._mode = "fence-lead"
            return True
        self._token += c
        return c != "`" and len(self._token) <= 3 + 16

    def _json(self, c: str) -> bool:
        self._segment.append(c)
        if self._in_string:
            if self._escape:
                self._escape = False
            elif c == "\\":
                self._escape = True
            elif c == '"':
                self._in_string = False
            return True
        if c == '"':
            self._in_string = True
        elif c == "{" or c == "[":
            self._depth += 1
        elif c == "}" or c == "]":
            self._depth -= 1
            if self._depth == 0:
                text = "".join(self._segment)
                start = text.index("{")
                call = read_call(text[start:], self._offered)
                if call is None:
                    return False
                self._calls.append(_with_source(call, text.strip()))
                self._mode, self._held_since = "after-json", None
        return True


def _with_source(call: RecoveredCall, source: str) -> RecoveredCall:
    return RecoveredCall(name=call.name, arguments=call.arguments, source=source)
