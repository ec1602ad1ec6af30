"""Model Markdown made safe: for the trusting frontend renderer, for static HTML, and split for
streaming."""

from __future__ import annotations

import itertools
import re
from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_kernel.views.markdown import (
    escape_inline_markdown,
    fence,
    safe_markdown,
    split_segments,
    unsafe_url,
)
from dsh_kernel.views.markdown_html import markdown_to_html

TOKENS = [
    *"<>/\"'&`*_[]()!:$\\~|#-=.\n ab1",
    "javascript:",
    "img",
    "script",
    "onerror=",
    "```",
    "~~~",
]
NASTY = st.lists(st.sampled_from(TOKENS), max_size=60).map("".join)


# --- safe_markdown ------------------------------------------------------------------------------------


def test_raw_html_is_neutralised_but_code_and_math_survive() -> None:
    text = (
        "Hi <script>alert(1)</script> and <img src=x onerror=alert(1)>\n"
        "`a<b` and ``x ` <y`` and `plain`\n"
        "$a<b$ and $$x <y$$ and \\(p<q\\) and \\<tag>\n"
        "```python\nif a < b: pass\n```\n"
        "after <b>"
    )
    assert safe_markdown(text) == (
        "Hi &lt;script>alert(1)&lt;/script> and &lt;img src=x onerror=alert(1)>\n"
        "<code>a&lt;b</code> and <code>x \\` &lt;y</code> and `plain`\n"
        "$a\\lt b$ and $$x \\lt y$$ and \\(p\\lt q\\) and &lt;tag>\n"
        "```python\nif a < b: pass\n```\n"
        "after &lt;b>"
    )


def test_fences_that_are_not_fences_do_not_protect() -> None:
    # An info string with a backtick does not open a fence; an indented line is not a top-level fence.
    assert safe_markdown("```a`b\n<script>") == "```a`b\n&lt;script>"
    assert safe_markdown("- a\n  ```\n<script>") == "- a\n  ```\n&lt;script>"
    assert safe_markdown("~~~\n<x>\n~~~\n<y>") == "~~~\n<x>\n~~~\n&lt;y>"


def test_a_fence_ends_where_any_renderer_might_end_it() -> None:
    # marked closes on "```~"; CommonMark would not. Ending early is the safe side.
    assert safe_markdown("```\nx\n```~\n<script>") == "```\nx\n```~\n&lt;script>"


def test_script_links_are_defanged() -> None:
    text = (
        "[a](javascript:alert(1)) [b](https://x.org/(y)) [c](JaVa&#115;cript:x) "
        "[d]( <javascript:x> ) [e](java\\script:x) [f](docs/p.md) [g](mailto:a@b.c)\n"
        "[r]: javascript:evil\n[s]:\n  vbscript:evil"
    )
    assert safe_markdown(text) == (
        "[a](#unsafe-link) [b](https://x.org/(y)) [c](#unsafe-link) "
        "[d]( #unsafe-link ) [e](#unsafe-link) [f](docs/p.md) [g](mailto:a@b.c)\n"
        "[r]: #unsafe-link\n[s]:\n  #unsafe-link"
    )


def test_close_fence_closes_what_the_text_left_open() -> None:
    assert safe_markdown("```\ncode <x>", close_fence=True) == "```\ncode <x>\n```"
    assert safe_markdown("````\ncode", close_fence=True) == "````\ncode\n````"


@settings(max_examples=300)
@given(NASTY)
def test_no_tag_outside_top_level_fences(text: str) -> None:
    out = safe_markdown(text)
    inside = False
    char, size = "", 0
    for line in out.split("\n"):
        stripped = line.strip(" ")
        if inside:
            if stripped and set(stripped) == {char} and len(stripped) >= size:
                inside = False
            continue
        if line.startswith(("```", "~~~")):
            run = len(line) - len(line.lstrip(line[0]))
            if not (line[0] == "`" and "`" in line[run:]):
                inside, char, size = True, line[0], run
                continue
        rest = line.replace("<code>", "").replace("</code>", "")
        assert "<" not in rest, (text, out)
        for m in re.finditer(r"\]\(\s*([^\s)]*)", line):
            assert not unsafe_url(m.group(1)), (text, out)


# --- markdown_to_html ----------------------------------------------------------------------------

