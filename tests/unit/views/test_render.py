"""The static rendering of finished turns: snapshots for every card status, escaping, footer, ends.

Snapshots live in ``snapshots/``; after an intended change, regenerate them with
``DSH_UPDATE_SNAPSHOTS=1 pytest tests/unit/views/test_render.py`` and review the diff.
"""

from __future__ import annotations

import base64
import os
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from dsh_kernel.llm.types import ModelInfo
from dsh_kernel.transcript.model import (
    CardStatus,
    NoticeItem,
    ReasoningItem,
    SteerItem,
    TextItem,
    ToolCardModel,
    ToolItem,
    TurnError,
    TurnModel,
    UsageSummary,
)
from dsh_kernel.views.card_content import KIND_ICONS
from dsh_kernel.views.format import cost, footer_parts
from dsh_kernel.views.render import MAX_INLINE_IMAGE, render_html, render_markdown, static_bundle
from tests.support.frontend import markdown_body


class _TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


SNAPSHOTS = Path(__file__).with_name("snapshots")
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()


def check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("DSH_UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == text, f"snapshot {name} differs"


def card(status: CardStatus, **kw: object) -> ToolCardModel:
    base: dict[str, object] = {
        "call_id": "c1",
        "name": "python",
        "arguments": '{"code":"print(1 < 2)"}',
        "status": status,
        "step": 1,
        "started_at": 1_000,
    }
    if status in ("done", "failed", "denied", "aborted"):
        base.update(ended_at=2_234, duration_ms=1_234, result_text="True")
    base.update(kw)
    return ToolCardModel(**base)  # type: ignore[arg-type]


CARDS: dict[str, ToolCardModel] = {
    "pending": card("pending", arguments='{"code":"pri', started_at=None),
    "waiting-approval": card("waiting-approval", approval_id="a1", approval_reason="runs code"),
    "running": card("running", approval_id="a1", approval_outcome="allowed-once"),
    "done": card(
        "done",
        meta={
            "outputs": [
                {"output_type": "stream", "name": "stdout", "text": "True\n"},
                {
                    "output_type": "display_data",
                    "data": {"image/png": PNG, "text/plain": "<Figure>"},
                },
                {
                    "output_type": "execute_result",
                    "data": {"text/html": "<b>t</b>", "text/plain": "table"},
                },
            ]
        },
    ),
    "failed": card(
        "failed",
        is_error=True,
        error_code="TOOL_FAILED",
        error_name="ValueError",
        result_text="Error: ValueError: <bad>",
    ),
    "denied": card(
        "denied",
        approval_id="a1",
        approval_outcome="rejected",
        is_error=True,
        error_code="DENIED",
        result_text="Error: the user rejected this call",
    ),
    "aborted": card(
        "aborted", is_error=True, error_code="ABORTED", result_text="Error: tool call aborted"
    ),
}


def turn(*items: object, **kw: object) -> TurnModel:
    base: dict[str, object] = {
        "turn": 1,
        "prompt": "hi",
        "items": tuple(items),
        "state": "ended",
        "end_reason": {"kind": "completed"},
        "provider": "deepseek",
        "model": "deepseek-chat",
        "usage": UsageSummary(
            requests=2,
            input_tokens=1_200,
            cache_read_tokens=24_000,
            output_tokens=345,
            reasoning_tokens=120,
            context_tokens=25_600,
        ),
        "context_window": 128_000,
        "started_at": 0,
        "ended_at": 4_200,
        "ttft_ms": 800,
    }
    base.update(kw)
    return TurnModel(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("status", list(CARDS))
def test_card_snapshots(status: str) -> None:
    model = turn(ToolItem(key="tool-c1", card=CARDS[status]))
    check_snapshot(f"card-{status}.md", render_markdown(model))
    check_snapshot(f"card-{status}.html", render_html(model))


@pytest.mark.parametrize(
    ("outcome", "pill"),
    [
        ("unavailable", "denied · no one could answer"),
        ("timeout", "denied · no answer in time"),
        ("rejected", "denied"),
    ],
)
def test_a_denied_pill_says_denied_once(outcome: str, pill: str) -> None:
    denied = card(
        "denied",
        approval_id="a1",
        approval_outcome=outcome,
        is_error=True,
        error_code="DENIED",
        result_text="Error: not approved",
    )
    html = render_html(turn(ToolItem(key="tool-c1", card=denied)))
    pills = [m.split(">", 1)[1] for m in html.split("<span") if "dsh-pill" in m.split(">", 1)[0]]
    assert [p.split("</span>", 1)[0] for p in pills] == [pill]


def test_no_card_icon_looks_like_a_disclosure_triangle() -> None:
    # A card's Details fold has its own triangle, which turns as it opens; an icon shaped like
    # one (a python call's was ▶) reads as a fold that stays closed.
    triangles = ("▶", "▷", "►", "▸", "▹", "⏵", "▼", "▽", "▾", "◀", "◂")
    assert not [i for i in KIND_ICONS.values() if i.startswith(triangles)], KIND_ICONS
    html = render_html(turn(ToolItem(key="k", card=CARDS["done"])))  # a python call
    icon = html.split('<span class="dsh-icon">', 1)[1].split("</span>", 1)[0]
    assert icon == KIND_ICONS["execute"]


def test_full_turn_snapshot() -> None:
    model = turn(
        ReasoningItem(key="r", text="First, <think>.", done=True),
        TextItem(key="t1", text="Let me check `x<y`.", done=True),
        ToolItem(key="tool-c1", card=CARDS["done"]),
        SteerItem(key="s", text="use <b>plots</b>"),
        NoticeItem(key="n", text="Retry 1/5 in 2.0 s after RATE_LIMIT: slow down"),
        TextItem(key="t2", text="## Result\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n$x<1$", done=True),
    )
    info = ModelInfo(
        context_window=128_000,
        input_price_per_mtok=0.27,
        cached_input_price_per_mtok=0.07,
        output_price_per_mtok=1.1,
    )
    check_snapshot(
        "turn.md", render_markdown(model, session_id="0123456789abcdef", model_info=info)
    )
    check_snapshot("turn.html", render_html(model, session_id="0123456789abcdef", model_info=info))


class _MathScope(HTMLParser):
    """Each text of an HTML page, with whether a ``<div class="mathjax_ignore">`` holds it."""

    def __init__(self) -> None:
        super().__init__()
        self.divs: list[bool] = []
        self.texts: list[tuple[str, bool]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "div":
            classes = (dict(attrs).get("class") or "").split()
            self.divs.append("mathjax_ignore" in classes)

    def handle_endtag(self, tag: str) -> None:
        if tag == "div":
            self.divs.pop()

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.texts.append((data, any(self.divs)))


def test_the_markdown_alternative_is_markdown_inside_a_container_mathjax_skips() -> None:
    """A frontend that shows the saved ``text/markdown`` renders it as Markdown (JupyterLab then
    typesets the result with MathJax): every text of it, the ``$…$`` too, must sit in the ignored
    container, and the Markdown inside must still be read as Markdown."""
    model = turn(
        ReasoningItem(key="r", text="Is $a$ < $b$?", done=True),
        TextItem(key="t1", text="**Costs** $5 and $6; $x^2$ \\(y\\)", done=True),
        ToolItem(key="tool-c1", card=CARDS["done"]),
        TextItem(key="t2", text="## Result\n\n$$\\int_0^1 f$$", done=True),
    )
    md = render_markdown(model)
    assert md.startswith('<div class="mathjax_ignore tex2jax_ignore">\n\n'), md[:80]
    page = MarkdownIt("commonmark").render(md)
    scope = _MathScope()
    scope.feed(page)
    assert scope.divs == []  # the container is closed
    outside = [text for text, ignored in scope.texts if not ignored]
    assert outside == [], outside
    assert any("$x^2$" in text for text, _ in scope.texts), scope.texts
    # Still Markdown inside: the heading, the emphasis, the folds and the footer are elements.
    for element in ("<h2>Result</h2>", "<strong>Costs</strong>", "<details>", "<sub>"):
        assert element in page, (element, page)


def test_model_text_never_becomes_markup() -> None:
    evil = "<script>alert(1)</script><img src=x onerror=alert(1)>\"'&"
    model = turn(
        ReasoningItem(key="r", text=evil, done=True),
        TextItem(key="t", text=evil + "\n```\n" + evil, done=True),  # an unclosed fence, too
        ToolItem(
            key="tool-c1",
            card=card("failed", name=evil, arguments=evil, result_text=evil, is_error=True),
        ),
        SteerItem(key="s", text=evil),
        NoticeItem(key="n", text=evil),
        prompt=evil,
        end_reason={"kind": "error"},
        error=TurnError(code="AUTH", message=evil),
    )
    bundle = static_bundle(model, include_prompt=True)
    html = bundle["text/html"]
    assert "<script" not in html and "<img src=x" not in html
    md = bundle["text/markdown"]
    # the text's unclosed fence was closed before the rest
    assert markdown_body(md).rstrip().endswith("</sub>")
    outside = "\n".join(outside_fences(md))
    assert "<script" not in outside and "<img src=x" not in outside


def outside_fences(md: str) -> list[str]:
    """The lines of ``md`` outside its top-level fenced code blocks."""
    out: list[str] = []
    closer = ""
    for line in md.split("\n"):
        if closer:
            if line.strip() == closer:
                closer = ""
            continue
        if line.startswith(("```", "~~~")):
            closer = line[: len(line) - len(line.lstrip(line[0]))]
            continue
        out.append(line)
    return out


def test_saved_html_draws_the_live_card_with_inline_styles() -> None:
    answer = "Ask the log:\n\n```sql\n%%sql\nSELECT type FROM events\n```"
    model = turn(ToolItem(key="k", card=CARDS["done"]), TextItem(key="t", text=answer, done=True))
    html = render_html(model)
    assert "<style" not in html  # JupyterLab's sanitiser removes it from untrusted notebooks
    tags = _TagCollector()
    tags.feed(html)
    by_class = {dict(a).get("class"): dict(a) for _, a in tags.tags if dict(a).get("class")}
    for cls in ("dsh-card", "dsh-card-head", "dsh-pill dsh-status-done", "dsh-dur", "dsh-code"):
        assert "style" in by_class[cls], cls  # the live view's class, and its look inline
    assert "border: 1px solid" in (by_class["dsh-card"]["style"] or "")
    assert "color: #2e7d32" in (by_class["dsh-pill dsh-status-done"]["style"] or "")
    assert '<code class="language-sql" style="background: transparent">' in html
    assert "%%</span>" in html and "dsh-hl-k" in html and "SELECT" in html
    assert ">done</span>" in html and ">1.2 s</span>" in html


def test_large_images_are_named_not_embedded() -> None:
    big = "A" * (MAX_INLINE_IMAGE + 4)
    model = turn(
        ToolItem(
            key="k",
            card=card(
                "done",
                meta={"outputs": [{"output_type": "display_data", "data": {"image/png": big}}]},
            ),
        )
    )
    html = render_html(model)
    assert big not in html and "image/png output of 750,003 bytes not embedded" in html


def test_footer_cost_and_context() -> None:
    model = turn()
    info = ModelInfo(input_price_per_mtok=2.0, output_price_per_mtok=8.0)
    # uncached input 1,200 and the 24,000 cached reads at the input price (no cached price), output 345
    assert cost(model, info) == pytest.approx((1_200 * 2.0 + 24_000 * 2.0 + 345 * 8.0) / 1e6)
    assert cost(model, ModelInfo()) is None
    assert footer_parts(model, session_id="abcdef0123", info=info) == [
        "deepseek:deepseek-chat",
        "in 1,200",  # uncached, as SQL's usage.input_tokens
        "cached 24.0k",
        "out 345 (reasoning 120)",
        "context 25.6k / 128.0k (20%)",
        "$0.0532",
        "first token 800 ms",
        "total 4.2 s",
        "session abcdef01",
    ]


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ({"kind": "aborted", "reason": {"kind": "user"}}, "Stopped by you."),
        ({"kind": "max-tokens"}, "cut off at the output token limit"),
        ({"kind": "max-steps", "limit": 100}, "Stopped after 100 steps."),
        ({"kind": "blocked"}, "A hook blocked this turn."),
    ],
)
def test_how_a_turn_ended_is_said(reason: dict[str, object], expected: str) -> None:
    model = turn(end_reason=reason)
    assert expected in render_html(model)
    assert expected in render_markdown(model).replace("\\", "")


def test_presenters_shape_the_card() -> None:
    from dsh_kernel.tools.presentation import GenericCallView, GenericResultView, Location
    from dsh_kernel.tools.types import ToolDefinition

    defn = ToolDefinition(
        name="sh",
        description="Run a shell command.",
        parameters={"type": "object", "properties": {"cmd": {"type": "string"}}},
        execute=lambda args, ctx: "",
        present_call=lambda args: GenericCallView(
            title=str(args["cmd"]),
            kind="search",
            raw_input={"cmd": args["cmd"], "cwd": "/tmp"},
            content="in <the> shell",
            locations=(Location(path="Makefile", line=3), Location(path="README.md")),
        ),
        present_result=lambda args, info: GenericResultView(title="made all", content="boom\n"),
    )
    model = turn(
        ToolItem(
            key="k", card=card("done", name="sh", arguments='{"cmd":"make <all>"}', result_text="x")
        )
    )
    md = render_markdown(model, tools=lambda name: defn if name == "sh" else None)
    assert "🔍 <b>made all</b> <code>sh</code> — done · 1.2 s" in md
    assert '<pre><code>{\n  "cmd": "make &lt;all&gt;",\n  "cwd": "/tmp"\n}</code></pre>' in md
    assert "<pre><code>in &lt;the&gt; shell</code></pre>" in md
    assert "**Locations**\n\n<pre><code>Makefile:3\nREADME.md</code></pre>" in md
    assert "**Result**\n\n<pre><code>boom</code></pre>" in md and "\nx\n" not in md

    def broken(name: str) -> ToolDefinition | None:
        raise KeyError(name)

    assert "<b>python</b>" in render_markdown(
        turn(ToolItem(key="k", card=CARDS["done"])), tools=broken
    )


def test_a_call_recovered_from_text_says_so_in_both_renderings() -> None:
    recovered = turn(ToolItem(key="k", card=card("done", recovered=True)))
    md, html = render_markdown(recovered), render_html(recovered)
    assert "done · recovered from text · 1.2 s" in md
    tags = _TagCollector()
    tags.feed(html)
    (note,) = [dict(a) for _, a in tags.tags if dict(a).get("class") == "dsh-card-note"]
    assert "font-style: italic" in (note["style"] or "")
    assert "ran it as a tool call" in (note["title"] or "")
    assert ">recovered from text</span>" in html
    plain = turn(ToolItem(key="k", card=card("done")))
    assert "recovered" not in render_markdown(plain) + render_html(plain)
