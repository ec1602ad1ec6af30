"""Markdown from the model, made safe for a renderer that trusts it, and cut for streaming.

**``safe_markdown(text)``** prepares model Markdown for a frontend renderer that trusts its input.
An ``Output`` widget renders its outputs as *trusted* (JupyterLab then neither sanitises the HTML
that Markdown lets through nor refuses ``<script>``), so model text must not be able to produce a
single raw HTML tag. The rule: no ``<`` reaches the renderer except inside a top-level fenced code
block, whose content every CommonMark renderer escapes.

* top-level fences (a line starting at column 0 with ```` ``` ```` or ``~~~``; a backtick fence's info
  string has no backtick) stay verbatim up to their closing fence or the end of the text;
* inside math (``$…$``, ``$$…$$``, ``\\(…\\)``, ``\\[…\\]``) ``<`` becomes ``\\lt `` (TeX), so MathJax
  still draws ``a < b``;
* a code span holding ``<`` becomes ``<code>…</code>`` written here, its content HTML-escaped and
  Markdown-escaped;
* every other ``<`` becomes ``&lt;``, which Markdown renders as the character;
* link targets and reference definitions with a scheme other than ``http``, ``https`` or
  ``mailto`` (``javascript:``, also hidden behind entities or backslashes) become ``#unsafe-link``
  — not every renderer refuses them (marked does not).

Where this guesses a construct differently from the renderer, the rules are arranged so that the
guess can only change how something looks (a literal ``\\lt`` or ``&lt;``), not let a tag through.

``markdown_to_html`` (the static HTML rendering, markdown-it-py configured) is in
``views.markdown_html``; it shares ``close_math`` with this module. ``split_segments`` cuts a streaming answer into independently rendered pieces.

``fence(text, lang)`` wraps any text in a fenced block that its content cannot close.
"""

from __future__ import annotations

import html
import itertools
import re

FENCE_OPEN = re.compile(r"^(`{3,}|~{3,})(.*)$")


def escape(text: str) -> str:
    """HTML-escape text for element content and quoted attribute values."""
    return html.escape(text, quote=True)


_LANG = re.compile(r"[A-Za-z0-9_+.#-]{1,40}")


