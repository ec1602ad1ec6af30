"""A loopback HTTP server that replays scripted model-API responses byte for byte (WIRE.md §6).

The fake network peer of every provider test. It binds 127.0.0.1 on an ephemeral port and runs its
own asyncio loop in a background thread, so it serves synchronous tests, async tests (whose loop it
never blocks) and — through ``python -m tests.support.sse_server script.json`` — other processes, such
as a kernel subprocess pointed at it with ``DSH_BASE_URL``.

A script is a queue of ``Reply``s consumed one per request, in order (503 → 503 → 200 for retries;
tool call → text for the agent loop); a request beyond the script gets a 500 that says so, and a
``sticky`` reply is never consumed. A ``respond`` function, when given, sees each model call first
and may answer it itself (a reply that depends on the request, such as a compaction's summary call,
whose place among the others a test cannot know); ``None`` leaves it to the script. A reply is either a plain body (JSON error bodies) or SSE
``frames``, each written as one transport write (one HTTP chunk) after its own ``delay_ms`` —
``coalesce`` batches undelayed frames instead, for throughput benchmarks. Close modes: ``normal``; ``abort`` (the last frame is cut in half and the
socket reset — a truncated stream); ``hang`` (nothing more is sent and the socket stays open until
the client leaves). ``Framing`` switches apply adversarial transport on top of any script: random
byte splits (always including one inside a multi-byte UTF-8 character when there is one), ``\\r\\n``
line endings, no space after ``data:``, ``: keep-alive`` comments between frames, ``[DONE]`` dropped.

Every request is recorded (``requests``): method, path, headers, body and parsed JSON, how many frames
were sent and whether the client went away mid-response — which is how tests prove that cancelling
closes the connection at once.

Stateful passback checks fail a request the way the real API does when its history breaks a rule:
``deepseek-reasoning`` (every assistant message with ``tool_calls`` carries ``reasoning_content``,
equal to what this server streamed with those calls; ``content`` never null) and
``anthropic-signature`` (the thinking blocks streamed before a ``tool_use`` come back verbatim,
signature included), and two a generic server may apply: ``reasoning-every-assistant`` (every
assistant message carries a ``reasoning_content`` string, as DeepSeek behind a proxy demands, with its
"Missing `reasoning_content` field" 400) and ``no-reasoning-field`` (no message carries
``reasoning_content``, as a strict validator demands: "Extra inputs are not permitted"). A failed
check answers 400 without consuming the script.

Lookups are not model calls: a ``GET`` (``/props``, ``/models``) or a ``POST`` to ``/api/show`` — what
a provider asks a server about its models — is answered from ``routes`` (path → ``Reply``, never
consumed), else with a 404, and never takes a reply from the script. They are recorded apart, in
``lookups``, so ``requests`` stays the model calls a test scripted. A tokenizer's count (``POST``
to ``/tokenize`` or ``/extras/tokenize/count``) is answered by the script's ``tokenizer`` function
when it answers, else the same way (a 404 without a route: the server has no tokenizer), and
recorded in ``counts``.

A frame may wait on a named gate (``Frame.gate``) until the test calls ``release(name)``: a test
holds the rest of a stream until it has seen what the client did with the part before.

Control endpoints for other processes: ``POST /_dsh/script`` (``{"replies": [...], "checks": [...],
"routes": {path: reply}}`` replaces the script and forgets requests, lookups and passback state),
``POST /_dsh/release`` (``{"gate": name}``), ``GET /_dsh/requests`` and ``GET /_dsh/lookups``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import random
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

CloseMode = Literal["normal", "abort", "hang"]
CHECKS = (
    "deepseek-reasoning",
    "anthropic-signature",
    "reasoning-every-assistant",
    "no-reasoning-field",
)


def missing_reasoning_error(index: int) -> dict[str, Any]:
    """DeepSeek's 400 as OpenRouter and LiteLLM pass it on (seen in continuedev/continue#9831)."""
    return {
        "error": {
            "message": f"Missing `reasoning_content` field in the assistant message at message "
            f"index {index}. For more information, please refer to "
            "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_request_error",
        }
    }


def extra_field_error(index: int) -> dict[str, Any]:
    """A strict validator's 400 for a field it does not know (as in earendil-works/pi#4514)."""
    return {
        "error": {
            "message": f"Extra inputs are not permitted, field: "
            f"'messages[{index}].reasoning_content'",
            "type": "invalid_request_error",
            "code": 400,
        }
    }


