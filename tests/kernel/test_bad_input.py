"""Bad input to a real ``dsh`` kernel: empty and oversized chat cells, references to names that are
missing or not functions, a tool run that prints 50 MB, and a store directory that cannot be
written. Each gets a clear answer; none hurts the kernel."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from tests.kernel.conftest import Live, provider_env
from tests.support import scenarios as sc
from tests.support.frontend import Frontend, saved_bundle
from tests.support.kernel import start_kernel
from tests.support.sse_server import SseServer


@pytest.mark.parametrize("code", ["", "   \n\n  \t"])
def test_an_empty_chat_cell_does_nothing(live: Live, code: str) -> None:
    before = len(live.fe.events())
    ex = live.fe.run(code)
    assert ex.status == "ok", ex.content
    assert live.server.requests == []
    assert not ex.of_type("display_data") and not ex.of_type("error")
    assert len(live.fe.events()) == before


def test_a_one_megabyte_chat_cell_is_refused_clearly(live: Live) -> None:
    started = time.monotonic()
    ex = live.fe.run("Summarise this: " + "lorem ipsum " * 87_400)  # ~1 MB
    assert time.monotonic() - started < 10
    assert ex.status == "error"
    assert "characters; the limit is" in ex.content["evalue"]
    assert "$`text`" in ex.content["evalue"]  # what to do instead
    assert live.server.requests == []
    assert live.fe.python("print('alive')") == "alive\n"


def test_a_reference_to_a_missing_name_names_it(live: Live) -> None:
    ex = live.fe.run("Describe $`missing_frame` please.")
    assert ex.status == "error"
    assert "missing_frame" in ex.content["evalue"]
    assert "no variable" in ex.content["evalue"]
    assert live.server.requests == []


def test_a_function_reference_to_a_non_callable_is_refused(live: Live) -> None:
    live.fe.python("not_callable = 3")
    ex = live.fe.run("Use &`not_callable` on it.")
    assert ex.status == "error"
    assert "not_callable" in ex.content["evalue"] and "not a function" in ex.content["evalue"]
    assert live.server.requests == []


def test_tool_code_printing_fifty_megabytes_is_capped(live: Live) -> None:
    live.server.script(
        sc.python_call("print('x' * 50_000_000)\nprint('tail line')"), sc.text("That was a lot.")
    )
    cell = live.fe.submit("Print a lot.")
    cell.pump(lambda: bool(live.fe.buttons("Allow once")), what="the approval buttons")
    live.fe.click(live.fe.buttons("Allow once")[0])
    ex = cell.finish(timeout=120)
    assert ex.status == "ok", ex.content
    # The model is given a summary within its 64 KiB budget, with an explicit marker.
    result = live.server.requests[1].json["messages"][-1]["content"]
    assert len(result) < 70_000
    assert "[output truncated: 47.9 MB more]" in result
    # The notebook gets the run's stored output (2 MiB budget) in the card, and the static
    # rendering of the finished turn repeats it as Markdown and HTML: ~6 MB for 50 MB printed.
    sent = sum(len(json.dumps(m["content"])) for m in ex.messages)
    assert sent < 8_000_000, sent
    assert live.fe.python("print('alive')") == "alive\n"


# --- a store that cannot be written ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def no_store(server: SseServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Frontend]:
    tmp = tmp_path_factory.mktemp("no-store")
    blocker = tmp / "a-file"
    blocker.write_text("not a directory")
    # Below a regular file nothing can be created, whoever runs the tests (root included).
    env = provider_env(server, tmp, DSH_STORE=str(blocker / "store"))
    with start_kernel(tmp, "dsh", env=env) as kernel:
        yield Frontend(kernel)


def test_an_unwritable_store_warns_and_chat_works_in_memory(
    no_store: Frontend, server: SseServer
) -> None:
    # Said at kernel start, in the kernel log (the terminal that runs Jupyter shows it).
    assert no_store.kernel.log_path is not None
    log = no_store.kernel.log_path.read_text(encoding="utf-8")
    assert "is not writable" in log and "DSH_STORE" in log
    server.script(sc.text("Working ", "in memory."))
    ex = no_store.run("Hello?")
    assert ex.status == "ok", ex.content
    warning = "".join(
        m["content"]["text"] for m in ex.of_type("stream") if m["content"]["name"] == "stderr"
    )
    assert "is not writable" in warning and "in memory only" in warning and "DSH_STORE" in warning
    static = saved_bundle(ex)["text/markdown"]
    assert "Working in memory." in static
    status = no_store.run("%agent status").stdout
    assert "store:    none (in memory only)" in status and "warning:" in status
    ex = no_store.run("%%sql\nSELECT 1")
    assert ex.status == "error" and ex.content["ename"] == "STORE"
