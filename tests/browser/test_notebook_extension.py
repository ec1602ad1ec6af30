"""The notebook extension (issue 18, docs/dev/notebook-comm.md) in a real JupyterLab, headless Chromium.

One Lab serves the module; each test opens its own notebook (so its own kernel). The model is the
loopback server, scripted per test; everything else is real: the prebuilt extension the editable
install put into the virtualenv, the kernel's ``dsh.notebook`` target and tools, Lab's notebook
model, its undo, the run of a cell.

* The extension opens its comm on a ``dsh`` kernel — the kernel records the ``hello`` (frontend,
  version, path, protocol) — and again after a restart; it sends nothing to a ``python3`` kernel (no
  comm there, no "No such comm target" in the server's log).
* A chat cell whose model calls ``notebook_read`` then ``notebook_insert`` (approved with a click):
  the model was sent the notebook's markdown, a run cell's count and output summary, and the cells
  not yet run; a new ``%%python`` cell with exactly the source the kernel wrote and a markdown cell
  appear right below the chat cell, marked as the agent's; one undo removes both; redone, the code
  cell runs when the user runs it, and its mark goes (the markdown cell's stays).
* The anchor-gone case: the cell the model names was deleted by the user; nothing is inserted and
  the model is told so (the card names ``NOTEBOOK_ANCHOR_GONE``).
* The comm is closed, not left for the kernel to time out on: closing the tab while the model
  thinks sends its ``comm_close`` (the model's later ``notebook_read`` gets no ``NOTEBOOK_TIMEOUT``;
  asked through another connection, the kernel holds no comm). The close on a page unload is best
  effort (headless Chromium drops it about once in four reloads) and not tested.
* ``read`` names a widget view (the running chat cell's turn) ``widget view``, not its repr; after a
  rename, the ``read`` and ``insert`` replies carry the notebook's new path.

Needs ``/usr/bin/chromium`` and the ``playwright`` and ``jupyterlab`` packages.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.support import scenarios as sc
from tests.support.lab import Lab, LabPage, browser, lab_server
from tests.support.sse_server import Recorded, SseServer

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "browser"
DSH_SPEC = {"name": "dsh", "display_name": "DSH Agent", "language": "python"}
PY_SPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


def frontends_probe(label: str) -> str:
    """A cell printing the kernel's open ``dsh.notebook`` comms: frontend, version, path, protocol."""
    return (
        "%%python\n"
        f"print('{label}', sorted((f.frontend, f.version, f.path, f.protocol)\n"
        "      for f in get_ipython().kernel.notebook_comms.frontends.values()))"
    )


TARGETS_PROBE = (
    "targets = sorted({c.target_name for c in get_ipython().kernel.comm_manager.comms.values()})\n"
    "print('targets:', targets)"
)


@dataclass
class Env:
    lab: Lab
    page: Any
    server: SseServer
    root: Path


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("nbext")
    root, work = tmp / "notebooks", tmp / "work"
    root.mkdir()
    work.mkdir()
    with SseServer() as server:
        kernel_env = {
            "DSH_PROVIDER": "openai-compatible",
            "DSH_BASE_URL": server.url,
            "DSH_STORE": str(tmp / "store"),
            "IPYTHONDIR": str(tmp / "ipython"),
        }
        with lab_server(root, work, kernel_env) as lab, browser(work) as page:
            yield Env(lab=lab, page=page, server=server, root=root)


def write(root: Path, name: str, spec: dict[str, str], cells: list[Any]) -> str:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = spec
    nb.cells = cells
    nbformat.write(nb, root / name)
    return name


def code(cell_id: str, source: str) -> Any:
    cell = nbformat.v4.new_code_cell(source)
    cell.id = cell_id
    return cell


def ran(cell_id: str, source: str, *, count: int, stdout: str) -> Any:
    """A code cell saved with its execution count and one stdout output."""
    cell = code(cell_id, source)
    cell.execution_count = count
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stdout)]
    return cell


def markdown(cell_id: str, source: str) -> Any:
    cell = nbformat.v4.new_markdown_cell(source)
    cell.id = cell_id
    return cell


def tool_results(request: Recorded) -> list[str]:
    """The tool results a model request carried, as text."""
    out: list[str] = []
    for message in request.json["messages"]:
        if message["role"] == "tool":
            content = message["content"]
            out.append(content if isinstance(content, str) else json.dumps(content))
    return out


def output_text(nb: LabPage, n: int) -> str:
    return nb.cells.nth(n).locator(".jp-OutputArea").inner_text()


