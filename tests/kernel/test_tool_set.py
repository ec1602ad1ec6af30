"""The notebook chooses the agent's tools (issue 14, the lean tool set), through a real kernel.

``%agent tools off <name>`` stops offering a tool — the next request the server gets lacks it, and
the choice survives ``%agent new``; ``on`` offers it again; ``lean|full|auto`` picks the form of the
tool list, lean being a fraction of the full one on the wire. Bad input fails the cell with
``USAGE`` naming what was wrong and changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import wire_transcripts as wt
from tests.support.kernel import Kernel, start_kernel
from tests.support.sse_server import SseServer, sse_reply


def hello() -> Any:
    return sse_reply(
        wt.sse(
            wt.chat_chunk({"role": "assistant", "content": "Hello."}),
            wt.chat_chunk({}, finish_reason="stop"),
            "[DONE]",
        )
    )


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kernel, SseServer]]:
    tmp = tmp_path_factory.mktemp("toolset")
    with SseServer() as server:
        env = {
            "DSH_PROVIDER": "openai-compatible",
            "DSH_BASE_URL": server.url,
            "DSH_MODEL": "local-model",
        }
        with start_kernel(tmp, "dsh", env=env) as k:
            yield k, server


NAMING = "Say hello; you may use sql or ask_user."
"""A message that names the two tools the lean set offers only when named."""


def offered(k: Kernel, server: SseServer, message: str = NAMING) -> list[dict[str, Any]]:
    """The tool list of the request one chat turn with ``message`` sends."""
    server.script(hello())
    ex = k.execute(message)
    assert ex.status == "ok", ex.content
    assert len(server.requests) == 1
    return server.requests[0].json.get("tools", [])


def names(tools: list[dict[str, Any]]) -> list[str]:
    return [t["function"]["name"] for t in tools]


def command(k: Kernel, line: str) -> str:
    ex = k.execute(line)
    assert ex.status == "ok", ex.content
    return ex.stdout


def test_a_tool_switched_off_is_not_offered_and_stays_off_in_a_new_session(
    rig: tuple[Kernel, SseServer],
) -> None:
    k, server = rig
    assert sorted(names(offered(k, server))) == [
        "ask_user",
        "inspect",
        "notebook_insert",
        "python",
        "sql",
    ]
    out = command(k, "%agent tools off sql")
    assert "tool sql off" in out and "sql" not in out.split("offered:")[1]
    assert "sql" not in names(offered(k, server))
    listing = command(k, "%agent tools")
    assert "switched off: sql" in listing
    # A server that does not say its window is assumed small (4,096): lean under auto.
    assert "descriptions: lean (auto: window 4,096 assumed < 16,384 tokens)" in listing
    command(k, "%agent new")
    assert "sql" not in names(offered(k, server))
    assert "python" in command(k, "%agent status").split("tools:")[1]
    command(k, "%agent tools on sql")
    assert "sql" in names(offered(k, server))


def test_the_lean_set_offers_ask_user_and_sql_only_in_a_turn_that_names_them(
    rig: tuple[Kernel, SseServer],
) -> None:
    k, server = rig
    # The window is assumed small (4,096), so the set is lean under auto.
    assert names(offered(k, server, "Say hello.")) == ["inspect", "notebook_insert", "python"]
    assert names(offered(k, server, "Count my turns with sql.")) == [
        "inspect", "notebook_insert", "python", "sql",
    ]  # fmt: skip
    assert "ask_user" in names(offered(k, server, "Use ask_user, then answer."))
    listing = command(k, "%agent tools")
    assert "lean set: ask_user, sql only in a turn whose message names them" in listing
    command(k, "%agent tools full")
    assert "sql" in names(offered(k, server, "Say hello."))  # the full set has every tool
    command(k, "%agent tools auto")


def test_the_lean_form_is_a_fraction_of_the_full_one_on_the_wire(
    rig: tuple[Kernel, SseServer],
) -> None:
    k, server = rig
    assert "full (set by %agent tools full)" in command(k, "%agent tools full")
    full = offered(k, server)
    assert "lean (set by %agent tools lean)" in command(k, "%agent tools lean")
    lean = offered(k, server)
    assert names(lean) == names(full)
    assert len(json.dumps(lean)) * 5 <= len(json.dumps(full)) * 2
    (python,) = [t["function"] for t in lean if t["function"]["name"] == "python"]
    assert python["parameters"]["required"] == ["code"]  # what a call needs is all still there
    assert "description" not in python["parameters"]["properties"]["code"]
    # The logged header says what was sent, so replay and SQL see the lean tools too.
    headers = [e["data"]["header"] for e in k.events() if e["type"] == "request/header"]
    assert [t["description"] for t in headers[-1]["tools"]] == [
        t["description"] for t in (x["function"] for x in lean)
    ]
    command(k, "%agent tools auto")


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("%agent tools off nosuch", "no tool named 'nosuch' is offered; tools: "),
        ("%agent tools on python", "tool 'python' is not switched off"),
        ("%agent tools sideways", "usage: %agent tools [on|off <name> | lean|full|auto]"),
    ],
)
def test_bad_tool_commands_fail_the_cell_and_change_nothing(
    rig: tuple[Kernel, SseServer], line: str, says: str
) -> None:
    k, server = rig
    before = names(offered(k, server))
    ex = k.execute(line)
    assert ex.status == "error" and ex.content["ename"] == "USAGE", ex.content
    assert says in ex.content["evalue"], ex.content["evalue"]
    assert names(offered(k, server)) == before
