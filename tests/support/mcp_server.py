"""An MCP server built with the official SDK (``mcp``'s ``MCPServer``), for the tests of MCP clients.

``python -m tests.support.mcp_server --port 0 --ready-file PATH`` serves streamable HTTP on
127.0.0.1 (the path ``/mcp``) and, once it accepts connections, writes its URL
(``http://127.0.0.1:PORT/mcp``) to ``PATH`` (written whole: a reader never sees half a URL).
``--stdio`` serves the same tools over stdin/stdout instead. ``McpServerProcess`` starts the HTTP
one as a subprocess and stops it by its PID; ``stdio_argv()`` is the command for a client that
spawns the stdio one itself.

The tools (``TOOLS``), each there to exercise one thing a client must get right:

- ``echo(text)`` returns ``text``. ``--tools-variant 2`` gives it a second, required property
  ``times`` (the text repeated that many times), so a client can see a tool's schema change
  between two listings.
- ``slow_progress(seconds, interval)`` sends ``notifications/progress`` every ``interval`` seconds
  (when the call carries a progress token) for ``seconds`` seconds, then returns
  ``"done after N s"``: a call longer than a client's idle timeout that progress keeps alive.
- ``wait_forever()`` sleeps until cancelled.
- ``image()`` returns an ``ImageContent`` (``PNG``, a real 16x8 PNG) and a ``TextContent``.
- ``resource()`` returns an ``EmbeddedResource``: a text resource at ``RESOURCE_URI``.
- ``structured()`` returns structured content (``STRUCTURED``, with an output schema) and the same
  as JSON text.
- ``crash()`` ends the server process at once (``os._exit(CRASH_EXIT)``) in the middle of the call.
- ``read_only_lookup(key)`` is annotated ``readOnlyHint: true``; ``delete_thing(name)``
  ``destructiveHint: true``. An unknown key is an ``isError`` result naming it.

Cancellation: with ``--cancel-log PATH`` the server appends one JSON line to ``PATH`` when
``wait_forever`` starts (``{"event": "tool-started", "tool": "wait_forever"}``: a test waits for it
before cancelling), one for each ``notifications/cancelled`` it receives (``{"event":
"notifications/cancelled", "requestId": …, "reason": …}``, seen by a middleware once the SDK has
applied it) and one when the call is cancelled while it runs (``{"event": "tool-cancelled",
"tool": "wait_forever"}``); ``wait_for_record`` waits for one. Which of the last two arrive
depends on the transport and the protocol era (``mcp`` 2.3.0, measured): over stdio, in either
era, and over streamable HTTP on a handshake-era connection (``initialize``, 2025-11-25:
``mcp.Client(..., mode="legacy")``), the client sends ``notifications/cancelled`` and both are
logged (``tool-cancelled`` first: the SDK cancels the call before the middleware sees the notice).
Over streamable HTTP at 2026-07-28 (what ``mcp.Client``'s default ``mode="auto"`` negotiates with
this server) there is no such notification: the client closes the request's response stream,
which cancels the call on the server, so only ``tool-cancelled`` is logged. Either way the server
stays up and serves the next call.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import anyio
from mcp.server import MCPServer, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import (
    EmbeddedResource,
    ImageContent,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from pydantic import BaseModel, Field

ROOT = Path(__file__).resolve().parents[2]
"""The repository root: on ``PYTHONPATH`` for a subprocess that imports this module."""

CRASH_EXIT = 17
"""The exit status of a server that ``crash()`` ended."""

RESOURCE_URI = "test://notes/first"
RESOURCE_TEXT = "The first note: the resource's own text."

TOOLS = (
    "echo",
    "slow_progress",
    "wait_forever",
    "image",
    "resource",
    "structured",
    "crash",
    "read_only_lookup",
    "delete_thing",
)
"""Every tool the server lists, in the order it lists them."""

LOOKUP = {"alpha": "first letter", "omega": "last letter"}
"""What ``read_only_lookup`` knows; any other key is an ``isError`` result."""


def _png(width: int, height: int, pixel: Callable[[int, int], tuple[int, int, int]]) -> bytes:
    """An 8-bit RGB PNG, made with the standard library (zlib, struct)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(
        b"\x00" + b"".join(bytes(pixel(x, y)) for x in range(width)) for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


PNG = _png(16, 8, lambda x, _y: (255, 0, 0) if x < 8 else (0, 0, 255))
"""What ``image()`` returns: 16x8 pixels, the left half red and the right half blue."""
IMAGE_TEXT = "A 16x8 PNG: left half red, right half blue."


class Measurement(BaseModel):
    """``structured()``'s result: the SDK sends it as ``structuredContent`` and as JSON text."""

    name: str
    value: float
    unit: str
    tags: list[str]


STRUCTURED = Measurement(name="latency", value=12.5, unit="ms", tags=["p50", "loopback"])


def _append(path: Path | None, record: dict[str, Any]) -> None:
    if path is None:
        return
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def build_server(*, tools_variant: int = 1, cancel_log: Path | None = None) -> MCPServer:
    """The server: ``TOOLS`` (``echo``'s schema depends on ``tools_variant``), logging
    cancellations to ``cancel_log`` when given."""
    server = MCPServer("dsh-test-server", version="1.0")

    async def log_cancellations(
        ctx: ServerRequestContext[Any, Any], call_next: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        if ctx.method == "notifications/cancelled":
            params = ctx.params if isinstance(ctx.params, dict) else {}
            _append(
                cancel_log,
                {
                    "event": "notifications/cancelled",
                    "requestId": params.get("requestId"),
                    "reason": params.get("reason"),
                },
            )
        return await call_next(ctx)

    server.middleware.append(log_cancellations)

    if tools_variant == 2:

        @server.tool(name="echo", description="Echo the text, repeated.", structured_output=False)
        def echo_twice(text: str, times: int) -> str:
            return text * times
    else:

        @server.tool(name="echo", description="Echo the text back.", structured_output=False)
        def echo(text: str) -> str:
            return text

    @server.tool(
        description="Report progress every `interval` seconds for `seconds` seconds, then answer.",
        structured_output=False,
    )
    async def slow_progress(
        seconds: float, interval: Annotated[float, Field(gt=0)], ctx: Context
    ) -> str:
        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < seconds:
            await ctx.report_progress(elapsed, seconds, f"{elapsed:.1f} of {seconds:g} s")
            await anyio.sleep(min(interval, max(0.0, seconds - elapsed)))
        await ctx.report_progress(seconds, seconds, "done")
        return f"done after {seconds:g} s"

    @server.tool(description="Sleep until the call is cancelled.", structured_output=False)
    async def wait_forever() -> str:
        _append(cancel_log, {"event": "tool-started", "tool": "wait_forever"})
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            _append(cancel_log, {"event": "tool-cancelled", "tool": "wait_forever"})
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    @server.tool(description="A small PNG and a line describing it.")
    def image() -> list[ImageContent | TextContent]:
        data = base64.b64encode(PNG).decode("ascii")
        return [
            ImageContent(type="image", data=data, mime_type="image/png"),
            TextContent(type="text", text=IMAGE_TEXT),
        ]

    @server.tool(description="An embedded text resource.")
    def resource() -> EmbeddedResource:
        contents = TextResourceContents(
            uri=RESOURCE_URI, mime_type="text/plain", text=RESOURCE_TEXT
        )
        return EmbeddedResource(type="resource", resource=contents)

    @server.tool(description="A measurement, as structured content.")
    def structured() -> Measurement:
        return STRUCTURED

    @server.tool(
        description="End the server process in the middle of the call.", structured_output=False
    )
    def crash() -> str:
        sys.stderr.write("crash(): exiting the server process now\n")
        sys.stderr.flush()
        os._exit(CRASH_EXIT)

    @server.tool(
        description="Look a key up; changes nothing.",
        annotations=ToolAnnotations(read_only_hint=True),
        structured_output=False,
    )
    def read_only_lookup(key: str) -> str:
        if key not in LOOKUP:
            raise ToolError(f"no such key: {key}")
        return LOOKUP[key]

    @server.tool(
        description="Delete a thing (pretends to: nothing is stored).",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True),
        structured_output=False,
    )
    def delete_thing(name: str) -> str:
        return f"deleted {name}"

    return server


async def serve_http(server: MCPServer, *, port: int, ready_file: Path | None) -> None:
    """Serve streamable HTTP on 127.0.0.1:``port`` (0: a free one) until cancelled; write the URL
    to ``ready_file`` once uvicorn accepts connections."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    app = server.streamable_http_app(host="127.0.0.1")

    class AnnouncingServer(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if not self.started:
                return
            print(f"serving {url}", file=sys.stderr, flush=True)
            if ready_file is not None:
                partial = ready_file.with_name(ready_file.name + ".part")
                partial.write_text(url, encoding="utf-8")
                partial.replace(ready_file)

    http = AnnouncingServer(uvicorn.Config(app, log_level="warning", lifespan="on"))
    try:
        await http.serve(sockets=[sock])
    finally:
        sock.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    transport = parser.add_mutually_exclusive_group(required=True)
    transport.add_argument("--port", type=int, help="serve streamable HTTP on 127.0.0.1:PORT")
    transport.add_argument("--stdio", action="store_true", help="serve over stdin/stdout")
    parser.add_argument("--ready-file", type=Path, help="write the URL here once serving (HTTP)")
    parser.add_argument("--cancel-log", type=Path, help="append a JSON line per cancellation")
    parser.add_argument("--tools-variant", type=int, choices=(1, 2), default=1)
    args = parser.parse_args(argv)
    server = build_server(tools_variant=args.tools_variant, cancel_log=args.cancel_log)
    if args.stdio:
        anyio.run(server.run_stdio_async)
    else:
        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(lambda: serve_http(server, port=args.port, ready_file=args.ready_file))
    return 0


# ---------------------------------------------------------------------------------------------------
# For tests: the server as a subprocess, and its cancel log


def read_records(path: Path) -> list[dict[str, Any]]:
    """The cancel log's records so far (none if it does not exist yet)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


async def wait_for_record(path: Path, event: str) -> dict[str, Any]:
    """The first record of ``event`` in the cancel log at ``path``, once there is one (the caller
    bounds the wait: ``anyio.fail_after``)."""
    while True:
        for record in read_records(path):
            if record.get("event") == event:
                return record
        await anyio.sleep(0.05)


def server_env() -> dict[str, str]:
    """The environment a server subprocess needs: this one, with the repository on ``PYTHONPATH``."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}


def stdio_argv(*, cancel_log: Path | None = None, tools_variant: int = 1) -> list[str]:
    """The command line of the stdio server (run it with ``server_env()`` or ``cwd=ROOT``)."""
    argv = [sys.executable, "-m", "tests.support.mcp_server", "--stdio"]
    if cancel_log is not None:
        argv += ["--cancel-log", str(cancel_log)]
    return [*argv, "--tools-variant", str(tools_variant)]


class McpServerProcess:
    """The HTTP server as a subprocess on a free port: ``start()`` waits until it serves (its URL is
    ``url``), ``stop()`` ends it by its PID. Its stderr goes to ``log``."""

    def __init__(
        self, workdir: Path, *, tools_variant: int = 1, start_timeout: float = 60.0
    ) -> None:
        self.workdir = workdir
        self.tools_variant = tools_variant
        self.start_timeout = start_timeout
        self.ready_file = workdir / "mcp-server.url"
        self.cancel_log = workdir / "mcp-server.cancel.jsonl"
        self.log = workdir / "mcp-server.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> McpServerProcess:
        self.ready_file.unlink(missing_ok=True)
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.support.mcp_server",
                    "--port",
                    "0",
                    "--ready-file",
                    str(self.ready_file),
                    "--cancel-log",
                    str(self.cancel_log),
                    "--tools-variant",
                    str(self.tools_variant),
                ],
                env=server_env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + self.start_timeout
        while not self.ready_file.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the MCP test server exited ({self.proc.returncode}) before serving: "
                    f"{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"the MCP test server did not serve within {self.start_timeout:.0f} s: "
                    f"{self.log_tail()}"
                )
            time.sleep(0.05)
        self.url = self.ready_file.read_text(encoding="utf-8")
        return self

    def wait_exit(self, timeout: float = 60.0) -> int:
        """The process's exit status, waiting up to ``timeout`` s for it to end (blocks)."""
        assert self.proc is not None, "the MCP test server was never started"
        return self.proc.wait(timeout=timeout)

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)

    def __enter__(self) -> McpServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    sys.exit(main())