def fence(text: str, lang: str = "") -> str:
    """A fenced code block holding ``text`` verbatim, with a fence longer than any run inside.

    ``lang`` (which may come from a tool's presenter) is kept only when it is a plain language name:
    a backtick or a line break in the info string would stop the line from opening a fence, and the
    content would render as Markdown."""
    longest = max((len(m.group(0)) for m in re.finditer(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    info = lang if _LANG.fullmatch(lang) else ""
    return f"{ticks}{info}\n{body}{ticks}"


def escape_inline_markdown(text: str) -> str:
    """Plain text for a Markdown line: every Markdown-active character backslash-escaped and ``<``
    written as an entity, so the text renders as itself (titles, file names, labels)."""
    out: list[str] = []
    for ch in text.replace("\n", " "):
        if ch == "<":
            out.append("&lt;")
        elif ch == "&":
            out.append("&amp;")
        elif ch in "\\`*_{}[]()#+-.!|~$>":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


# --- safe_markdown -----------------------------------------------------------------------------------


def safe_markdown(text: str, *, close_fence: bool = False) -> str:
    """See the module docstring. ``close_fence=True`` closes a fence the text left open, so the
    result can be embedded in a larger document without swallowing what follows."""
    out: list[str] = []
    prose: list[str] = []
    fence_char = ""
    fence_len = 0
    for line in text.split("\n"):
        if fence_char:
            out.append(line)
            if _may_close(line, fence_char, fence_len):
                fence_char = ""
            continue
        m = FENCE_OPEN.match(line)
        if m is not None and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            if prose:
                out.append(_neutralise(_defang_links("\n".join(prose))))
                prose = []
            fence_char, fence_len = m.group(1)[0], len(m.group(1))
            out.append(line)
            continue
        prose.append(line)
    if prose:
        out.append(_neutralise(_defang_links("\n".join(prose))))
    if fence_char and close_fence:
        out.append(fence_char * fence_len)
    return "\n".join(out)


def _may_close(line: str, char: str, size: int) -> bool:
    """Whether any common renderer could take ``line`` as the end of the fence: CommonMark wants
    only fence characters; marked also accepts a run of either kind after the opening sequence.
    Closing early is the safe mistake (what follows is then escaped)."""
    stripped = line.strip(" \t")
    indent = len(line) - len(line.lstrip(" "))
    return indent <= 3 and stripped.startswith(char * size) and not stripped.strip("`~ \t")


_LINK_DEST = re.compile(r"(\]\(\s*)(<[^>\n]*>|(?:[^\s()]|\([^\s()]*\))*)")
_REF_DEF = re.compile(r"^( {0,3}\[[^\]\n]+\]:[ \t]*\n?[ \t]*)(<[^>\n]*>|\S+)", re.MULTILINE)
_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*):")
_SAFE_SCHEMES = frozenset({"http", "https", "mailto"})


def unsafe_url(url: str) -> bool:
    """True for a link target with a scheme other than http, https or mailto (``javascript:``,
    also when hidden by entities, backslashes or control characters)."""
    u = html.unescape(url.strip("<>")).replace("\\", "")
    u = "".join(ch for ch in u if ch > " " and ch != "\x7f").lower()
    m = _SCHEME.match(u)
    return m is not None and m.group(1) not in _SAFE_SCHEMES


def _defang_links(text: str) -> str:
    """Point inline links and reference definitions with an unsafe scheme at ``#`` instead (a
    trusting renderer would otherwise make a ``javascript:`` link out of them)."""

    def fix(m: re.Match[str]) -> str:
        return m.group(1) + ("#unsafe-link" if unsafe_url(m.group(2)) else m.group(2))

    return _REF_DEF.sub(fix, _LINK_DEST.sub(fix, text))


def backtick_run(text: str, i: int) -> int:
    """How many backticks start at ``text[i]``."""
    j = i
    while j < len(text) and text[j] == "`":
        j += 1
    return j - i


def close_code(text: str, start: int, n: int) -> int:
    """Index of the backtick run of exactly ``n`` closing a code span opened before ``start``, or
    -1. Code spans do not cross a blank line."""
    i = start
    limit = text.find("\n\n", start)
    end = len(text) if limit < 0 else limit
    while i < end:
        if text[i] == "`":
            run = backtick_run(text, i)
            if run == n:
                return i
            i += run
        else:
            i += 1
    return -1


def close_math(text: str, start: int, closer: str) -> int:
    """Where ``closer`` ends the formula opened before ``start`` (``$`` stops at a blank line); -1 if not."""
    i = start
    limit = text.find("\n\n", start) if closer == "$" else -1
    end = len(text) if limit < 0 else limit
    while i < end:
        if text[i] == "\\":
            if text.startswith(closer, i) and closer.startswith("\\"):
                return i
            i += 2
            continue
        if text.startswith(closer, i):
            return i
        i += 1
    return -1


def _code_html(content: str) -> str:
    body = content.replace("\n", " ")
    if len(body) > 2 and body[0] == " " and body[-1] == " " and body.strip(" "):
        body = body[1:-1]
    out: list[str] = []
    for ch in body:
        if ch == "<":
            out.append("&lt;")
        elif ch == ">":
            out.append("&gt;")
        elif ch == "&":
            out.append("&amp;")
        elif ch in "\\`*_{}[]()!~|$":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "<code>" + "".join(out) + "</code>"


def _neutralise(text: str) -> str:
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if nxt in "([":
                closer = "\\)" if nxt == "(" else "\\]"
                j = close_math(text, i + 2, closer)
                if j >= 0:
                    out.append(text[i : j + 2].replace("<", "\\lt "))
                    i = j + 2
                    continue
            if nxt == "<":
                out.append("&lt;")
            else:
                out.append(text[i : i + 2])
            i += 2
            continue
        if ch == "`":
            run = backtick_run(text, i)
            j = close_code(text, i + run, run)
            if j < 0:
                out.append(text[i : i + run])
                i += run
                continue
            content = text[i + run : j]
            out.append(_code_html(content) if "<" in content else text[i : j + run])
            i = j + run
            continue
        if ch == "$":
            closer = "$$" if text.startswith("$$", i) else "$"
            j = close_math(text, i + len(closer), closer)
            if j >= 0:
                out.append(text[i : j + len(closer)].replace("<", "\\lt "))
                i = j + len(closer)
                continue
            out.append(closer)
            i += len(closer)
            continue
        out.append("&lt;" if ch == "<" else ch)
        i += 1
    return "".join(out)


# --- split_segments ------------------------------------------------------------------------------------

SEGMENT_CHARS = 2000
_LIST_MARK = re.compile(r"^([-*+]|\d{1,9}[.)])(\s|$)")


def split_segments(text: str, min_chars: int = SEGMENT_CHARS) -> list[str]:
    """Cut Markdown into pieces that render the same on their own: at a line that follows a blank
    line, outside fences and display math, that starts a new top-level block (not indented, not a
    list item, a quote or a table row), once the current piece has ``min_chars`` characters.

    The cuts are *prefix-stable*: a cut depends only on the text before it and the first character
    of its line, so the cuts of any prefix are exactly the cuts of the whole text that fall inside
    it. A streaming view can therefore freeze every piece but the last and resend only that one.
    """
    cuts = [0]
    pos = 0
    fence_char = ""
    fence_len = 0
    in_math = False
    prev_blank = False
    for line in text.split("\n"):
        start = pos
        pos += len(line) + 1
        if fence_char:
            stripped = line.strip(" ")
            if stripped and set(stripped) == {fence_char} and len(stripped) >= fence_len:
                fence_char = ""
            prev_blank = False
            continue
        m = FENCE_OPEN.match(line)
        if (
            prev_blank
            and not in_math
            and line
            and not line[0].isspace()
            and line[0] not in ">|"
            and not _LIST_MARK.match(line)
            and start - cuts[-1] >= min_chars
        ):
            cuts.append(start)
        if m is not None and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            fence_char, fence_len = m.group(1)[0], len(m.group(1))
        elif line.count("$$") % 2:
            in_math = not in_math
        prev_blank = not line.strip()
    cuts.append(len(text))
    return [text[a:b] for a, b in itertools.pairwise(cuts) if b > a] or [""]
