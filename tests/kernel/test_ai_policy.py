"""A course's AI policy (issue 17, item 2), through real kernels and the loopback model server.

``off`` refuses chat cells (and ``%agent compact``, ``%agent replay``) before a byte is sent, while
``%%python``, the DSH Python kernel and ``%%sql`` keep working; ``explain`` sends no ``python`` tool
and a system prompt that says to guide rather than solve, refuses an ``&`fn``` that is not
read-only, and a ``python`` call the model makes anyway runs nothing; a notebook's
``metadata.dsh.ai_policy`` (the file ``JPY_SESSION_NAME`` names) tightens the configuration but
never loosens it, and a notebook saved while the kernel runs takes effect at its next chat cell;
the policy in force only tightens (a renamed notebook keeps what it named), and the extension's
``path`` message leads the kernel to a renamed notebook; the session header in the store records
the policy in force.
"""

from __future__ import annotations

import json
import os
import pwd
import uuid
from pathlib import Path
from typing import Any

from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import run_query
from tests.kernel.conftest import provider_env
from tests.support import scenarios as sc
from tests.support.frontend import Frontend
from tests.support.kernel import start_kernel
from tests.support.sse_server import SseServer


def write_notebook(path: Path, policy: object | None) -> Path:
    """A notebook file whose ``metadata.dsh.ai_policy`` is ``policy`` (``None``: no ``dsh`` key)."""
    metadata: dict[str, Any] = {"kernelspec": {"name": "dsh", "display_name": "DSH Agent"}}
    if policy is not None:
        metadata["dsh"] = {"ai_policy": policy}
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": metadata, "cells": []}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def tool_names(body: Any) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


def system_text(body: Any) -> str:
    return "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "system")


def sessions(store: Path) -> list[tuple[Any, ...]]:
    result = run_query(
        Store.at(store),
        'SELECT session_id, ai_policy, "user", parent_session FROM sessions ORDER BY created',
    )
    return [tuple(r) for r in result.rows]


def status(fe: Frontend) -> str:
    ex = fe.run("%agent status")
    assert ex.status == "ok", ex.content
    return ex.stdout


def test_off_refuses_chat_and_keeps_python_and_sql(server: SseServer, tmp_path: Path) -> None:
    server.script()
    env = provider_env(server, tmp_path, DSH_AI_POLICY="off")
    with start_kernel(tmp_path, "dsh", env=env) as kernel:
        fe = Frontend(kernel)
        ex = fe.run("Explain the chart, please.")
        assert ex.status == "error" and ex.content["ename"] == "AI_POLICY_OFF", ex.content
        line = ex.content["evalue"]
        assert "AI switched off" in line and "%%python" in line and "DSH_AI_POLICY" in line
        assert "\n" not in line and ex.content["traceback"] == [f"AI_POLICY_OFF: {line}"]
        for command in ("%agent compact", "%agent replay abcd1234"):
            ex = fe.run(command)
            assert ex.status == "error" and ex.content["ename"] == "AI_POLICY_OFF", ex.content
        assert server.requests == []  # nothing reached the model

        assert fe.run("%%python\nanswer = 6 * 7\nprint(answer)").stdout.strip() == "42"
        ex = fe.run("%%sql\nSELECT 6 * 7 AS answer")
        assert ex.status == "ok", ex.content
        assert "42" in "".join(ex.data("text/plain")) + ex.stdout
        shown = status(fe)
        assert "ai policy: off (DSH_AI_POLICY)" in shown
        assert "tools:    none" in shown
    assert sessions(tmp_path / "store") == []  # no chat, so no session was written


def test_off_in_the_dsh_python_kernel_refuses_chat_cells_only(
    server: SseServer, tmp_path: Path
) -> None:
    server.script()
    env = provider_env(server, tmp_path, DSH_AI_POLICY="off")
    with start_kernel(tmp_path, "dsh-python", env=env) as kernel:
        fe = Frontend(kernel)
        ex = fe.run("%%chat\nSolve exercise 3 for me.")
        assert ex.status == "error" and ex.content["ename"] == "AI_POLICY_OFF", ex.content
        assert fe.python("print(sum(range(4)))").strip() == "6"
    assert server.requests == []


