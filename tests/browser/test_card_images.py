"""A tool card shows the image the model was sent, in a real JupyterLab (headless Chromium).

The notebook is on the ``dsh`` kernel; the model is the loopback server as an OpenAI-compatible
server said to take images (``DSH_VISION=on``), so the request header in force sends them. A ``%%python`` cell gives the kernel's agent a tool (from a module beside the
notebook) whose result carries an image block with its bytes, as the ``python`` tool's capture makes
them, and shows the original, larger figure as its rich output. The chat cell is run like a person runs it; the model calls the tool,
then asks to run Python (so the turn waits for a click while the card is live), then answers.

Checked twice — on the live card while the turn waits, and on the saved rendering the finished
turn leaves — the card has an ``<img>`` whose data URL decodes to exactly the PNG the model got,
that the browser decoded at its size and shows, beside the line "Sent to the model: 1 image, …";
and the card's original output is still there, once. The request after the result carried exactly
those bytes (an ``image_url`` data URL): the card says what the wire did. Screenshots go to ``artifacts/browser/``.

Needs ``/usr/bin/chromium`` and the ``playwright`` and ``jupyterlab`` packages.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import nbformat

from tests.support import scenarios as sc
from tests.support.image_tool import ORIGINAL, SENT, SENT_LINE, tool_module
from tests.support.lab import LabPage, browser, lab_server
from tests.support.sse_server import SseServer

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "browser"
ANSWER = ["The ", "loss ", "rises ", "again ", "after ", "epoch ", "6."]

THUMBS = """(scope) => [...document.querySelectorAll(scope + ' .dsh-card .dsh-images img.dsh-thumb')]
  .map((img) => {
    const box = img.getBoundingClientRect();
    return {src: img.getAttribute('src'), natural: [img.naturalWidth, img.naturalHeight],
            box: [box.width, box.height], complete: img.complete,
            line: img.closest('.dsh-image-line').textContent};
  })"""


TOOL_CELL = """%%python
# the kernel's agent gets the tool (a chat cell's &`fn` offers plain functions only)
from draw_tool import draw_loss
get_ipython().kernel.host.agent.registry.register(draw_loss)
print("registered", draw_loss.name)"""


def write_notebook(root: Path, name: str = "images.ipynb") -> None:
    """The notebook (a tool cell, a chat cell) and its ``draw_tool.py`` in ``root``."""
    (root / "draw_tool.py").write_text(tool_module(), encoding="utf-8")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "dsh", "display_name": "DSH Agent", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell(TOOL_CELL),
        nbformat.v4.new_code_cell("Plot the training loss and tell me what looks wrong."),
    ]
    nbformat.write(nb, root / name)


def check_thumbnail(page: Any, scope: str) -> dict[str, Any]:
    (thumb,) = page.evaluate(THUMBS, scope)
    head, _, b64 = thumb["src"].partition(",")
    assert head == "data:image/png;base64", head
    assert base64.b64decode(b64, validate=True) == SENT
    assert thumb["complete"] and thumb["natural"] == [320, 240], thumb  # the browser decoded it
    assert thumb["box"][0] > 0 and thumb["box"][1] > 0, thumb  # laid out, not hidden
    assert SENT_LINE in thumb["line"], thumb["line"]
    img = page.locator(f"{scope} .dsh-card .dsh-images img.dsh-thumb").first
    assert img.is_visible()
    return thumb


def test_the_card_shows_the_image_the_model_was_sent(tmp_path: Path) -> None:
    root, work = tmp_path / "notebooks", tmp_path / "work"
    root.mkdir()
    work.mkdir()
    write_notebook(root)
    script = [
        sc.tool_calls(("draw_loss", {})),
        sc.python_call("print('checked')"),
        sc.text(*ANSWER, delay_ms=50),
    ]
    with SseServer(script) as server:
        env = {
            "DSH_PROVIDER": "openai-compatible",
            "DSH_BASE_URL": server.url,
            "DSH_VISION": "on",
            "DSH_STORE": str(tmp_path / "store"),
            "IPYTHONDIR": str(tmp_path / "ipython"),
        }
        with lab_server(root, work, env) as lab, browser(work) as page:
            nb = LabPage(page, lab, "images.ipynb")
            nb.wait_kernel_idle()
            nb.run_cell(0)
            nb.wait_text("registered draw_loss")
            nb.wait_kernel_idle()
            nb.run_cell(1)

            # Live: the turn waits on the python call's approval; the draw_loss card is drawn.
            allow = nb.button("Allow once")
            allow.wait_for(state="visible", timeout=30_000)
            live = ".dsh-turn"
            page.locator(f"{live} .dsh-card .dsh-images img.dsh-thumb").first.wait_for(
                state="visible", timeout=30_000
            )
            check_thumbnail(page, live)
            card = page.locator(f"{live} .dsh-card").first
            assert "draw_loss" in card.inner_text()
            nb.screenshot(ARTIFACTS / "card-images-live.png")
            assert nb.widget_errors() == []

            allow.click()
            nb.wait_text("after epoch 6.")
            nb.wait_kernel_idle()

            # Saved: the finished turn's static rendering says and shows the same.
            saved = ".dsh-turn-static"
            page.locator(f"{saved} .dsh-card .dsh-images img.dsh-thumb").first.wait_for(
                state="visible", timeout=30_000
            )
            check_thumbnail(page, saved)
            originals = page.evaluate(
                """(b64) => [...document.querySelectorAll('.dsh-turn-static img')]
                  .filter((i) => (i.getAttribute('src') || '').endsWith(b64)).length""",
                base64.b64encode(ORIGINAL).decode(),
            )
            assert originals == 1  # the original output, once; the thumbnail is the sent image
            chat = page.locator(".jp-Cell", has=page.locator(saved)).first
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            chat.screenshot(path=str(ARTIFACTS / "card-images-saved.png"))
            assert nb.widget_errors() == []
    # the request after the tool result carried the image the card shows
    assert len(server.requests) == 3
    body = server.requests[1].json
    assert isinstance(body, dict)
    urls = [
        part["image_url"]["url"]
        for m in body["messages"]
        if isinstance(m.get("content"), list)
        for part in m["content"]
        if part.get("type") == "image_url"
    ]
    assert [base64.b64decode(u.partition(",")[2]) for u in urls] == [SENT], urls
