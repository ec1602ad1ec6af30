"""The MCP servers the kernel's MCP tests talk to work, driven by the SDK's own client (``mcp.Client``).

The reference servers nobody here wrote (``tests/mcp_servers/reference.py``'s cache, which ``make
test`` builds first): ``mcp-server-time`` tells the time, ``mcp-server-git`` lists the commits of a
repository the test makes, ``mcp-server-fetch`` reads a page from a loopback HTTP server (and
refuses it without ``--allow-private-ips``). A missing cache fails these tests with the command
that builds it; they never skip.

The SDK-built test server (``tests/support/mcp_server.py``), over streamable HTTP and stdio:
progress arrives, a cancelled ``wait_forever`` reaches the server and the next call works, image,
resource and structured content arrive, ``crash()`` ends the connection, ``--tools-variant 2``
changes ``echo``'s schema. Cancellation is checked in both protocol eras, because what reaches the
server differs (see that module's docstring).
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx2
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, EmbeddedResource, ImageContent, TextContent

from tests.mcp_servers.reference import CacheError, ReferenceServers, reference_servers
from tests.support.git_repo import make_git_repo
from tests.support.http_pages import PAGE_PHRASE, PageServer
from tests.support.mcp_server import (
    CRASH_EXIT,
    IMAGE_TEXT,
    PNG,
    RESOURCE_TEXT,
    RESOURCE_URI,
    STRUCTURED,
    TOOLS,
    McpServerProcess,
    read_records,
    server_env,
    stdio_argv,
    wait_for_record,
)

pytestmark = pytest.mark.timeout(300)

CALL_TIMEOUT = 120.0
"""Seconds any one call may take: servers start in about a second, far longer on a loaded machine."""


@pytest.fixture(scope="module")
def reference() -> ReferenceServers:
    try:
        return reference_servers()
    except CacheError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    with (tmp_path / "server-stderr.log").open("w", encoding="utf-8") as f:
        yield f


def stdio(argv: list[str], errlog: TextIO, env: dict[str, str] | None = None) -> Client:
    """A client that spawns ``argv`` and speaks to it over stdio, its stderr into ``errlog``."""
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
    return Client(stdio_client(params, errlog=errlog))


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def call(client: Client, name: str, arguments: dict[str, Any]) -> CallToolResult:
    with anyio.fail_after(CALL_TIMEOUT):
        return await client.call_tool(name, arguments)


# ---------------------------------------------------------------------------------------------------
# The reference servers


async def test_the_time_server_tells_the_current_time(
    reference: ReferenceServers, errlog: TextIO
) -> None:
    async with stdio(reference.time_argv(), errlog) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["get_current_time"].input_schema["required"] == ["timezone"]
        assert tools["get_current_time"].annotations is not None
        assert tools["get_current_time"].annotations.read_only_hint is True
        before = dt.datetime.now(dt.UTC).replace(microsecond=0)
        result = await call(client, "get_current_time", {"timezone": "UTC"})
        after = dt.datetime.now(dt.UTC)
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    assert result.structured_content["timezone"] == "UTC"
    told = dt.datetime.fromisoformat(result.structured_content["datetime"])
    assert before <= told <= after
    assert result.structured_content["day_of_week"] == told.strftime("%A")


async def test_the_time_server_reports_an_unknown_zone_as_a_tool_error(
    reference: ReferenceServers, errlog: TextIO
) -> None:
    async with stdio(reference.time_argv(), errlog) as client:
        result = await call(client, "get_current_time", {"timezone": "Mars/Olympus_Mons"})
    assert result.is_error
    assert "Invalid timezone" in text_of(result)


async def test_the_git_server_lists_the_commits_of_a_repository(
    reference: ReferenceServers, errlog: TextIO, tmp_path: Path
) -> None:
    repo = make_git_repo(tmp_path / "repo")
    async with stdio(reference.git_argv(repo.path), errlog) as client:
        result = await call(client, "git_log", {"repo_path": str(repo.path)})
    assert not result.is_error, text_of(result)
    log = text_of(result)
    assert log.startswith("Commit history:")
    # Newest first, each with its id and message.
    positions = [log.index(f"Message: {m}") for m in reversed(repo.messages)]
    assert positions == sorted(positions)
    for sha in repo.shas:
        assert f"Commit: {sha}" in log


async def test_the_git_server_refuses_a_repository_outside_its_own(
    reference: ReferenceServers, errlog: TextIO, tmp_path: Path
) -> None:
    repo = make_git_repo(tmp_path / "repo")
    other = make_git_repo(tmp_path / "other")
    async with stdio(reference.git_argv(repo.path), errlog) as client:
        result = await call(client, "git_log", {"repo_path": str(other.path)})
    assert result.is_error
    assert "outside the allowed repository" in text_of(result)


async def test_the_fetch_server_reads_a_loopback_page(
    reference: ReferenceServers, errlog: TextIO
) -> None:
    with PageServer(robots_txt="User-agent: *\nDisallow: /\n") as pages:
        async with stdio(reference.fetch_argv(), errlog) as client:
            result = await call(client, "fetch", {"url": pages.url()})
        seen = [r.path for r in pages.requests]
    assert not result.is_error, text_of(result)
    text = text_of(result)
    assert text.startswith(f"Contents of {pages.url()}:")
    assert PAGE_PHRASE in text
    # --ignore-robots-txt: the page was fetched although robots.txt forbids it, unread.
    assert seen == ["/page.html"]


async def test_the_fetch_server_refuses_loopback_without_allow_private_ips(
    reference: ReferenceServers, errlog: TextIO
) -> None:
    with PageServer() as pages:
        async with stdio([str(reference.fetch), "--ignore-robots-txt"], errlog) as client:
            result = await call(client, "fetch", {"url": pages.url()})
        seen = list(pages.requests)
    assert result.is_error
    assert "--allow-private-ips" in text_of(result)
    assert seen == []


# ---------------------------------------------------------------------------------------------------
# The SDK-built test server, over streamable HTTP and stdio


Connect = Callable[..., AbstractAsyncContextManager[Client]]


@pytest.fixture(params=["http", "stdio"])
def transport(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def http_server(tmp_path: Path) -> AsyncIterator[McpServerProcess]:
    server = McpServerProcess(tmp_path, start_timeout=CALL_TIMEOUT)
    await asyncio.to_thread(server.start)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)


@pytest.fixture
def cancel_log(tmp_path: Path) -> Path:
    return tmp_path / "cancel.jsonl"


@pytest.fixture
def connect(transport: str, tmp_path: Path, errlog: TextIO, cancel_log: Path) -> Connect:
    """``connect(mode="auto", tools_variant=1)``: a client of the test server over ``transport``
    (HTTP: a server subprocess started per connection, logging cancellations to ``cancel_log``)."""

    @asynccontextmanager
    async def open_client(*, mode: str = "auto", tools_variant: int = 1) -> AsyncIterator[Client]:
        if transport == "stdio":
            argv = stdio_argv(cancel_log=cancel_log, tools_variant=tools_variant)
            async with Client(
                stdio_client(
                    StdioServerParameters(command=argv[0], args=argv[1:], env=server_env()),
                    errlog=errlog,
                ),
                mode=mode,
            ) as client:
                yield client
            return
        server = McpServerProcess(tmp_path, tools_variant=tools_variant, start_timeout=CALL_TIMEOUT)
        server.cancel_log = cancel_log
        await asyncio.to_thread(server.start)
        try:
            async with Client(server.url, mode=mode) as client:
                yield client
        finally:
            await asyncio.to_thread(server.stop)

    return open_client


async def test_the_test_server_lists_its_tools_with_their_hints(connect: Connect) -> None:
    async with connect() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tuple(tools) == TOOLS
    lookup, delete = tools["read_only_lookup"].annotations, tools["delete_thing"].annotations
    assert lookup is not None and lookup.read_only_hint is True
    assert delete is not None and delete.destructive_hint is True
    assert delete.read_only_hint is False
    assert tools["echo"].input_schema["required"] == ["text"]


async def test_progress_arrives_while_a_slow_call_runs(connect: Connect) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with connect() as client:
        with anyio.fail_after(CALL_TIMEOUT):
            result = await client.call_tool(
                "slow_progress", {"seconds": 2, "interval": 0.25}, progress_callback=on_progress
            )
    assert text_of(result) == "done after 2 s"
    assert len(seen) >= 3, seen
    assert [p for p, _, _ in seen] == sorted(p for p, _, _ in seen)
    assert all(total == 2 for _, total, _ in seen)
    assert seen[-1][0] == 2 and seen[-1][2] == "done"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_cancelled_call_reaches_the_server_and_the_next_call_works(
    connect: Connect, cancel_log: Path, transport: str, mode: str
) -> None:
    async with connect(mode=mode) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "wait_forever", {})
            with anyio.fail_after(CALL_TIMEOUT):
                await wait_for_record(cancel_log, "tool-started")
            tg.cancel_scope.cancel()
        with anyio.fail_after(CALL_TIMEOUT):
            await wait_for_record(cancel_log, "tool-cancelled")
        if transport == "stdio" or mode == "legacy":
            with anyio.fail_after(CALL_TIMEOUT):
                notice = await wait_for_record(cancel_log, "notifications/cancelled")
            assert notice["requestId"] is not None
        else:
            # 2026-07-28 over HTTP: the client cancels by closing the response stream; no notice.
            assert client.protocol_version == "2026-07-28"
            assert "notifications/cancelled" not in {r["event"] for r in read_records(cancel_log)}
        result = await call(client, "echo", {"text": "still here"})
    assert text_of(result) == "still here"


async def test_an_image_arrives_as_image_content(connect: Connect) -> None:
    async with connect() as client:
        result = await call(client, "image", {})
    image, text = result.content
    assert isinstance(image, ImageContent) and image.mime_type == "image/png"
    assert base64.b64decode(image.data) == PNG
    assert isinstance(text, TextContent) and text.text == IMAGE_TEXT


async def test_a_resource_and_structured_content_arrive(connect: Connect) -> None:
    async with connect() as client:
        resource = await call(client, "resource", {})
        structured = await call(client, "structured", {})
    (block,) = resource.content
    assert isinstance(block, EmbeddedResource)
    assert str(block.resource.uri) == RESOURCE_URI
    assert getattr(block.resource, "text", None) == RESOURCE_TEXT
    assert structured.structured_content == STRUCTURED.model_dump()
    assert '"latency"' in text_of(structured)


async def test_a_tool_error_is_a_result_not_an_exception(connect: Connect) -> None:
    async with connect() as client:
        ok = await call(client, "read_only_lookup", {"key": "alpha"})
        missing = await call(client, "read_only_lookup", {"key": "zeta"})
    assert text_of(ok) == "first letter" and not ok.is_error
    assert missing.is_error and "no such key: zeta" in text_of(missing)


async def test_the_second_tools_variant_changes_echo_s_schema(connect: Connect) -> None:
    async with connect(tools_variant=2) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        result = await call(client, "echo", {"text": "ab", "times": 3})
    assert tools["echo"].input_schema["required"] == ["text", "times"]
    assert text_of(result) == "ababab"


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


async def test_a_crash_ends_the_connection_over_stdio(
    cancel_log: Path, errlog: TextIO, tmp_path: Path
) -> None:
    argv = stdio_argv(cancel_log=cancel_log)
    async with stdio(argv, errlog, env=server_env()) as client:
        with pytest.raises(MCPError, match="Connection closed"):
            await call(client, "crash", {})
    errlog.flush()
    assert "crash(): exiting" in (tmp_path / "server-stderr.log").read_text(encoding="utf-8")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_crash_ends_the_connection_over_http(
    http_server: McpServerProcess, mode: str
) -> None:
    raised: BaseException | None = None
    try:
        async with Client(http_server.url, mode=mode) as client:
            await call(client, "crash", {})
    except Exception as e:
        raised = e
    assert raised is not None, "crash() returned a result"
    # Handshake era: an MCPError ("SSE stream ended without a response"). 2026-07-28: the call's
    # scope is cancelled and leaving the client raises the transport's RemoteProtocolError.
    assert any(isinstance(e, (MCPError, httpx2.TransportError)) for e in _leaves(raised)), raised
    assert await asyncio.to_thread(http_server.wait_exit) == CRASH_EXIT