def wait_output(nb: LabPage, n: int, text: str) -> str:
    nb.page.wait_for_function(
        """([n, text]) => {
          const cells = document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell');
          const out = cells[n] && cells[n].querySelector('.jp-OutputArea');
          return !!out && out.innerText.includes(text);
        }""",
        arg=[n, text],
        timeout=nb.timeout_ms,
    )
    return output_text(nb, n)


def test_the_comm_opens_on_a_dsh_kernel_again_after_a_restart_and_never_on_python3(
    env: Env,
) -> None:
    plain = write(env.root, "plain.ipynb", PY_SPEC, [code("p1", TARGETS_PROBE)])
    nb = LabPage(env.page, env.lab, plain)
    nb.wait_kernel_idle()
    nb.wait_comm_state("none")
    nb.run_cell(0)
    assert "targets: []" in wait_output(nb, 0, "targets:")

    name = write(
        env.root,
        "comm.ipynb",
        DSH_SPEC,
        [code("c1", frontends_probe("before:")), code("c2", frontends_probe("after:"))],
    )
    nb = LabPage(env.page, env.lab, name)
    nb.wait_kernel_idle()
    nb.wait_comm_state("open")
    version = json.loads((ROOT / "widgets" / "package.json").read_text())["version"]
    expected = f"[('jupyterlab', '{version}', 'comm.ipynb', 1)]"
    nb.run_cell(0)
    assert expected in wait_output(nb, 0, "before:")

    # A restart disposes the connection's comms; the extension opens one new comm.
    env.page.evaluate(  # resolves once the new process answered
        "() => window.jupyterapp.shell.currentWidget.sessionContext.restartKernel()"
    )
    nb.wait_kernel_idle()
    nb.wait_comm_state("open")
    nb.run_cell(1)
    assert expected in wait_output(nb, 1, "after:")
    assert "No such comm target" not in env.lab.log.read_text()


def test_an_inserted_cell_appears_below_undoes_in_one_step_and_runs(env: Env) -> None:
    name = write(
        env.root,
        "agent.ipynb",
        DSH_SPEC,
        [
            markdown("intro", "# Sales notes\nRevenue figures come from the March export."),
            code("ask", "Read my notebook, then add a cell that computes the answer."),
            ran("done", "%%python\nprint('rows: 120')", count=3, stdout="rows: 120\n"),
            code("later", "%%python\ntotal = sum(range(10))"),
        ],
    )
    new_code = "answer = 6 * 7\nprint(f'answer={answer}')"
    new_note = "The cell above prints the answer."
    new_cells = [
        {"cell_type": "code", "source": new_code},
        {"cell_type": "markdown", "source": new_note},
    ]
    env.server.script(
        sc.tool_calls(("notebook_read", {})),
        sc.tool_calls(
            (
                "notebook_insert",
                {"after": "ask", "cells": new_cells},
            )
        ),
        sc.text("I added a cell below this one."),
    )
    nb = LabPage(env.page, env.lab, name)
    nb.wait_kernel_idle()
    nb.wait_comm_state("open")
    nb.run_cell(1)

    allow = nb.button("Allow once")
    allow.wait_for(state="visible", timeout=30_000)
    assert "answer = 6 * 7" in env.page.locator(".dsh-card").last.inner_text()
    allow.click()
    nb.wait_text("I added a cell below this one.")
    nb.wait_kernel_idle()

    # The model was sent the notebook as the user sees it: markdown and the cell not yet run.
    requests = env.server.requests
    assert len(requests) == 3
    # The model was sent the notebook as the user sees it: the markdown, a cell run earlier with its
    # count and output summary, the cell not yet run, and which cell the user is on.
    (read,) = tool_results(requests[1])
    for expected in (
        "live from the notebook frontend",
        "id intro · markdown",
        "# Sales notes\nRevenue figures come from the March export.",
        "id done · code [3]",
        "[outputs: stdout: rows: 120 (1 output)]",
        "id later · code\n%%python\ntotal = sum(range(10))",
        "The user's active cell: ",
    ):
        assert expected in read, (expected, read)

    # Exactly that source, right below the chat cell, with the agent's provenance, marked.
    cells = nb.model_cells()
    assert [c["id"] for c in cells][:2] == ["intro", "ask"]
    assert [c["id"] for c in cells][4:] == ["done", "later"]
    added, note = cells[2], cells[3]
    assert (added["cell_type"], added["source"]) == ("code", "%%python\n" + new_code)
    assert (note["cell_type"], note["source"]) == ("markdown", new_note)
    for cell in (added, note):
        assert cell["metadata"]["dsh"]["by"] == "agent"
        assert cell["metadata"]["dsh"]["call_id"]
        assert "reviewed" not in cell["metadata"]["dsh"]
    for n in (2, 3):
        marked = nb.cells.nth(n)
        assert "dsh-agent-cell" in (marked.get_attribute("class") or "")
        assert marked.locator(".dsh-agent-label").inner_text() == "written by the agent"
    # The extension's stylesheet (widgets/style/, loaded by Lab with the extension) styles them:
    # the mark is an inset bar, the label sits in the corner.
    shadow, position = nb.cells.nth(2).evaluate(
        "cell => [getComputedStyle(cell).boxShadow,"
        " getComputedStyle(cell.querySelector('.dsh-agent-label')).position]"
    )
    assert "inset" in shadow and position == "absolute", (shadow, position)
    assert env.page.locator(".jp-Cell.dsh-agent-cell").count() == 2
    nb.screenshot(ARTIFACTS / "notebook-insert.png")

    # One undo (Z in command mode: Edit › Undo Cell Operation) removes both; redo (Shift+Z) brings
    # them back, still unreviewed.
    nb.cells.nth(5).locator(".jp-InputPrompt").click()  # select a cell: command mode, focused
    env.page.keyboard.press("z")
    env.page.wait_for_function(
        "() => document.querySelectorAll('.jp-Notebook .jp-Cell').length === 4"
    )
    assert [c["id"] for c in nb.model_cells()] == ["intro", "ask", "done", "later"]
    env.page.keyboard.press("Shift+Z")
    env.page.wait_for_function(
        "() => document.querySelectorAll('.jp-Notebook .jp-Cell').length === 6"
    )
    assert [c["source"] for c in nb.model_cells()[2:4]] == ["%%python\n" + new_code, new_note]
    assert env.page.locator(".jp-Cell.dsh-agent-cell").count() == 2

    # Run as the user runs it: it works, and that cell is reviewed (the note is not, yet).
    nb.run_cell(2)
    assert "answer=42" in wait_output(nb, 2, "answer=42")
    nb.wait_kernel_idle()
    cells = nb.model_cells()
    assert cells[2]["metadata"]["dsh"]["reviewed"] is True
    assert "reviewed" not in cells[3]["metadata"]["dsh"]
    assert "dsh-agent-cell" not in (nb.cells.nth(2).get_attribute("class") or "")
    assert "dsh-agent-cell" in (nb.cells.nth(3).get_attribute("class") or "")


