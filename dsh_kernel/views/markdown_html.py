"""``markdown_to_html``: model Markdown as HTML for the saved rendering of a turn, by markdown-it-py.

The static rendering (``views.render``) needs HTML because nbconvert, nbviewer and GitHub prefer
``text/html``. The parser is markdown-it-py (CommonMark) configured here; this module only states
our rules as its options:

* ``html=False``: raw HTML in the input is text (escaped), never markup;
* tables and strikethrough on (off in its ``commonmark`` preset; ``~~…~~`` is written ``<del>``, as
  GFM does), typographer off, and linkify off: a bare ``https://…`` stays text (making it a link
  needs linkify-it-py, one more dependency; ``[text](url)`` and ``<url>`` are links);
* ``validateLink`` is our allowlist: ``http``, ``https``, ``mailto``, in-page anchors, relative
  paths, and ``data:image/(png|jpeg|gif|webp);base64`` (markdown-it's own rule for data URIs; the
  hook cannot tell a link from an image, so such a URL is allowed for both — the old renderer
  allowed it for images only). A link or image whose URL fails is not made: its source stays text;
* math (``$…$``, ``$$…$$``, ``\\(…\\)``, ``\\[…\\]``) is one inline rule that copies the source
  through as text (escaped, not parsed as emphasis or escapes), so the page's MathJax can typeset it.
  Where a formula ends is decided by ``close_math``, the scanner ``safe_markdown`` uses too.

Code blocks (fenced and indented) are drawn by one render rule of ours, so the saved rendering can
give them their look (``pre_attrs``, ``code_style``). Everything that reaches the output is escaped
by markdown-it's renderer (``&``, ``<``, ``>``, ``"``); attributes are always double-quoted. The
parser is built on first use: importing this module costs nothing at kernel start.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING

from dsh_kernel.views.markdown import close_math

if TYPE_CHECKING:
    from collections.abc import Sequence

    from markdown_it import MarkdownIt
    from markdown_it.renderer import RendererHTML
    from markdown_it.rules_inline import StateInline
    from markdown_it.token import Token
    from markdown_it.utils import EnvType, OptionsDict

_SAFE_URL = re.compile(r"^(https?:|mailto:|#|/|\./|\.\./|[^:/?#]*([/?#]|$))", re.IGNORECASE)
_DATA_IMAGE = re.compile(r"^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=%]*$", re.IGNORECASE)


def markdown_to_html(text: str, *, pre_attrs: str = "", code_style: str = "") -> str:
    """``text`` as HTML. ``pre_attrs`` (our own markup, not escaped) goes on every code block's
    ``<pre>`` and ``code_style`` (escaped) on its ``<code>``: the saved rendering styles code
    blocks like the live view's."""
    env = {"pre_attrs": pre_attrs, "code_style": code_style}
    return _parser().render(text, env).rstrip("\n")


def safe_link(url: str) -> bool:
    """Our link and image URL allowlist (markdown-it's ``validateLink``; it gets the URL with
    entities decoded and percent-encoded by ``normalizeLink``)."""
    cleaned = "".join(ch for ch in url if ch > " " and ch != "\x7f")
    return bool(_SAFE_URL.match(cleaned) or _DATA_IMAGE.match(cleaned))


def _code_block(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """Fenced and indented code: ``<pre{pre_attrs}><code class="language-…">``, content escaped."""
    from markdown_it.common.utils import escapeHtml, unescapeAll

    del self, options
    token = tokens[idx]
    info = unescapeAll(token.info).strip().split()
    lang = f' class="language-{escapeHtml(info[0])}"' if info else ""
    pre = env.get("pre_attrs", "")
    code_style = env.get("code_style", "")
    css = f' style="{escapeHtml(code_style)}"' if code_style else ""
    return f"<pre{pre}><code{lang}{css}>{escapeHtml(token.content)}</code></pre>\n"


def _math(state: StateInline, silent: bool) -> bool:
    src, pos = state.src, state.pos
    if src.startswith(("\\(", "\\["), pos):
        closer = "\\)" if src[pos + 1] == "(" else "\\]"
        opener = 2
    elif src[pos] == "$":
        closer = "$$" if src.startswith("$$", pos) else "$"
        opener = len(closer)
    else:
        return False
    end = close_math(src[: state.posMax], pos + opener, closer)
    if end < 0:
        return False
    if not silent:
        token = state.push("text", "", 0)
        token.content = src[pos : end + len(closer)]
    state.pos = end + len(closer)
    return True


@cache
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    md = MarkdownIt(
        "commonmark",
        {"html": False, "xhtmlOut": False, "linkify": False, "typographer": False},
    ).enable(["table", "strikethrough"])
    md.validateLink = safe_link
    md.inline.ruler.before("escape", "math", _math)
    # GFM's element for ``~~…~~`` (markdown-it writes ``<s>``): the same look, the same DOM as before.
    md.add_render_rule("s_open", lambda *_: "<del>")
    md.add_render_rule("s_close", lambda *_: "</del>")
    md.add_render_rule("fence", _code_block)
    md.add_render_rule("code_block", _code_block)
    return md