DEEPSEEK_PASSBACK_ERROR = {
    "error": {
        "message": "The `reasoning_content` in the thinking mode must be passed back to the API.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_request_error",
    }
}


def anthropic_signature_error(where: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": f"{where}: Invalid `signature` in `thinking` block",
        },
        "request_id": "req_fake_signature",
    }


# ---------------------------------------------------------------------------------------------------
# Script data


@dataclass(frozen=True, kw_only=True)
class Frame:
    raw: bytes
    delay_ms: float = 0.0
    gate: str | None = None
    """A gate name: the frame is written only once the test has ``release``d that gate (after its
    ``delay_ms``), so a test can hold the rest of a stream until it has seen what came before."""


@dataclass(frozen=True, kw_only=True)
class Framing:
    """Adversarial transport switches, applied to every frame of a reply."""

    split_seed: int | None = None
    crlf: bool = False
    no_space: bool = False
    keepalive: bool = False
    omit_done: bool = False
    split_pause_ms: float = 1.0


@dataclass(frozen=True, kw_only=True)
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    frames: tuple[Frame, ...] = ()
    body: bytes | None = None
    close: CloseMode = "normal"
    first_byte_delay_ms: float = 0.0
    framing: Framing = Framing()
    chunked: bool = True
    """False: no length and ``Connection: close``; the end of the body is the end of the socket."""
    sticky: bool = False
    """Never consumed: served again for every later request (benchmarks, long-lived servers)."""
    coalesce: bool = False
    """Write runs of undelayed frames together (up to 64 KiB per write), so the server is never the
    bottleneck of a throughput benchmark; by default every frame is its own write, as real APIs do."""


def frames_from_sse(text: str, delay_ms: float = 0.0) -> tuple[Frame, ...]:
    """Split a transcript (events separated by blank lines) into one frame per event."""
    events = [e for e in text.replace("\r\n", "\n").split("\n\n") if e.strip()]
    return tuple(Frame(raw=(e.strip("\n") + "\n\n").encode(), delay_ms=delay_ms) for e in events)


def data_frame(obj: object, *, event: str | None = None, delay_ms: float = 0.0) -> Frame:
    payload = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return Frame(raw=f"{head}data: {payload}\n\n".encode(), delay_ms=delay_ms)


def comment_frame(text: str = "keep-alive", *, delay_ms: float = 0.0) -> Frame:
    return Frame(raw=f": {text}\n\n".encode(), delay_ms=delay_ms)


def sse_reply(
    frames: str | Iterable[Frame], *, headers: dict[str, str] | None = None, **kw: Any
) -> Reply:
    fr = frames_from_sse(frames) if isinstance(frames, str) else tuple(frames)
    hdrs = {"content-type": "text/event-stream", **(headers or {})}
    return Reply(frames=fr, headers=hdrs, **kw)


def json_reply(status: int, body: object, *, headers: dict[str, str] | None = None) -> Reply:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Reply(
        status=status,
        headers={"content-type": "application/json", **(headers or {})},
        body=raw,
    )


def reply_from_json(obj: dict[str, Any]) -> Reply:
    """The JSON script form (file or ``/_dsh/script``) → ``Reply``."""
    frames: list[Frame] = []
    if "sse" in obj:
        frames.extend(frames_from_sse(obj["sse"], float(obj.get("delay_ms", 0))))
    for f in obj.get("frames", []):
        delay = float(f.get("delay_ms", 0))
        if "raw" in f:
            frame = Frame(raw=f["raw"].encode(), delay_ms=delay)
        elif "comment" in f:
            frame = comment_frame(f["comment"], delay_ms=delay)
        else:
            frame = data_frame(f["data"], event=f.get("event"), delay_ms=delay)
        frames.append(replace(frame, gate=f.get("gate")))
    body = obj.get("body")
    raw_body = (
        None
        if body is None
        else body.encode()
        if isinstance(body, str)
        else json.dumps(body).encode()
    )
    headers = {k.lower(): str(v) for k, v in obj.get("headers", {}).items()}
    if frames and "content-type" not in headers:
        headers["content-type"] = "text/event-stream"
    if raw_body is not None and "content-type" not in headers:
        headers["content-type"] = "application/json"
    return Reply(
        status=int(obj.get("status", 200)),
        headers=headers,
        frames=tuple(frames),
        body=raw_body,
        close=obj.get("close", "normal"),
        first_byte_delay_ms=float(obj.get("first_byte_delay_ms", 0)),
        framing=Framing(**obj.get("framing", {})),
        chunked=bool(obj.get("chunked", True)),
        sticky=bool(obj.get("sticky", False)),
        coalesce=bool(obj.get("coalesce", False)),
    )


