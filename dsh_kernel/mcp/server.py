"""``McpServer``: one configured MCP server, kept connected in the background on the kernel's loop.

``start()`` makes a task that connects (the official SDK's ``mcp.Client``: a stdio subprocess or a
streamable-HTTP endpoint), lists the tools and then holds the connection open until ``stop()``. The
SDK is imported in a worker thread (it takes most of a second), so nothing blocks the loop for long
and a kernel never waits for its servers to start. ``state`` is ``starting``, ``ready``, ``failed``
or ``stopped``; ``settled`` is set once it is ``ready`` or ``failed``, and ``on_change`` is told of
every change (the tools the agent is offered follow it: ``mcp.servers``).

A stdio server's stderr goes to its own file, ``log_path`` (``<store>/mcp/logs/<name>.log``),
appended (a log past ``MAX_LOG_BYTES`` at a start is kept as ``<name>.log.1``), never to the
notebook (ipykernel's ``sys.stderr`` has no file descriptor: a subprocess cannot inherit it). A
server's notices that its tool list changed are coalesced: one listing at a time, and at most one
more after it. The server's environment is the SDK's safe set plus its entry's ``env``; an HTTP
server's headers are its entry's. Both are resolved from ``${NAME}`` references when the server
starts (``mcp.config.resolve``), and what they supplied is added to the redactor.

``call(tool, arguments, …)`` runs one ``tools/call`` and returns the result as its wire JSON
(``CallToolResult`` with camelCase keys). Two clocks bound it: ``idle_s`` — the longest the server
may stay silent, reset by each progress notification it sends for the call (the SDK's own read
timeout is not reset by progress, so it is not used) — and ``deadline_s`` overall. Either ends the
call with ``McpCallError`` (``MCP_TIMEOUT``). ``signal`` aborting (Stop, interrupt) cancels the
request: the SDK sends ``notifications/cancelled`` to the server, and the call raises ``ABORTED``.
When the connection is lost during a call (the process died, the endpoint went away) the call fails
with ``MCP_SERVER_CRASHED`` and the server is restarted once in the background; a second loss
leaves it ``failed`` until ``%agent mcp restart``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from dsh_kernel.abort import AbortSignal
from dsh_kernel.errors import ToolError
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.mcp.config import McpConfigError, ServerEntry, resolve

if TYPE_CHECKING:
    from mcp import Client

State = Literal["starting", "ready", "failed", "stopped"]

CONNECT_TIMEOUT_S: Final = 60.0
"""How long one connection attempt (spawn or connect, handshake, first listing) may take."""

MAX_RESTARTS: Final = 1

_log = logging.getLogger(__name__)


class McpCallError(ToolError):
    """A call that did not get a result (its ``code`` says why: docs/mcp.md lists each)."""

    code = "MCP_CALL_FAILED"


class McpUnavailable(ImportError):
    """The ``mcp`` package is not installed (``pip install 'dsh-kernel[mcp]'``)."""


def import_sdk() -> None:
    """Import the SDK (in a worker thread: ``start`` runs it there); ``McpUnavailable`` if absent."""
    try:
        import mcp  # pyright: ignore[reportUnusedImport]
        import mcp.client.stdio  # pyright: ignore[reportUnusedImport]
        import mcp.client.streamable_http  # noqa: F401  # pyright: ignore[reportUnusedImport]
        from jsonschema import validators  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError as exc:
        raise McpUnavailable(
            "the MCP client is not installed: pip install 'dsh-kernel[mcp]' (the `mcp` package), "
            "then restart the kernel"
        ) from exc


class McpServer:
    """One server's connection (module docstring)."""

    def __init__(
        self,
        entry: ServerEntry,
        *,
        log_dir: Path,
        on_change: Callable[[McpServer], None] = lambda _s: None,
        add_secret: Callable[[str], None] = lambda _s: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.entry = entry
        self.name = entry.name
        self.log_path = log_dir / f"{entry.name}.log"
        self.state: State = "starting"
        self.last_error: str | None = entry.problem
        self.tools: tuple[JsonObject, ...] = ()
        """The tools as the server listed them (wire JSON: ``name``, ``inputSchema``, …)."""
        self.restarts = 0
        self.started_at: float | None = None
        self.settled = asyncio.Event()
        self._on_change = on_change
        self._add_secret = add_secret
        self._clock = clock
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._lost = asyncio.Event()
        self._relisting: set[asyncio.Future[None]] = set()
        self._relist_again = False
        self._last_status: int | None = None
        if entry.problem is not None:
            self._settle("failed", entry.problem)

    # -- life -------------------------------------------------------------------------------------

    def start(self) -> None:
        """Connect in the background (nothing happens for an entry with a problem)."""
        if self.entry.problem is not None or self._task is not None:
            return
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """Close the connection (a stdio server's process ends) and wait for it."""
        self._stop.set()
        task, self._task = self._task, None
        if task is not None and not task.done():
            with contextlib.suppress(asyncio.TimeoutError, Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), timeout=10)
            if not task.done():
                task.cancel()
        self._client = None
        if self.state != "failed":
            self.state = "stopped"
        self.settled.set()
        self._on_change(self)

    async def _run(self) -> None:
        try:
            await asyncio.to_thread(import_sdk)
        except McpUnavailable as exc:
            self._settle("failed", str(exc))
            return
        while not self._stop.is_set():
            try:
                await self._serve()
            except asyncio.CancelledError:
                raise
            except McpConfigError as exc:
                self._settle("failed", exc.message)
                return
            except BaseException as exc:
                error = self._with_status(describe_exception(exc))
                _log.warning("dsh: MCP server %s: %s", self.name, error)
                was_ready = self.state == "ready"
                self._client = None
                if self._stop.is_set():
                    return
                if was_ready and self.restarts < MAX_RESTARTS:
                    self.restarts += 1
                    self.last_error = f"{error} (restarted)"
                    self.state = "starting"
                    self.settled.clear()
                    self._on_change(self)
                    continue
                self._settle("failed", error)
                return
            else:
                if self._stop.is_set():
                    return
                # The connection ended on its own while idle (the server exited).
                if self.restarts < MAX_RESTARTS:
                    self.restarts += 1
                    self.last_error = "the server closed the connection (restarted)"
                    self.state = "starting"
                    self.settled.clear()
                    self._on_change(self)
                    continue
                self._settle("failed", "the server closed the connection")
                return

    async def _serve(self) -> None:
        from mcp import Client
        from mcp.types import Implementation

        from dsh_kernel import __version__

        entry = self.entry
        resolved = resolve(entry)
        for secret in resolved.secrets:
            self._add_secret(secret)
        self._lost.clear()
        self.started_at = self._clock()
        async with contextlib.AsyncExitStack() as stack:
            transport: Any
            if entry.transport == "stdio":
                from mcp.client.stdio import StdioServerParameters, stdio_client

                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                _rotate(self.log_path)
                errlog = stack.enter_context(self.log_path.open("a", encoding="utf-8"))
                errlog.write(f"--- dsh-kernel starts {entry.describe()} ---\n")
                errlog.flush()
                params = StdioServerParameters(
                    command=entry.command,
                    args=list(entry.args),
                    env=dict(resolved.env),
                    cwd=entry.cwd,
                )
                transport = stdio_client(params, errlog=errlog)
            else:
                import httpx2
                from mcp.client.streamable_http import streamable_http_client

                http = await stack.enter_async_context(
                    httpx2.AsyncClient(
                        headers=dict(resolved.headers),
                        timeout=httpx2.Timeout(30.0, read=None),
                        event_hooks={"response": [self._http_status]},
                    )
                )
                transport = streamable_http_client(entry.url, http_client=http)
            client = Client(
                transport,
                client_info=Implementation(name="dsh-kernel", version=__version__),
                message_handler=self._message,
                cache=None,
            )
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                await stack.enter_async_context(client)
                tools = await self._list(client)
            self._client = client
            self.tools = tools
            self._settle("ready", None)
            stop = asyncio.ensure_future(self._stop.wait())
            lost = asyncio.ensure_future(self._lost.wait())
            try:
                await asyncio.wait({stop, lost}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop.cancel()
                lost.cancel()
                self._client = None
            if self._lost.is_set() and not self._stop.is_set():
                raise ConnectionError("the connection to the server was lost")

    async def _http_status(self, response: Any) -> None:
        """Keep an HTTP server's last error status: the SDK's message for it names none."""
        status = getattr(response, "status_code", 0)
        self._last_status = status if status >= 400 else None

    def _with_status(self, error: str) -> str:
        status, self._last_status = self._last_status, None
        if status is None:
            return error
        hint = {
            401: "the server wants credentials: check the entry's headers and their variables",
            403: "the server refused these credentials: check the entry's headers",
        }.get(status, "")
        return f"{error} (HTTP {status}{'; ' + hint if hint else ''})"

    async def _list(self, client: Client) -> tuple[JsonObject, ...]:
        tools: list[JsonObject] = []
        cursor: str | None = None
        for _ in range(100):
            page = await client.list_tools(cursor=cursor)
            tools += [
                t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools
            ]
            cursor = page.next_cursor
            if cursor is None:
                break
        return tuple(tools)

    async def _message(self, message: object) -> None:
        """The server's notifications: a changed tool list is listed again."""
        method = getattr(getattr(message, "root", message), "method", None)
        if method == "notifications/tools/list_changed":
            # Coalesced: one listing in flight and at most one more after it, however many
            # notices a server sends.
            if self._relist_again:
                return
            if self._relisting:
                self._relist_again = True
                return
            task = asyncio.ensure_future(self._relist_until_quiet())
            self._relisting.add(task)
            task.add_done_callback(self._relisting.discard)

    async def _relist_until_quiet(self) -> None:
        await self.relist()
        while self._relist_again:
            self._relist_again = False
            await self.relist()

    async def relist(self) -> None:
        client = self._client
        if client is None:
            return
        try:
            self.tools = await self._list(client)
        except Exception as exc:
            self.last_error = f"listing tools failed: {describe_exception(exc)}"
        self._on_change(self)

    def _settle(self, state: State, error: str | None) -> None:
        self.state = state
        if error is not None:
            self.last_error = error
        self.settled.set()
        self._on_change(self)

    # -- calls ------------------------------------------------------------------------------------

    async def call(
        self,
        tool: str,
        arguments: JsonObject,
        *,
        signal: AbortSignal,
        idle_s: float,
        deadline_s: float,
        on_progress: Callable[[float, float | None, str | None], None] | None = None,
    ) -> JsonObject:
        """One ``tools/call`` (module docstring); the result's wire JSON."""
        client = self._client
        if client is None or self.state != "ready":
            raise McpCallError(
                f"MCP server {self.name!r} is {self.state}"
                + (f" ({self.last_error})" if self.last_error else "")
                + "; `%agent mcp` shows its state and `%agent mcp restart "
                + f"{self.name}` starts it again",
                code="MCP_SERVER_UNAVAILABLE",
            )
        last = [self._clock()]

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            last[0] = self._clock()
            if on_progress is not None:
                with contextlib.suppress(Exception):
                    on_progress(progress, total, message)

        task = asyncio.ensure_future(
            client.call_tool(tool, dict(arguments), progress_callback=progress)
        )
        aborted = asyncio.get_running_loop().create_future()
        unlink = signal.add_callback(lambda _c: aborted.done() or aborted.set_result(None))
        started = self._clock()
        try:
            while True:
                now = self._clock()
                wait = min(last[0] + idle_s - now, started + deadline_s - now)
                if wait <= 0:
                    task.cancel()
                    await _settle(task)
                    overall = now >= started + deadline_s
                    raise McpCallError(
                        f"MCP tool {tool!r} of server {self.name!r} "
                        + (
                            f"did not finish within {deadline_s:g} s (the overall deadline)"
                            if overall
                            else f"sent nothing for {idle_s:g} s (no result, no progress)"
                        )
                        + "; the call was cancelled",
                        code="MCP_TIMEOUT",
                    )
                done, _ = await asyncio.wait(
                    {task, aborted}, timeout=min(wait, 1.0), return_when=asyncio.FIRST_COMPLETED
                )
                if task in done:
                    break
                if aborted in done:
                    task.cancel()
                    await _settle(task)
                    raise McpCallError("the call was stopped", code="ABORTED")
        except asyncio.CancelledError:
            task.cancel()
            await _settle(task)
            raise
        finally:
            unlink()
            if not aborted.done():
                aborted.cancel()
        try:
            if task.cancelled():
                # Not our cancel (that path raised above): the SDK cancels a call whose HTTP
                # connection broke (the 2026 streamable-HTTP transport).
                raise ConnectionError("the request was cancelled by the transport")
            result = task.result()
        except Exception as exc:
            if _connection_lost(exc):
                self._lost.set()
                raise McpCallError(
                    f"MCP server {self.name!r} went away during the call "
                    f"({describe_exception(exc)}); it is restarted once — the call was not "
                    f"repeated (its log: {self.log_path})",
                    code="MCP_SERVER_CRASHED",
                ) from exc
            raise McpCallError(
                f"MCP tool {tool!r} of server {self.name!r} failed: "
                + self._with_status(describe_exception(exc)),
                code="MCP_ERROR",
            ) from exc
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)


