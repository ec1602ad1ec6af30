"""Finding a notebook's conversation again (issue 12, item 4), through real kernels.

Each test starts its own kernels on one private store, with ``JPY_SESSION_NAME`` set as
jupyter-server sets it: the notebook path is on the session and in the ``sessions`` view;
``%agent resume`` takes the 8 characters a footer shows, and with no id resumes this notebook's
latest session; a restarted kernel's first chat cell says live (never in the saved notebook) that an
earlier session exists; a kernel that only ran ``%agent`` commands leaves no session behind.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import run_query
from tests.kernel.conftest import provider_env
from tests.support import scenarios as sc
from tests.support.frontend import Frontend
from tests.support.kernel import kernelspecs, start_kernel
from tests.support.sse_server import SseServer

NOTEBOOK = "/home/ana/projects/sales/analysis.ipynb"
HINT = "earlier session"


def _env(server: SseServer, tmp: Path, notebook: str = NOTEBOOK) -> dict[str, str]:
    return provider_env(server, tmp, JPY_SESSION_NAME=notebook)


def _chat_once(server: SseServer, tmp: Path, store: Path, answer: str = "Noted.") -> str:
    """Run one chat turn in a fresh kernel of the notebook; returns the session id."""
    server.script(sc.text(answer))
    with start_kernel(tmp, "dsh", env=_env(server, tmp), store=store) as kernel:
        fe = Frontend(kernel)
        assert fe.run("Remember: the red chart is wrong.").status == "ok"
        return fe.python("print(get_ipython().kernel.host.agent.session.id)").strip()


def _rows(store: Path) -> list[tuple[object, ...]]:
    result = run_query(Store.at(store), "SELECT session_id, notebook, turns FROM sessions")
    return [tuple(r) for r in result.rows]


def test_the_notebook_path_is_on_the_session_and_queryable(
    server: SseServer, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    sid = _chat_once(server, tmp_path / "k1", store)
    assert _rows(store) == [(sid, NOTEBOOK, 1)]


def test_agent_sessions_shows_the_title_and_the_notebook(server: SseServer, tmp_path: Path) -> None:
    server.script(sc.text("Noted."))
    with start_kernel(tmp_path, "dsh", env=_env(server, tmp_path), store=tmp_path / "store") as k:
        fe = Frontend(k)
        assert fe.run("Remember: the red chart is wrong.").status == "ok"
        listing = fe.run("%agent sessions")
    assert listing.status == "ok", listing.content
    [row] = [line for line in listing.stdout.splitlines() if "(this session)" in line]
    assert row.endswith(f"Remember: the red chart is wrong. · {NOTEBOOK} (this session)"), row


def test_resume_takes_a_short_id_and_no_id_means_this_notebooks_latest(
    server: SseServer, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    first = _chat_once(server, tmp_path / "k1", store, "First.")
    latest = _chat_once(server, tmp_path / "k2", store, "Second.")
    with start_kernel(tmp_path / "k3", "dsh", env=_env(server, tmp_path), store=store) as kernel:
        fe = Frontend(kernel)
        ex = fe.run(f"%agent resume {first[:8]}")  # what a footer shows
        assert ex.status == "ok", ex.content
        assert f"resumed session {first}" in ex.stdout
        assert fe.python("print(get_ipython().kernel.host.agent.session.id)").strip() == first
    with start_kernel(tmp_path / "k4", "dsh", env=_env(server, tmp_path), store=store) as kernel:
        fe = Frontend(kernel)
        ex = fe.run("%agent resume")
        assert ex.status == "ok", ex.content
        assert f"resumed session {latest}" in ex.stdout
    # Another notebook's kernel finds none of these as its own.
    other = _env(server, tmp_path, "/home/ana/other.ipynb")
    with start_kernel(tmp_path / "k5", "dsh", env=other, store=store) as kernel:
        ex = Frontend(kernel).run("%agent resume")
        assert ex.status == "error" and ex.content["ename"] == "SESSION_NOT_FOUND", ex.content
        assert "/home/ana/other.ipynb" in ex.content["evalue"]


def test_a_prefix_two_sessions_share_is_ambiguous(server: SseServer, tmp_path: Path) -> None:
    store = tmp_path / "store"
    day = store / "journals" / "2026-01-01"
    day.mkdir(parents=True)
    for sid in ("abcd0001-0000-4000-8000-000000000000", "abcd0002-0000-4000-8000-000000000000"):
        header = {"version": 1, "id": sid, "createdAt": 1767225600000}
        (day / f"{sid}.jsonl").write_text(json.dumps(header) + "\n", encoding="utf-8")
    with start_kernel(tmp_path / "k", "dsh", env=_env(server, tmp_path), store=store) as kernel:
        ex = Frontend(kernel).run("%agent resume abcd")
    assert ex.status == "error" and ex.content["ename"] == "SESSION_AMBIGUOUS", ex.content
    assert ex.content["traceback"] == [f"SESSION_AMBIGUOUS: {ex.content['evalue']}"]
    assert "abcd0001" in ex.content["evalue"] and "abcd0002" in ex.content["evalue"]


def test_a_restarted_kernel_hints_live_at_the_earlier_session_never_in_the_saved_notebook(
    server: SseServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    earlier = _chat_once(server, tmp_path / "k1", store)
    server.script(sc.text("Hello again."), sc.text("And again."))
    with start_kernel(tmp_path / "k2", "dsh", env=_env(server, tmp_path), store=store) as kernel:
        fe = Frontend(kernel)
        ex = fe.run("Where were we?")
        assert ex.status == "ok", ex.content
        shown = [t for t in ex.data("text/plain") if HINT in t]
        assert len(shown) == 1, ex.data("text/plain")
        (hint,) = shown
        assert earlier[:8] in hint and "%agent resume" in hint and "\n" not in hint
        again = fe.run("Anything else?")  # once per kernel: the first chat cell only
        assert not [t for t in again.data("text/plain") if HINT in t]

    server.script(sc.text("Hello from nbclient."))
    monkeypatch.setenv("JUPYTER_PATH", str(kernelspecs(tmp_path)))
    for key in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DSH_MODEL"):
        monkeypatch.delenv(key, raising=False)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "dsh", "display_name": "DSH Agent", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("Where were we?")]
    env = {**os.environ, **_env(server, tmp_path), "DSH_STORE": str(store)}
    client = NotebookClient(
        nb, timeout=60, kernel_name="dsh", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute(env=env, cwd=str(tmp_path))
    saved = nbformat.writes(nb)
    assert "Hello from nbclient." in saved
    assert HINT not in saved and earlier[:8] not in saved


def test_the_hint_is_never_shown_in_replay(server: SseServer, tmp_path: Path) -> None:
    store = tmp_path / "store"
    recorded = _chat_once(server, tmp_path / "k1", store)
    with start_kernel(tmp_path / "k2", "dsh", env=_env(server, tmp_path), store=store) as kernel:
        fe = Frontend(kernel)
        assert fe.run(f"%agent replay {recorded[:8]}").status == "ok"
        ex = fe.run("Remember: the red chart is wrong.")
        assert ex.status == "ok", ex.content
        assert not [t for t in ex.data("text/plain") if HINT in t]


def test_agent_commands_alone_leave_no_session(server: SseServer, tmp_path: Path) -> None:
    store = tmp_path / "store"
    with start_kernel(tmp_path / "k1", "dsh", env=_env(server, tmp_path), store=store) as kernel:
        fe = Frontend(kernel)
        assert fe.run("%agent status").status == "ok"
        assert fe.run("%agent sessions").status == "ok"
    assert not list(Store.at(store).iter_journals())
    assert _rows(store) == []
    # Commands run before the first turn are kept in memory and written with it.
    server.script(sc.text("Noted."))
    with start_kernel(tmp_path / "k2", "dsh", env=_env(server, tmp_path), store=store) as kernel:
        fe = Frontend(kernel)
        assert fe.run("%agent title sales review").status == "ok"
        assert fe.run("Hello").status == "ok"
    result = run_query(
        Store.at(store),
        "SELECT s.title, count(*) FILTER (WHERE e.type = 'command/run') FROM sessions s "
        "JOIN events e USING (session_id) GROUP BY s.title",
    )
    assert [tuple(r) for r in result.rows] == [("sales review", 1)]
