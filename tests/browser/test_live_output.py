"""The agent's running code shows its output in its card as it runs, in a real JupyterLab.

The notebook is on the ``dsh`` kernel; the model is the loopback server, which asks to run Python
that prints 61 lines (more than the live area's height: it scrolls, and shows the newest), shows a ``tqdm.auto`` progress bar, moves it to 3 of 10, then waits for a file
this test writes. While the code waits (it holds the kernel's main thread), the page must show the
printed line and the bar — a real progress widget, not text — in the card; then the test lets the
code finish, and the card shows the run's whole output as before. How long the print took to reach
the page is printed (``-s``) and checked to be well under the time the code waited.

Screenshots go to ``artifacts/browser/``. Needs ``/usr/bin/chromium`` and the ``playwright`` and
``jupyterlab`` packages.
"""

from __future__ import annotations

import time
from pathlib import Path

import nbformat

from tests.support import scenarios as sc
from tests.support.lab import LabPage, browser, lab_server
from tests.support.sse_server import SseServer

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "browser"

CODE = """\
import os, time
from tqdm.auto import tqdm
for i in range(60):
    print("warming up", i)
print("epoch 1: loss 0.50")
open({printed!r}, "w").write(repr(time.time()))
bar = tqdm(total=10, desc="training")
bar.update(3)
bar.refresh()  # tqdm draws at most every 0.1 s by itself
started = time.monotonic()
while not os.path.exists({release!r}) and time.monotonic() - started < 120:
    time.sleep(0.05)
bar.update(7)
bar.close()
print("epoch 2: loss 0.25")
"""

BAR_JS = """() => {
  const area = document.querySelector('.dsh-turn .dsh-card .dsh-live');
  if (!area || area.offsetParent === null) return null;
  const bar = area.querySelector('.progress .progress-bar');
  return {bar: !!bar, width: bar ? bar.style.width : null, text: area.innerText};
}"""


IN_VIEW_JS = """() => {
  const area = document.querySelector('.dsh-turn .dsh-card .dsh-live');
  const box = area.getBoundingClientRect();
  const spans = [...area.querySelectorAll('pre')];
  const inView = (el, text) => {
    const range = document.createRange();
    const node = [...el.childNodes].find((n) => n.textContent.includes(text));
    if (!node) return false;
    const at = node.textContent.indexOf(text);
    range.setStart(node, at);
    range.setEnd(node, at + text.length);
    const r = range.getBoundingClientRect();
    return r.top >= box.top - 1 && r.bottom <= box.bottom + 1;
  };
  const text = spans[0];
  return {scrolls: area.scrollHeight > area.clientHeight + 1,
          lastInView: inView(text, 'epoch 1: loss 0.50'),
          firstInView: inView(text, 'warming up 0')};
}"""


def test_prints_and_a_progress_bar_show_in_the_card_while_the_code_runs(tmp_path: Path) -> None:
    root, work = tmp_path / "notebooks", tmp_path / "work"
    root.mkdir()
    work.mkdir()
    printed, release = tmp_path / "printed", tmp_path / "release"
    nb_file = nbformat.v4.new_notebook()
    nb_file.metadata["kernelspec"] = {
        "name": "dsh",
        "display_name": "DSH Agent",
        "language": "python",
    }
    nb_file.cells = [nbformat.v4.new_code_cell("Train the model for two epochs.")]
    nbformat.write(nb_file, root / "live.ipynb")
    code = CODE.format(printed=str(printed), release=str(release))
    script = [sc.python_call(code), sc.text("Trained ", "for ", "two ", "epochs.", delay_ms=30)]
    with SseServer(script) as server:
        env = {
            "DSH_PROVIDER": "openai-compatible",
            "DSH_BASE_URL": server.url,
            "DSH_STORE": str(tmp_path / "store"),
            "IPYTHONDIR": str(tmp_path / "ipython"),
        }
        with lab_server(root, work, env) as lab, browser(work) as page:
            nb = LabPage(page, lab, "live.ipynb")
            nb.wait_kernel_idle()
            nb.run_cell(0)
            allow = nb.button("Allow once")
            allow.wait_for(state="visible", timeout=60_000)
            allow.click()

            # While the code waits: the print, then the bar at 3/10, in the card's live area.
            live = page.locator(".dsh-turn .dsh-card .dsh-live")
            live.get_by_text("epoch 1: loss 0.50").wait_for(state="visible", timeout=60_000)
            seen_at = time.time()
            page.wait_for_function(
                f"() => {{ const s = ({BAR_JS})(); return !!s && s.bar && s.width === '30%'; }}",
                timeout=60_000,
            )
            state = page.evaluate(BAR_JS)
            assert not release.exists()
            assert "training" in state["text"] and "3/10" in state["text"], state
            assert "epoch 2" not in state["text"]
            # The area scrolls, anchored at its bottom: the newest line is in view.
            view = page.evaluate(IN_VIEW_JS)
            assert view["scrolls"] and view["lastInView"] and not view["firstInView"], view
            latency = seen_at - float(printed.read_text())
            print(f"print → page: {latency * 1000:.0f} ms (an upper bound: polled)")
            assert latency < 10, latency  # the code still waits; without live output it never ends
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            chat = page.locator(".jp-Cell", has=page.locator(".dsh-turn")).first
            chat.screenshot(path=str(ARTIFACTS / "live-output-running.png"))
            assert nb.widget_errors() == []

            release.write_text("go")
            nb.wait_text("Trained for two epochs.")
            nb.wait_kernel_idle()
            # The finished turn: its static rendering shows the run's whole output.
            saved = page.locator(".dsh-turn-static")
            saved.first.wait_for(state="visible", timeout=60_000)
            text = saved.first.inner_text()
            assert "epoch 1: loss 0.50" in text and "epoch 2: loss 0.25" in text, text
            assert page.locator(".dsh-live:visible").count() == 0
            chat = page.locator(".jp-Cell", has=saved).first
            chat.screenshot(path=str(ARTIFACTS / "live-output-done.png"))
            assert nb.widget_errors() == []
    assert len(server.requests) == 2