MAX_LOG_BYTES: Final = 5_000_000
"""A server's log past this size at a start is moved to ``<name>.log.1`` (one old log kept)."""


def _rotate(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.stat().st_size > MAX_LOG_BYTES:
            path.replace(path.with_name(path.name + ".1"))


async def _settle(task: asyncio.Future[Any]) -> None:
    """Wait for a cancelled call to unwind (the SDK sends ``notifications/cancelled`` then)."""
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(asyncio.shield(task), timeout=5)


def _connection_lost(exc: BaseException) -> bool:
    import anyio

    if isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError)):
        return True
    try:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED
    except ImportError:  # pragma: no cover - the SDK is there when a call ran
        return False
    return isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED


def describe_exception(exc: BaseException) -> str:
    """One line for a failure, unwrapping exception groups (anyio's task groups make them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:  # pyright: ignore[reportUnknownMemberType]
        exc = exc.exceptions[0]  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    text = str(exc).strip() or type(exc).__name__  # pyright: ignore[reportUnknownArgumentType]
    lines = text.splitlines()
    text = lines[0][:300] + (" …" if len(lines) > 1 or len(lines[0]) > 300 else "")
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or text}"
    if isinstance(exc, TimeoutError):
        return f"no answer within {CONNECT_TIMEOUT_S:g} s"
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text  # pyright: ignore[reportUnknownArgumentType]