ALLOWED_TAGS = {
    "p", "h1", "h2", "h3", "h4", "h5", "h6", "em", "strong", "del", "code", "pre", "a", "img",
    "ul", "ol", "li", "blockquote", "hr", "br", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
ALLOWED_ATTRS = {"href", "src", "alt", "title", "class", "start", "style"}


class TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


class DomEvents(HTMLParser):
    """An HTML string as the DOM it builds: start/end tags with their attributes (a ``style``
    without its spaces) and the text nodes, whitespace at their edges dropped — two serialisations
    of one DOM (newlines between blocks, ``text-align: center`` or ``text-align:center``) compare
    equal."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.events: list[tuple[str, ...]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        norm = sorted(
            (k, (v or "").replace(" ", "") if k == "style" else (v or "")) for k, v in attrs
        )
        self.events.append(("start", tag, *(f"{k}={v}" for k, v in norm)))

    def handle_endtag(self, tag: str) -> None:
        self.events.append(("end", tag))

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.events.append(("text", data.strip()))


def dom(html: str) -> list[tuple[str, ...]]:
    parser = DomEvents()
    parser.feed(html)
    parser.close()
    return parser.events


def check_html(html: str) -> None:
    parser = TagCollector()
    parser.feed(html)
    for tag, attrs in parser.tags:
        assert tag in ALLOWED_TAGS, (tag, html)
        for name, value in attrs:
            assert name in ALLOWED_ATTRS, (name, html)
            if name in ("href", "src"):
                v = (value or "").strip().lower()
                assert not v.startswith(("javascript:", "vbscript:", "data:text")), html


def test_common_markdown_converts() -> None:
    md = (
        "# Title\n\nSome **bold**, *em*, ~~gone~~, `code` and [a link](https://x.org/?a=1&b=2).\n\n"
        "- one\n- two\n\n1. first\n2. second\n\n> quoted\n\n| a | b |\n|---|:-:|\n| 1 | 2 |\n\n"
        "```python\nx = 1 < 2\n```\n\n---\n\nsnake_case_name stays"
    )
    assert dom(markdown_to_html(md)) == dom(
        "<h1>Title</h1>\n"
        "<p>Some <strong>bold</strong>, <em>em</em>, <del>gone</del>, <code>code</code> and "
        '<a href="https://x.org/?a=1&amp;b=2">a link</a>.</p>\n'
        "<ul><li>one</li><li>two</li></ul>\n"
        "<ol><li>first</li><li>second</li></ol>\n"
        "<blockquote><p>quoted</p></blockquote>\n"
        '<table><thead><tr><th>a</th><th style="text-align: center">b</th></tr></thead>'
        '<tbody><tr><td>1</td><td style="text-align: center">2</td></tr></tbody></table>\n'
        '<pre><code class="language-python">x = 1 &lt; 2</code></pre>\n'
        "<hr>\n"
        "<p>snake_case_name stays</p>"
    )


def test_html_in_markdown_is_shown_as_text_and_bad_urls_dropped() -> None:
    html = markdown_to_html(
        "<script>alert(1)</script> [x](javascript:alert(1)) ![i](java\tscript:x) "
        '[ok](docs/a.md) ![png](data:image/png;base64,AAAA) $a<b$ "quote"'
    )
    assert "<script" not in html and "javascript" not in html.split("[x](")[0]
    assert '<a href="docs/a.md">ok</a>' in html
    assert '<img src="data:image/png;base64,AAAA" alt="png">' in html
    assert "$a&lt;b$" in html
    check_html(html)


def test_math_is_copied_through_for_mathjax() -> None:
    html = markdown_to_html("$a*b*c$ and $$x_1 * y_2$$ and \\(p_1 * q_2\\) and \\[r<s\\] but *em*")
    assert html == (
        "<p>$a*b*c$ and $$x_1 * y_2$$ and \\(p_1 * q_2\\) and \\[r&lt;s\\] but <em>em</em></p>"
    )


def test_code_blocks_take_the_callers_look() -> None:
    html = markdown_to_html(
        "```sql\n%%sql\nSELECT 1 < 2\n```\n\n    indented",
        pre_attrs=' class="dsh-code"',
        code_style='background: "x"',
    )
    assert html == (
        '<pre class="dsh-code"><code class="language-sql" style="background: &quot;x&quot;">'
        "%%sql\nSELECT 1 &lt; 2\n</code></pre>\n"
        '<pre class="dsh-code"><code style="background: &quot;x&quot;">indented\n</code></pre>'
    )


@settings(max_examples=300)
@given(NASTY)
def test_html_output_only_has_safe_tags(text: str) -> None:
    check_html(markdown_to_html(text))


# --- helpers ---------------------------------------------------------------------------------------


def test_fence_cannot_be_closed_by_its_content() -> None:
    assert fence("a ``` b\n") == "````\na ``` b\n````"
    assert fence("x", "python") == "```python\nx\n```"


def test_escape_inline_markdown_renders_as_itself() -> None:
    assert escape_inline_markdown("a_b *c* <d> [e](f)") == "a\\_b \\*c\\* &lt;d\\> \\[e\\]\\(f\\)"


# --- split_segments ------------------------------------------------------------------------------

BLOCKY = st.lists(
    st.sampled_from(
        [
            "word " * 9,
            "```\ncode\n\nmore\n```",
            "- item\n- item",
            "$$\na\n\nb\n$$",
            "> q",
            "  indented",
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
        # and every cut of the whole text well inside the prefix is already there
        assert {c for c in cuts if c < n} <= set(prefix_cuts) | {n}


def test_segments_never_cut_inside_a_fence() -> None:
    text = "a" * 50 + "\n\n```\n" + "x\n\n" * 30 + "```\n\nafter"
    pieces = split_segments(text, 10)
    assert pieces[-1] == "after"
    assert any(p.startswith("```") and p.rstrip().endswith("```") for p in pieces)
