"""A loopback TCP relay in front of the live server that keeps the HTTP requests it passed on.

llama-cpp-python's server logs each request's line (its access log) but never its body. A live test
that must assert on what the server *received* — which turns a request carried — puts a ``WireTap``
between the kernel and the server: ``DSH_BASE_URL`` points at the tap, the tap copies every byte
unchanged both ways, and parses the client's bytes into the HTTP requests they were
(``Content-Length`` or chunked bodies). The server therefore gets exactly the bytes kept here.
Standard library only; 127.0.0.1 only; every thread and socket ends with ``stop()``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from dataclasses import dataclass
from typing import Any

CHUNK = 65536


@dataclass(frozen=True)
class TappedRequest:
    method: str
    path: str
    headers: dict[str, str]
    """Header names lower-cased."""
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class RequestParser:
    """Splits one connection's client bytes into the HTTP/1.1 requests they hold."""

    def __init__(self, sink: list[TappedRequest], lock: threading.Lock) -> None:
        self.buf = bytearray()
        self.sink = sink
        self.lock = lock

    def feed(self, data: bytes) -> None:
        self.buf += data
        while (req := self._take()) is not None:
            with self.lock:
                self.sink.append(req)

    def _take(self) -> TappedRequest | None:
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return None
        head = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        method, path, _version = head[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        start = end + 4
        if "chunked" in headers.get("transfer-encoding", "").lower():
            decoded = self._dechunk(start)
            if decoded is None:
                return None
            body, after = decoded
        else:
            length = int(headers.get("content-length", "0"))
            if len(self.buf) < start + length:
                return None
            body, after = bytes(self.buf[start : start + length]), start + length
        del self.buf[:after]
        return TappedRequest(method, path, headers, body)

    def _dechunk(self, at: int) -> tuple[bytes, int] | None:
        body = bytearray()
        while True:
            eol = self.buf.find(b"\r\n", at)
            if eol < 0:
                return None
            size = int(bytes(self.buf[at:eol]).split(b";")[0], 16)
            at = eol + 2
            if size == 0:  # the last chunk; no trailers are sent by the clients in use
                if len(self.buf) < at + 2:
                    return None
                return bytes(body), at + 2
            if len(self.buf) < at + size + 2:
                return None
            body += self.buf[at : at + size]
            at += size + 2


class WireTap:
    """``with WireTap(server.port) as tap:`` — point the client at ``tap.base_url``."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._requests: list[TappedRequest] = []
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._closed = False

    @property
    def base_url(self) -> str:
        """What ``DSH_BASE_URL`` is set to: the tap's ``/v1`` root."""
        return f"http://127.0.0.1:{self.port}/v1"

    def requests(self) -> list[TappedRequest]:
        """Every complete request passed on so far, in the order their last byte arrived."""
        with self._lock:
            return list(self._requests)

    def chat_requests(self) -> list[TappedRequest]:
        """The ``POST …/chat/completions`` requests passed on so far."""
        return [
            r
            for r in self.requests()
            if r.method == "POST" and r.path.endswith("/chat/completions")
        ]

    def start(self) -> WireTap:
        self._spawn(self._accept)
        return self

    def _spawn(self, target: Any, *args: Any) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._threads.append(t)
        t.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # the listener was closed: stop()
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._closed:
                    client.close()
                    upstream.close()
                    return
                self._sockets += [client, upstream]
            parser = RequestParser(self._requests, self._lock)
            self._spawn(self._pump, client, upstream, parser)
            self._spawn(self._pump, upstream, client, None)

    def _pump(self, src: socket.socket, dst: socket.socket, parser: RequestParser | None) -> None:
        try:
            while data := src.recv(CHUNK):
                if parser is not None:
                    parser.feed(data)
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:  # either end went away: end the other too
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        with self._lock:
            self._closed = True
            sockets, threads = list(self._sockets), list(self._threads)
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() under way (Linux)
        self._listener.close()
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        for t in threads:
            t.join(5)

    def __enter__(self) -> WireTap:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
