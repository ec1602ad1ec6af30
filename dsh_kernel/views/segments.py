"""Cutting a streaming answer into Markdown pieces that render the same on their own.

The live view renders each piece to HTML separately (``markup.safe_html.markdown_html``) and, while
the answer grows, renders and sends again only the last piece: a long answer costs the same per
redraw at its end as at its start.
"""

from __future__ import annotations

import itertools
import re

FENCE_OPEN = re.compile(r"^(`{3,}|~{3,})(.*)$")

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
