"""Dollar signs and long lines as JupyterLab shows them (headless Chromium).

A ``%%sql`` result whose cells hold ``$`` shows the dollar signs literally: MathJax typesets nothing
in it. A chat answer that names prices (``$5 and $6``) shows them as prose. A tool card's code wraps
at whitespace only — Lab's output CSS would break a ``<pre>`` mid-word — and a token longer than
the line scrolls inside its block, live and in the saved rendering; a long token in an answer
breaks rather than overflow the page. The card's head has no icon shaped like a disclosure triangle
(its Details fold has the one that turns).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat

from tests.support import scenarios as sc
from tests.support.lab import LabPage, browser, lab_server
from tests.support.sse_server import SseServer

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "browser"
TOKEN = "x" * 400
# The code waits for the test to look at the live card, then lets the turn end.
CODE = (
    "import os, time\n"
    f"value = 'a short string with spaces ' * 12 + '{TOKEN}'\n"
    "deadline = time.monotonic() + 120\n"
    "while not os.path.exists('go') and time.monotonic() < deadline:\n"
    "    time.sleep(0.05)\n"
    "print(len(value))\n"
)
SQL = "%%sql\nSELECT '$: missing x' AS note, 'costs $5 and $6' AS price"

LAYOUT = """(sel) => [...document.querySelectorAll(sel)].map((el) => {
  const cs = getComputedStyle(el);
  return {wordBreak: cs.wordBreak, overflowWrap: cs.overflowWrap, whiteSpace: cs.whiteSpace,
          clientWidth: el.clientWidth, scrollWidth: el.scrollWidth, text: el.textContent};
})"""


def write_notebook(path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "dsh", "display_name": "DSH Agent", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("%agent approve auto"),
        nbformat.v4.new_code_cell("Look at the value, please."),
        nbformat.v4.new_code_cell(SQL),
    ]
    nbformat.write(nb, path)


def code_blocks(page: Any, scope: str) -> list[dict[str, Any]]:
    blocks = page.evaluate(LAYOUT, f"{scope} .dsh-card pre.dsh-code")
    return [b for b in blocks if "a short string with spaces" in b["text"]]


def assert_code_wraps_at_whitespace(blocks: list[dict[str, Any]]) -> None:
    assert blocks, "no code block holds the long line"
    for b in blocks:
        assert (b["wordBreak"], b["overflowWrap"]) == ("normal", "normal"), b
        assert b["whiteSpace"] == "pre-wrap", b
        # the token does not fit the line: it scrolls inside the block instead of being cut up
        assert b["scrollWidth"] > b["clientWidth"] > 0, b


def assert_prose_breaks_a_long_token(page: Any, scope: str, start: str) -> dict[str, Any]:
    [p] = [p for p in page.evaluate(LAYOUT, f"{scope} p") if p["text"].startswith(start)]
    assert p["overflowWrap"] == "break-word", p
    assert 0 < p["scrollWidth"] <= p["clientWidth"] < 2000, p  # broke within the cell
    return p


def test_dollars_stay_text_and_code_never_breaks_mid_word(tmp_path: Path) -> None:
    root, work = tmp_path / "notebooks", tmp_path / "work"
    root.mkdir()
    work.mkdir()
    write_notebook(root / "text.ipynb")
    script = [
        sc.text_then_call(["Running ", TOKEN, " now."], "python", {"code": CODE}),
        sc.text("It costs $5 and $6. The value ends in ", TOKEN, " as printed."),
    ]
    with SseServer(script) as server:
        env = {
            "DSH_PROVIDER": "openai-compatible",
            "DSH_BASE_URL": server.url,
            "DSH_STORE": str(tmp_path / "store"),
            "IPYTHONDIR": str(tmp_path / "ipython"),
        }
        with lab_server(root, work, env) as lab, browser(work) as page:
            nb = LabPage(page, lab, "text.ipynb", timeout_s=120)
            nb.wait_kernel_idle()
            nb.run_cell(0)
            nb.wait_text("approval: auto")
            nb.wait_kernel_idle()
            nb.run_cell(1)

            # Live: the card is running; open its Details and measure the code block.
            card = page.locator(".dsh-turn .dsh-card").first
            card.wait_for(state="visible", timeout=120_000)
            icon = card.locator(".dsh-icon").first.inner_text()
            assert not icon.startswith(("▶", "▸", "►")), icon  # only the Details fold is a triangle
            card.get_by_text("Details").first.click()
            page.wait_for_function(
                """() => [...document.querySelectorAll('.dsh-turn .dsh-card pre.dsh-code')]
                    .some((p) => p.clientWidth > 0)""",
                timeout=60_000,
            )
            assert_code_wraps_at_whitespace(code_blocks(page, ".dsh-turn"))
            assert_prose_breaks_a_long_token(page, ".dsh-turn", "Running")
            nb.screenshot(ARTIFACTS / "text-layout-live.png")
            (root / "go").write_text("", encoding="utf-8")

            # Saved rendering: the finished turn, then the SQL cell.
            nb.wait_text("as printed.")
            nb.wait_kernel_idle()
            page.locator(".dsh-turn-static").first.wait_for(state="attached", timeout=60_000)
            nb.run_cell(2)
            # the SQL table's own cell ("costs $5 and $6" is in the chat answer above too)
            sql_out = nb.cells.nth(2).locator(".jp-OutputArea-output").first
            sql_out.locator("td").nth(1).wait_for(state="attached", timeout=120_000)
            nb.wait_kernel_idle()
            page.wait_for_timeout(500)  # MathJax typesets after the output is attached
            assert_code_wraps_at_whitespace(code_blocks(page, ".dsh-turn-static"))
            answer = assert_prose_breaks_a_long_token(page, ".dsh-turn-static", "It costs")
            assert answer["text"].startswith("It costs $5 and $6. The value"), answer
            assert page.locator(".dsh-turn-static code.dsh-math").count() == 0
            cells = sql_out.locator("td").all_inner_texts()
            assert cells == ["$: missing x", "costs $5 and $6"], cells
            assert page.locator("mjx-container").count() == 0  # nothing typeset anywhere
            nb.screenshot(ARTIFACTS / "text-layout-saved.png")
            assert nb.widget_errors() == []
