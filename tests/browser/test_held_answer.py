"""An answer held as a possible tool call, as JupyterLab shows it (headless Chromium).

While the model's answer looks like a tool call written as text, the turn shows one muted line
"writing a tool call… (N characters)" whose count grows; once the text has passed the bound without
becoming a call it is released, and the line gives way to the answer's text.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import nbformat

from dsh_kernel.llm.providers.openai_compat.text_tools import MAX_HELD_CHARS
from tests.support import wire_transcripts as wt
from tests.support.lab import LabPage, browser, lab_server
from tests.support.sse_server import Reply, SseServer, frames_from_sse

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "browser"
LOOP = '{"name": "python", "arguments": {"code": "' + "print(1)\\n" * 600
PIECE = 256


def held_reply() -> Reply:
    """The loop in pieces, with a long pause before the piece that passes the bound: the page has
    time to show the held line (the release comes at that piece, or at the time bound)."""
    frames = list(frames_from_sse(wt.local_stream(wt.tokens(LOOP, PIECE)), delay_ms=20))
    crossing = MAX_HELD_CHARS // PIECE + 1  # frame 0 is the role-only delta
    frames[crossing] = replace(frames[crossing], delay_ms=6_000)
    return Reply(frames=tuple(frames))


def test_held_text_shows_a_growing_count_then_the_text(tmp_path: Path) -> None:
    root, work = tmp_path / "notebooks", tmp_path / "work"
    root.mkdir()
    work.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "dsh", "display_name": "DSH Agent", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("Write some code.")]
    nbformat.write(nb, root / "held.ipynb")
    with SseServer([held_reply()]) as server:
        env = {
            "DSH_PROVIDER": "openai-compatible",
            "DSH_BASE_URL": server.url,
            "DSH_STORE": str(tmp_path / "store"),
            "IPYTHONDIR": str(tmp_path / "ipython"),
        }
        with lab_server(root, work, env) as lab, browser(work) as page:
            lab_page = LabPage(page, lab, "held.ipynb", timeout_s=120)
            lab_page.wait_kernel_idle()
            lab_page.run_cell(0)

            held = page.locator(".dsh-turn .dsh-held").first
            held.wait_for(state="visible", timeout=120_000)
            text = held.inner_text()
            assert "writing a tool call…" in text and "characters" in text, text
            # read from the element on the page now: each redraw of the growing count replaces it,
            # and a replaced (detached) element has no computed style
            style = page.wait_for_function(
                "() => { const el = document.querySelector('.dsh-turn .dsh-held');"
                " if (!el || !el.isConnected) return null; const cs = getComputedStyle(el);"
                " return cs.borderLeftStyle ? {border: cs.borderLeftStyle, color: cs.color} : null; }",
                timeout=30_000,
            ).json_value()
            assert style["border"] == "solid", style  # drawn as the turn's notices are
            assert page.locator(".dsh-turn", has_text='{"name": "python"').count() == 0
            lab_page.screenshot(ARTIFACTS / "held-progress.png")

            lab_page.wait_text("print(1)")  # released: the answer's text
            lab_page.wait_kernel_idle()
            assert page.locator(".dsh-held").count() == 0
            assert page.get_by_text("writing a tool call").count() == 0
            lab_page.screenshot(ARTIFACTS / "held-released.png")
            assert lab_page.widget_errors() == []
