"""A chat cell is edited as Markdown: the notebook extension's editor modes in a real JupyterLab.

One Lab serves the module; each test opens its own notebook (so its own kernel). What is read is
the page's own state: each cell model's ``mimeType`` (what the extension sets) and the CodeMirror
editor's language (``data-language`` on its content, what the person sees highlighted).

* On ``dsh`` a plain cell is Markdown, ``%%python`` Python (IPython), ``%%sql`` SQL, a cell of line
  magics Python, a Markdown cell untouched; all of it after the kernel's ``language_info`` arrived
  (when Lab resets every code cell's mode) and after a reset of every cell's mode, without making
  the notebook dirty. Typing ``%%python``
  on a chat cell's first line makes it Python at once; taking it away, Markdown again. A new cell
  and a moved cell get their mode too.
* The table the kernel's router is tested against (``tests/data/cell_kinds.json``) through the
  extension in the page: a saved notebook whose cells are the cases, on ``dsh`` and on
  ``dsh-python``; every cell's mode is its case's kind.
* A notebook switched from ``dsh`` to ``python3`` gets Lab's mode back on every cell, and its chat
  cells are Markdown again when switched back; a ``python3`` notebook is never touched.

Needs ``/usr/bin/chromium`` and the ``playwright`` and ``jupyterlab`` packages.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.support.cell_kinds import cell_kind_cases
from tests.support.lab import Lab, LabPage, browser, lab_server

DSH_SPEC = {"name": "dsh", "display_name": "DSH Agent", "language": "python"}
DSH_PYTHON_SPEC = {"name": "dsh-python", "display_name": "DSH Python", "language": "python"}
PY_SPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}

MIME = {"chat": "text/x-ipythongfm", "python": "text/x-ipython", "sql": "text/x-sql"}
"""Each kind's editor mime type once the kernel's ``language_info`` (IPython) has arrived."""

MODES_JS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  return panel.content.widgets.map((cell) => {
    const content = cell.node.querySelector('.jp-InputArea-editor .cm-content');
    return {
      type: cell.model.type,
      mime: cell.model.mimeType,
      language: content ? content.getAttribute('data-language') : null,
      source: cell.model.sharedModel.getSource(),
    };
  });
}"""

DIRTY_JS = "() => window.jupyterapp.shell.currentWidget.context.model.dirty"


@dataclass
class Env:
    lab: Lab
    page: Any
    root: Path


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("modes")
    root, work = tmp / "notebooks", tmp / "work"
    root.mkdir()
    work.mkdir()
    kernel_env = {
        "DSH_PROVIDER": "offline",
        "DSH_STORE": str(tmp / "store"),
        "IPYTHONDIR": str(tmp / "ipython"),
    }
    with lab_server(root, work, kernel_env) as lab, browser(work) as page:
        yield Env(lab=lab, page=page, root=root)


def write(root: Path, name: str, spec: dict[str, str], cells: list[Any]) -> str:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = spec
    nb.metadata["language_info"] = {"name": "python", "codemirror_mode": {"name": "ipython"}}
    nb.cells = cells
    nbformat.write(nb, root / name)
    return name


def modes(nb: LabPage) -> list[dict[str, Any]]:
    return nb.page.evaluate(MODES_JS)


