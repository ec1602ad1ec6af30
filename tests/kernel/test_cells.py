"""Cell routing in real kernels (ARCHITECTURE §2): ``%%python`` / ``%%py`` and line-magic-only cells in
``dsh``, plain Python and ``%%chat`` in ``dsh-python``, and ``%%sql`` over the store joined with the
notebook's DataFrames."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kernel.conftest import Live, provider_env
from tests.support import scenarios as sc
from tests.support.frontend import Frontend, saved_bundle
from tests.support.kernel import Execution, start_kernel
from tests.support.sse_server import SseServer


def static_markdown(ex: Execution) -> str:
    return saved_bundle(ex)["text/markdown"]


# --- dsh: a plain cell is a message ------------------------------------------------------------------


def test_python_and_py_cells_run_python_in_the_notebook_namespace(live: Live) -> None:
    ex = live.fe.run("%%python\nrouted = [n * n for n in range(4)]\nrouted")
    assert ex.status == "ok", ex.content
    assert [m["content"]["data"]["text/plain"] for m in ex.of_type("execute_result")] == [
        "[0, 1, 4, 9]"
    ]
    ex = live.fe.run("%%py\nprint(sum(routed))")
    assert (ex.status, ex.stdout) == ("ok", "14\n")
    ex = live.fe.run("%%python\n1 / 0")
    assert ex.status == "error" and ex.content["ename"] == "ZeroDivisionError"
    assert live.server.requests == []  # nothing went to the model


def test_line_magic_only_cells_are_handled_by_ipython(live: Live) -> None:
    ex = live.fe.run("%env DSH_TEST_FLAG=on\n# a comment\n%agent status")
    assert ex.status == "ok", ex.content
    assert "provider: openai-compatible" in ex.stdout
    assert live.fe.python("import os\nprint(os.environ['DSH_TEST_FLAG'])").strip() == "on"
    ex = live.fe.run("%agent frobnicate")  # a failed command fails its cell
    assert ex.status == "error" and ex.content["ename"] == "UNKNOWN_COMMAND"
    assert "unknown subcommand 'frobnicate'" in ex.content["evalue"]
    assert live.server.requests == []


def test_other_cell_magics_stay_ipython_magics(live: Live) -> None:
    ex = live.fe.run("%%capture captured\nprint('hidden')")
    assert ex.status == "ok" and ex.stdout == ""
    assert live.fe.python("print(captured.stdout, end='')") == "hidden\n"


# --- %%sql ---------------------------------------------------------------------------------------------


def test_sql_cells(live: Live) -> None:
    live.server.script(sc.text("An answer for the store."))
    assert live.fe.run("Something to query.").status == "ok"
    live.fe.python(
        "import pandas as pd\n"
        "labels = pd.DataFrame({'role': ['user', 'assistant'], 'who': ['person', 'model']})\n"
        "kind = 'assistant/message'"
    )

    ex = live.fe.run("%%sql\nSELECT count(*) AS n FROM turns WHERE end_reason = 'completed'")
    assert ex.status == "ok", ex.content
    assert ex.data("text/html"), "a table"
    assert int(live.fe.python("print(_sql['n'][0])")) >= 1

    # A join with a DataFrame of the namespace, by its name.
    ex = live.fe.run(
        "%%sql\nSELECT l.who, count(*) AS n FROM messages m JOIN labels l ON m.role = l.role\n"
        "GROUP BY l.who ORDER BY l.who"
    )
    assert ex.status == "ok", ex.content
    assert live.fe.python("print(list(_sql['who']))").strip() == "['model', 'person']"

    # $name is a bound parameter; `name <<` keeps the result under that name.
    ex = live.fe.run(
        "%%sql answers <<\nSELECT text FROM messages WHERE type = $kind ORDER BY seq DESC LIMIT 1"
    )
    assert ex.status == "ok", ex.content
    assert live.fe.python("print(answers['text'][0])").strip() == "An answer for the store."

    ex = live.fe.run("%%sql\nSELEC 1")
    assert ex.status == "error"
    assert 'syntax error at or near "SELEC"' in ex.content["evalue"]  # DuckDB's own message

    ex = live.fe.run("%%sql\nCREATE TABLE scratch (x INTEGER)")
    assert ex.status == "error"
    assert "read-only" in ex.content["evalue"]
    ex = live.fe.run(
        "%%sql\nSELECT count(*) AS n FROM information_schema.tables WHERE table_name = 'scratch'"
    )
    assert ex.status == "ok" and live.fe.python("print(_sql['n'][0])").strip() == "0"

    ex = live.fe.run("%%sql\nSELECT * FROM turns WHERE prompt = $nowhere")
    assert ex.status == "error" and "nowhere" in ex.content["evalue"]


# --- dsh-python: a plain cell is Python ----------------------------------------------------------------


@pytest.fixture(scope="module")
def python_kernel(
    server: SseServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Frontend]:
    tmp = tmp_path_factory.mktemp("dsh-python")
    with start_kernel(tmp, "dsh-python", env=provider_env(server, tmp)) as kernel:
        yield Frontend(kernel)


def test_dsh_python_plain_cells_are_python_and_chat_cells_are_messages(
    python_kernel: Frontend, server: SseServer
) -> None:
    server.script(sc.text("Hello from ", "the model."))
    fe = python_kernel
    ex = fe.run("greeting = 'hi'\nprint(greeting.upper())")
    assert (ex.status, ex.stdout) == ("ok", "HI\n")
    assert server.requests == []
    ex = fe.run("%%chat\nSay hello about $`greeting`.")
    assert ex.status == "ok", ex.content
    assert "Hello from the model." in static_markdown(ex)
    assert len(server.requests) == 1
    # %%python is not special here: IPython's own magic (a subprocess) runs it.
    ex = fe.run("%%python\nprint('from a subprocess')")
    assert (ex.status, ex.stdout) == ("ok", "from a subprocess\n")
    assert "greeting" in fe.python("print(sorted(globals()))")