def test_explain_sends_read_only_tools_and_a_guide_and_runs_no_code(
    server: SseServer, tmp_path: Path
) -> None:
    server.script(
        sc.python_call("hacked = True"),  # a model that tries anyway
        sc.text("Look at the mean of each column first."),
    )
    # A window past the lean threshold: the full tool set, every read-only tool offered.
    env = provider_env(
        server, tmp_path, DSH_AI_POLICY="explain", JUPYTERHUB_USER="ana", DSH_CONTEXT_WINDOW="32768"
    )
    with start_kernel(tmp_path, "dsh", env=env) as kernel:
        fe = Frontend(kernel)
        ex = fe.run("How do I find outliers in my data?")
        assert ex.status == "ok", ex.content
        first, second = (r.json for r in server.requests)
        assert "python" not in tool_names(first)
        assert {"inspect", "sql"} <= set(tool_names(first))
        assert "guide rather than solve" in system_text(first)
        assert "The `python` tool runs" not in system_text(first)  # not told of a tool it lacks
        # The call to the withheld tool was answered as unknown; no code ran.
        results = [m for m in second["messages"] if m["role"] == "tool"]
        assert results and "python" in str(results[0]["content"])
        assert fe.python("print('hacked' in globals())").strip() == "False"

        # &`fn` offering a function that is not read-only: refused before anything is sent.
        fe.python("def wipe(path: str) -> str:\n    'Delete a file.'\n    return path")
        ex = fe.run("Please clean up with &`wipe`.")
        assert ex.status == "error" and ex.content["ename"] == "AI_POLICY_EXPLAIN", ex.content
        assert "`wipe`" in ex.content["evalue"]
        assert len(server.requests) == 2

        # A read-only @tool is offered.
        server.script(sc.text("It counts rows."))
        fe.python(
            "from dsh_kernel import tool\n"
            "@tool(read_only=True)\n"
            "def peek(n: int) -> int:\n    'Count rows.'\n    return n"
        )
        ex = fe.run("What does &`peek` do?")
        assert ex.status == "ok", ex.content
        assert "peek" in tool_names(server.requests[0].json)
        assert "python" not in tool_names(server.requests[0].json)
        assert "ai policy: explain (DSH_AI_POLICY)" in status(fe)
        ex = fe.run("%agent tools on python")
        assert ex.status == "error" and "AI policy in force (explain) withholds it" in str(
            ex.content["evalue"]
        ), ex.content
    ((_sid, policy, user, _parent),) = sessions(tmp_path / "store")
    assert (policy, user) == ("explain", "ana")


def test_notebook_metadata_tightens_the_configuration(server: SseServer, tmp_path: Path) -> None:
    # JPY_SESSION_NAME relative to the server's root (the kernel's cwd is the notebook's folder).
    write_notebook(tmp_path / "lesson.ipynb", "Explain")
    server.script(sc.text("Try grouping by month first."))
    env = provider_env(server, tmp_path, JPY_SESSION_NAME=f"{tmp_path.name}/lesson.ipynb")
    with start_kernel(tmp_path, "dsh", env=env) as kernel:
        fe = Frontend(kernel)
        assert "ai policy: explain (the notebook's metadata; configured: full)" in status(fe)
        ex = fe.run("Write the groupby for me.")
        assert ex.status == "ok", ex.content
        (request,) = server.requests
        assert "python" not in tool_names(request.json)
        assert "guide rather than solve" in system_text(request.json)
        # %agent new and %agent fork carry the policy in force too.
        assert fe.run("%agent fork 1").status == "ok"
        forked = fe.python("print(get_ipython().kernel.host.agent.session.header.ai_policy)")
        assert forked.strip() == "explain"
        assert fe.run("%agent new").status == "ok"
        fresh = fe.python("print(get_ipython().kernel.host.agent.session.header.ai_policy)")
        assert fresh.strip() == "explain"
    assert [row[1] for row in sessions(tmp_path / "store")] == ["explain", "explain"]


def test_notebook_metadata_cannot_loosen_the_configuration(
    server: SseServer, tmp_path: Path
) -> None:
    notebook = write_notebook(tmp_path / "course" / "week1.ipynb", "full")
    server.script(sc.text("Start by plotting it."))
    env = provider_env(server, tmp_path, DSH_AI_POLICY="explain", JPY_SESSION_NAME=str(notebook))
    with start_kernel(tmp_path, "dsh", env=env) as kernel:
        fe = Frontend(kernel)
        assert "explain (DSH_AI_POLICY; the notebook asks for full; the stricter wins)" in status(
            fe
        )
        assert fe.run("Fit the model.").status == "ok"
        assert "python" not in tool_names(server.requests[0].json)
    ((_sid, policy, _user, _parent),) = sessions(tmp_path / "store")
    assert policy == "explain"


