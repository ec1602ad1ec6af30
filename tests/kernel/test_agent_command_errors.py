"""A failed ``%agent`` command fails its cell (issue 12, item 2), and free text parses (item 11).

A command that cannot do what it was asked replies ``status: error`` with ``ename`` = the stable
code, ``evalue`` = what was wrong and what to do, and a one-line traceback — never our frames — so
that Run All stops there: after a failed ``%agent replay`` the teaching notebook's chat cells must
not go to whatever model is configured. ``%agent search don't`` searches for ``don't``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from tests.kernel.conftest import Live, provider_env
from tests.support import scenarios as sc
from tests.support.kernel import kernelspecs
from tests.support.sse_server import SseServer

FAILURES = [
    ("%agent resume 0000dead", "SESSION_NOT_FOUND", "%agent resume: ", "0000dead"),
    ("%agent replay nope", "SESSION_NOT_FOUND", "%agent replay: ", "nope"),
    ("%agent fork 99", "USAGE", "%agent fork: ", "turn 99"),
    ("%agent frobnicate", "UNKNOWN_COMMAND", "%agent: unknown subcommand 'frobnicate'", "status"),
]


@pytest.mark.parametrize(("line", "code", "starts", "names"), FAILURES)
def test_a_failed_command_fails_its_cell(
    live: Live, line: str, code: str, starts: str, names: str
) -> None:
    ex = live.fe.run(line)
    assert ex.status == "error", ex.content
    assert ex.content["ename"] == code
    evalue = ex.content["evalue"]
    assert evalue.startswith(starts) and names in evalue, evalue
    assert ex.content["traceback"] == [f"{code}: {evalue}"]
    (error,) = ex.of_type("error")  # the notebook shows the same one line
    assert error["content"]["ename"] == code
    assert error["content"]["traceback"] == [f"{code}: {evalue}"]
    shown = json.dumps([m["content"] for m in ex.messages])
    assert "Traceback" not in shown and ".py" not in shown  # none of our frames
    assert live.server.requests == []


def test_a_key_prompt_without_stdin_is_a_usage_error(live: Live) -> None:
    ex = live.kernel.execute("%agent key openai", allow_stdin=False)  # a headless client
    assert ex.status == "error" and ex.content["ename"] == "USAGE", ex.content
    assert "cannot ask for input" in ex.content["evalue"]
    assert "Traceback" not in json.dumps(ex.content)


def test_the_rest_of_a_failing_cell_does_not_run(live: Live) -> None:
    ex = live.fe.run("%agent frobnicate\n%agent title should not be set")
    assert ex.status == "error" and ex.content["ename"] == "UNKNOWN_COMMAND"
    titles = [e for e in live.fe.events() if e["type"] == "session/title"]
    assert not any("should not be set" in json.dumps(e["data"]) for e in titles)


def test_a_failed_command_is_logged_as_an_error(live: Live) -> None:
    assert live.fe.run("%agent fork 99").status == "error"
    done = [e["data"] for e in live.fe.events() if e["type"] == "command/done"]
    assert done[-1]["kind"] == "error" and "turn 99" in done[-1]["text"]
    assert live.fe.python("print(6 * 7)").strip() == "42"  # the kernel is fine


def test_free_text_with_an_apostrophe_parses_and_flags_still_work(live: Live) -> None:
    live.server.script(sc.text("Noted."))
    assert live.fe.run("I don't like red charts.").status == "ok"
    ex = live.fe.run("%agent search don't")
    assert ex.status == "ok", ex.content
    assert "don't like red" in ex.stdout, ex.stdout
    ex = live.fe.run("%agent search 'like red'")  # quotes still group words
    assert ex.status == "ok" and "don't like red" in ex.stdout, ex.stdout
    target = live.tmp / "my notes.md"  # a flag, then a quoted path with a space
    target.unlink(missing_ok=True)
    ex = live.fe.run('%agent export --md "my notes.md"')
    assert ex.status == "ok", ex.content
    assert "don't like red" in target.read_text(encoding="utf-8")


def test_run_all_stops_at_a_failed_agent_line(
    server: SseServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.script(sc.text("This answer must never be asked for."))
    marker = tmp_path / "ran-after-the-failure"
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "dsh", "display_name": "DSH Agent", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("%agent approve auto"),
        nbformat.v4.new_code_cell("%agent replay nope"),
        nbformat.v4.new_code_cell("What did the recording say?"),
        nbformat.v4.new_code_cell(f"%%python\nopen({str(marker)!r}, 'w').close()"),
    ]
    monkeypatch.setenv("JUPYTER_PATH", str(kernelspecs(tmp_path)))
    for key in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DSH_MODEL"):
        monkeypatch.delenv(key, raising=False)
    env = {**os.environ, **provider_env(server, tmp_path, DSH_STORE=str(tmp_path / "store"))}
    client = NotebookClient(
        nb, timeout=60, kernel_name="dsh", resources={"metadata": {"path": str(tmp_path)}}
    )
    with pytest.raises(CellExecutionError) as raised:
        client.execute(env=env, cwd=str(tmp_path))
    assert raised.value.ename == "SESSION_NOT_FOUND"
    assert "nope" in raised.value.evalue
    assert not marker.exists()
    assert server.requests == []  # the chat cell after the failure never ran
    assert nb.cells[2].outputs == [] and nb.cells[3].outputs == []
