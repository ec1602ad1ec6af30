"""The teaching notebooks, executed headless as a reader's Run All would, with no key and no network:
the offline demo model (01, 02), replays of the recordings shipped in ``notebooks/data`` (03, 05) and
the loopback fake model server (04)."""

from __future__ import annotations

import base64
import difflib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_kernel.llm.providers.offline import OFFLINE_LABEL
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import run_query
from dsh_kernel.store.shared.catchup import ship_store
from tests.support.course_sample import make_course
from tests.support.frontend import markdown_footer
from tests.support.kernel import kernelspecs
from tests.support.notebooks import NOTEBOOKS, PROVIDER_KEYS, Executed, run_notebook
from tests.support.shared_db import SharedDb
from tests.support.sse_server import SseServer, sse_reply
from tests.support.wire_transcripts import anthropic_text, chat_text_stream, deepseek_thinking_text

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
DATA = Path(__file__).resolve().parents[2] / "notebooks" / "data"


def recorded_session_id(name: str) -> str:
    with (DATA / name).open(encoding="utf-8") as f:
        return str(json.loads(f.readline())["id"])


def assert_static_saved(ex: Executed, start: str) -> None:
    """The finished chat cell is saved as its static rendering (what JupyterLab without a kernel,
    nbconvert and GitHub show), not as a widget view; nbclient still saved the widget state."""
    outputs = ex.cell(start).outputs
    assert not any(WIDGET_VIEW in o.get("data", {}) for o in outputs)
    static = [
        o.data for o in outputs if "dsh-turn-static" in o.get("data", {}).get("text/html", "")
    ]
    assert len(static) == 1
    assert static[0]["text/markdown"].strip()
    assert ex.nb.metadata["widgets"][WIDGET_STATE]["state"]


def assert_same_saved(first: Executed, second: Executed) -> None:
    """Two Run Alls of a replayed notebook saved the same bytes (``Executed.saved`` says exactly
    what nbclient and ipywidgets write differently on every run and is left out)."""
    a, b = first.saved(), second.saved()
    if a != b:
        diff = difflib.unified_diff(
            a.splitlines(), b.splitlines(), "first", "second", n=0, lineterm=""
        )
        raise AssertionError("the two runs saved different notebooks:\n" + "\n".join(diff))


# --- 01 ----------------------------------------------------------------------------------------------


def test_quickstart_runs_with_no_key_and_shows_the_whole_product(tmp_path: Path) -> None:
    ex = run_notebook("01-quickstart.ipynb", tmp_path, {"DSH_APPROVAL": "auto"})
    assert ex.errors() == []
    status = ex.text("%agent status")
    assert f"provider: {OFFLINE_LABEL}: no API key found" in status
    assert "approval: auto" in status

    chat = "What is in $`sales`?"
    answer = ex.text(chat, "text/markdown")
    assert OFFLINE_LABEL in answer
    assert "<b>inspect sales</b> <code>python</code> — done" in answer  # the tool card
    assert "DataFrame" in answer and "(4, 3)" in answer  # the tool ran on the notebook's value
    assert "%%sql" in answer  # the suggested query
    footer = markdown_footer(answer)
    for part in ("offline:offline-demo", "in ", "out ", "first token", "total", "session "):
        assert part in footer, footer
    assert_static_saved(ex, chat)

    counts = ex.text("%%sql\nSELECT type, count(*)")
    for event_type in ("user/message", "assistant/chunk", "tool/call", "tool/result", "turn/end"):
        assert event_type in counts
    calls = ex.text("%%sql\nSELECT turn, name, status")
    assert "python | done" in calls and "DataFrame" in calls
    assert ex.text("%agent cost").startswith("this session: 2 requests")


def test_quickstart_headless_without_auto_approval_denies_and_says_how_to_allow(
    tmp_path: Path,
) -> None:
    ex = run_notebook("01-quickstart.ipynb", tmp_path, {"DSH_HEADLESS_APPROVAL_TIMEOUT": "0.2"})
    assert ex.errors() == []
    answer = ex.text("What is in $`sales`?", "text/markdown")
    assert "<b>inspect sales</b> <code>python</code> — denied" in answer
    assert "%agent approve auto" in answer
    assert "python | denied" in ex.text("%%sql\nSELECT turn, name, status")