def test_a_notebook_saved_while_the_kernel_runs_takes_effect_at_its_next_chat_cell(
    server: SseServer, tmp_path: Path
) -> None:
    notebook = write_notebook(tmp_path / "lab.ipynb", None)
    server.script(sc.text("First answer."), sc.text("Second answer."))
    env = provider_env(server, tmp_path, JPY_SESSION_NAME=str(notebook))
    with start_kernel(tmp_path, "dsh", env=env) as kernel:
        fe = Frontend(kernel)
        assert fe.run("Hello.").status == "ok"
        assert "python" in tool_names(server.requests[0].json)
        write_notebook(notebook, "explain")  # the instructor saves the notebook, tightened
        ex = fe.run("And now?")
        assert ex.status == "ok", ex.content
        assert "python" not in tool_names(server.requests[1].json)
        assert "now explain" in ex.stdout and "new session" in ex.stdout
        # The conversation goes on in the forked session: the first turn is still in the history.
        assert "First answer." in json.dumps(server.requests[1].json["messages"])

        write_notebook(notebook, "off")
        ex = fe.run("Still there?")
        assert ex.status == "error" and ex.content["ename"] == "AI_POLICY_OFF", ex.content
        assert "the notebook's metadata" in ex.content["evalue"]
        assert len(server.requests) == 2
    (first, policy1, _u1, parent1), (_second, policy2, _u2, parent2) = sessions(tmp_path / "store")
    assert (policy1, parent1) == ("full", None)
    assert (policy2, parent2) == ("explain", first)


def test_a_metadata_value_that_is_not_a_policy_refuses_chat(
    server: SseServer, tmp_path: Path
) -> None:
    notebook = write_notebook(tmp_path / "quiz.ipynb", "strict")
    server.script()
    env = provider_env(server, tmp_path, JPY_SESSION_NAME=str(notebook))
    with start_kernel(tmp_path, "dsh", env=env) as kernel:
        fe = Frontend(kernel)
        ex = fe.run("Give me the answers.")
        assert ex.status == "error" and ex.content["ename"] == "AI_POLICY_INVALID", ex.content
        assert (
            "'strict'" in ex.content["evalue"] and "metadata.dsh.ai_policy" in ex.content["evalue"]
        )
        assert fe.python("print(2 + 2)").strip() == "4"
        assert "ai policy: off — " in status(fe)
    assert server.requests == []


