"""First visible answer text: through a real ``dsh`` kernel, beside a direct streaming request.

What a person waits for after pressing Shift+Enter is the answer's first words. This benchmark times,
from the moment the request is sent, when the first visible answer text is on IOPub, against the
anchor of the same request sent straight to the same server:

* **direct** — the exact body the kernel sends for the prompt (captured below), POSTed with httpx to
  ``{base}/chat/completions`` and read as SSE; the time of the first ``delta.content`` holding more
  than whitespace (what a client reading the stream could show first).
* **kernel, widget view** — ``execute_request`` of the chat cell (sent as JupyterLab and nbclient
  send it, no stdin) to the first IOPub ``comm_msg`` that puts answer text into the turn view's
  answer block (an ``HTML`` widget inside a text block of the view's items).
* **kernel, text view** — the same cell sent as ``jupyter console`` sends it (stdin allowed, no cell
  id), to the first ``stream`` message holding answer text.

Rows: the medians, their spread (min–max), the added latency of each kernel path (the median of the
paired differences, kernel − direct; target ≤ 30 ms) and, read from the kernel's own clock, the time
from logging the answer's first text delta to the IOPub message that shows it (``logged → iopub``:
the view's part, which a rate limit would lengthen). The runs alternate (each rep runs the three in
a rotating order) after one warm-up of each; every kernel turn starts a fresh session (``%agent
new``) so every request is the same prompt, as the direct one is, and a server that caches the
prompt's prefix (llama.cpp) serves them all warm; temperature 0 and a fixed seed
(``DSH_TEMPERATURE``, ``DSH_SEED``, in the body both send) make a live model give the same answer
each time.

The server is, by default, the loopback scenario server (``tests.support.sse_server``) in its own
process, answering as the live tier's warm llama.cpp did: the headers, the role chunk and the first
word after a 45 ms prefill (the low end of the 45–63 ms that server took, where the first word lands
just after a view's rate-limited redraw), then a word every 40 ms. ``--url`` points everything at a
live OpenAI-compatible server instead (its ``/v1`` base URL, with ``--model``); ``--live qwen|smollm2`` starts the live tier's llama-cpp-python
server from its cache (``tests/local``; ``python -m tests.local.models --check`` says whether it is
ready) and stops it after. The body is captured from a second kernel pointed at a loopback recorder,
so the kernel under test and the direct request send the same bytes; both kernels are told the
context window (``--window``; the live tier's 4,096 with ``--live``), so no session asks the server
for it (a new session asks a server that said nothing again, in the background, and a timed turn
would race that lookup) and both fit the same tools to the same window.

Run from the repository root: ``python benchmarks/first_token.py [--reps 7] [--url URL --model M |
--live qwen] [--json out.json]``; ``--quick`` is the tiny run ``make test`` makes (figures meaningless).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.frontend import Frontend, html_text  # noqa: E402
from tests.support.kernel import Kernel, start_kernel  # noqa: E402
from tests.support.sse_server import (  # noqa: E402
    Frame,
    SseServer,
    frames_from_sse,
    reply_to_json,
    sse_reply,
)
from tests.support.wire_transcripts import chat_text_stream  # noqa: E402

PROMPT = "Greet me in one short sentence of plain text."
TARGET_MS = 30.0
PREFILL_MS = 45.0
WORD_MS = 40.0
WORDS = (
    "Hello, benchmark! This is a short answer, streamed word by word as a warm local model would."
)


# --- the model server -------------------------------------------------------------------------------


class FakeServer:
    """The loopback scenario server in its own process (so it never takes this process's GIL)."""

    def __init__(self, words: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.sse_server"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        pieces = [w + " " for w in WORDS.split()][:words]
        frames = frames_from_sse(chat_text_stream(pieces))
        # role chunk after the prefill, the first word with it (as llama.cpp writes them), then a
        # word every WORD_MS
        paced = tuple(
            Frame(raw=f.raw, delay_ms=WORD_MS if 1 < i <= len(pieces) else 0.0)
            for i, f in enumerate(frames)
        )
        reply = sse_reply(paced, first_byte_delay_ms=PREFILL_MS, sticky=True)
        self._post("/_dsh/script", {"replies": [reply_to_json(reply)]})

    def _post(self, path: str, obj: object) -> None:
        req = urllib.request.Request(self.url + path, data=json.dumps(obj).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()

    def requests(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.url}/_dsh/requests", timeout=10) as r:
            return json.loads(r.read())

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@dataclass(frozen=True)
class Target:
    base_url: str
    """What ``DSH_BASE_URL`` is set to; chat completions are at ``{base_url}/chat/completions``."""
    model: str
    label: str
    window: int
    """The context window the kernels are told (``DSH_CONTEXT_WINDOW``)."""
    fake: FakeServer | None = None


@contextmanager
def target(args: argparse.Namespace, tmp: Path) -> Iterator[Target]:
    if args.live:
        from tests.local.models import cache_paths
        from tests.local.server import N_CTX, LlamaServer

        with LlamaServer(cache_paths(), args.live, log=tmp / "llama.log") as server:
            label = f"live llama-cpp-python, {args.live}, one thread"
            yield Target(base_url=server.base_url, model=server.model, label=label, window=N_CTX)
        return
    if args.url:
        url = args.url.rstrip("/")
        yield Target(base_url=url, model=args.model, label=f"live {url}", window=args.window)
        return
    fake = FakeServer(words=4 if args.quick else len(WORDS.split()))
    try:
        label = f"loopback fake: {PREFILL_MS:.0f} ms prefill, a word every {WORD_MS:.0f} ms"
        yield Target(
            base_url=fake.url, model=args.model, label=label, window=args.window, fake=fake
        )
    finally:
        fake.close()


# --- the body the kernel sends ----------------------------------------------------------------------


def kernel_body(tgt: Target, tmp: Path, env: dict[str, str]) -> bytes:
    """The chat-completions body a fresh session of a kernel with ``env`` sends for ``PROMPT``: a
    kernel pointed at a loopback recorder (``tests/local/record.py`` takes its bodies the same
    way). ``env`` sets the context window, so neither kernel asks a server for it and both fit the
    same tools to the same window."""
    base_path = tgt.base_url.split("://", 1)[1].partition("/")[2].rstrip("/")
    with SseServer() as recorder:
        recorder.script(sse_reply(frames_from_sse(chat_text_stream(["ok"]))))
        url = recorder.url + (f"/{base_path}" if base_path else "")
        with start_kernel(tmp / "capture", "dsh", env={**env, "DSH_BASE_URL": url}) as k:
            assert k.execute("%agent new").status == "ok"
            ex = k.execute(PROMPT, timeout=120)
            assert ex.status == "ok", ex.content
        chats = [r for r in recorder.requests if r.path.endswith("/chat/completions")]
        assert len(chats) == 1, [r.path for r in recorder.requests]
        return chats[0].body


# --- one measurement each ---------------------------------------------------------------------------


def direct_s(client: httpx.Client, tgt: Target, body: bytes) -> float:
    """Seconds from sending ``body`` to the first content delta with more than whitespace."""
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    url = tgt.base_url + "/chat/completions"
    first: float | None = None
    started = time.perf_counter()
    with client.stream("POST", url, content=body, headers=headers) as resp:
        resp.raise_for_status()
        for line in resp.iter_lines():
            if first is None and line.startswith("data:") and line[5:].strip() != "[DONE]":
                obj = json.loads(line[5:])
                text = "".join((c.get("delta") or {}).get("content") or "" for c in obj["choices"])
                if text.strip():
                    first = time.perf_counter() - started
    assert first is not None, "the server's answer had no text"
    return first


def _answer_models(fe: Frontend, view_id: str) -> set[str]:
    """The ``HTML`` models of the answer's text blocks in the view ``view_id``: the view's items
    are a ``VBox`` (third child of the root); a text block is a ``VBox`` of ``HTML`` pieces."""
    root = fe.models.get(view_id)
    kids = (
        [str(c).removeprefix("IPY_MODEL_") for c in (root.state.get("children") or [])]
        if root
        else []
    )
    items = fe.models.get(kids[2]) if len(kids) > 2 else None
    out: set[str] = set()
    for ref in (items.state.get("children") or []) if items else []:
        block = fe.models.get(str(ref).removeprefix("IPY_MODEL_"))
        if block is None or block.name != "VBoxModel":
            continue
        for piece in block.state.get("children") or []:
            model = fe.models.get(str(piece).removeprefix("IPY_MODEL_"))
            if model is not None and model.name == "HTMLModel":
                out.add(model.comm_id)
    return out


@dataclass(frozen=True)
class Seen:
    seconds: float
    """From ``execute_request`` to the first IOPub message showing answer text (this client)."""
    at: datetime
    """That message's ``date`` (the kernel's clock, when it built the message)."""
    msg_id: str
    """The cell's ``execute_request``."""


def widget_turn(fe: Frontend, timeout: float) -> Seen:
    """One chat cell in the widget view: the first ``comm_msg`` putting text into an answer block."""
    cell = fe.submit(PROMPT)
    started = time.perf_counter()
    texts: dict[str, tuple[float, datetime]] = {}
    """Each ``HTML`` model's first update with text: when it came, and its ``date``."""
    scanned = 0
    first: list[tuple[float, datetime]] = []

    def shown() -> bool:
        # A new block's text is set before the block joins the view's items (the same redraw
        # sends both), so the text is noted first and claimed once the tree says it is an answer's.
        nonlocal scanned
        msgs = cell.messages
        for msg in msgs[scanned:]:
            scanned += 1
            content = msg["content"]
            if msg["msg_type"] == "comm_msg" and content["comm_id"] not in texts:
                value = (content["data"].get("state") or {}).get("value")
                if html_text(value).strip():
                    texts[content["comm_id"]] = (time.perf_counter(), msg["header"]["date"])
        views = cell.views
        answers = _answer_models(fe, views[0]) if views and texts else set()
        hits = sorted(texts[m] for m in answers if m in texts)
        if hits:
            first.append(hits[0])
        return bool(hits)

    cell.pump(shown, timeout=timeout, what="the answer's first text")
    cell.finish(timeout=timeout)  # how the turn ended is the model's business, not this figure's
    return Seen(seconds=first[0][0] - started, at=first[0][1], msg_id=cell.msg_id)


def text_turn(k: Kernel, timeout: float) -> Seen:
    """One chat cell as ``jupyter console`` sends it: the first ``stream`` text of the answer."""
    msg_id = k.kc.execute(PROMPT, allow_stdin=True)
    started = time.perf_counter()
    first: Seen | None = None
    deadline = time.monotonic() + timeout
    while True:
        try:
            msg = k.kc.get_iopub_msg(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError("the text view's turn did not finish") from None
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind = msg["msg_type"]
        if first is None and kind == "stream" and msg["content"]["text"].strip():
            first = Seen(time.perf_counter() - started, msg["header"]["date"], msg_id)
        if kind == "status" and msg["content"]["execution_state"] == "idle":
            break
    reply = k.kc.get_shell_msg(timeout=timeout)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = k.kc.get_shell_msg(timeout=timeout)
    assert first is not None, f"the text view wrote no answer: {reply['content']}"
    return first


def logged_to_iopub_ms(fe: Frontend, seen: Seen) -> float:
    """Milliseconds, on the kernel's clock, from logging the turn's first text delta (the event's
    time, whole milliseconds) to building the IOPub message that showed it."""
    logged = fe.python(
        "_e = get_ipython().kernel.host.agent.session.events\n"
        "print(next(e.time for e in _e if e.type == 'assistant/chunk'"
        " and e.data['chunk'].get('type') == 'text-delta'"
        " and str(e.data['chunk'].get('text', '')).strip()))"
    )
    return seen.at.timestamp() * 1000 - int(logged)


# --- the run ----------------------------------------------------------------------------------------


@dataclass
class Series:
    direct: list[float]
    widget: list[float]
    text: list[float]
    widget_view_ms: list[float]
    text_view_ms: list[float]


def fresh(fe: Frontend) -> None:
    ex = fe.run("%agent new")
    assert ex.status == "ok", ex.content


def run(args: argparse.Namespace, tgt: Target, tmp: Path) -> Series:
    env = {
        "DSH_PROVIDER": "openai-compatible",
        "DSH_MODEL": tgt.model,
        "DSH_APPROVAL": "auto",
        "DSH_DEV_INVARIANTS": "0",  # the per-request log-rebuild check is a test-only cost
        # the same answer every time (a live model's first words, and whether it answers in text)
        "DSH_TEMPERATURE": "0",
        "DSH_SEED": "7",
        # Known, so no session asks the server for it: a new session (``%agent new``) asks a server
        # that said nothing again, in the background, and the turn would race that lookup.
        "DSH_CONTEXT_WINDOW": str(tgt.window),
    }
    body = kernel_body(tgt, tmp, env)
    out = Series([], [], [], [], [])
    timeout = 600.0  # a live model's first (cold) prompt
    with ExitStack() as stack:
        k = stack.enter_context(
            start_kernel(tmp / "kernel", "dsh", env={**env, "DSH_BASE_URL": tgt.base_url})
        )
        client = stack.enter_context(httpx.Client(timeout=timeout))
        fe = Frontend(k)

        def widget() -> None:
            fresh(fe)
            seen = widget_turn(fe, timeout)
            out.widget.append(seen.seconds)
            out.widget_view_ms.append(logged_to_iopub_ms(fe, seen))

        def text() -> None:
            fresh(fe)
            seen = text_turn(k, timeout)
            out.text.append(seen.seconds)
            out.text_view_ms.append(logged_to_iopub_ms(fe, seen))

        def direct() -> None:
            out.direct.append(direct_s(client, tgt, body))

        runs: list[Callable[[], None]] = [widget, text, direct]
        for rep in range(args.reps + 1):
            for n in range(3):
                runs[(rep + n) % 3]()
            if rep == 0:  # the warm-up: the server's cold prompt, the kernel's first imports
                out = Series([], [], [], [], [])
    if tgt.fake is not None:  # the same prompt every time: every request the kernel sent
        sent = [r["json"] for r in tgt.fake.requests()]
        assert sent and all(b == json.loads(body) for b in sent), "the kernel's requests differ"
    return out


def _ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def _spread(values: list[float], scale: float = 1000) -> str:
    return f"{min(values) * scale:.0f}–{max(values) * scale:.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--url", help="a live OpenAI-compatible server's base URL (…/v1)")
    parser.add_argument("--model", default="local", help="the model id to ask for (with --url)")
    parser.add_argument(
        "--window", type=int, default=32_768, help="the context window (with --url)"
    )
    parser.add_argument("--live", choices=("qwen", "smollm2"), help="start the live tier's server")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a tiny run that only checks the benchmark still works (make test runs it); its figures mean nothing",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.reps = 1
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as d, target(args, Path(d)) as tgt:
        s = run(args, tgt, Path(d))
    load_end = os.getloadavg()[0]
    widget_added = [w - r for w, r in zip(s.widget, s.direct, strict=True)]
    text_added = [t - r for t, r in zip(s.text, s.direct, strict=True)]
    rows = [
        ("direct request → first text", _ms(s.direct), _spread(s.direct), ""),
        ("kernel, widget view → first text on IOPub", _ms(s.widget), _spread(s.widget), ""),
        ("  added (kernel − direct)", _ms(widget_added), _spread(widget_added), TARGET_MS),
        ("  logged → IOPub (kernel clock)", statistics.median(s.widget_view_ms),
         _spread(s.widget_view_ms, 1), TARGET_MS),
        ("kernel, text view → first text on IOPub", _ms(s.text), _spread(s.text), ""),
        ("  added (kernel − direct)", _ms(text_added), _spread(text_added), TARGET_MS),
        ("  logged → IOPub (kernel clock)", statistics.median(s.text_view_ms),
         _spread(s.text_view_ms, 1), TARGET_MS),
    ]  # fmt: skip
    print(
        f"first visible answer text: medians of {args.reps} alternating runs after a warm-up; "
        f"{tgt.label}; {os.cpu_count()} CPUs, load average {load_start:.1f} at the start, "
        f"{load_end:.1f} at the end"
    )
    width = max(len(r[0]) for r in rows)
    print(f"{'':<{width}}  {'median':>9}  {'min–max':>11}  {'target':>9}")
    for name, median, spread, tgt_ms in rows:
        verdict = "" if tgt_ms == "" else ("ok" if median <= float(tgt_ms) else "MISSED")
        shown = "" if tgt_ms == "" else f"≤ {float(tgt_ms):.0f} ms"
        print(f"{name:<{width}}  {median:>6.0f} ms  {spread + ' ms':>11}  {shown:>9}  {verdict}")
    if args.json:
        figures = {
            "direct_ms": _ms(s.direct),
            "widget_ms": _ms(s.widget),
            "widget_added_ms": _ms(widget_added),
            "widget_logged_to_iopub_ms": statistics.median(s.widget_view_ms),
            "text_ms": _ms(s.text),
            "text_added_ms": _ms(text_added),
            "text_logged_to_iopub_ms": statistics.median(s.text_view_ms),
            "load_start": load_start,
            "load_end": load_end,
        }
        args.json.write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
