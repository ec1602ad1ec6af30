"""An MCP tool's call in a real JupyterLab (headless Chromium): its card, its approval, its result.

The notebook's kernel reads an MCP configuration (``DSH_MCP_CONFIG``) naming the SDK-built test
server over stdio (``tests/support/mcp_server.py``); the model (the loopback server) calls the
server's ``echo`` with text that is markup. The card names the tool ``t__echo`` and waits for a
click; after Allow once, the result is shown as text — the markup is data, never an element — and
the answer streams in. Screenshots go to ``artifacts/browser/``.

Needs ``/usr/bin/chromium`` and the ``playwright`` and ``jupyterlab`` packages.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat

from tests.support import scenarios as sc
from tests.support.lab import LabPage, browser, lab_server
from tests.support.mcp_server import stdio_argv
from tests.support.sse_server import SseServer

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "browser"
MARKUP = "<img src=x onerror=\"document.title='pwned'\"><b>bold?</b>"


def test_an_mcp_call_is_a_card_with_its_approval(tmp_path: Path) -> None:
    root, work = tmp_path / "notebooks", tmp_path / "work"
    root.mkdir()
    work.mkdir()
    nb_file = nbformat.v4.new_notebook()
    nb_file.metadata["kernelspec"] = {
        "name": "dsh",
        "display_name": "DSH Agent",
        "language": "python",
    }
    nb_file.cells = [nbformat.v4.new_code_cell("Echo this through the MCP server.")]
    nbformat.write(nb_file, root / "mcp.ipynb")
    argv = stdio_argv()
    config = tmp_path / "servers.json"
    config.write_text(
        json.dumps({"mcpServers": {"t": {"command": argv[0], "args": argv[1:], "cwd": str(ROOT)}}})
    )
    script = [sc.tool_calls(("t__echo", {"text": MARKUP})), sc.text("The server echoed it.")]
    with SseServer(script) as server:
        env = {
            "DSH_PROVIDER": "openai-compatible",
            "DSH_BASE_URL": server.url,
            "DSH_STORE": str(tmp_path / "store"),
            "DSH_MCP_CONFIG": str(config),
            "DSH_MCP_WAIT": "60",
            "IPYTHONDIR": str(tmp_path / "ipython"),
        }
        with lab_server(root, work, env) as lab, browser(work) as page:
            nb = LabPage(page, lab, "mcp.ipynb")
            nb.wait_kernel_idle()
            nb.run_cell(0)
            allow = nb.button("Allow once")
            allow.wait_for(state="visible", timeout=90_000)
            card = page.locator(".dsh-turn .dsh-card").first
            assert "t__echo" in card.inner_text()
            nb.screenshot(ARTIFACTS / "mcp-card-approval.png")
            allow.click()
            nb.wait_text("The server echoed it.")
            nb.wait_kernel_idle()
            nb.screenshot(ARTIFACTS / "mcp-card-done.png")
            assert page.title() != "pwned"
            assert page.locator(".dsh-card img[src='x']").count() == 0
            assert page.locator(".dsh-card b", has_text="bold?").count() == 0
            assert nb.widget_errors() == []