def reply_to_json(reply: Reply) -> dict[str, Any]:
    out: dict[str, Any] = {
        "status": reply.status,
        "headers": reply.headers,
        "frames": [
            {"raw": f.raw.decode(), "delay_ms": f.delay_ms}
            | ({"gate": f.gate} if f.gate is not None else {})
            for f in reply.frames
        ],
        "close": reply.close,
        "first_byte_delay_ms": reply.first_byte_delay_ms,
        "framing": {k: getattr(reply.framing, k) for k in Framing.__dataclass_fields__},
        "chunked": reply.chunked,
        "sticky": reply.sticky,
        "coalesce": reply.coalesce,
    }
    if reply.body is not None:
        out["body"] = reply.body.decode()
    return out


@dataclass(kw_only=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any = None
    frames_sent: int = 0
    client_closed: bool = False
    rejected: str | None = None
    """The passback check that failed this request, if any."""

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "json": self.json,
            "frames_sent": self.frames_sent,
            "client_closed": self.client_closed,
            "rejected": self.rejected,
        }


async def until_closed(rec: Recorded, timeout_s: float = 30) -> None:
    """Wait until the client of ``rec`` has gone away (the server notices at its next write); fail
    after ``timeout_s`` (a margin for a loaded machine, not an expected wait)."""
    deadline = time.monotonic() + timeout_s
    while not rec.client_closed:
        assert time.monotonic() < deadline, (
            f"the client never closed ({rec.frames_sent} frames sent)"
        )
        await asyncio.sleep(0.02)


# ---------------------------------------------------------------------------------------------------
# Passback state: what this server streamed, and what the next request must echo


