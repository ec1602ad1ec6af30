"""The reference MCP servers nobody here wrote (``mcp-server-time``, ``mcp-server-git``,
``mcp-server-fetch``, from their own cached virtual environment: ``tests/mcp_servers``) in a real
``dsh`` kernel: a chat cell whose model (the loopback fake) calls each, every call approved through
its card, each a row of ``tool_calls`` naming its server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.kernel.conftest import Live, provider_env
from tests.kernel.test_mcp import results, run_approved
from tests.mcp_servers.reference import CacheError, reference_servers
from tests.support import scenarios as sc
from tests.support.frontend import Frontend, sql_rows
from tests.support.git_repo import make_git_repo
from tests.support.http_pages import PAGE_PHRASE, PageServer
from tests.support.kernel import start_kernel
from tests.support.sse_server import SseServer


def test_time_git_and_fetch_answer_a_chat_cell(server: SseServer, tmp_path: Path) -> None:
    try:
        refs = reference_servers()
    except CacheError as exc:
        pytest.fail(str(exc), pytrace=False)
    repo = make_git_repo(tmp_path / "repo")
    servers = {}
    for name, argv in (
        ("time", refs.time_argv()),
        ("git", refs.git_argv(repo.path)),
        ("fetch", refs.fetch_argv()),
    ):
        servers[name] = {"command": argv[0], "args": argv[1:]}
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    env = provider_env(server, tmp_path, DSH_MCP_CONFIG=str(config), DSH_MCP_WAIT="90")
    with PageServer() as pages, start_kernel(tmp_path, "dsh", env=env) as kernel:
        live = Live(kernel=kernel, fe=Frontend(kernel), server=server, tmp=tmp_path)
        server.script(
            sc.tool_calls(("time__get_current_time", {"timezone": "UTC"})),
            sc.tool_calls(("git__git_log", {"repo_path": str(repo.path), "max_count": 3})),
            sc.tool_calls(("fetch__fetch", {"url": pages.url("/page.html")})),
            sc.text("Time, log and page."),
        )
        ex = run_approved(
            live, "What time is it, what did the repo log say, and fetch the page.", clicks=3
        )
        assert ex.status == "ok", ex.content
        clock, log, page = results(live)
        for result in (clock, log, page):
            assert "error" not in result, result
        assert "UTC" in json.dumps(clock["message"])
        assert repo.messages[-1] in json.dumps(log["message"])
        assert PAGE_PHRASE in json.dumps(page["message"])
        rows = sql_rows(live.fe, "SELECT server, tool, status FROM mcp_calls ORDER BY 1")
        assert [(r["server"], r["tool"], r["status"]) for r in rows] == [
            ("fetch", "fetch", "done"),
            ("git", "git_log", "done"),
            ("time", "get_current_time", "done"),
        ], rows
