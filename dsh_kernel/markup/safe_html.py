"""The one way outside text becomes markup: Markdown to inert HTML, made by the kernel.

Whatever a model, a tool, a frontend, a journal or a server wrote reaches the page only through this
module. JupyterLab trusts a widget's outputs (raw HTML in them is not sanitised, event handlers run,
and text is typeset by MathJax, which can load files), so nothing from outside is ever handed to the
frontend as Markdown, LaTeX or HTML for it to interpret. Instead:

* **Markdown** is parsed here by markdown-it-py (CommonMark, tables and strikethrough) with raw HTML
  off, so ``<img onerror=…>`` is text; link targets pass ``safe_url`` (``http``, ``https``,
  ``mailto``, in-page anchors and relative paths — markdown-it then refuses ``javascript:`` however
  it is encoded); an image is never loaded from a URL (a link to it is drawn instead: a model that
  reads a hostile page must not be able to make the page fetch ``https://…/?secret``), only a
  ``data:image/png|jpeg|gif|webp`` one is shown. Math (``$…$``, ``$$…$$``, ``\\(…\\)``, ``\\[…\\]``) is
  shown as its TeX source in a ``<code class="dsh-math">``; code blocks are highlighted here by
  Pygments (a few token classes, coloured by the theme's editor colours where the page has them).
* **Every** HTML string this module returns then passes ``sanitize``: nh3 (ammonia) with an
  allowlist of tags, attributes, URL schemes and CSS properties. A slip in the parser or in our
  own markup still cannot yield a script, an event attribute, a form, an iframe, an SVG or a style
  that loads a URL. The output carries ``mathjax_ignore`` (and MathJax 2's ``tex2jax_ignore``) on
  its container so a page that typesets HTML outputs leaves our text alone.
* **The Markdown alternative** of a saved turn (``markdown_alternative``: nbconvert, GitHub and a
  console read it) escapes every HTML-significant character of outside text: ``<`` and ``&`` are
  entities everywhere, code blocks are written as ``<pre><code>`` with entity-escaped content
  (a renderer that finds fences somewhere else than we do still sees no tag), ``$`` is ``\\$``. The
  only tags in it are our own, written here.

The live view and the saved rendering call the same functions, so what streams is what is saved;
styles are inline (``markup.static_style`` explains why: they survive a saved notebook's sanitiser).
``docs/security.md`` states the boundary this module is one side of. Parsers are built on first use.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Final

from dsh_kernel.markup.static_style import attrs, style

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.renderer import RendererHTML
    from markdown_it.rules_inline import StateInline
    from markdown_it.token import Token
    from markdown_it.utils import EnvType, OptionsDict

__all__ = [
    "ALLOWED_TAGS",
    "code_html",
    "escape",
    "inline_markdown_text",
    "markdown_alternative",
    "markdown_code",
    "markdown_html",
    "safe_url",
    "sanitize",
    "text_html",
]

NO_MATH: Final = "mathjax_ignore tex2jax_ignore"
"""Container classes MathJax 3 (JupyterLab) and MathJax 2 (nbconvert, nbviewer) skip."""

HIGHLIGHT_MAX: Final = 20_000
"""Code longer than this (characters) is shown plain: highlighting costs markup per token."""

ALLOWED_TAGS: Final = frozenset(
    {
        "a", "b", "blockquote", "br", "code", "del", "details", "div", "em", "h1", "h2", "h3",
        "h4", "h5", "h6", "hr", "i", "img", "li", "ol", "p", "pre", "s", "small", "span",
        "strong", "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul",
    }
)  # fmt: skip
_ATTRIBUTES: Final = {
    "*": {"class", "style", "title"},
    "a": {"href"},
    "img": {"src", "alt"},
    "ol": {"start"},
    "details": {"open"},
}
_STYLE_PROPERTIES: Final = frozenset(
    {
        "align-items", "background", "background-color", "border", "border-color", "border-left",
        "border-left-color", "border-radius", "color", "cursor", "display", "flex-wrap", "font-family",
        "font-size", "font-style", "font-weight", "gap", "line-height", "margin", "margin-top",
        "max-height", "max-width", "overflow", "overflow-wrap", "padding", "text-align",
        "white-space", "word-break",
    }
)  # fmt: skip
# A declaration value that could fetch or hide something: url(), image-set(), CSS escapes, imports.
_STYLE_FETCH: Final = re.compile(r"url\s*\(|image|expression|\\|@|/\*", re.IGNORECASE)
_SAFE_URL: Final = re.compile(r"^(?!//)(https?:|mailto:|#|/|\./|\.\./|[^:/?#]*([/?#]|$))", re.I)
_DATA_IMAGE: Final = re.compile(r"^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=]*$", re.I)


def escape(text: str) -> str:
    """Text as HTML element content or a double-quoted attribute value."""
    return html.escape(text, quote=True)


def _content(text: str) -> str:
    """Text as element content (quotes need no escaping there; attributes use ``escape``)."""
    return html.escape(text, quote=False)


def safe_url(url: str) -> bool:
    """Whether a link may point at ``url``: ``http``, ``https``, ``mailto``, an in-page anchor or a
    relative path (control characters and blanks, which browsers drop, are dropped first)."""
    cleaned = "".join(ch for ch in url if ch > " " and ch != "\x7f")
    return bool(_SAFE_URL.match(cleaned))


def _image_src(url: str) -> bool:
    return bool(_DATA_IMAGE.match(url))


def _attribute_filter(tag: str, attr: str, value: str) -> str | None:
    if attr == "href":
        return value if safe_url(value) else None
    if attr == "src":
        return value if tag == "img" and _image_src(value) else None
    if attr == "style":
        return _clean_style(value)
    return value


def _clean_style(value: str) -> str | None:
    """Only allowlisted properties, and no value that could fetch (``url()``, ``image-set()``) or hide
    something (CSS escapes, comments, at-rules). Our own declarations never hold a ``;`` inside."""
    kept: list[str] = []
    for declaration in value.split(";"):
        prop, sep, val = declaration.partition(":")
        prop = prop.strip().lower()
        if not sep or prop not in _STYLE_PROPERTIES or _STYLE_FETCH.search(val):
            continue
        kept.append(f"{prop}: {val.strip()}")
    return "; ".join(kept) or None


def sanitize(markup: str) -> str:
    """``markup`` reduced to the allowlist (tags, attributes, URLs, CSS properties); see the module
    docstring. Idempotent, and applied to everything this module returns."""
    import nh3

    return nh3.clean(
        markup,
        tags=set(ALLOWED_TAGS),
        clean_content_tags={"script", "style"},
        attributes={k: set(v) for k, v in _ATTRIBUTES.items()},
        attribute_filter=_attribute_filter,
        url_schemes={"http", "https", "mailto", "data"},
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


# --- plain text and code -------------------------------------------------------------------------

_PRE: Final = attrs("dsh-code")
_CODE: Final = style("dsh-code-text")

# Pygments token types → (class suffix, plain colour, JupyterLab editor variable, extra CSS).
_TOKEN_LOOKS: Final = (
    ("Comment", "c", "#408080", "--jp-mirror-editor-comment-color", "font-style: italic"),
    ("Keyword", "k", "#008000", "--jp-mirror-editor-keyword-color", "font-weight: bold"),
    ("Operator.Word", "k", "#008000", "--jp-mirror-editor-keyword-color", "font-weight: bold"),
    ("Literal.String", "s", "#ba2121", "--jp-mirror-editor-string-color", ""),
    ("Literal.Number", "m", "#008800", "--jp-mirror-editor-number-color", ""),
    ("Name.Builtin", "b", "#008000", "--jp-mirror-editor-builtin-color", ""),
    ("Name.Function", "f", "#0000ff", "--jp-mirror-editor-def-color", ""),
    ("Name.Class", "f", "#0000ff", "--jp-mirror-editor-def-color", ""),
    ("Name.Decorator", "f", "#aa22ff", "--jp-mirror-editor-meta-color", ""),
    ("Operator", "o", "#aa22ff", "--jp-mirror-editor-operator-color", ""),
)


@cache
def _token_span(token_type: str) -> str | None:
    """The opening ``<span …>`` for a Pygments token type, or ``None`` to leave it plain."""
    for prefix, suffix, plain, var, extra in _TOKEN_LOOKS:
        if token_type == prefix or token_type.startswith(prefix + "."):
            css = f"color: {plain}; color: var({var}, {plain})" + (f"; {extra}" if extra else "")
            return f'<span class="dsh-hl-{suffix}" style="{css}">'
    return None


def _highlighted(code: str, lang: str) -> str | None:
    """``code`` as escaped HTML with token spans, or ``None`` when ``lang`` is unknown or the code
    is long (Pygments' lexers are regular expressions over text: data, never markup)."""
    if not lang or len(code) > HIGHLIGHT_MAX:
        return None
    from pygments.lexers import get_lexer_by_name  # pyright: ignore[reportUnknownVariableType]
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_by_name(lang, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None
    out: list[str] = []
    run_span: str | None = None
    run: list[str] = []
    for token_type, value in lexer.get_tokens(code):
        span = _token_span(str(token_type)[6:]) if value.strip() else run_span  # drop "Token."
        if span != run_span:
            out.append(_span(run_span, "".join(run)))
            run_span, run = span, []
        run.append(value)
    out.append(_span(run_span, "".join(run)))
    return "".join(out)


def _span(span: str | None, text: str) -> str:
    """A run of same-coloured tokens (whitespace joins the run it sits in)."""
    if not text:
        return ""
    return f"{span}{_content(text)}</span>" if span else _content(text)


_LANG: Final = re.compile(r"[A-Za-z0-9_+.#-]{1,40}")


def _code_block(code: str, lang: str) -> str:
    """Unsanitised: callers sanitise the document they build."""
    lang = lang if _LANG.fullmatch(lang) else ""
    body = _highlighted(code, lang.lower()) if lang else None
    cls = f' class="language-{escape(lang)}"' if lang else ""
    return f'<pre{_PRE}><code{cls} style="{_CODE}">{body if body is not None else _content(code)}</code></pre>'


def code_html(code: str, lang: str = "") -> str:
    """``code`` in a code block, highlighted when ``lang`` names a language Pygments knows."""
    return sanitize(_code_block(code, lang))


def text_html(text: str) -> str:
    """Plain text as a preformatted block (tool results, stdout): every character shown as itself."""
    return sanitize(_code_block(text, ""))


# --- Markdown to HTML ----------------------------------------------------------------------------


MAX_FORMULA: Final = 2_000
"""Characters a formula may span: a closer further on is not looked for (an answer of 20,000
unclosed ``\\(`` must not cost a scan to its end for each)."""


def close_math(text: str, start: int, closer: str, end: int | None = None) -> int:
    """Where ``closer`` ends the formula opened before ``start`` (``$`` stops at a blank line; a
    closer after an odd run of backslashes is escaped), searching up to ``end``; -1 if not."""
    stop = len(text) if end is None else end
    if closer == "$":
        blank = text.find("\n\n", start, stop)
        stop = blank if blank >= 0 else stop
    i = text.find(closer, start, stop)
    while i >= 0:
        j = i
        while j > start and text[j - 1] == "\\":
            j -= 1
        if (i - j) % 2 == 0:
            return i
        i = text.find(closer, i + 1, stop)
    return -1


def _dollar_closer(src: str, start: int, end: int, bound: int) -> int:
    """Where a single-``$`` formula opened before ``start`` ends, given ``close_math``'s first
    candidate ``end``; -1 when it is no formula. Pandoc's rule, so prices stay text (``$5 and $6``):
    the opening ``$`` is followed by a non-space, and the closing one follows a non-space and is not
    followed by a digit (a later ``$`` may close instead)."""
    if start >= len(src) or src[start].isspace():
        return -1
    while end >= 0:
        after = end + 1
        if not src[end - 1].isspace() and not (after < len(src) and src[after].isdigit()):
            return end
        end = close_math(src, after, "$", bound)
    return -1


def _math(state: StateInline, silent: bool) -> bool:
    """An inline rule: a formula is one token whose source is shown as it is (never typeset)."""
    src, pos = state.src, state.pos
    if src.startswith(("\\(", "\\["), pos):
        closer = "\\)" if src[pos + 1] == "(" else "\\]"
        opener = 2
    elif src[pos] == "$":
        closer = "$$" if src.startswith("$$", pos) else "$"
        opener = len(closer)
    else:
        return False
    bound = min(state.posMax, pos + opener + MAX_FORMULA)
    end = close_math(src, pos + opener, closer, bound)
    if closer == "$":
        end = _dollar_closer(src, pos + 1, end, bound)
    if end < 0 or end == pos + opener:
        return False
    if not silent:
        token = state.push("math_inline", "code", 0)
        token.content = src[pos : end + len(closer)]
    state.pos = end + len(closer)
    return True


def _render_math(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    del self, options, env
    return f'<code class="dsh-math">{escape(tokens[idx].content)}</code>'


def _render_code(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    del self, options, env
    token = tokens[idx]
    info = html.unescape(token.info).strip().split()
    return _code_block(token.content, info[0] if info else "") + "\n"


def _render_image(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """A ``data:`` raster image is shown; any other image becomes a link to it (no request)."""
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env)
    src = str(token.attrGet("src") or "")
    if _image_src(src):
        return f'<img src="{escape(src)}" alt="{escape(alt)}" style="max-width: 100%">'
    label = escape(f"🖼 {alt or 'image'}")
    if safe_url(src):
        return f'<a href="{escape(src)}" class="dsh-image-link">{label}</a>'
    return label


@cache
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    md = MarkdownIt(
        "commonmark",
        {"html": False, "xhtmlOut": False, "linkify": False, "typographer": False},
    ).enable(["table", "strikethrough"])
    md.validateLink = lambda url: safe_url(url) or _image_src(url)
    md.inline.ruler.before("escape", "math", _math)
    md.add_render_rule("math_inline", _render_math)
    md.add_render_rule("fence", _render_code)
    md.add_render_rule("code_block", _render_code)
    md.add_render_rule("image", _render_image)
    md.add_render_rule("s_open", lambda *_: "<del>")
    md.add_render_rule("s_close", lambda *_: "</del>")
    return md


def markdown_html(text: str) -> str:
    """Markdown from outside as sanitised HTML in a container no typesetter touches."""
    body = _parser().render(text).rstrip("\n")
    return sanitize(f'<div class="dsh-md {NO_MATH}">{body}</div>')


# --- the Markdown alternative ---------------------------------------------------------------------

_CODE_SPAN: Final = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)


def _escape_prose(text: str) -> str:
    """Prose lines for the Markdown alternative: ``&``, ``<`` as entities, ``$`` as ``\\$``, the colon
    of ``javascript:`` and ``vbscript:`` anywhere, and of any scheme but ``http``, ``https`` and
    ``mailto`` starting a link destination, as ``∶`` (another renderer may link what markdown-it
    does not), ``![`` as ``!\\[`` (an image would be fetched: it stays text); a code
    span holding ``<`` or ``&`` becomes our own ``<code>`` with its content entity-escaped (an
    entity inside a code span would show as itself)."""
    out: list[str] = []
    pos = 0
    for m in _CODE_SPAN.finditer(text):
        out.append(_escape_chars(text[pos : m.start()]))
        content = m.group(2)
        if "<" in content or "&" in content:
            out.append("<code>" + _content(content) + "</code>")
        else:
            out.append(m.group(0))
        pos = m.end()
    out.append(_escape_chars(text[pos:]))
    return "".join(out)


# A script scheme, however spaced out by characters a browser drops from a URL.
_GAP = r"[\x00-\x20\x7f]*"
_SCRIPT_SCHEME: Final = re.compile(
    "(?i)(?<![a-z0-9+.-])("
    + "|".join(_GAP.join(word) for word in ("javascript", "vbscript"))
    + f"){_GAP}:"
)


# A link destination (inline, or a reference definition's) that starts with a scheme.
_DEST_SCHEME: Final = re.compile(r"(\]\(\s*(?:&lt;)?|\]:\s*(?:&lt;)?)([a-z][a-z0-9+.-]*):", re.I)


def _dest_colon(m: re.Match[str]) -> str:
    safe = m.group(2).lower() in ("http", "https", "mailto")
    return m.group(0) if safe else f"{m.group(1)}{m.group(2)}\u2236"


def _escape_chars(text: str) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace("$", "\\$").replace("![", "!\\[")
    # The colon of a script scheme becomes U+2236: the word still reads, no renderer links it.
    text = _DEST_SCHEME.sub(_dest_colon, text)
    return _SCRIPT_SCHEME.sub(lambda m: m.group(1) + "\u2236", text)


def markdown_alternative(text: str) -> str:
    """Markdown from outside as Markdown that no renderer can turn into HTML: its formatting kept,
    every ``<`` and ``&`` of it an entity, top-level code blocks as entity-escaped ``<pre><code>``."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[str] = []
    done = 0
    for token in _parser().parse("\n".join(lines)):
        if token.level != 0 or token.map is None or token.type not in ("fence", "code_block"):
            continue
        start, end = token.map
        if start > done:
            out.append(_escape_prose("\n".join(lines[done:start])))
        out.append(markdown_code(token.content))
        done = end
    if done < len(lines):
        out.append(_escape_prose("\n".join(lines[done:])))
    return "\n".join(out)


def markdown_code(text: str) -> str:
    """Code or output text for the Markdown alternative: an HTML ``<pre>`` block (CommonMark's kind
    that blank lines do not end) with the text entity-escaped, so no reading of fences matters."""
    return f"<pre><code>{_content(text.rstrip(chr(10)))}</code></pre>"


def inline_markdown_text(text: str) -> str:
    """Plain text for one Markdown line (titles, names, labels): every Markdown-active character
    backslash-escaped and ``<``, ``&`` entities, so it renders as itself."""
    out: list[str] = []
    for ch in text.replace("\r", " ").replace("\n", " "):
        if ch == "<":
            out.append("&lt;")
        elif ch == "&":
            out.append("&amp;")
        elif ch in "\\`*_{}[]()#+-.!|~$>":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)