def _payloads(frames: Sequence[Frame]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    text = b"".join(f.raw for f in frames).decode("utf-8", "replace").replace("\r\n", "\n")
    for event in text.split("\n\n"):
        data = "\n".join(
            line[5:].lstrip(" ") for line in event.split("\n") if line.startswith("data:")
        )
        if data and data != "[DONE]":
            with contextlib.suppress(ValueError):
                obj = json.loads(data)
                if isinstance(obj, dict):
                    out.append(obj)
    return out


class PassbackState:
    def __init__(self) -> None:
        self.reasoning_by_call: dict[str, str] = {}
        self.thinking_by_tool: dict[str, list[dict[str, Any]]] = {}

    def learn(self, frames: Sequence[Frame]) -> None:
        reasoning: list[str] = []
        call_ids: list[str] = []
        blocks: dict[int, dict[str, Any]] = {}
        for obj in _payloads(frames):
            for choice in obj.get("choices") or []:
                delta = choice.get("delta") or {}
                if isinstance(delta.get("reasoning_content"), str):
                    reasoning.append(delta["reasoning_content"])
                for call in delta.get("tool_calls") or []:
                    if call.get("id"):
                        call_ids.append(call["id"])
            kind = obj.get("type")
            if kind == "content_block_start":
                blocks[obj["index"]] = dict(obj["content_block"])
            elif kind == "content_block_delta":
                block, delta = blocks.get(obj["index"]), obj["delta"]
                if block is not None and delta.get("type") == "thinking_delta":
                    block["thinking"] = block.get("thinking", "") + delta["thinking"]
                elif block is not None and delta.get("type") == "signature_delta":
                    block["signature"] = delta["signature"]
        for call_id in call_ids:
            self.reasoning_by_call[call_id] = "".join(reasoning)
        ordered = [blocks[i] for i in sorted(blocks)]
        thinking = [b for b in ordered if b.get("type") in ("thinking", "redacted_thinking")]
        for b in ordered:
            if b.get("type") == "tool_use" and thinking:
                self.thinking_by_tool[b["id"]] = thinking

    def check_deepseek(self, body: Any) -> bool:
        for msg in body.get("messages", []) if isinstance(body, dict) else []:
            if msg.get("role") != "assistant":
                continue
            if msg.get("content") is None:
                return False
            calls = msg.get("tool_calls") or []
            if not calls:
                continue
            sent = msg.get("reasoning_content")
            if not isinstance(sent, str):
                return False
            for call in calls:
                expected = self.reasoning_by_call.get(call.get("id"))
                if expected is not None and sent != expected:
                    return False
        return True

    @staticmethod
    def missing_reasoning(body: Any) -> int | None:
        """The index of the first assistant message without a ``reasoning_content`` string."""
        for n, msg in enumerate(body.get("messages", []) if isinstance(body, dict) else []):
            if msg.get("role") == "assistant" and not isinstance(msg.get("reasoning_content"), str):
                return n
        return None

    @staticmethod
    def extra_reasoning(body: Any) -> int | None:
        """The index of the first message that carries ``reasoning_content``."""
        for n, msg in enumerate(body.get("messages", []) if isinstance(body, dict) else []):
            if "reasoning_content" in msg:
                return n
        return None

    def check_anthropic(self, body: Any) -> str | None:
        messages = body.get("messages", []) if isinstance(body, dict) else []
        for n, msg in enumerate(messages):
            content = msg.get("content")
            if msg.get("role") != "assistant" or not isinstance(content, list):
                continue
            sent = [b for b in content if b.get("type") in ("thinking", "redacted_thinking")]
            for block in content:
                expected = (
                    self.thinking_by_tool.get(block.get("id", ""))
                    if block.get("type") == "tool_use"
                    else None
                )
                if expected is None:
                    continue
                want = [
                    {k: b.get(k) for k in ("type", "thinking", "signature", "data") if k in b}
                    for b in expected
                ]
                got = [
                    {k: b.get(k) for k in ("type", "thinking", "signature", "data") if k in b}
                    for b in sent
                ]
                if got != want or content[: len(sent)] != sent:
                    return f"messages.{n}.content.0"
        return None


# ---------------------------------------------------------------------------------------------------
# The server


def _transform(reply: Reply) -> list[Frame]:
    fr = reply.framing
    if fr == Framing() or fr == Framing(split_seed=fr.split_seed):
        return list(reply.frames)
    out: list[Frame] = []
    for frame in reply.frames:
        raw = frame.raw
        if fr.omit_done and raw.replace(b" ", b"").strip() == b"data:[DONE]":
            continue
        if fr.no_space:
            raw = b"\n".join(
                line[:5] + line[6:] if line.startswith(b"data: ") else line
                for line in raw.split(b"\n")
            )
        if fr.crlf:
            raw = raw.replace(b"\n", b"\r\n")
        if fr.keepalive and out:
            out.append(Frame(raw=b": keep-alive\r\n\r\n" if fr.crlf else b": keep-alive\n\n"))
        out.append(replace(frame, raw=raw))
    return out


def _split(raw: bytes, rng: random.Random) -> list[bytes]:
    inside = [i for i in range(1, len(raw)) if 0x80 <= raw[i] <= 0xBF]
    points = set(rng.sample(range(1, len(raw)), min(2, len(raw) - 1))) if len(raw) > 1 else set()
    if inside:
        points.add(rng.choice(inside))
    cuts = [0, *sorted(points), len(raw)]
    return [raw[a:b] for a, b in itertools.pairwise(cuts) if b > a]


def _coalesce(frames: list[Frame], limit: int = 65536) -> list[Frame]:
    groups: list[tuple[Frame, list[bytes]]] = []
    size = 0
    for frame in frames:
        if groups and not frame.delay_ms and frame.gate is None and size + len(frame.raw) <= limit:
            groups[-1][1].append(frame.raw)
            size += len(frame.raw)
        else:
            groups.append((frame, [frame.raw]))
            size = len(frame.raw)
    return [replace(first, raw=b"".join(parts)) for first, parts in groups]


class SseServer:
    """The scenario server. ``start()`` returns self; use as a context manager in sync code."""

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        checks: Iterable[str] = (),
        routes: dict[str, Reply] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._queue: list[Reply] = list(replies)
        self._checks = tuple(checks)
        self._passback = PassbackState()
        self._requests: list[Recorded] = []
        self._routes: dict[str, Reply] = dict(routes or {})
        self._lookups: list[Recorded] = []
        self._counts: list[Recorded] = []
        self._respond: Callable[[Recorded], Reply | None] | None = None
        self._tokenizer: Callable[[Recorded], Reply | None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping: asyncio.Event | None = None
        self._gates: dict[str, asyncio.Event] = {}
        self.port = 0

    # -- script -----------------------------------------------------------------------------------

    def script(
        self,
        *replies: Reply,
        checks: Iterable[str] | None = None,
        routes: dict[str, Reply] | None = None,
        respond: Callable[[Recorded], Reply | None] | None = None,
        tokenizer: Callable[[Recorded], Reply | None] | None = None,
    ) -> None:
        """Replace the script (and ``routes``, when given; ``respond`` and ``tokenizer``, always: see the module
        docstring); forget recorded requests, lookups and passback state."""
        with self._lock:
            self._queue = list(replies)
            self._respond = respond
            self._tokenizer = tokenizer
            if checks is not None:
                self._checks = tuple(checks)
            if routes is not None:
                self._routes = dict(routes)
            self._passback = PassbackState()
            self._requests = []
            self._lookups = []
            self._counts = []

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def release(self, gate: str) -> None:
        """Let the frames waiting on ``gate`` be written (and any later one on it, at once)."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("the server is not running")
        loop.call_soon_threadsafe(lambda: self._gate(gate).set())

    def _gate(self, name: str) -> asyncio.Event:
        """The event of gate ``name`` (the server's loop only)."""
        event = self._gates.get(name)
        if event is None:
            event = self._gates[name] = asyncio.Event()
        return event

    @property
    def requests(self) -> list[Recorded]:
        with self._lock:
            return list(self._requests)

    @property
    def lookups(self) -> list[Recorded]:
        """The lookups (not model calls) the server was asked, in order (module docstring)."""
        with self._lock:
            return list(self._lookups)

    @property
    def counts(self) -> list[Recorded]:
        """The tokenizer lookups (``POST /tokenize``, ``/extras/tokenize/count``) the server was
        asked, in order: answered from ``routes`` (a 404 without one), never a model call."""
        with self._lock:
            return list(self._counts)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> SseServer:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._stopping = asyncio.Event()

            async def main() -> None:
                self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
                self.port = self._server.sockets[0].getsockname()[1]
                ready.set()
                assert self._stopping is not None
                await self._stopping.wait()
                self._server.close()
                for task in list(self._tasks):
                    task.cancel()
                await asyncio.gather(*self._tasks, return_exceptions=True)
                await self._server.wait_closed()

            loop.run_until_complete(main())
            loop.close()

        self._thread = threading.Thread(target=run, name="sse-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("sse server did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> SseServer:
        return self.start() if self._thread is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- HTTP -------------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                body = await self._read_body(reader, headers)
                if path.startswith("/_dsh/"):
                    await self._control(method, path, body, writer)
                    continue
                parsed: Any = None
                with contextlib.suppress(ValueError):
                    parsed = json.loads(body) if body else None
                rec = Recorded(method=method, path=path, headers=headers, body=body, json=parsed)
                reply = self._next(rec)
                if not await self._send(reply, rec, reader, writer):
                    return
        except asyncio.CancelledError:
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    @staticmethod
    async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
        if "content-length" in headers:
            return await reader.readexactly(int(headers["content-length"]))
        if headers.get("transfer-encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")
                    return b"".join(parts)
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
        return b""

    def _next(self, rec: Recorded) -> Reply:
        with self._lock:
            if rec.path.endswith(("/tokenize", "/tokenize/count")):
                self._counts.append(rec)
                answer = self._tokenizer(rec) if self._tokenizer is not None else None
                route = answer or self._routes.get(rec.path.split("?", 1)[0])
                return route or json_reply(404, {"detail": "Not Found"})
            if rec.method == "GET" or rec.path.endswith("/api/show"):
                self._lookups.append(rec)
                route = self._routes.get(rec.path.split("?", 1)[0])
                return route or json_reply(404, {"error": f"sse_server: no route {rec.path}"})
            self._requests.append(rec)
            if "deepseek-reasoning" in self._checks and not self._passback.check_deepseek(rec.json):
                rec.rejected = "deepseek-reasoning"
                return json_reply(400, DEEPSEEK_PASSBACK_ERROR)
            if "reasoning-every-assistant" in self._checks:
                at = self._passback.missing_reasoning(rec.json)
                if at is not None:
                    rec.rejected = "reasoning-every-assistant"
                    return json_reply(400, missing_reasoning_error(at))
            if "no-reasoning-field" in self._checks:
                at = self._passback.extra_reasoning(rec.json)
                if at is not None:
                    rec.rejected = "no-reasoning-field"
                    return json_reply(400, extra_field_error(at))
            if "anthropic-signature" in self._checks:
                where = self._passback.check_anthropic(rec.json)
                if where is not None:
                    rec.rejected = "anthropic-signature"
                    return json_reply(400, anthropic_signature_error(where))
            answer = self._respond(rec) if self._respond is not None else None
            if answer is not None:
                return answer
            if not self._queue:
                return json_reply(
                    500,
                    {"error": {"message": "sse_server: script exhausted", "type": "server_error"}},
                )
            reply = self._queue[0] if self._queue[0].sticky else self._queue.pop(0)
            if self._checks and reply.status == 200 and reply.frames:
                self._passback.learn(reply.frames)
            return reply

    async def _control(
        self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter
    ) -> None:
        if method == "POST" and path == "/_dsh/script":
            obj = json.loads(body)
            self.script(
                *(reply_from_json(r) for r in obj.get("replies", [])),
                checks=obj.get("checks", []),
                routes={k: reply_from_json(v) for k, v in obj.get("routes", {}).items()},
            )
            out = b'{"ok":true}'
        elif method == "POST" and path == "/_dsh/release":
            self._gate(json.loads(body)["gate"]).set()
            out = b'{"ok":true}'
        elif method == "GET" and path == "/_dsh/requests":
            out = json.dumps([r.to_json() for r in self.requests]).encode()
        elif method == "GET" and path == "/_dsh/lookups":
            out = json.dumps([r.to_json() for r in self.lookups]).encode()
        else:
            out = b'{"ok":false}'
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            + f"content-length: {len(out)}\r\n\r\n".encode()
            + out
        )
        await writer.drain()

    async def _send(
        self,
        reply: Reply,
        rec: Recorded,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Write ``reply``; return whether the connection may serve another request."""
        if reply.first_byte_delay_ms:
            await asyncio.sleep(reply.first_byte_delay_ms / 1000)
        head = [f"HTTP/1.1 {reply.status} {'OK' if reply.status < 400 else 'Error'}"]
        head += [f"{k}: {v}" for k, v in reply.headers.items()]
        if reply.body is not None and not reply.frames:
            head.append(f"content-length: {len(reply.body)}")
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + reply.body)
            try:
                await writer.drain()
            except ConnectionError:
                rec.client_closed = True
                return False
            return True
        head.append("transfer-encoding: chunked" if reply.chunked else "connection: close")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        frames = _transform(reply)
        rng = random.Random(reply.framing.split_seed)
        split = reply.framing.split_seed is not None

        def put(data: bytes) -> None:
            writer.write(b"%x\r\n%s\r\n" % (len(data), data) if reply.chunked else data)

        if reply.coalesce and not split:
            frames = _coalesce(frames)
        try:
            for n, frame in enumerate(frames):
                if frame.delay_ms:
                    await asyncio.sleep(frame.delay_ms / 1000)
                if frame.gate is not None:
                    await self._gate(frame.gate).wait()
                last = n == len(frames) - 1
                if reply.close == "abort" and last:
                    put(frame.raw[: max(1, len(frame.raw) // 2)])
                    await writer.drain()
                    writer.transport.abort()
                    rec.frames_sent += 1
                    return False
                if split:
                    for piece in _split(frame.raw, rng):
                        put(piece)
                        await writer.drain()
                        await asyncio.sleep(reply.framing.split_pause_ms / 1000)
                else:
                    put(frame.raw)
                    await writer.drain()
                if writer.transport.is_closing():
                    raise ConnectionResetError
                rec.frames_sent += 1
            if reply.close == "abort":
                writer.transport.abort()
                return False
            if reply.close == "hang":
                await writer.drain()
                while await reader.read(65536):
                    pass
                rec.client_closed = True
                return False
            if reply.chunked:
                writer.write(b"0\r\n\r\n")
                await writer.drain()
                return True
            return False
        except ConnectionError:
            rec.client_closed = True
            return False


# ---------------------------------------------------------------------------------------------------
# CLI: serve a JSON script for another process


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("script", nargs="?", help='JSON file: {"replies": [...], "checks": [...]}')
    args = parser.parse_args(argv)
    replies: list[Reply] = []
    checks: list[str] = []
    if args.script:
        with open(args.script, encoding="utf-8") as f:
            obj = json.load(f)
        replies = [reply_from_json(r) for r in obj.get("replies", [])]
        checks = list(obj.get("checks", []))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with SseServer(replies, checks=checks) as server:
        print(server.url, flush=True)
        while not stop.wait(0.2):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
