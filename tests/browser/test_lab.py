"""A chat cell run through JupyterLab's UI in headless Debian Chromium (Playwright).

The notebook is on the ``dsh`` kernel, pointed at the loopback server. The test clicks into the cell
and presses Shift+Enter like a person; the model streams a sentence, then asks to run Python; the
tool card shows with its approval buttons; a real click on "Allow once" lets the turn go on; the
final answer streams in. No widget view may fail to render. The screenshots are kept under
``artifacts/browser/`` (gitignored) for a person to look at.

Needs ``/usr/bin/chromium`` and the ``playwright`` and ``jupyterlab`` packages (``.ci/run`` installs
them); without them the test fails and says what is missing.
"""

from __future__ import annotations

import time
from pathlib import Path

import nbformat

from tests.support import scenarios as sc
from tests.support.lab import LabPage, browser, lab_server
from tests.support.sse_server import SseServer

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "browser"
FIRST = ["Let me ", "compute ", "that ", "in ", "Python ", "for ", "you."]
FINAL = ["The ", "answer ", "is ", "**42**, ", "computed ", "in ", "your ", "notebook."]
KERNEL_BUSY_JS = """() =>
  window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'busy'"""


def write_notebook(path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "dsh", "display_name": "DSH Agent", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("What is six times seven? Use Python."),
        nbformat.v4.new_code_cell("%%python\nprint(f'answer={answer}')"),
    ]
    nbformat.write(nb, path)


def test_chat_cell_streams_shows_a_tool_card_and_allow_continues(tmp_path: Path) -> None:
    root, work = tmp_path / "notebooks", tmp_path / "work"
    root.mkdir()
    work.mkdir()
    write_notebook(root / "chat.ipynb")
    script = [
        sc.text_then_call(FIRST, "python", {"code": "answer = 6 * 7\nprint(answer)"}, delay_ms=120),
        sc.text(*FINAL, delay_ms=120),
    ]
    with SseServer(script) as server:
        env = {
            "DSH_PROVIDER": "openai-compatible",
            "DSH_BASE_URL": server.url,
            "DSH_STORE": str(tmp_path / "store"),
            "IPYTHONDIR": str(tmp_path / "ipython"),
        }
        with lab_server(root, work, env) as lab, browser(work) as page:
            nb = LabPage(page, lab, "chat.ipynb")
            nb.wait_kernel_idle()
            nb.run_cell(0)

            # Streaming: the first sentence is seen part-written before it is complete.
            seen: list[str] = []
            deadline = time.monotonic() + 30
            while "you." not in "".join(seen[-1:]) and time.monotonic() < deadline:
                texts = (
                    page.locator(".dsh-turn").first.all_inner_texts()
                    if page.locator(".dsh-turn").count()
                    else []
                )
                seen.append(" ".join(texts))
                page.wait_for_timeout(40)
            partial = [t for t in seen if "Let me" in t and "for you." not in t]
            assert partial, "the answer was never seen part-written"
            assert "Let me compute that in Python for you." in seen[-1]

            allow = nb.button("Allow once")
            allow.wait_for(state="visible", timeout=30_000)
            card = page.locator(".dsh-card").first
            assert "answer = 6 * 7" in card.inner_text()
            assert "waiting" in card.locator(".dsh-pill").inner_text().lower()
            nb.screenshot(ARTIFACTS / "lab-approval.png")
            assert nb.widget_errors() == []

            # The wait for a click reads "Busy", also after the kernel answered another request
            # meanwhile (Lab asks for a comm subshell on the control channel as the view's widgets
            # arrive; a key in the steer box is a widget message).
            page.get_by_placeholder("Tell the agent something now…").press_sequentially("x")
            page.wait_for_function(KERNEL_BUSY_JS, timeout=10_000)
            assert "DSH Agent | Busy" in " ".join(
                page.locator(".jp-StatusBar-Widget").all_inner_texts()
            )
            # Empty the box again: the "x" was only a widget message, never meant to be steered.
            page.get_by_placeholder("Tell the agent something now…").fill("")

            allow.click()
            nb.wait_text("computed in your notebook.")
            nb.wait_kernel_idle()
            assert "done" in card.locator(".dsh-pill").inner_text().lower()
            assert "42" in card.inner_text()
            # Once the kernel is idle the live view may already be replaced by its static rendering
            # (the turn view closes at turn end): either holds the answer.
            assert (
                "The answer is 42, computed in your notebook."
                in page.locator(".dsh-turn, .dsh-turn-static").first.inner_text()
            )
            assert nb.widget_errors() == []
            assert not page.get_by_text("Error displaying widget").count()

            # The code ran in the notebook's namespace: the next cell sees it.
            nb.run_cell(1)
            nb.wait_text("answer=42")
            nb.wait_kernel_idle()
            nb.screenshot(ARTIFACTS / "lab-chat.png")
    assert len(server.requests) == 2