def test_an_insert_after_a_deleted_cell_inserts_nothing_and_says_so(env: Env) -> None:
    name = write(
        env.root,
        "gone.ipynb",
        DSH_SPEC,
        [
            code("ask", "Add a plot cell below the scratch cell."),
            code("scratch", "%%python\n# scratch"),
        ],
    )
    env.server.script(
        sc.tool_calls(
            (
                "notebook_insert",
                {"after": "scratch", "cells": [{"cell_type": "code", "source": "plot()"}]},
            )
        ),
        sc.text("The scratch cell is gone."),
    )
    nb = LabPage(env.page, env.lab, name)
    nb.wait_kernel_idle()
    nb.wait_comm_state("open")
    # The user deletes the scratch cell (command mode, D D) before asking.
    nb.cells.nth(1).locator(".jp-InputArea-editor").click()
    env.page.keyboard.press("Escape")
    env.page.keyboard.press("d")
    env.page.keyboard.press("d")
    env.page.wait_for_function(
        "() => document.querySelectorAll('.jp-Notebook .jp-Cell').length === 1"
    )
    nb.run_cell(0)
    allow = nb.button("Allow once")
    allow.wait_for(state="visible", timeout=30_000)
    allow.click()
    nb.wait_text("The scratch cell is gone.")
    nb.wait_kernel_idle()

    # The model reads the frontend's message; the card names the code.
    (result,) = tool_results(env.server.requests[1])
    assert "no cell with id scratch in gone.ipynb" in result, result
    card = env.page.locator(".dsh-card").last.inner_text()
    nb.screenshot(ARTIFACTS / "notebook-anchor-gone.png")
    assert "NOTEBOOK_ANCHOR_GONE" in card, card
    # Nothing was inserted (Shift+Enter on the last cell added the empty one below it, as Lab does).
    cells = nb.model_cells()
    assert cells[0]["id"] == "ask"
    assert [(c["source"], "dsh" in c["metadata"]) for c in cells[1:]] == [("", False)]
    assert env.page.locator(".jp-Cell.dsh-agent-cell").count() == 0


KERNEL_ID_JS = "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.id"

# Runs ``code`` on kernel ``id`` through a connection of its own (another client session, as a
# console's would be) and returns its stdout: a look at the kernel that needs no open notebook.
EXECUTE_ELSEWHERE_JS = """async ([id, code]) => {
  const kc = window.jupyterapp.serviceManager.kernels.connectTo(
    {model: {id, name: 'dsh'}, handleComms: false});
  let out = '';
  const future = kc.requestExecute({code, store_history: false});
  future.onIOPub = (msg) => {
    if (msg.header.msg_type === 'stream') { out += msg.content.text; }
  };
  await future.done;
  kc.dispose();
  return out;
}"""


