"""Record real llama-cpp-python wire transcripts into ``tests/support/llamacpp/`` (by hand, rarely).

``.venv/bin/python -m tests.local.record [NAME ...]`` needs the live-tier cache
(``python -m tests.local.models``). For each recording it builds the request body the kernel really
sends — a real ``dsh`` kernel pointed at the loopback ``SseServer`` runs the chat cell and the body
is taken from what it posted — optionally edits it (``stream: false`` for the non-streaming twin,
``max_tokens: 1`` for the probe), sends it over a raw socket to a real ``python -m
llama_cpp.server`` (``tests/local/server.py``: one thread, ``n_ctx`` 4096) and writes what came back
byte for byte: status line, headers in order, and every HTTP chunk's data with the milliseconds
after the request when its last byte arrived. ``tests/support/llamacpp.py`` reads the files.

With no NAME every recording in ``RECORDINGS`` is made. The model's output is not deterministic
(the server samples at its default temperature): a new recording may differ in wording; the
``check`` of each recording says what it must show (e.g. Qwen's answer is a tool call written as
JSON text) and the recorder refuses to write one that does not.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.local.models import LLAMA_CPP_VERSION, MODELS, cache_paths
from tests.local.server import LlamaServer
from tests.support import scenarios
from tests.support.kernel import start_kernel
from tests.support.sse_server import SseServer

OUT = Path(__file__).resolve().parents[1] / "support" / "llamacpp"
CHAT = "/v1/chat/completions"
LONG_TEXT = "Summarise this text in one sentence: " + " ".join(f"word{i}" for i in range(5000))
TOOL_SETUP = "%%python\nx = 17"
TOOL_PROMPT = (
    "The notebook already has a variable x. Run the python code `x * 23` with the python tool "
    "and tell me the result."
)
THINK_PROMPT = (
    "Answer in this exact format: <think>your reasoning</think> then the answer. "
    "Question: how many legs do three spiders have?"
)
Edit = Callable[[dict[str, Any]], dict[str, Any]]


def _no_stream(body: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in body.items() if k != "stream_options"}
    out["stream"] = False
    return out


def _probe(body: dict[str, Any]) -> dict[str, Any]:
    return {**_no_stream(body), "max_tokens": 1}


def _cap(n: int) -> Edit:
    return lambda body: {**body, "max_tokens": n}


@dataclass(frozen=True, kw_only=True)
class Spec:
    name: str
    model: str
    description: str
    prompt: str | None = None
    """The chat cell whose request body the kernel sends (None: a GET of ``path``)."""
    setup: tuple[str, ...] = ()
    edit: Edit | None = None
    path: str = CHAT
    followup: str | None = None
    """Run the kernel's tool call (arguments taken from this recording) and record its next request."""
    check: Callable[[dict[str, Any]], str | None] = field(default=lambda _r: None)


def _sse_content(rec: dict[str, Any]) -> str:
    text = "".join(c["data"] for c in rec["response"]["chunks"])
    out: list[str] = []
    for event in text.replace("\r\n", "\n").split("\n\n"):
        for line in event.split("\n"):
            if line.startswith("data: ") and line[6:] != "[DONE]":
                for choice in json.loads(line[6:]).get("choices", []):
                    out.append(choice.get("delta", {}).get("content") or "")
    return "".join(out)


def _expect_status(status: int, *, empty: bool = False) -> Callable[[dict[str, Any]], str | None]:
    def check(rec: dict[str, Any]) -> str | None:
        resp = rec["response"]
        if resp["status"] != status:
            return f"status {resp['status']}, expected {status}"
        if empty and resp.get("chunks"):
            return f"{len(resp['chunks'])} chunks, expected an empty body"
        return None

    return check


def _json_call(rec: dict[str, Any]) -> str | None:
    text = _sse_content(rec).strip()
    if "python" not in text or "{" not in text:
        return f"not a python tool call written as text: {text[:200]!r}"
    return None


def _think(rec: dict[str, Any]) -> str | None:
    text = _sse_content(rec)
    return None if "<think>" in text and "</think>" in text else f"no <think> block: {text[:200]!r}"


