"""MCP servers in a real ``dsh`` kernel: configured by an ``mcp.json``, started in the background,
their tools offered as ``server__tool``, approved through the card, logged, and in SQL.

The server is the SDK-built test server (``tests/support/mcp_server.py``) over stdio; the model is
the loopback fake. One kernel serves the module; its working directory (the notebook's folder) also
holds a project ``mcp.json``, which waits for ``%agent mcp allow``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import run_query
from tests.kernel.conftest import Live, provider_env
from tests.support import scenarios as sc
from tests.support.frontend import Frontend, last_turn, sql_rows
from tests.support.kernel import start_kernel
from tests.support.mcp_server import McpServerProcess, read_records, stdio_argv
from tests.support.sse_server import SseServer

ROOT = Path(__file__).resolve().parents[2]


def entry(tmp: Path, **extra: Any) -> dict[str, Any]:
    argv = stdio_argv(cancel_log=tmp / "cancel.log")
    return {"command": argv[0], "args": argv[1:], "cwd": str(ROOT), **extra}


@pytest.fixture(scope="module")
def mcp_live(server: SseServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("mcp-kernel")
    config = tmp / "servers.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "t": entry(tmp, trust="read-only-hints"),
                    # the same server with a short idle timeout: progress must keep a call alive
                    "quick": entry(tmp, timeout=2),
                    # a command that does not exist: listed with its error, in the kernel log
                    "broken": {"command": str(tmp / "no-such-mcp-server")},
                }
            }
        )
    )
    # a project file in the notebook's folder: its server waits for `%agent mcp allow`
    (tmp / "mcp.json").write_text(json.dumps({"mcpServers": {"proj": entry(tmp)}}))
    env = provider_env(server, tmp, DSH_MCP_CONFIG=str(config), DSH_MCP_WAIT="60")
    with start_kernel(tmp, "dsh", env=env) as kernel:
        yield Live(kernel=kernel, fe=Frontend(kernel), server=server, tmp=tmp)


def run_approved(live: Live, message: str, *, clicks: int = 1) -> Any:
    """Run a chat cell, clicking Allow once for each of ``clicks`` approvals."""
    cell = live.fe.submit(message)
    for _ in range(clicks):
        cell.pump(lambda: bool(live.fe.buttons("Allow once")), what="the buttons", timeout=90)
        live.fe.click(live.fe.buttons("Allow once")[0])
        cell.pump(lambda: not live.fe.buttons("Allow once"), what="the click taken", timeout=60)
    return cell.finish(timeout=120)


def results(live: Live) -> list[dict[str, Any]]:
    return [e["data"] for e in last_turn(live.fe.events()) if e["type"] == "tool/result"]


def test_an_mcp_tool_is_offered_approved_called_and_queryable(mcp_live: Live) -> None:
    live = mcp_live
    live.server.script(sc.tool_calls(("t__echo", {"text": "hello mcp"})), sc.text("It said hello."))
    ex = run_approved(live, "Echo hello through the MCP server.")
    assert ex.status == "ok", ex.content
    first = live.server.requests[-2].json
    assert isinstance(first, dict)
    tools = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert {"t__echo", "t__slow_progress", "quick__echo"} <= set(tools), sorted(tools)
    assert not any(n.startswith("proj__") for n in tools)  # the project file is not allowed yet
    assert tools["t__echo"]["description"].startswith("[MCP server t]")
    [result] = results(live)
    assert "error" not in result, result
    assert result["meta"]["origin"] == {"mcp": "t", "tool": "echo"}
    # the call names its origin before any result: a call in flight has its server too
    [call] = [e["data"] for e in last_turn(live.fe.events()) if e["type"] == "tool/call"]
    assert call["origin"] == {"mcp": "t", "tool": "echo"}
    assert "hello mcp" in json.dumps(live.server.requests[-1].json)
    rows = sql_rows(live.fe, "SELECT name, server, status FROM tool_calls WHERE name = 't__echo'")
    assert rows and rows[-1]["name"] == "t__echo", rows
    assert rows[-1]["server"] == "t", rows


def test_read_only_hints_are_trusted_only_where_the_entry_says_so(mcp_live: Live) -> None:
    live = mcp_live
    # t trusts read-only hints: its lookup runs without a click; quick does not: it asks
    live.server.script(
        sc.tool_calls(("t__read_only_lookup", {"key": "alpha"})),
        sc.tool_calls(("quick__read_only_lookup", {"key": "nope"})),
        sc.text("Looked up twice."),
    )
    ex = run_approved(live, "Look up keys on both servers.", clicks=1)
    assert ex.status == "ok", ex.content
    first, second = results(live)
    assert "error" not in first and "first letter" in json.dumps(first["message"]), first
    # the server flags an unknown key isError: the call fails with its text
    assert second["error"]["code"] == "MCP_TOOL_ERROR", second
    assert "no such key: nope" in json.dumps(second["message"])
    approvals = [e for e in last_turn(live.fe.events()) if e["type"] == "approval/asked"]
    assert len(approvals) == 1, approvals


def test_a_call_that_reports_progress_outlives_the_idle_timeout(mcp_live: Live) -> None:
    live = mcp_live
    live.server.script(
        sc.tool_calls(("quick__slow_progress", {"seconds": 5, "interval": 0.5})),
        sc.text("It finished."),
    )
    ex = run_approved(live, "Run the slow task.")
    assert ex.status == "ok", ex.content
    [result] = results(live)
    assert "error" not in result, result  # 5 s > the entry's 2 s idle timeout


def test_a_silent_call_times_out_and_is_cancelled(mcp_live: Live) -> None:
    live = mcp_live
    live.server.script(sc.tool_calls(("quick__wait_forever", {})), sc.text("It timed out."))
    ex = run_approved(live, "Wait forever.")
    assert ex.status == "ok", ex.content
    [result] = results(live)
    assert result["error"]["code"] == "MCP_TIMEOUT", result
    assert "sent nothing for 2 s" in json.dumps(result["message"])


def test_stop_cancels_a_running_call_and_the_server_stays_usable(mcp_live: Live) -> None:
    live = mcp_live
    log = live.tmp / "cancel.log"
    started = sum(r["event"] == "tool-started" for r in read_records(log))
    cancelled = sum(r["event"] == "notifications/cancelled" for r in read_records(log))
    live.server.script(sc.tool_calls(("t__wait_forever", {})), sc.text("unused"))
    cell = live.fe.submit("Wait until I stop you.")
    cell.pump(lambda: bool(live.fe.buttons("Allow once")), what="the buttons", timeout=90)
    live.fe.click(live.fe.buttons("Allow once")[0])
    cell.pump(
        lambda: (
            sum(r["event"] == "tool-started" for r in read_records(log)) > started
            and bool(live.fe.buttons("Stop"))
        ),  # the view's Stop may be drawn just after
        what="the call running on the server, and the Stop button",
        timeout=60,
    )
    # the kernel is busy with it; another process's query finds it running, naming its server
    running = run_query(
        Store.at(live.tmp / "store"),
        "SELECT name, server, tool FROM mcp_calls WHERE status = 'running'",
    )
    assert running.rows == (("t__wait_forever", "t", "wait_forever"),), running
    live.fe.click(live.fe.buttons("Stop")[0])
    ex = cell.finish(timeout=60)
    assert ex.status == "error", ex.content
    [result] = results(live)
    assert result["error"]["code"] == "ABORTED", result
    deadline = time.monotonic() + 30
    while sum(r["event"] == "notifications/cancelled" for r in read_records(log)) <= cancelled:
        assert time.monotonic() < deadline, "the server never heard the cancellation"
        time.sleep(0.1)
    live.server.script(sc.tool_calls(("t__echo", {"text": "still here"})), sc.text("ok"))
    assert run_approved(live, "Echo again.").status == "ok"
    assert "still here" in json.dumps(live.server.requests[-1].json)


def test_an_image_reaches_a_text_only_model_as_its_description(mcp_live: Live) -> None:
    live = mcp_live
    live.server.script(sc.tool_calls(("t__image", {})), sc.text("A small picture."))
    ex = run_approved(live, "Show me the image.")
    assert ex.status == "ok", ex.content
    sent = json.dumps(live.server.requests[-1].json)
    assert "data:image/png;base64" not in sent
    assert "an image (" in sent, sent[-2000:]


def test_a_crashed_server_is_restarted_once(mcp_live: Live) -> None:
    live = mcp_live
    live.server.script(sc.tool_calls(("t__crash", {})), sc.text("It crashed."))
    ex = run_approved(live, "Crash it.")
    assert ex.status == "ok", ex.content
    [result] = results(live)
    assert result["error"]["code"] == "MCP_SERVER_CRASHED", result
    deadline = time.monotonic() + 60
    while "t: ready" not in (out := live.fe.python("%agent mcp")):
        assert time.monotonic() < deadline, out
        time.sleep(0.5)
    assert "restarted" in out
    live.server.script(sc.tool_calls(("t__echo", {"text": "back"})), sc.text("ok"))
    assert run_approved(live, "Echo once more.").status == "ok"
    assert "back" in json.dumps(live.server.requests[-1].json)


def test_a_server_that_cannot_start_is_listed_and_in_the_kernel_log(mcp_live: Live) -> None:
    out = mcp_live.fe.python("%agent mcp")
    assert "broken: failed" in out and "command not found" in out, out
    assert mcp_live.kernel.log_path is not None
    log = mcp_live.kernel.log_path.read_text(errors="replace")
    assert "dsh: MCP server broken" in log, log[-2000:]


def test_a_project_file_waits_for_allow(mcp_live: Live) -> None:
    live = mcp_live
    out = live.fe.python("%agent mcp")
    assert "names proj: not started until you allow it" in out, out
    assert "allowed" in live.fe.python("%agent mcp allow")
    deadline = time.monotonic() + 60
    while "proj: ready" not in (out := live.fe.python("%agent mcp")):
        assert time.monotonic() < deadline, out
        time.sleep(0.5)
    assert json.loads((live.tmp / "store" / "mcp" / "allowed.json").read_text())


def test_an_image_reaches_a_vision_model_as_an_image(server: SseServer, tmp_path: Path) -> None:
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"t": entry(tmp_path)}}))
    env = provider_env(
        server,
        tmp_path,
        DSH_MCP_CONFIG=str(config),
        DSH_MCP_WAIT="60",
        DSH_MODEL="llava",
        DSH_VISION="on",
        DSH_APPROVAL="auto",
    )
    server.script(sc.tool_calls(("t__image", {})), sc.text("A small picture."))
    with start_kernel(tmp_path, "dsh", env=env) as kernel:
        ex = Frontend(kernel).run("Show me the image.", timeout=120)
        assert ex.status == "ok", ex.content
    assert "data:image/png;base64" in json.dumps(server.requests[-1].json)


def test_a_streamable_http_server_with_a_header_from_the_environment(
    server: SseServer, tmp_path: Path
) -> None:
    """The same tools over streamable HTTP: a header from ``${NAME}`` (never written anywhere we
    write), progress outliving the idle timeout, Stop cancelling the call on the server, and a crash
    that fails the call without failing the turn."""
    token = "mcp-test-token-5f2c9a71e0"
    with McpServerProcess(tmp_path) as http:
        config = tmp_path / "servers.json"
        config.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "h": {
                            "url": http.url,
                            "headers": {"Authorization": "Bearer ${MCP_TEST_TOKEN}"},
                            "timeout": 2,
                        }
                    }
                }
            )
        )
        env = provider_env(
            server,
            tmp_path,
            DSH_MCP_CONFIG=str(config),
            DSH_MCP_WAIT="60",
            DSH_APPROVAL="auto",
            MCP_TEST_TOKEN=token,
        )
        with start_kernel(tmp_path, "dsh", env=env) as kernel:
            live = Live(kernel=kernel, fe=Frontend(kernel), server=server, tmp=tmp_path)
            server.script(
                sc.tool_calls(("h__echo", {"text": "over http"})),
                sc.tool_calls(("h__slow_progress", {"seconds": 4, "interval": 0.5})),
                sc.text("Both done."),
            )
            assert live.fe.run("Echo, then the slow task.", timeout=120).status == "ok"
            echo, slow = results(live)
            assert "error" not in echo and "error" not in slow, (echo, slow)
            assert "over http" in json.dumps(echo["message"])

            server.script(sc.tool_calls(("h__wait_forever", {})), sc.text("unused"))
            cell = live.fe.submit("Wait until I stop you.")
            cell.pump(
                lambda: (
                    any(r["event"] == "tool-started" for r in read_records(http.cancel_log))
                    and bool(live.fe.buttons("Stop"))
                ),  # the view's Stop may be drawn just after
                what="the call running on the server, and the Stop button",
                timeout=60,
            )
            live.fe.click(live.fe.buttons("Stop")[0])
            assert cell.finish(timeout=60).status == "error"
            [stopped] = results(live)
            assert stopped["error"]["code"] == "ABORTED", stopped
            deadline = time.monotonic() + 30
            while not any(r["event"] == "tool-cancelled" for r in read_records(http.cancel_log)):
                assert time.monotonic() < deadline, "the server never cancelled the call"
                time.sleep(0.1)

            server.script(sc.tool_calls(("h__crash", {})), sc.text("It went away."))
            ex = live.fe.run("Crash it.", timeout=120)
            assert ex.status == "ok", ex.content
            [crashed] = results(live)
            assert crashed["error"]["code"] == "MCP_SERVER_CRASHED", crashed
            live.fe.python("get_ipython().kernel.host.flush()")
        for path in (tmp_path / "store").rglob("*"):
            if path.is_file():
                assert token.encode() not in path.read_bytes(), path
        assert token not in (tmp_path / "kernel.log").read_text(errors="replace")
