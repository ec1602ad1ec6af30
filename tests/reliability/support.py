"""Shared rig of the reliability suite: real kernels against the loopback model server.

``launch(tmp, env=...)`` starts a ``dsh`` kernel whose every file lands under ``tmp`` (the store, the
IPython profile and history, the Jupyter runtime files, its stdout/stderr log in ``tmp/kernel.log``),
so a test can scan all of them. ``loopback_env(server)`` points it at an ``SseServer``.
``Driver`` runs cells on a thread without ever blocking on a kernel that was killed.

Reply builders write OpenAI-compatible SSE: ``text_reply``, ``tool_reply`` (one or many calls),
plus ``journal_of``/``verify_log`` which read the kernel's journal from disk and check it with the
session invariants. ``FIGURES`` collects numbers the terminal summary prints (``conftest.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from jupyter_core.utils import ensure_event_loop

from dsh_kernel.session.check.invariants import check_invariants
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.store.journal import read_session
from tests.support.kernel import Execution, Kernel, start_kernel
from tests.support.sse_server import Frame, Reply, SseServer, sse_reply
from tests.support.wire_transcripts import chat_chunk, sse

FIGURES: list[str] = []
"""Lines for the "reliability figures" section of the terminal summary."""

FAKE_KEY = "sk-dshrel-FAKEKEY-7f3c9a1e5b2d4c6f8a0b"
"""A recognisable API key: the security tests scan every written file for it."""

stress = pytest.mark.stress


def sizes(fast: int, long: int) -> list[Any]:
    """``[fast, long]`` as pytest params: the long one runs only under ``make stress``."""
    return [
        pytest.param(fast, id=f"fast-{fast}"),
        pytest.param(long, id=f"stress-{long}", marks=stress),
    ]


# --- replies -------------------------------------------------------------------------------------


def text_reply(text: str, *, delay_ms: float = 0.0, pieces: int = 1) -> Reply:
    """A streamed answer: ``text`` cut into ``pieces`` chunks, each after ``delay_ms``."""
    step = max(1, len(text) // pieces)
    parts = [text[i : i + step] for i in range(0, len(text), step)] or [""]
    body = sse(
        chat_chunk({"role": "assistant", "content": ""}),
        *(chat_chunk({"content": p}) for p in parts),
        chat_chunk({}, finish_reason="stop"),
        {"id": "chatcmpl-X", "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 2}},
        "[DONE]",
    )
    if not delay_ms:
        return sse_reply(body)
    events = [e for e in body.split("\n\n") if e]
    return sse_reply([Frame(raw=(e + "\n\n").encode(), delay_ms=delay_ms) for e in events])


@dataclass(frozen=True)
class Call:
    name: str
    arguments: str | Mapping[str, Any]
    id: str


def tool_reply(*calls: Call, text: str = "") -> Reply:
    """One assistant message calling ``calls`` (arguments sent verbatim when a string)."""
    head: dict[str, Any] = {"role": "assistant", "content": text or None}
    chunks: list[object] = [chat_chunk(head)]
    for i, c in enumerate(calls):
        args = c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments)
        chunks.append(
            chat_chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": args},
                        }
                    ]
                }
            )
        )
    chunks.append(chat_chunk({}, finish_reason="tool_calls"))
    chunks.append("[DONE]")
    return sse_reply(sse(*chunks))


def python_call(code: str, call_id: str) -> Call:
    return Call(name="python", arguments={"code": code}, id=call_id)


# --- kernels -------------------------------------------------------------------------------------


def loopback_env(server: SseServer, **extra: str) -> dict[str, str]:
    return {
        "DSH_PROVIDER": "openai-compatible",
        "DSH_BASE_URL": server.url,
        "DSH_MODEL": "loopback-model",
        "DSH_HEADLESS_APPROVAL_TIMEOUT": "0.2",
        **extra,
    }


@contextlib.contextmanager
def launch(
    tmp: Path, *, env: Mapping[str, str], store: Path | None = None, name: str = "dsh"
) -> Iterator[Kernel]:
    """A kernel whose files all live under ``tmp`` (``tests.support.kernel.start_kernel``)."""
    with start_kernel(tmp, name, env, store=store) as k:
        yield k


def kill9(k: Kernel) -> None:
    """``kill -9`` the kernel process and reap it."""
    provisioner = k.km.provisioner
    assert provisioner is not None
    pid = provisioner.pid  # type: ignore[attr-defined]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while k.km.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not k.km.is_alive(), "the kernel survived SIGKILL"


def interrupt_later(k: Kernel, delay_s: float) -> threading.Thread:
    """The Jupyter interrupt (``interrupt_kernel``) after ``delay_s``, from a helper thread."""

    def run() -> None:
        time.sleep(delay_s)
        try:
            k.km.interrupt_kernel()
        finally:
            ensure_event_loop().close()  # the one jupyter_client made for this thread

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


class Driver:
    """Runs cells one after another on a thread; ``stop()`` abandons them (e.g. after a kill)."""

    def __init__(self, k: Kernel, cells: Sequence[str], *, allow_errors: bool = False) -> None:
        self.k = k
        self.cells = list(cells)
        self.replies: list[dict[str, Any]] = []
        self.allow_errors = allow_errors
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Driver:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self._cells()
        finally:
            # jupyter_client's blocking calls made an event loop for this thread: close it
            ensure_event_loop().close()

    def _cells(self) -> None:
        for code in self.cells:
            # a cell allowed to fail must not make the kernel abort the requests queued after it
            msg_id = self.k.kc.execute(code, stop_on_error=not self.allow_errors)
            while not self._stop.is_set():
                try:
                    reply = self.k.kc.get_shell_msg(timeout=0.1)
                except queue.Empty:
                    continue
                if reply["parent_header"].get("msg_id") == msg_id:
                    self.replies.append(reply["content"])
                    break
            if self._stop.is_set():
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"cells did not finish in {timeout} s"


# --- the log -------------------------------------------------------------------------------------


def journal_of(k: Kernel) -> Path:
    """Flush the kernel's journal and return its path."""
    out = k.python(
        "_h = get_ipython().kernel.host\n_h.flush()\nprint(_h.journal.path if _h.journal else '')"
    ).strip()
    assert out, "the kernel has no journal"
    return Path(out)


