"""The one renderer of outside text (``markup.safe_html``): Markdown to inert HTML, the Markdown
alternative, and the hostile corpus (``tests/data/hostile-markdown.json``) through both."""

from __future__ import annotations

import itertools
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from dsh_kernel.markup.safe_html import (
    ALLOWED_TAGS,
    code_html,
    inline_markdown_text,
    markdown_alternative,
    markdown_code,
    markdown_html,
    sanitize,
    text_html,
)
from dsh_kernel.views import _ipw
from dsh_kernel.views.segments import split_segments

CORPUS = json.loads(
    (Path(__file__).parents[2] / "data" / "hostile-markdown.json").read_text(encoding="utf-8")
)
IDS = [c["name"] for c in CORPUS]

TOKENS = [
    *"<>/\"'&`*_[]()!:$\\~|#-=.\n\r\t ab1",
    "javascript:",
    "JaVa\tScRipt:",
    "&#106;",
    "%3A",
    "data:text/html,",
    "data:image/png;base64,AAAA",
    "img",
    "svg",
    "script",
    "style",
    "iframe",
    "onerror=",
    "url(",
    "```",
    "~~~",
    "\\begin{x}",
    "\\end{x}",
    "\\[",
    "\\]",
    "$$",
    "    ",
    "> ",
    "- ",
    "[a]: ",
    "[a]",
    "![i](",
    "http://127.0.0.1/",
]
NASTY = st.one_of(
    st.lists(st.sampled_from(TOKENS), max_size=60).map("".join),
    st.sampled_from([c["text"] for c in CORPUS]).flatmap(
        lambda t: st.tuples(st.just(t), st.integers(0, len(t)), st.sampled_from(TOKENS)).map(
            lambda x: x[0][: x[1]] + x[2] + x[0][x[1] :]
        )
    ),
)

ALLOWED_ATTRS = {"class", "style", "title", "href", "src", "alt", "start", "open", "rel"}
SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*):", re.IGNORECASE)
SAFE_SRC = re.compile(r"^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=]*$", re.IGNORECASE)


