"""``markdown_to_html``: the common Markdown subset as HTML, for saved notebooks.

Headings, paragraphs, emphasis, strikethrough, code spans and fences, lists (nested by
indentation), block quotes, pipe tables, links, images and rules — what model answers use. The
static rendering of a turn (``views.render``) needs HTML because nbconvert, nbviewer and GitHub
prefer ``text/html``, and no Markdown library is a dependency.

Safe by construction: every character of the input reaches the output HTML-escaped, raw HTML in the
input is shown as text, and link and image URLs are kept only for ``http``, ``https``, ``mailto``,
relative paths and ``data:image/…`` images (anything else leaves the Markdown source as text). Math
(``$…$``, ``$$…$$``, ``\\(…\\)``, ``\\[…\\]``) is copied through so the page's MathJax can typeset it.
"""

from __future__ import annotations

import re

from dsh_kernel.views.markdown import (
    ESCAPABLE,
    FENCE_OPEN,
    backtick_run,
    close_code,
    close_math,
    escape,
)

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_QUOTE = re.compile(r"^ {0,3}> ?(.*)$")
_ITEM = re.compile(r"^( {0,3})([-*+]|\d{1,9}[.)])([ \t]+|$)(.*)$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_SAFE_URL = re.compile(r"^(https?:|mailto:|#|/|\./|\.\./|[^:/?#]*([/?#]|$))", re.IGNORECASE)
_DATA_IMAGE = re.compile(r"^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*$")


def markdown_to_html(text: str) -> str:
    return _blocks(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))


def _starts_block(line: str) -> bool:
    return bool(
        _HEADING.match(line)
        or _RULE.match(line)
        or _QUOTE.match(line)
        or FENCE_OPEN.match(line.lstrip(" "))
        or _ITEM.match(line)
    )


def _blocks(lines: list[str]) -> str:
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        fm = FENCE_OPEN.match(stripped) if indent <= 3 else None
        if fm is not None:
            char, size = fm.group(1)[0], len(fm.group(1))
            lang = fm.group(2).strip().split(" ")[0] if fm.group(2).strip() else ""
            body: list[str] = []
            i += 1
            while i < len(lines):
                s = lines[i].strip()
                if s and set(s) == {char} and len(s) >= size:
                    i += 1
                    break
                body.append(lines[i])
                i += 1
            cls = f' class="language-{escape(lang)}"' if lang else ""
            out.append(f"<pre><code{cls}>{escape(chr(10).join(body))}</code></pre>")
            continue
        if indent >= 4:
            body = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith("    ")):
                body.append(lines[i][4:])
                i += 1
            out.append(f"<pre><code>{escape(chr(10).join(body).rstrip())}</code></pre>")
            continue
        if (h := _HEADING.match(line)) is not None:
            level = len(h.group(1))
            out.append(f"<h{level}>{_inline(h.group(2) or '')}</h{level}>")
            i += 1
            continue
        if _RULE.match(line):
            out.append("<hr>")
            i += 1
            continue
        if _QUOTE.match(line):
            quoted: list[str] = []
            while i < len(lines) and lines[i].strip():
                q = _QUOTE.match(lines[i])
                quoted.append(q.group(1) if q is not None else lines[i])
                i += 1
            out.append(f"<blockquote>{_blocks(quoted)}</blockquote>")
            continue
        if _ITEM.match(line):
            i = _list(lines, i, out)
            continue
        if "|" in line and i + 1 < len(lines) and _TABLE_SEP.match(lines[i + 1]):
            i = _table(lines, i, out)
            continue
        para: list[str] = []
        while i < len(lines) and lines[i].strip() and (not para or not _starts_block(lines[i])):
            para.append(lines[i])
            i += 1
        out.append(f"<p>{_inline(chr(10).join(para).strip())}</p>")
    return "\n".join(out)


