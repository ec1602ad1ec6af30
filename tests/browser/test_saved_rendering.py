"""The saved rendering of a finished turn, in a real JupyterLab (headless Chromium), untrusted.

The quickstart is executed headless (the offline demo model: it calls the ``python`` tool and
suggests a ``%%sql`` query), saved, and opened in Lab *without* ``jupyter trust`` — the case where
Lab sanitises the HTML output, as it does for any notebook someone sends you. The finished turn must
still look like the live view: its tool card drawn with a border and a coloured status pill, the
header laid out in a row, and the suggested query a code block. A screenshot goes to
``artifacts/browser/saved-rendering-untrusted.png`` for a person to look at.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from tests.support.lab import LabPage, browser, lab_server
from tests.support.notebooks import ROOT, run_notebook

ARTIFACTS = ROOT / "artifacts" / "browser"
NOTEBOOK = "01-quickstart.ipynb"

COMPUTED = """() => {
  const turn = document.querySelector('.dsh-turn-static');
  const css = (el) => (el ? getComputedStyle(el) : {});
  const card = css(turn.querySelector('.dsh-card'));
  const head = css(turn.querySelector('.dsh-card .dsh-card-head'));
  const pill = css(turn.querySelector('.dsh-card .dsh-pill'));
  const code = turn.querySelector('pre > code.language-sql');
  const pre = css(code && code.parentElement);
  return {
    card_border: [card.borderTopWidth, card.borderTopStyle],
    card_radius: card.borderTopLeftRadius,
    head_display: head.display,
    pill_border: [pill.borderTopWidth, pill.borderTopStyle],
    pill_color: pill.color,
    text_color: getComputedStyle(turn).color,
    sql: [...turn.querySelectorAll('pre > code.language-sql')].map((c) => c.textContent),
    sql_background: pre.backgroundColor,
    sql_border: pre.borderTopWidth,
    sql_wrap: [pre.whiteSpace, pre.wordBreak, pre.overflowWrap],
    turn_wrap: getComputedStyle(turn).overflowWrap,
  };
}"""


def test_saved_turn_is_styled_like_the_live_view_when_untrusted(tmp_path: Path) -> None:
    ex = run_notebook(NOTEBOOK, tmp_path / "run", {"DSH_APPROVAL": "auto"})
    nbformat.write(ex.nb, ex.workdir / NOTEBOOK)  # not trusted: Lab sanitises its HTML
    keys = ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    env = {"DSH_STORE": str(tmp_path / "lab-store"), **dict.fromkeys(keys, "")}
    with lab_server(ex.workdir, tmp_path / "lab", env) as lab, browser(tmp_path) as page:
        view = LabPage(page, lab, NOTEBOOK)
        page.locator(".dsh-turn-static .dsh-card").first.wait_for(state="attached", timeout=60_000)
        page.wait_for_timeout(300)
        got = page.evaluate(COMPUTED)
        chat = page.locator(".jp-Cell", has=page.locator(".dsh-turn-static .dsh-card")).first
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        chat.screenshot(path=str(ARTIFACTS / "saved-rendering-untrusted.png"))
        assert view.widget_errors() == []
    assert got["card_border"] == ["1px", "solid"], got  # unstyled, a div has no border
    assert got["card_radius"] == "6px", got
    assert got["head_display"] == "flex", got
    assert got["pill_border"] == ["1px", "solid"], got
    assert got["pill_color"] == "rgb(46, 125, 50)", got  # done: the success colour, not the text's
    assert got["pill_color"] != got["text_color"], got
    assert any(q.startswith("%%sql\nSELECT") for q in got["sql"]), got  # a code element
    assert got["sql_background"] not in ("rgba(0, 0, 0, 0)", "rgb(255, 255, 255)", None), got
    assert got["sql_border"] == "1px", got
    # Lab's sanitiser keeps the wrapping: code wraps at whitespace only, prose breaks long tokens
    assert got["sql_wrap"] == ["pre-wrap", "normal", "normal"], got
    assert got["turn_wrap"] == "break-word", got
