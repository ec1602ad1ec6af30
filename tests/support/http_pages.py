"""A loopback HTTP server serving fixed pages, for a fetching MCP server (``mcp-server-fetch``) to read.

``PageServer`` binds 127.0.0.1 on a free port and serves from a thread (``ThreadingHTTPServer``), so
a test's server subprocess can fetch from it while the test waits on the MCP call. It serves
``PAGE_HTML`` at ``/page.html`` (``url("/page.html")``), any ``pages`` given, and ``/robots.txt``
when ``robots_txt`` is given (else a 404, which a fetcher takes as "allowed"); anything else is a
404. Every request is recorded (``requests``: method, path, User-Agent), so a test can prove the
fetch reached it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PAGE_PHRASE = "The loopback heron reads every page twice"
"""A sentence of ``PAGE_HTML``'s body: a fetch's Markdown must carry it."""

PAGE_TITLE = "Field notes from the loopback marsh"

PAGE_HTML = f"""<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>{PAGE_TITLE}</title></head>
<body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<article>
<h1>{PAGE_TITLE}</h1>
<p>{PAGE_PHRASE}. It wades through the shallow water of port numbers, looking for requests that
came from 127.0.0.1, and it keeps a careful list of what it found.</p>
<p>On a quiet morning the heron counted three frogs, two dragonflies and a single misplaced
semicolon, which it returned to the nearest parser with a polite note.</p>
<ul><li>frogs: 3</li><li>dragonflies: 2</li><li>semicolons: 1</li></ul>
</article>
<footer>Written for the tests; no heron was harmed.</footer>
</body>
</html>
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class PageRequest:
    """One request the server answered."""

    method: str
    path: str
    user_agent: str


class PageServer:
    """Fixed pages on 127.0.0.1 (see the module docstring); ``start()`` / ``stop()``, or ``with``."""

    def __init__(
        self, *, pages: dict[str, str] | None = None, robots_txt: str | None = None
    ) -> None:
        self.pages = {"/page.html": PAGE_HTML, **(pages or {})}
        if robots_txt is not None:
            self.pages["/robots.txt"] = robots_txt
        self.requests: list[PageRequest] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def url(self, path: str = "/page.html") -> str:
        assert self._httpd is not None, "the page server is not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}{path}"

    def start(self) -> PageServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with server._lock:
                    server.requests.append(
                        PageRequest(
                            method="GET",
                            path=self.path,
                            user_agent=self.headers.get("User-Agent", ""),
                        )
                    )
                body = server.pages.get(self.path.split("?", 1)[0])
                if body is None:
                    self.send_error(404)
                    return
                data = body.encode("utf-8")
                kind = "text/plain" if self.path.endswith(".txt") else "text/html"
                self.send_response(200)
                self.send_header("Content-Type", f"{kind}; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> PageServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