def _list(lines: list[str], i: int, out: list[str]) -> int:
    first = _ITEM.match(lines[i])
    assert first is not None
    ordered = first.group(2)[0].isdigit()
    items: list[list[str]] = []
    loose = False
    while i < len(lines):
        m = _ITEM.match(lines[i])
        if m is None or m.group(2)[0].isdigit() != ordered:
            break
        width = len(m.group(1)) + len(m.group(2)) + max(1, min(len(m.group(3)), 4))
        item = [m.group(4)]
        i += 1
        while i < len(lines):
            line = lines[i]
            if not line.strip():
                nxt = lines[i + 1] if i + 1 < len(lines) else ""
                if nxt.startswith(" " * width) and nxt.strip():
                    item.append("")
                    loose = True
                    i += 1
                    continue
                nm = _ITEM.match(nxt)
                if nm is not None and nm.group(2)[0].isdigit() == ordered:
                    loose = True
                    i += 1
                break
            if line.startswith(" " * width):
                item.append(line[width:])
            elif _ITEM.match(line) or _starts_block(line):
                break
            else:
                item.append(line.strip())
            i += 1
        items.append(item)
    tag = "ol" if ordered else "ul"
    start = ""
    if ordered:
        number = int(first.group(2)[:-1])
        start = f' start="{number}"' if number != 1 else ""
    parts: list[str] = []
    for item in items:
        inner = _blocks(item)
        if not loose and inner.startswith("<p>") and inner.count("<p>") == 1:
            inner = inner[3:].replace("</p>", "", 1)
        parts.append(f"<li>{inner}</li>")
    out.append(f"<{tag}{start}>{''.join(parts)}</{tag}>")
    return i


def _cells(row: str) -> list[str]:
    row = row.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return [c.strip() for c in re.split(r"(?<!\\)\|", row)]


def _table(lines: list[str], i: int, out: list[str]) -> int:
    head = _cells(lines[i])
    aligns: list[str] = []
    for spec in _cells(lines[i + 1]):
        left, right = spec.startswith(":"), spec.endswith(":")
        aligns.append("center" if left and right else "right" if right else "left" if left else "")
    i += 2

    def cell(tag: str, text: str, k: int) -> str:
        align = aligns[k] if k < len(aligns) and aligns[k] else ""
        style = f' style="text-align: {align}"' if align else ""
        return f"<{tag}{style}>{_inline(text)}</{tag}>"

    rows = ["<tr>" + "".join(cell("th", c, k) for k, c in enumerate(head)) + "</tr>"]
    while i < len(lines) and lines[i].strip() and "|" in lines[i]:
        cells = _cells(lines[i])
        rows.append("<tr>" + "".join(cell("td", c, k) for k, c in enumerate(cells)) + "</tr>")
        i += 1
    out.append(f"<table><thead>{rows[0]}</thead><tbody>{''.join(rows[1:])}</tbody></table>")
    return i


def _safe_url(url: str, *, image: bool) -> str | None:
    cleaned = "".join(ch for ch in url if ch > " " and ch != "\x7f")
    if image and _DATA_IMAGE.match(cleaned):
        return cleaned
    return cleaned if _SAFE_URL.match(cleaned) else None


def _link_target(text: str, i: int) -> tuple[str, str, int] | None:
    """Parse ``(url "title")`` at ``text[i]``; return url, title and the index after it."""
    if i >= len(text) or text[i] != "(":
        return None
    j = text.find(")", i)
    if j < 0:
        return None
    inner = text[i + 1 : j].strip()
    url, _, rest = inner.partition(" ")
    title = rest.strip()
    if len(title) >= 2 and title[0] == title[-1] and title[0] in "\"'":
        title = title[1:-1]
    return url.strip("<>"), title, j + 1


def _find_closer(text: str, start: int, delim: str) -> int:
    i = start
    while (j := text.find(delim, i)) >= 0:
        closes = j > start and not text[j - 1].isspace() and text[j - 1] != "\\"
        after = text[j + len(delim) : j + len(delim) + 1]
        if closes and not (delim[0] == "_" and after.isalnum()):
            return j
        i = j + 1
    return -1