def wait_for(predicate: Any, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_closing_the_tab_mid_turn_closes_the_comm(env: Env) -> None:
    name = write(
        env.root,
        "closing.ipynb",
        DSH_SPEC,
        [code("ask", "Read my notebook.")],
    )
    nb = LabPage(env.page, env.lab, name)
    nb.wait_kernel_idle()
    nb.wait_comm_state("open")
    kernel_id = env.page.evaluate(KERNEL_ID_JS)

    # The user closes the tab while the model is still thinking (discarding the unsaved run);
    # the model then asks to read the notebook.
    env.server.script(
        replace(sc.tool_calls(("notebook_read", {})), first_byte_delay_ms=3000),
        sc.text("Read."),
    )
    nb.run_cell(0)
    wait_for(lambda: len(env.server.requests) == 1)
    closed_at = time.monotonic()
    env.page.locator(".lm-TabBar-tab.lm-mod-current .lm-TabBar-tabCloseIcon").first.click()
    env.page.locator(".jp-Dialog button", has_text="Discard").click()
    env.page.wait_for_selector(".jp-NotebookPanel", state="detached")

    # The kernel forgot the comm: the read did not wait for a dead tab (no NOTEBOOK_TIMEOUT after
    # 10 s), and the kernel, asked through another connection, holds no comm.
    wait_for(lambda: len(env.server.requests) == 2)
    assert time.monotonic() - closed_at < 9
    (result,) = tool_results(env.server.requests[1])
    assert "NOTEBOOK_TIMEOUT" not in result, result
    out = env.page.evaluate(EXECUTE_ELSEWHERE_JS, [kernel_id, frontends_probe("left:")])
    assert "left: []" in out, out


# Records the comm messages the page sends on the open notebook's kernel connection.
SPY_JS = """() => {
  window.dshSent = [];
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  kernel.anyMessage.connect((_, args) => {
    if (args.direction === 'send' && args.msg.header.msg_type === 'comm_msg') {
      window.dshSent.push(args.msg.content.data);
    }
  });
}"""


def test_a_widget_view_is_summarised_by_name_and_the_insert_reply_has_the_path_now(
    env: Env,
) -> None:
    name = write(
        env.root,
        "before-rename.ipynb",
        DSH_SPEC,
        [code("hello", "Say hello."), code("ask", "Read my notebook, then add a note.")],
    )
    env.server.script(
        sc.text("Hello from the first turn."),
        sc.tool_calls(("notebook_read", {})),
        sc.tool_calls(
            (
                "notebook_insert",
                {"after": "ask", "cells": [{"cell_type": "markdown", "source": "A note."}]},
            )
        ),
        sc.text("Added a note."),
    )
    nb = LabPage(env.page, env.lab, name)
    nb.wait_kernel_idle()
    nb.wait_comm_state("open")
    nb.run_cell(0)
    nb.wait_text("Hello from the first turn.")
    nb.wait_kernel_idle()
    env.page.evaluate(SPY_JS)
    # The user renames the notebook after its comm opened (its hello named the old path).
    env.page.evaluate(
        "async () => await window.jupyterapp.shell.currentWidget.context.rename('renamed.ipynb')"
    )
    nb.run_cell(1)
    allow = nb.button("Allow once")
    allow.wait_for(state="visible", timeout=30_000)
    allow.click()
    nb.wait_text("Added a note.")
    nb.wait_kernel_idle()

    # The running chat cell's turn view is a widget view: named, not its repr (VBox(children=(…).
    (read,) = tool_results(env.server.requests[2])
    assert "id ask · code" in read, read
    assert "[outputs: widget view" in read, read
    assert "VBox" not in read and "<style" not in read, read
    # The insert reply names the notebook's path as it is now.
    sent = env.page.evaluate("() => window.dshSent")
    (reply,) = [m for m in sent if "inserted" in m]
    assert reply["ok"] is True and reply["path"] == "renamed.ipynb", reply
    # Two reads: the kernel's own at the chat cell's start (the notebook's order: kernel.rewind),
    # then the tool's.
    order_reply, read_reply = [m for m in sent if "cells" in m]
    assert [c["id"] for c in order_reply["cells"]][:2] == ["hello", "ask"]
    assert read_reply["path"] == "renamed.ipynb"
    assert read_reply["cells"][1]["outputs"].startswith("widget view"), read_reply["cells"][1]
