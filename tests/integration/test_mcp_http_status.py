"""An HTTP MCP endpoint that answers with an error status: the server's line names the status (the
SDK's own message names none) and, for 401/403, says to check the entry's headers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from dsh_kernel.mcp.config import parse_entry
from dsh_kernel.mcp.server import McpServer


@pytest.fixture
def refusing() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b"token rejected"
            self.send_response(401)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST

        def log_message(self, format: str, *args: object) -> None:
            del format, args

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_401_is_named_with_what_to_check(refusing: str, tmp_path: Path) -> None:
    async def run() -> McpServer:
        server = McpServer(parse_entry("locked", {"url": refusing}, "test"), log_dir=tmp_path)
        server.start()
        await asyncio.wait_for(server.settled.wait(), timeout=90)
        return server

    server = asyncio.run(run())
    assert server.state == "failed"
    assert server.last_error is not None and "HTTP 401" in server.last_error, server.last_error
    assert "check the entry's headers" in server.last_error
    assert "\n" not in server.last_error