_SPECIAL = re.compile(r"[\\`$!\[*_~\n]|https?://")
_DELIM = re.compile(r"\*\*|__|~~|\*|_")
_AUTOLINK = re.compile(r"https?://[^\s<>\"'`]+[^\s<>\"'`.,;:!?)\]]")


def _inline(text: str) -> str:
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        m = _SPECIAL.search(text, i)
        start = m.start() if m is not None else n
        if start > i:
            out.append(escape(text[i:start]))  # plain text, in one piece
            i = start
            continue
        ch = text[i]
        if ch == "\\" and i + 1 < n and text[i + 1] == "\n":
            out.append("<br>\n")
            i += 2
        elif ch == "\\" and text.startswith(("\\(", "\\["), i):
            closer = "\\)" if text[i + 1] == "(" else "\\]"
            j = close_math(text, i + 2, closer)
            end = j + 2 if j >= 0 else i + 2
            out.append(escape(text[i:end]))
            i = end
        elif ch == "\\" and i + 1 < n and text[i + 1] in ESCAPABLE:
            out.append(escape(text[i + 1]))
            i += 2
        elif ch == "`":
            run = backtick_run(text, i)
            j = close_code(text, i + run, run)
            if j < 0:
                out.append(text[i : i + run])
                i += run
            else:
                content = text[i + run : j].replace("\n", " ")
                if len(content) > 2 and content[0] == content[-1] == " " and content.strip():
                    content = content[1:-1]
                out.append(f"<code>{escape(content)}</code>")
                i = j + run
        elif ch == "$":
            closer = "$$" if text.startswith("$$", i) else "$"
            j = close_math(text, i + len(closer), closer)
            end = j + len(closer) if j >= 0 else i + len(closer)
            out.append(escape(text[i:end]))
            i = end
        elif ch == "!" and text.startswith("![", i) and (k := text.find("](", i)) > 0:
            target = _link_target(text, k + 1)
            url = _safe_url(target[0], image=True) if target is not None else None
            alt = text[i + 2 : k]
            if target is not None and url is not None:
                title = f' title="{escape(target[1])}"' if target[1] else ""
                out.append(f'<img src="{escape(url)}" alt="{escape(alt)}"{title}>')
                i = target[2]
            else:
                out.append(escape("!["))
                i += 2
        elif ch == "[" and (k := text.find("](", i)) > 0 and "\n\n" not in text[i:k]:
            target = _link_target(text, k + 1)
            url = _safe_url(target[0], image=False) if target is not None else None
            if target is not None and url is not None:
                label = _inline(text[i + 1 : k])
                title = f' title="{escape(target[1])}"' if target[1] else ""
                out.append(f'<a href="{escape(url)}"{title}>{label}</a>')
                i = target[2]
            else:
                out.append("[")
                i += 1
        elif (
            ch in "*_~" and (m := _DELIM.match(text, i)) is not None and _opens(text, i, m.group(0))
        ):
            delim = m.group(0)
            j = _find_closer(text, i + len(delim), delim)
            if j < 0:
                out.append(escape(delim))
                i += len(delim)
            else:
                tag = {"**": "strong", "__": "strong", "~~": "del"}.get(delim, "em")
                out.append(f"<{tag}>{_inline(text[i + len(delim) : j])}</{tag}>")
                i = j + len(delim)
        elif (m := _AUTOLINK.match(text, i)) is not None and (i == 0 or not text[i - 1].isalnum()):
            url = m.group(0)
            out.append(f'<a href="{escape(url)}">{escape(url)}</a>')
            i += len(url)
        elif ch == "\n":
            hard = len(out) > 0 and text[max(0, i - 2) : i] == "  "
            out.append("<br>\n" if hard else "\n")
            i += 1
        else:
            out.append(escape(ch))
            i += 1
    return "".join(out)


def _opens(text: str, i: int, delim: str) -> bool:
    after = text[i + len(delim) : i + len(delim) + 1]
    if not after or after.isspace():
        return False
    # snake_case words are not emphasis
    return not (delim[0] == "_" and i > 0 and text[i - 1].isalnum())