def test_a_session_resumed_under_a_stricter_policy_goes_on_in_a_fork_under_it(
    server: SseServer, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    server.script(sc.text("Recorded under full."))
    with start_kernel(tmp_path / "k1", "dsh", env=provider_env(server, tmp_path), store=store) as k:
        fe = Frontend(k)
        assert fe.run("Hello.").status == "ok"
        recorded = fe.python("print(get_ipython().kernel.host.agent.session.id)").strip()
    server.script(sc.text("Now I only explain."))
    env = provider_env(server, tmp_path, DSH_AI_POLICY="explain")
    with start_kernel(tmp_path / "k2", "dsh", env=env, store=store) as k:
        fe = Frontend(k)
        assert fe.run(f"%agent resume {recorded[:8]}").status == "ok"
        ex = fe.run("Go on.")
        assert ex.status == "ok", ex.content
        assert f"session {recorded[:8]} was full" in ex.stdout
        (request,) = server.requests
        assert "python" not in tool_names(request.json)
        assert "Recorded under full." in json.dumps(request.json["messages"])
    rows = {sid: (policy, parent) for sid, policy, _user, parent in sessions(store)}
    assert rows.pop(recorded) == ("full", None)
    assert list(rows.values()) == [("explain", recorded)]


def test_the_user_is_who_started_the_kernel_not_who_the_notebook_says(
    server: SseServer, tmp_path: Path
) -> None:
    # A notebook that sets os.environ["USER"] does not become another student (whose budget
    # and report rows would be their own).
    server.script(sc.text("One."), sc.text("Two."))
    env = provider_env(server, tmp_path, USER="bob", JUPYTERHUB_USER="")
    with start_kernel(tmp_path, "dsh", env=env) as kernel:
        fe = Frontend(kernel)
        assert fe.run("Hello?").status == "ok"
        fe.python(
            "import os\nos.environ['USER'] = 'mallory'\nos.environ['JUPYTERHUB_USER'] = 'eve'"
        )
        assert fe.run("%agent new").status == "ok"
        assert fe.run("Hello again?").status == "ok"
    users = [user for _sid, _policy, user, _parent in sessions(tmp_path / "store")]
    assert users == ["bob", "bob"]


def test_with_neither_variable_the_user_is_the_account(server: SseServer, tmp_path: Path) -> None:
    # A container often sets neither JUPYTERHUB_USER nor USER: the account's name stands in, and a
    # notebook that sets USER afterwards still does not become another user.
    server.script(sc.text("One."), sc.text("Two."))
    env = provider_env(server, tmp_path, USER="", JUPYTERHUB_USER="", LOGNAME="")
    with start_kernel(tmp_path, "dsh", env=env) as kernel:
        fe = Frontend(kernel)
        fe.python("import os\nos.environ['USER'] = 'mallory'")
        assert fe.run("Hello?").status == "ok"
        assert fe.run("%agent new").status == "ok"
        assert fe.run("Hello again?").status == "ok"
    users = [user for _sid, _policy, user, _parent in sessions(tmp_path / "store")]
    assert users == [pwd.getpwuid(os.getuid()).pw_name] * 2


def test_a_course_setting_that_does_not_parse_refuses_chat_only(
    server: SseServer, tmp_path: Path
) -> None:
    server.script()
    env = provider_env(server, tmp_path, DSH_BUDGET_TOKENS="lots")
    with start_kernel(tmp_path, "dsh", env=env) as kernel:
        fe = Frontend(kernel)
        ex = fe.run("Explain the chart, please.")
        assert ex.status == "error" and ex.content["ename"] == "AI_POLICY_INVALID", ex.content
        line = ex.content["evalue"]
        assert "DSH_BUDGET_TOKENS='lots'" in line and "configuration is fixed" in line, line
        assert fe.python("print(6 * 7)").strip() == "42"
        ex = fe.run("%%sql\nSELECT 6 * 7 AS answer")
        assert ex.status == "ok", ex.content
        assert "DSH_BUDGET_TOKENS='lots'" in status(fe)
    assert server.requests == []


def open_notebook_comm(fe: Frontend, path: str) -> str:
    """Open the ``dsh.notebook`` comm as the frontend extension does (its ``hello``)."""
    comm_id = uuid.uuid4().hex
    hello = {"protocol": 1, "path": path, "frontend": "test", "version": "0"}
    content = {"comm_id": comm_id, "target_name": "dsh.notebook", "data": hello}
    fe.kernel.kc.shell_channel.send(fe.kernel.kc.session.msg("comm_open", content))
    return comm_id


def test_a_renamed_notebook_keeps_the_policy_it_named(server: SseServer, tmp_path: Path) -> None:
    # No extension tells the kernel where the notebook went: what was in force stays.
    notebook = write_notebook(tmp_path / "lesson.ipynb", "explain")
    server.script(sc.text("Look at the mean first."), sc.text("Then the spread."))
    env = provider_env(server, tmp_path, JPY_SESSION_NAME=str(notebook))
    with start_kernel(tmp_path, "dsh", env=env) as kernel:
        fe = Frontend(kernel)
        assert fe.run("How do I start?").status == "ok"
        assert "python" not in tool_names(server.requests[0].json)
        notebook.rename(tmp_path / "lesson-renamed.ipynb")
        ex = fe.run("And then?")
        assert ex.status == "ok", ex.content
        assert "python" not in tool_names(server.requests[1].json)
        assert "new session" not in ex.stdout  # the policy did not change
        shown = status(fe)
        assert "ai policy: explain (the notebook's metadata" in shown
        assert "was not found" in shown and "kept: explain was in force earlier" in shown


def test_the_extension_tells_the_kernel_where_the_notebook_went(
    server: SseServer, tmp_path: Path
) -> None:
    # The kernel has not read the notebook yet when it is renamed; the extension's hello and its
    # path message (docs/dev/notebook-comm.md) lead the kernel to the file, and an instructor's
    # later save of the renamed file takes effect.
    root = tmp_path / "root"
    notebook = write_notebook(root / "course" / "lesson.ipynb", "explain")
    server.script(sc.text("Guided answer."))
    env = provider_env(server, tmp_path, JPY_SESSION_NAME=str(notebook))
    with start_kernel(tmp_path, "dsh", env=env) as kernel:
        fe = Frontend(kernel)
        comm_id = open_notebook_comm(fe, "course/lesson.ipynb")
        renamed = notebook.rename(root / "course" / "week1.ipynb")
        fe.send(comm_id, {"event": "path", "path": "course/week1.ipynb"})
        ex = fe.run("Help me with the exercise.")
        assert ex.status == "ok", ex.content
        assert "python" not in tool_names(server.requests[0].json)
        shown = status(fe)
        assert "ai policy: explain (the notebook's metadata; configured: full)" in shown
        write_notebook(renamed, "off")  # the renamed file is the one read
        ex = fe.run("Still there?")
        assert ex.status == "error" and ex.content["ename"] == "AI_POLICY_OFF", ex.content
        assert len(server.requests) == 1
