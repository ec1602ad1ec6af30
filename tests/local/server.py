"""A real ``python -m llama_cpp.server`` on loopback, for the live tier and the recorder.

``LlamaServer(paths, "qwen").start()`` runs the cache venv's server on 127.0.0.1 and a free port,
with one thread for prefill and generation and ``n_ctx`` 4096 (the command is ``command``), writes
its output to ``log``, and returns once ``GET /v1/models`` answers; ``stop()`` ends exactly that
process by its PID (SIGTERM, then SIGKILL after 10 s). A server that exits or never answers raises
``RuntimeError`` with the tail of its log. Standard library only.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.local.models import CachePaths

N_CTX = 4096
START_TIMEOUT_S = 120.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """One llama-cpp-python server process serving one model of the cache."""

    def __init__(
        self,
        paths: CachePaths,
        model: str,
        *,
        log: Path,
        n_ctx: int = N_CTX,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.model = model
        self.model_path = paths.models[model]
        self.port = free_port()
        self.log = log
        self.command = [
            str(paths.python),
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.model_path),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(n_ctx),
            "--n_threads",
            "1",
            "--n_threads_batch",
            "1",
            *extra,
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        """What ``DSH_BASE_URL`` is set to: the server's ``/v1`` root."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LlamaServer:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"llama_cpp.server exited with {self.proc.returncode}: {self.log_tail()}"
                )
            with contextlib.suppress(OSError, http.client.HTTPException):
                status, _ = self.get("/v1/models", timeout=2)
                if status == 200:
                    return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer in {START_TIMEOUT_S:.0f} s")

    def get(self, path: str, *, timeout: float = 30) -> tuple[int, Any]:
        """``GET path`` on the server: (status, parsed JSON or None)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        try:
            return resp.status, json.loads(raw)
        except ValueError:
            return resp.status, None

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """End this server by its PID: SIGTERM, then SIGKILL if it is still there after 10 s."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def __enter__(self) -> LlamaServer:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()