RECORDINGS: tuple[Spec, ...] = (
    Spec(
        name="smollm2_models",
        model="smollm2",
        prompt=None,
        path="/v1/models",
        description="GET /v1/models: the served model and its metadata",
    ),
    Spec(
        name="smollm2_props",
        model="smollm2",
        prompt=None,
        path="/props",
        description="GET /props (llama.cpp's llama-server has it, with n_ctx): not served here",
    ),
    Spec(
        name="smollm2_text_stream",
        model="smollm2",
        prompt="What is the capital of France? Answer in one short sentence.",
        description="streamed plain text: role-only first delta, content deltas, finish, no usage",
        check=_expect_status(200),
    ),
    Spec(
        name="smollm2_length_stream",
        model="smollm2",
        prompt="Count from 1 to 100, one number per line.",
        edit=_cap(8),
        description="streamed text cut by max_tokens 8: finish_reason length",
        check=_expect_status(200),
    ),
    Spec(
        name="smollm2_overflow_stream",
        model="smollm2",
        prompt=LONG_TEXT,
        description="an over-long request, streamed: HTTP 200, text/event-stream, 0 bytes",
        check=_expect_status(200, empty=True),
    ),
    Spec(
        name="smollm2_overflow_nostream",
        model="smollm2",
        prompt=LONG_TEXT,
        edit=_no_stream,
        description="the same over-long request without streaming: HTTP 400 context_length_exceeded",
        check=_expect_status(400),
    ),
    Spec(
        name="smollm2_overflow_probe",
        model="smollm2",
        prompt=LONG_TEXT,
        edit=_probe,
        description="the over-long request as a probe: stream false, max_tokens 1",
        check=_expect_status(400),
    ),
    Spec(
        name="smollm2_probe_fits",
        model="smollm2",
        prompt="What is the capital of France? Answer in one short sentence.",
        edit=_probe,
        description="a probe (stream false, max_tokens 1) of a request that fits: 200, one token",
        check=_expect_status(200),
    ),
    Spec(
        name="qwen_models",
        model="qwen",
        prompt=None,
        path="/v1/models",
        description="GET /v1/models of the Qwen server",
    ),
    Spec(
        name="qwen_tool_call_stream",
        model="qwen",
        setup=(TOOL_SETUP,),
        prompt=TOOL_PROMPT,
        description="Qwen's default template with the kernel's 4 tools: the call written as text",
        check=_json_call,
    ),
    Spec(
        name="qwen_tool_result_stream",
        model="qwen",
        setup=(TOOL_SETUP,),
        prompt=TOOL_PROMPT,
        followup="qwen_tool_call_stream",
        description="the request after the python tool ran (the call and its result), answered",
        check=_expect_status(200),
    ),
    Spec(
        name="qwen_think_stream",
        model="qwen",
        prompt=THINK_PROMPT,
        description="asked to think inside <think></think> first: the block arrives as content",
        check=_think,
    ),
)


# ---------------------------------------------------------------------------------------------------
# The kernel's real request bodies


def kernel_bodies(specs: list[Spec], tmp: Path) -> dict[str, bytes]:
    """Each chat spec's request body as a real kernel sends it (one fresh session each)."""
    out: dict[str, bytes] = {}
    with SseServer() as srv:
        env = {
            "DSH_PROVIDER": "openai-compatible",
            "DSH_BASE_URL": srv.url + "/v1",
            "DSH_MODEL": "local",
            "DSH_APPROVAL": "auto",
        }
        with start_kernel(tmp, "dsh", env=env) as kernel:
            for spec in specs:
                if spec.prompt is None:
                    continue
                if spec.followup is not None:
                    call = _recorded_call(spec.followup)
                    srv.script(
                        scenarios.tool_calls(("python", call)), scenarios.text("done", sticky=True)
                    )
                else:
                    srv.script(scenarios.text("ok", sticky=True))
                assert kernel.execute("%agent new").status == "ok"
                for cell in spec.setup:
                    assert kernel.execute(cell).status == "ok", cell
                ex = kernel.execute(spec.prompt, timeout=120)
                assert ex.status == "ok", ex.content
                chats = [
                    r for r in srv.requests if isinstance(r.json, dict) and r.json.get("tools")
                ]
                out[spec.name] = chats[-1].body
    return out


def _recorded_call(name: str) -> dict[str, Any]:
    """The arguments of the JSON tool call the model wrote in recording ``name``."""
    rec = json.loads((OUT / f"{name}.json").read_text(encoding="utf-8"))
    text = _sse_content(rec).strip().removeprefix("```json").removeprefix("```").strip("`\n ")
    text = text.removeprefix("<tool_call>").removesuffix("</tool_call>").strip()
    args = json.loads(text)["arguments"]
    assert isinstance(args, dict)
    return args


# ---------------------------------------------------------------------------------------------------
# Raw capture