# --- 02 ----------------------------------------------------------------------------------------------


def test_sql_notebook_queries_views_joins_a_frame_prices_turns_and_charts(tmp_path: Path) -> None:
    ex = run_notebook("02-sql-over-sessions.ipynb", tmp_path)
    assert ex.errors() == []
    lesson = recorded_session_id("teaching-session.jsonl")
    assert ex.text("from dsh_kernel.store import import_journal") == repr(lesson)
    assert OFFLINE_LABEL in ex.text("%%chat", "text/markdown")

    sessions = ex.text("%%sql\nSELECT title, turns")
    assert "2 rows" in sessions and "Make a pandas DataFrame called `planets`" in sessions

    turns = ex.text("%%sql\nSELECT turn, left(prompt, 50)").splitlines()
    assert turns[-1] == "4 rows in " + turns[-1].split(" in ")[1]
    assert [ln.split("|")[-2].strip() for ln in turns[2:6]] == ["0", "0", "1", "0"]  # tool_errors

    per_turn = ex.text("per_turn").splitlines()
    assert per_turn[0].split() == [
        "turn",
        "input_tokens",
        "cached_input_tokens",
        "output_tokens",
        "cost",
    ]
    costs = [float(row.split()[-1]) for row in per_turn[1:]]
    assert len(costs) == 4 and all(c > 0 for c in costs)

    charts = [o for o in ex.cell("import matplotlib").outputs if "image/png" in o.get("data", {})]
    assert len(charts) == 1
    assert base64.b64decode(charts[0].data["image/png"]).startswith(b"\x89PNG")

    rate = ex.text("%%sql\nSELECT name,\n       count(*) AS calls")
    assert [c.strip() for c in rate.splitlines()[2].split("|")] == ["python", "5", "1", "20.0"]
    joined = ex.text("%%sql\nSELECT o.team")
    assert [c.strip() for c in joined.splitlines()[2].split("|")] == ["data", "5", "1"]
    assert "INVALID_ARGS" in ex.text("%%sql\nSELECT source, code")
    assert "8 rows" in ex.text("%%sql\nSELECT request, turn")


# --- 03 ----------------------------------------------------------------------------------------------

LESSON_ANSWERS = (
    "`planets` has 8 rows and 3 columns",
    "together they have **285** known moons",
    "a giant planet has **71.25** known moons",
    "after fixing a wrong argument name",
)


def test_teaching_replay_runs_all_offline_and_twice_gives_identical_outputs(
    tmp_path: Path,
) -> None:
    first = run_notebook("03-teaching-replay.ipynb", tmp_path / "a")
    second = run_notebook("03-teaching-replay.ipynb", tmp_path / "b")
    for ex in (first, second):
        assert ex.errors() == []
        answers = [
            ex.text(start, "text/markdown")
            for start in ("Make a pandas", "Which planets", "What is the average", "Summarise")
        ]
        for answer, expected in zip(answers, LESSON_ANSWERS, strict=True):
            assert expected in answer
            assert "replay:teaching-script" in answer  # the footer names the recording's model
        assert "Reasoning" in answers[1]
        assert "<b>python</b> — failed" in answers[2] and "INVALID\\_ARGS" in answers[2]
        # The agent's code ran in this notebook: the student's own cell sees `planets`.
        assert "Saturn" in ex.text("%%python\nplanets.sort_values")
        calls = ex.text("%%sql\nSELECT turn, name, status, error_code")
        assert "python | failed | INVALID_ARGS" in calls
    assert_same_saved(first, second)
    # Only the drawing leaves times and ids out: the replay's own session keeps them in the store.
    recording = recorded_session_id("teaching-session.jsonl")
    kept = run_query(
        Store.at(first.store),
        "SELECT (SELECT count(*) FROM turns WHERE session_id <> $r AND duration_ms IS NOT NULL),"
        " (SELECT count(*) FROM tool_calls WHERE session_id <> $r AND duration_ms IS NOT NULL)",
        {"r": recording},
    )
    assert kept.rows == ((4, 4),)


GRADING = (
    "--ExecutePreprocessor.record_timing=False",
    "--ExecutePreprocessor.store_widget_state=False",
)
"""What docs/course.md tells a course to run: nbconvert's own timing stamps and the widget models'
random ids are the only bytes of a replay's re-run that would differ."""