class _Check(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ALLOWED_TAGS:
            self.problems.append(f"tag {tag}")
        for name, value in attrs:
            v = value or ""
            if name not in ALLOWED_ATTRS:
                self.problems.append(f"attribute {name} on {tag}")
            scheme = SCHEME.match("".join(c for c in v if c > " " and c != "\x7f"))
            if name == "href" and scheme and scheme[1].lower() not in ("http", "https", "mailto"):
                self.problems.append(f"href {v!r}")
            if name == "src" and not (tag == "img" and SAFE_SRC.match(v)):
                self.problems.append(f"src {v!r}")
            if name == "style" and re.search(r"url\s*\(|image|expression|\\|@", v, re.I):
                self.problems.append(f"style {v!r}")

    handle_startendtag = handle_starttag

    def handle_comment(self, data: str) -> None:
        self.problems.append("comment")

    def handle_decl(self, decl: str) -> None:
        self.problems.append(f"declaration {decl}")

    def unknown_decl(self, data: str) -> None:
        self.problems.append(f"declaration {data}")


def check_html(html: str) -> None:
    """Only allowlisted tags and attributes; links http, https, mailto or relative (no scheme as a
    browser reads one: a letter, then letters, digits, ``+-.``, then ``:``); images
    only checked raster data URIs; no style that fetches."""
    parser = _Check()
    parser.feed(html)
    parser.close()
    assert not parser.problems, (parser.problems, html)


# --- Markdown to HTML ----------------------------------------------------------------------------


@pytest.mark.parametrize("case", CORPUS, ids=IDS)
def test_the_hostile_corpus_renders_inert(case: dict[str, str]) -> None:
    html = markdown_html(case["text"])
    check_html(html)
    assert "mathjax_ignore" in html


@settings(max_examples=400)
@given(NASTY)
def test_any_text_renders_to_allowlisted_html_only(text: str) -> None:
    check_html(markdown_html(text))


@settings(max_examples=200)
@given(NASTY, st.sampled_from(["python", "json", "sql", "", 'py"><img src=x onerror=1>']))
def test_code_and_text_blocks_are_allowlisted_html_only(text: str, lang: str) -> None:
    check_html(code_html(text, lang))
    check_html(text_html(text))


def test_common_markdown_converts() -> None:
    html = markdown_html(
        "# Title\n\nSome **bold**, *em*, ~~gone~~, `code` and [a link](https://x.org/?a=1&b=2).\n\n"
        "- one\n- two\n\n> quoted\n\n| a | b |\n|---|:-:|\n| 1 | 2 |\n\n---\n\nsnake_case_name"
    )
    for fragment in (
        "<h1>Title</h1>",
        "<strong>bold</strong>",
        "<em>em</em>",
        "<del>gone</del>",
        "<code>code</code>",
        '<a href="https://x.org/?a=1&amp;b=2" rel="noopener noreferrer nofollow">a link</a>',
        "<li>one</li>",
        "<blockquote>",
        '<th style="text-align: center">b</th>',
        "<hr>",
        "snake_case_name",
    ):
        assert fragment in html, (fragment, html)


def test_raw_html_is_text_and_script_links_are_not_links() -> None:
    html = markdown_html("<b>x</b> [a](javascript:alert(1)) [b](docs/a.md) [c](mailto:a@b.c)")
    assert "&lt;b&gt;x&lt;/b&gt;" in html
    assert 'href="javascript' not in html
    assert '<a href="docs/a.md"' in html and '<a href="mailto:a@b.c"' in html


def test_math_is_shown_as_its_tex_source_never_typeset() -> None:
    html = markdown_html("$a*b*c$ and $$x_1 * y_2$$ and \\(p_1\\) and \\[r<s\\] but *em*")
    assert '<code class="dsh-math">$a*b*c$</code>' in html
    assert '<code class="dsh-math">$$x_1 * y_2$$</code>' in html
    assert '<code class="dsh-math">\\[r&lt;s\\]</code>' in html
    assert "<em>em</em>" in html
    assert html.startswith('<div class="dsh-md mathjax_ignore tex2jax_ignore">')


def test_images_load_nothing_from_a_url() -> None:
    html = markdown_html(
        "![chart](https://example.org/c.png) ![local](plot.png) ![d](data:image/png;base64,AAAA)"
    )
    assert '<img src="data:image/png;base64,AAAA" alt="d"' in html
    assert html.count("<img") == 1
    assert '<a href="https://example.org/c.png" class="dsh-image-link"' in html
    assert "🖼 chart" in html and "🖼 local" in html


def test_code_blocks_are_highlighted_with_inline_theme_colours() -> None:
    html = markdown_html("```python\nimport os  # note\nx = '<b>'\n```")
    assert 'class="language-python"' in html
    assert "color: var(--jp-mirror-editor-keyword-color, #008000)" in html
    assert "&lt;b&gt;" in html and "<b>" not in html
    plain = code_html("x" * 30_000, "python")
    assert "dsh-hl" not in plain  # too long to highlight: shown plain


def test_sanitize_drops_what_our_own_markup_must_never_carry() -> None:
    dirty = (
        '<div style="color: red; background: url(http://x/y); position: fixed" onclick="x">a</div>'
        '<a href="javascript:x">j</a><img src="http://x/t.png"><svg><script>1</script></svg>'
        "<style>*{}</style><form><input></form><iframe></iframe>"
    )
    clean = sanitize(dirty)
    assert (
        clean == '<div style="color: red">a</div><a rel="noopener noreferrer nofollow">j</a><img>'
    )


def test_an_html_widget_sanitises_whatever_is_assigned() -> None:
    widget = _ipw.HTML(value="<img src=x onerror=alert(1)><b>ok</b>")
    assert widget.value == "<img><b>ok</b>"
    widget.value = "<script>alert(1)</script>"
    assert widget.value == ""


# --- the Markdown alternative ----------------------------------------------------------------------

OUR_TAGS = re.compile(r"</?(pre|code)>")


def _trusting_render(markdown: str) -> str:
    """What a renderer that lets raw HTML through makes of it (marked in JupyterLab does)."""
    return (
        MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(markdown)
    )


@pytest.mark.parametrize("case", CORPUS, ids=IDS)
def test_the_markdown_alternative_of_the_corpus_holds_no_tag_of_its_own(
    case: dict[str, str],
) -> None:
    alt = markdown_alternative(case["text"])
    assert "<" not in OUR_TAGS.sub("", alt), alt
    check_html(_trusting_render(alt))


@settings(max_examples=300)
@given(NASTY)
def test_the_markdown_alternative_never_yields_html_in_a_trusting_renderer(text: str) -> None:
    alt = markdown_alternative(text)
    assert "<" not in OUR_TAGS.sub("", alt), alt
    check_html(_trusting_render(alt))


def test_the_markdown_alternative_keeps_the_formatting() -> None:
    alt = markdown_alternative(
        "**Bold** a<b & `x<y` and `plain`\n\n```python\nif a < b:\n\n    pass\n```\nafter $5"
    )
    assert alt == (
        "**Bold** a&lt;b &amp; <code>x&lt;y</code> and `plain`\n\n"
        "<pre><code>if a &lt; b:\n\n    pass</code></pre>\nafter \\$5"
    )
    assert markdown_alternative("[x](javascript:alert(1))") == "[x](javascript∶alert(1))"
    assert markdown_code("</pre><script>") == "<pre><code>&lt;/pre&gt;&lt;script&gt;</code></pre>"


def test_inline_markdown_text_renders_as_itself() -> None:
    assert inline_markdown_text("a_b *c* <d> [e](f)") == "a\\_b \\*c\\* &lt;d\\> \\[e\\]\\(f\\)"


# --- split_segments ------------------------------------------------------------------------------

BLOCKY = st.lists(
    st.sampled_from(
        [
            "word " * 9,
            "```\ncode\n\nmore\n```",
            "- item\n- item",
            "$$\na\n\nb\n$$",
            "> q",
            "  x",
            "",
        ]
    ),
    max_size=40,
).map("\n\n".join)


@settings(max_examples=200)
@given(BLOCKY, st.integers(min_value=1, max_value=80))
def test_segments_are_prefix_stable(text: str, min_chars: int) -> None:
    full = split_segments(text, min_chars)
    assert "".join(full) == text
    cuts = set(itertools.accumulate(len(s) for s in full))
    for n in range(len(text) + 1):
        part = split_segments(text[:n], min_chars)
        assert "".join(part) == text[:n]
        prefix_cuts = list(itertools.accumulate(len(s) for s in part))[:-1]
        assert all(c in cuts for c in prefix_cuts)  # a cut never moves or disappears
        assert {c for c in cuts if c < n} <= set(prefix_cuts) | {n}


def test_a_dollar_amount_is_text_not_a_formula() -> None:
    for prose in ("It costs $5 and $6 today.", "From $ 5 to $10.", "Pay $20,000 or $30,000."):
        html = markdown_html(prose)
        assert "dsh-math" not in html and "$" in html, html
    html = markdown_html("Both $x$ and $y_1$ cost $5.")
    assert '<code class="dsh-math">$x$</code>' in html
    assert '<code class="dsh-math">$y_1$</code>' in html and "cost $5." in html


def test_segments_never_cut_inside_a_fence() -> None:
    text = "a" * 50 + "\n\n```\n" + "x\n\n" * 30 + "```\n\nafter"
    pieces = split_segments(text, 10)
    assert pieces[-1] == "after"
    assert any(p.startswith("```") and p.rstrip().endswith("```") for p in pieces)


def test_a_formula_is_looked_for_within_its_bound_and_escapes_count() -> None:
    from dsh_kernel.markup.safe_html import MAX_FORMULA, close_math, safe_url

    assert close_math("a\\)b", 0, "\\)") == 1
    assert close_math("a\\\\)b", 0, "\\)") == -1  # the backslash before it is escaped
    assert close_math("x" * 10 + "$", 0, "$", 5) == -1  # beyond the bound: not a formula
    far = "\\(" + "x" * (MAX_FORMULA + 10) + "\\)"
    assert "dsh-math" not in markdown_html(far)
    assert "dsh-math" in markdown_html("\\(" + "x" * 10 + "\\)")
    assert not safe_url("//evil.example") and not safe_url("&#47;&#47;x".replace("&#47;", "/"))