def capture(
    port: int, method: str, path: str, body: bytes | None, headers: dict[str, str]
) -> dict[str, Any]:
    """Send one request over a fresh socket (``Connection: close``) and return the response as
    received: status, headers in order, and (chunked) each chunk with its arrival time."""
    head = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    if body is not None:
        head.append(f"Content-Length: {len(body)}")
    head.append("Connection: close")
    raw_request = ("\r\n".join(head) + "\r\n\r\n").encode() + (body or b"")
    reads: list[tuple[float, bytes]] = []
    with socket.create_connection(("127.0.0.1", port), timeout=900) as sock:
        t0 = time.monotonic()
        sock.sendall(raw_request)
        while data := sock.recv(65536):
            reads.append(((time.monotonic() - t0) * 1000, data))
    return _parse(reads)


def _parse(reads: list[tuple[float, bytes]]) -> dict[str, Any]:
    buf = b"".join(d for _, d in reads)
    ends: list[tuple[int, float]] = []
    pos = 0
    for t, d in reads:
        pos += len(d)
        ends.append((pos, t))

    def time_at(offset: int) -> float:
        return next(t for end, t in ends if end >= offset)

    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    _, status, reason = ([*lines[0].split(" ", 2), ""])[:3]
    headers = [[k.strip(), v.strip()] for k, v in (ln.split(":", 1) for ln in lines[1:])]
    out: dict[str, Any] = {"status": int(status), "reason": reason, "headers": headers}
    start = len(head) + 4
    chunked = any(k.lower() == "transfer-encoding" and "chunked" in v for k, v in headers)
    out["chunked"] = chunked
    if not chunked:
        out["body"] = rest.decode("utf-8")
        out["t_ms"] = round(time_at(len(buf)), 1)
        return out
    chunks: list[dict[str, Any]] = []
    at = 0
    complete = False
    while at < len(rest):
        line_end = rest.index(b"\r\n", at)
        size = int(rest[at:line_end].split(b";")[0], 16)
        if size == 0:
            complete = True
            break
        data = rest[line_end + 2 : line_end + 2 + size]
        end = line_end + 2 + size
        chunks.append({"t_ms": round(time_at(start + end), 1), "data": data.decode("utf-8")})
        at = end + 2
    out["chunks"] = chunks
    out["complete"] = complete
    return out


def _send_headers(kernel_headers: bool) -> dict[str, str]:
    if not kernel_headers:
        return {"Accept": "application/json"}
    return {
        "Authorization": "Bearer sk-no-key",
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
        "User-Agent": "dsh-kernel/0.1",
    }


def record(spec: Spec, server: LlamaServer, body: bytes | None) -> dict[str, Any]:
    if body is not None and spec.edit is not None:
        body = json.dumps(spec.edit(json.loads(body)), ensure_ascii=False).encode()
    method = "GET" if body is None else "POST"
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    headers = _send_headers(body is not None)
    response = capture(server.port, method, spec.path, body, headers)
    model = next(m for m in MODELS if m.key == spec.model)
    command = [
        "python"
        if i == 0
        else "{MODEL}"
        if a == str(server.model_path)
        else "{PORT}"
        if a == str(server.port)
        else a
        for i, a in enumerate(server.command)
    ]
    return {
        "name": spec.name,
        "description": spec.description,
        "recorded": started,
        "server": f"llama-cpp-python {LLAMA_CPP_VERSION}",
        "server_command": command,
        "model": {
            "file": model.filename,
            "sha256": model.sha256,
            "general_name": model.general_name,
        },
        "request": {
            "method": method,
            "path": spec.path,
            "headers": headers,
            "body": None if body is None else body.decode("utf-8"),
        },
        "response": response,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("names", nargs="*", help="recordings to make (default: all)")
    args = parser.parse_args(argv)
    specs = [s for s in RECORDINGS if not args.names or s.name in args.names]
    if unknown := set(args.names) - {s.name for s in RECORDINGS}:
        print(f"error: no recording named {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    paths = cache_paths()
    tmp = Path("/tmp") / f"dsh-record-{time.monotonic_ns()}"
    OUT.mkdir(parents=True, exist_ok=True)
    failed = 0
    for model in dict.fromkeys(s.model for s in specs):
        todo = [s for s in specs if s.model == model]
        with LlamaServer(paths, model, log=tmp / f"{model}.log") as server:
            for spec in todo:
                body = kernel_bodies([spec], tmp / spec.name).get(spec.name)
                rec = record(spec, server, body)
                if problem := spec.check(rec):
                    kept = tmp / f"{spec.name}.rejected.json"
                    kept.write_text(json.dumps(rec, indent=1, ensure_ascii=False), encoding="utf-8")
                    print(f"{spec.name}: not written ({kept}): {problem}", file=sys.stderr)
                    failed += 1
                    continue
                path = OUT / f"{spec.name}.json"
                path.write_text(
                    json.dumps(rec, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
                )
                print(f"{spec.name}: {rec['response']['status']} → {path.name}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