def settle(nb: LabPage, predicate: str, arg: Any) -> None:
    """Wait (up to the page's timeout) for ``predicate(arg)`` to hold in the page; the caller then
    asserts on what is there, so a failure names what the page holds rather than a timeout."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with contextlib.suppress(PlaywrightTimeout):
        nb.page.wait_for_function(predicate, arg=arg, timeout=nb.timeout_ms)


def wait_mimes(nb: LabPage, expected: Sequence[str | None]) -> None:
    """Wait until the cells' mime types are ``expected`` (``None`` for a Markdown cell, whose own
    mode is not checked here)."""
    settle(
        nb,
        """(expected) => {
          const cells = window.jupyterapp.shell.currentWidget.content.widgets;
          return cells.length === expected.length && cells.every((cell, i) =>
            expected[i] === null ? cell.model.type !== 'code' : cell.model.mimeType === expected[i]);
        }""",
        list(expected),
    )
    assert [m["mime"] if m["type"] == "code" else None for m in modes(nb)] == list(expected)


def wait_languages(nb: LabPage, expected: Sequence[str | None]) -> None:
    """Wait until the editors' languages (``data-language``) are ``expected`` (``None``: not
    checked); every cell of these notebooks is on screen, so every editor exists."""
    settle(
        nb,
        f"""(expected) => ({MODES_JS})().every((m, i) =>
              expected[i] === null || m.language === expected[i])""",
        list(expected),
    )
    got = modes(nb)
    assert len(got) == len(expected)
    assert [
        m["language"] if want is not None else None for m, want in zip(got, expected, strict=True)
    ] == list(expected)


def code(source: str) -> Any:
    return nbformat.v4.new_code_cell(source)


def test_a_dsh_notebook_edits_chat_as_markdown_and_follows_the_cell(env: Env) -> None:
    name = write(
        env.root,
        "modes.ipynb",
        DSH_SPEC,
        [
            code("Summarise $`df` in two sentences."),
            code("%%python\nx = 1"),
            code("%%sql result <<\nSELECT 1"),
            code("%agent status"),
            nbformat.v4.new_markdown_cell("# Notes"),
            code("what does %timeit do?"),
        ],
    )
    nb = LabPage(env.page, env.lab, name)
    nb.wait_kernel_idle()  # the kernel's language_info has arrived: Lab reset every code cell
    chat, python, sql = MIME["chat"], MIME["python"], MIME["sql"]
    wait_mimes(nb, [chat, python, sql, python, None, chat])
    wait_languages(nb, ["markdown", "python", "sql", "python", None, "markdown"])

    # Lab resets every code cell's mode (as when language_info arrives); the extension sets them
    # again, and none of it is an edit of the notebook.
    nb.page.evaluate("() => window.jupyterapp.shell.currentWidget.context.save()")
    assert nb.page.evaluate(DIRTY_JS) is False
    nb.page.evaluate(
        """() => window.jupyterapp.shell.currentWidget.content.widgets.forEach((cell) => {
          if (cell.model.type === 'code') { cell.model.mimeType = 'text/plain'; }
        })"""
    )
    wait_mimes(nb, [chat, python, sql, python, None, chat])
    assert nb.page.evaluate(DIRTY_JS) is False, "setting editor modes must not edit the notebook"

    # Typing %%python on the chat cell's first line makes it Python; taking it away, Markdown.
    editor = nb.cells.nth(0).locator(".jp-InputArea-editor")
    editor.click()
    nb.page.keyboard.press("Control+Home")
    nb.page.keyboard.type("%%python")
    nb.page.keyboard.press("Enter")
    wait_mimes(nb, [python, python, sql, python, None, chat])
    wait_languages(nb, ["python", "python", "sql", "python", None, "markdown"])
    assert modes(nb)[0]["source"] == "%%python\nSummarise $`df` in two sentences."
    for _ in range(len("%%python\n")):
        nb.page.keyboard.press("Backspace")
    wait_mimes(nb, [chat, python, sql, python, None, chat])
    wait_languages(nb, ["markdown", "python", "sql", "python", None, "markdown"])

    # A new cell (a plain cell: chat), and a cell moved (Lab gives it the notebook's mode again).
    nb.page.keyboard.press("Escape")
    nb.page.keyboard.press("b")
    wait_mimes(nb, [chat, chat, python, sql, python, None, chat])
    nb.page.evaluate(
        """async () => {
          const app = window.jupyterapp;
          app.shell.currentWidget.content.activeCellIndex = 0;
          await app.commands.execute('notebook:move-cell-down');
          await app.commands.execute('notebook:move-cell-down');
        }"""
    )
    wait_mimes(nb, [chat, python, chat, sql, python, None, chat])
    assert modes(nb)[2]["source"] == "Summarise $`df` in two sentences."
    wait_languages(nb, ["markdown", "python", "markdown", "sql", "python", None, "markdown"])


@pytest.mark.parametrize(("spec", "default"), [(DSH_SPEC, "chat"), (DSH_PYTHON_SPEC, "python")])
def test_the_extension_reads_every_case_of_the_shared_table_as_the_kernel(
    env: Env, spec: dict[str, str], default: str
) -> None:
    cases = [c for c in cell_kind_cases() if c.default == default]
    name = write(env.root, f"table-{spec['name']}.ipynb", spec, [code(c.source) for c in cases])
    nb = LabPage(env.page, env.lab, name)
    nb.wait_kernel_idle()
    wait = [MIME[c.kind] for c in cases]
    try:
        wait_mimes(nb, wait)
    except AssertionError:
        got = modes(nb)
        wrong = [
            f"{c.name}: {c.source!r} is {m['mime']} in the page, the kernel's {c.kind}"
            + ("" if m["source"] == c.source else f" (the page holds {m['source']!r})")
            for c, m in zip(cases, got, strict=True)
            if m["mime"] != MIME[c.kind]
        ]
        pytest.fail("\n".join(wrong), pytrace=False)
    assert [m["source"] for m in modes(nb)] == [c.source for c in cases]


def test_a_kernel_switch_gives_cells_their_mode_and_python3_is_never_touched(env: Env) -> None:
    prose = "Summarise $`df` in two sentences."
    name = write(env.root, "switch.ipynb", DSH_SPEC, [code(prose), code("%%sql\nSELECT 1")])
    nb = LabPage(env.page, env.lab, name)
    nb.wait_kernel_idle()
    wait_mimes(nb, [MIME["chat"], MIME["sql"]])

    change = "(name) => window.jupyterapp.shell.currentWidget.sessionContext.changeKernel({name})"
    nb.page.evaluate(change, "python3")
    nb.wait_kernel_idle()
    wait_mimes(nb, [MIME["python"], MIME["python"]])
    wait_languages(nb, ["python", "python"])

    nb.page.evaluate(change, "dsh-python")
    nb.wait_kernel_idle()
    wait_mimes(nb, [MIME["python"], MIME["sql"]])

    nb.page.evaluate(change, "dsh")
    nb.wait_kernel_idle()
    wait_mimes(nb, [MIME["chat"], MIME["sql"]])
    wait_languages(nb, ["markdown", "sql"])

    plain = write(env.root, "plain.ipynb", PY_SPEC, [code(prose), code("%%sql\nSELECT 1")])
    nb = LabPage(env.page, env.lab, plain)
    nb.wait_kernel_idle()
    wait_mimes(nb, [MIME["python"], MIME["python"]])
    wait_languages(nb, ["python", "python"])