def nbconvert_in_place(notebook: Path, data: Path, store: Path) -> bytes:
    """``jupyter nbconvert --to notebook --execute --inplace`` as a grader runs it; the file's bytes."""
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_KEYS}
    env.update({"JUPYTER_PATH": str(data), "DSH_STORE": str(store), "PYTHONUNBUFFERED": "1"})
    command = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute"]
    done = subprocess.run(
        [*command, "--inplace", *GRADING, notebook.name],
        cwd=notebook.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    return notebook.read_bytes()


def test_a_replayed_notebook_re_executed_for_grading_is_byte_identical(tmp_path: Path) -> None:
    """The grading loop: the executed notebook is committed; re-running it — on another machine,
    with an empty store — writes the very same bytes, so ``git diff`` shows nothing."""
    work = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, work)
    data = kernelspecs(tmp_path)
    notebook = work / "03-teaching-replay.ipynb"
    committed = nbconvert_in_place(notebook, data, tmp_path / "store-a")
    assert b"replay:teaching-script" in committed and b'"execution_count": null' not in committed
    assert nbconvert_in_place(notebook, data, tmp_path / "store-b") == committed
    assert nbconvert_in_place(notebook, data, tmp_path / "store-b") == committed  # and again


def test_teaching_replay_stops_clearly_when_a_message_no_longer_matches(tmp_path: Path) -> None:
    import nbformat

    from tests.support.notebooks import NOTEBOOKS

    nb = nbformat.read(NOTEBOOKS / "03-teaching-replay.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.source.startswith("Summarise"):
            cell.source = "Summarise it in one sentence."
    edited = tmp_path / "edited"
    edited.mkdir()
    nbformat.write(nb, edited / "03-edited.ipynb")
    with pytest.raises(Exception) as err:
        run_notebook("03-edited.ipynb", tmp_path / "run", source=edited)
    assert "REPLAY_DIVERGED" in str(err.value)


# --- 04 ----------------------------------------------------------------------------------------------


def test_providers_notebook_against_the_loopback_fake_server(tmp_path: Path) -> None:
    replies = [
        sse_reply(deepseek_thinking_text("A greeting.", "Hello from the DeepSeek fake!")),
        sse_reply(chat_text_stream(["Hello ", "from the OpenAI fake!"])),
        sse_reply(anthropic_text("Hello from the Anthropic fake!")),
        sse_reply(chat_text_stream(["Hello from the Ollama fake!"])),
        sse_reply(chat_text_stream(["Hello from the vLLM fake!"])),
        sse_reply(chat_text_stream(["Hello from the llama.cpp fake!"])),
    ]
    keys = {
        "DEEPSEEK_API_KEY": "sk-deepseek-test",
        "OPENAI_API_KEY": "sk-openai-test",
        "ANTHROPIC_API_KEY": "sk-ant-test",
    }
    with SseServer(replies) as server:
        # each provider's own endpoint is the fake (a base URL belongs to one provider only)
        urls = {f"{p}_BASE_URL": server.url for p in ("DSH", "DEEPSEEK", "OPENAI", "ANTHROPIC")}
        ex = run_notebook("04-providers.ipynb", tmp_path, {**urls, **keys})
        requests = server.requests
    assert ex.errors() == []
    assert server.remaining == 0
    answers = [
        o.data["text/markdown"]
        for c in ex.nb.cells
        if c.cell_type == "code" and c.source == "Say hello in five words."
        for o in c.outputs
        if "text/markdown" in o.get("data", {})
    ]
    expected = ["DeepSeek", "OpenAI", "Anthropic", "Ollama", "vLLM", "llama.cpp"]
    assert len(answers) == len(expected)
    for answer, name in zip(answers, expected, strict=True):
        assert f"Hello from the {name} fake!" in answer

    sent = [(r.path, r.json["model"]) for r in requests]
    assert sent == [
        ("/chat/completions", "deepseek-flash"),
        ("/chat/completions", "gpt-6-luna"),
        ("/v1/messages", "claude-sonnet-5-5"),
        ("/chat/completions", "llama3.2"),
        ("/chat/completions", "Qwen/Qwen2.5-7B-Instruct"),
        ("/chat/completions", "local"),
    ]
    auth = [r.headers.get("authorization") or r.headers.get("x-api-key") for r in requests]
    assert auth[:3] == ["Bearer sk-deepseek-test", "Bearer sk-openai-test", "sk-ant-test"]
    assert all(a == "Bearer sk-no-key" for a in auth[3:])  # OPENAI_API_KEY never goes elsewhere
    assert "Reasoning" in answers[0]
    assert "provider: deepseek" in ex.text("%agent status")
    assert f"now using {OFFLINE_LABEL}" in ex.text("%env DSH_BASE_URL=\n%agent provider offline")


# --- 05 ----------------------------------------------------------------------------------------------


def test_build_a_tool_notebook(tmp_path: Path) -> None:
    ex = run_notebook("05-build-a-tool.ipynb", tmp_path / "a")
    assert ex.errors() == []
    # its chat cell is a replay: a second Run All saves the same notebook
    assert_same_saved(ex, run_notebook("05-build-a-tool.ipynb", tmp_path / "b"))
    schema = ex.text("from dsh_kernel import tool")
    assert (
        "the amount in the source currency" in schema and "'required': ['amount', 'rate']" in schema
    )

    answer = ex.text("%%chat\nHow much is 250 EUR", "text/markdown")
    assert "<b>convert</b> — done" in answer and "270.0" in answer
    assert "**270.00 USD**" in answer
    assert_static_saved(ex, "%%chat\nHow much is 250 EUR")

    decorated = ex.text("@tool(read_only=True)")
    assert decorated.startswith("word_count | read-only: True | Count the words in a text.\n")
    assert "called as written: 3\n" in decorated  # @tool gives the function back
    policies = ex.text("from dsh_kernel import Agent").splitlines()
    assert policies[0].endswith("-> saved note 1")
    assert policies[1].startswith("asked: may save_note run")
    assert "the user rejected this call to 'save_note'" in policies[2]
    assert "its approval policy is 'never'" in policies[3]
    assert policies[4] == "notes: ['buy milk']"

    asked = ex.text("from dsh_kernel.kernel.toolbox.ask_user")
    assert 'the model got: {"answers":[{"id":"unit","selected":["metric"]}]}' in asked
    assert "final answer: Metric it is." in asked


# --- 06 ----------------------------------------------------------------------------------------------


def test_instructor_notebook_queries_the_shipped_course(
    tmp_path: Path, shared_db: SharedDb
) -> None:
    # the shared-store section mirrors a real server holding the sample course's sessions
    for store in make_course(tmp_path / "course").values():
        ship_store(store, shared_db.target)
    ex = run_notebook("06-instructor.ipynb", tmp_path, {"DSH_SHARED_STORE": shared_db.target})
    assert ex.errors() == []
    assert ex.text("from pathlib import Path") == "['alice', 'bob', 'chen']"
    per_student = ex.text("import duckdb").splitlines()
    assert [line.split()[1] for line in per_student[1:]] == ["alice", "bob", "chen"]
    assert per_student[2].split()[1:5] == ["bob", "explain", "1", "3"]
    assert per_student[3].split()[1:3] == ["chen", "unrecorded"]  # the folder's name: no user
    by_day = ex.text('con.sql("""\n    SELECT date')
    assert "2026-11-01" in by_day and "2026-11-04" in by_day
    tools = ex.text('con.sql("""\n    SELECT s.student, c.name')
    assert "DENIED" in tools and "CODE_FAILED" in tools
    assert "BUDGET_EXCEEDED" in ex.text('con.sql("""\n    SELECT s.student, s.notebook')
    report = ex.text("import subprocess", "text/markdown")
    assert report.startswith("# Course report\n\n3 students, 5 sessions, 8 turns")
    assert "| bob | hw1-regression.ipynb | 1 | 3 |" in report
    written = ex.workdir / "course-report.html"
    assert ex.text("print(dsh(") == f"wrote the report to {written}\n"
    assert written.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    mirrored = ex.text("import os\n\nshared = ")  # the mirror's line, then the per-user table
    assert mirrored.startswith("mirrored ") and " new events of 5 sessions from " in mirrored
    assert "alice" in mirrored and "bob" in mirrored and "NULL" in mirrored  # chen: no user
