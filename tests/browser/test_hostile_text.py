"""Hostile text from a model, a tool and a replayed journal runs nothing in a real JupyterLab.

The corpus (``tests/data/hostile-markdown.json``: raw HTML, ``\\r`` line endings, fences hidden in
LaTeX and ``$…$``, script links in every disguise, SVG, ``<style>``, forms, remote images,
MathJax ``\\require``) is streamed as the answers of a notebook's chat cells, and printed by a
``python`` tool call whose result the card shows. The same session is then answered again by
``%agent replay`` in a second notebook. The page must end with ``window.__dsh_pwned`` unset (every
payload sets it) and must have made no request for anything the corpus names: nothing outside
Lab's own server, and none of the corpus's relative URLs on it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.support import scenarios as sc
from tests.support.lab import LabPage, browser, lab_server
from tests.support.sse_server import SseServer

CORPUS: list[dict[str, str]] = json.loads(
    (Path(__file__).parents[1] / "data" / "hostile-markdown.json").read_text(encoding="utf-8")
)
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "browser"
# The last path segment of a request for something the corpus names (relative ones resolve on Lab).
FETCHED = frozenset({"x", "track.png", "t.png", "x.css", "y", "z", "ext"})
PRINT_CORPUS = (
    "import json, pathlib\n"
    "for case in json.loads(pathlib.Path('corpus.json').read_text()):\n"
    "    print(case['text'])\n"
)


def prompts() -> list[str]:
    return [f"Say hostile text {i}." for i in range(len(CORPUS))] + ["Print the corpus."]


def write_notebook(path: Path, first: list[str]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "dsh", "display_name": "DSH Agent", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in [*first, *prompts()]]
    nbformat.write(nb, path)


def run_all(view: LabPage, page: Any, cells: int) -> None:
    view.wait_kernel_idle()
    view.cells.nth(0).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Escape")
    page.keyboard.press("Control+A")
    page.keyboard.press("Shift+Enter")
    last = view.cells.nth(cells - 1)
    try:
        last.locator(".dsh-turn-static").wait_for(state="attached", timeout=180_000)
    except Exception:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "hostile-timeout.png"), full_page=True)
        raise
    view.wait_kernel_idle()
    page.wait_for_timeout(1000)  # let any delayed handler (an image error, a typeset) fire


def check_page(view: LabPage, page: Any, requests: list[str], lab_url: str) -> None:
    assert page.evaluate("() => window.__dsh_pwned") is None, "a payload ran"
    assert page.evaluate("() => document.querySelectorAll('mjx-container').length") == 0
    foreign = [u for u in requests if not u.startswith(lab_url) and not u.startswith("data:")]
    assert foreign == [], foreign
    named = [u for u in requests if u.split("?")[0].rstrip("/").rsplit("/", 1)[-1] in FETCHED]
    assert named == [], named
    assert view.widget_errors() == []


@pytest.mark.timeout(600)
def test_the_hostile_corpus_runs_nothing_live_as_a_tool_result_and_replayed(
    tmp_path: Path,
) -> None:
    root, work, store = tmp_path / "notebooks", tmp_path / "work", tmp_path / "store"
    root.mkdir()
    work.mkdir()
    (root / "corpus.json").write_text(json.dumps(CORPUS), encoding="utf-8")
    write_notebook(root / "live.ipynb", ["%agent approve auto"])
    script = [sc.text(*_pieces(c["text"]), delay_ms=20) for c in CORPUS]
    script += [sc.python_call(PRINT_CORPUS), sc.text("Printed.")]
    with SseServer(script) as server:
        env = {
            "DSH_PROVIDER": "openai-compatible",
            "DSH_BASE_URL": server.url,
            "DSH_STORE": str(store),
            "IPYTHONDIR": str(tmp_path / "ipython"),
        }
        with lab_server(root, work, env) as lab, browser(work) as page:
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            view = LabPage(page, lab, "live.ipynb", timeout_s=180)
            run_all(view, page, len(prompts()) + 1)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "hostile-live.png"), full_page=False)
            card = page.locator(".dsh-turn-static .dsh-card").last
            assert "done" in card.inner_text()
            assert page.get_by_text("window.__dsh_pwned", exact=False).count() > 0  # shown as text
            check_page(view, page, requests, lab.url)

            (journal,) = [p for p in (store / "journals").rglob("*.jsonl") if p.stat().st_size]
            write_notebook(
                root / "replay.ipynb", [f"%agent replay {journal.stem}", "%agent approve auto"]
            )
            requests.clear()
            replay = LabPage(page, lab, "replay.ipynb", timeout_s=180)
            run_all(replay, page, len(prompts()) + 2)
            page.screenshot(path=str(ARTIFACTS / "hostile-replayed.png"), full_page=False)
            assert page.get_by_text("Printed.", exact=False).count() > 0
            check_page(replay, page, requests, lab.url)


def _pieces(text: str) -> list[str]:
    """The text in three streamed pieces (the live view draws it before the turn ends)."""
    third = max(1, len(text) // 3)
    return [text[:third], text[third : 2 * third], text[2 * third :]] if len(text) > 3 else [text]