def session_id(k: Kernel) -> str:
    return k.python("print(get_ipython().kernel.host.agent.session.id)").strip()


def verify_log(k: Kernel) -> tuple[SessionEvent, ...]:
    """The journal on disk equals the live log and passes the invariants; returns its events."""
    path = journal_of(k)
    loaded = read_session(path)
    assert not loaded.repaired, "an idle session's journal needed crash repair"
    violations = check_invariants(loaded.events)
    assert violations == [], violations
    live = int(k.python("print(len(get_ipython().kernel.host.agent.session.events))"))
    assert len(loaded.events) == live, (len(loaded.events), live)
    return loaded.events


def turn_ends(events: Sequence[SessionEvent]) -> list[dict[str, Any]]:
    return [dict(e.data["reason"]) for e in events if e.type == "turn/end"]  # type: ignore[arg-type]


def of_type(events: Sequence[SessionEvent], kind: str) -> list[SessionEvent]:
    return [e for e in events if e.type == kind]


def chat(k: Kernel, text: str, *, timeout: float = 60) -> Execution:
    return k.execute(text, timeout=timeout)


@dataclass
class Scan:
    """Where a byte string occurs under a directory tree (every file, any size)."""

    root: Path
    hits: list[str] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)

    def run(self, needle: bytes) -> Scan:
        for path in sorted(self.root.rglob("*")):
            if path.is_file() and not path.is_symlink():
                self.seen.append(path.name)
                if needle in path.read_bytes():
                    self.hits.append(str(path.relative_to(self.root)))
        return self
