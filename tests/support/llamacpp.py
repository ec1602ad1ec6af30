"""Real llama-cpp-python wire recordings (``tests/support/llamacpp/*.json``), for replay tests.

Each file is one request the kernel really sends (or a GET), sent to a real ``python -m
llama_cpp.server`` and recorded byte for byte by ``tests/local/record.py``; ``PROVENANCE.md`` beside
them says which server, model, flags and command. ``load(name)`` returns a ``Recording``;
``names()`` lists them; ``Recording.reply()`` turns one into an ``sse_server.Reply`` that serves
the same status, headers and body — a chunked response as one frame per HTTP chunk the server wrote,
in order — so a kernel pointed at ``SseServer`` sees what it would see from the real server.

The recordings are data, never edited by hand: ``tests/integration/providers/
test_llamacpp_recordings.py`` checks every one still parses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.sse_server import Frame, Reply

DIR = Path(__file__).parent / "llamacpp"
HOP_BY_HOP = frozenset({"transfer-encoding", "content-length", "connection", "date", "server"})
"""Headers the replay server writes itself (or that only describe the recording's own socket)."""


@dataclass(frozen=True, kw_only=True)
class Chunk:
    data: str
    t_ms: float
    """Milliseconds after the request was sent when the chunk's last byte arrived."""


@dataclass(frozen=True, kw_only=True)
class Recording:
    name: str
    description: str
    model_file: str
    model_sha256: str
    method: str
    path: str
    request_body: str | None
    status: int
    headers: tuple[tuple[str, str], ...]
    chunks: tuple[Chunk, ...] | None
    """The HTTP chunks of a chunked response, in order; None for a ``Content-Length`` body."""
    complete: bool
    """A chunked response ended with its zero-length chunk (a plain body is always complete)."""
    plain_body: str | None

    @property
    def request_json(self) -> Any:
        return None if self.request_body is None else json.loads(self.request_body)

    @property
    def body(self) -> str:
        """The response body, byte for byte (the chunks joined)."""
        if self.chunks is not None:
            return "".join(c.data for c in self.chunks)
        return self.plain_body or ""

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    def events(self) -> list[Any]:
        """The ``data:`` payloads of an SSE body, parsed (``"[DONE]"`` kept as the string)."""
        out: list[Any] = []
        for event in self.body.replace("\r\n", "\n").split("\n\n"):
            for line in event.split("\n"):
                if line.startswith("data:"):
                    data = line[5:].lstrip(" ")
                    out.append(data if data == "[DONE]" else json.loads(data))
        return out

    def content(self) -> str:
        """The streamed ``delta.content`` joined, or a JSON body's ``message.content``."""
        if self.chunks is None:
            obj = json.loads(self.body)
            return "".join(
                (c.get("message") or {}).get("content") or "" for c in obj.get("choices", [])
            )
        return "".join(
            (c.get("delta") or {}).get("content") or ""
            for e in self.events()
            if isinstance(e, dict)
            for c in e.get("choices", [])
        )

    def reply(self, **kw: Any) -> Reply:
        """The recorded response for ``SseServer`` (``kw`` overrides ``Reply`` fields, e.g. sticky)."""
        headers = {k.lower(): v for k, v in self.headers if k.lower() not in HOP_BY_HOP}
        if self.chunks is None:
            return Reply(
                status=self.status, headers=headers, body=(self.plain_body or "").encode(), **kw
            )
        frames = tuple(Frame(raw=c.data.encode()) for c in self.chunks)
        return Reply(status=self.status, headers=headers, frames=frames, **kw)


def names() -> list[str]:
    """Every recording's name, sorted."""
    return sorted(p.stem for p in DIR.glob("*.json"))


def load(name: str) -> Recording:
    """The recording ``name`` (a file ``tests/support/llamacpp/<name>.json``)."""
    obj = json.loads((DIR / f"{name}.json").read_text(encoding="utf-8"))
    req, resp = obj["request"], obj["response"]
    chunks = resp.get("chunks")
    return Recording(
        name=obj["name"],
        description=obj["description"],
        model_file=obj["model"]["file"],
        model_sha256=obj["model"]["sha256"],
        method=req["method"],
        path=req["path"],
        request_body=req["body"],
        status=int(resp["status"]),
        headers=tuple((str(k), str(v)) for k, v in resp["headers"]),
        chunks=None
        if chunks is None
        else tuple(Chunk(data=c["data"], t_ms=float(c["t_ms"])) for c in chunks),
        complete=bool(resp.get("complete", True)),
        plain_body=resp.get("body"),
    )
