"""Real kernel subprocesses for the kernel tier, driven through ``jupyter_client``.

``kernelspecs(tmp)`` writes the ``dsh`` and ``dsh-python`` kernelspecs (pointing at this interpreter)
into a private Jupyter data dir; ``start_kernel(...)`` starts one with a private store and the given
environment (e.g. ``DSH_PROVIDER=openai-compatible`` + ``DSH_BASE_URL`` of a loopback
``SseServer``); ``Kernel.execute`` runs a cell and collects every IOPub message of it until idle.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager

from dsh_kernel.kernel.kernelspec import KERNELS, spec


def kernelspecs(root: Path) -> Path:
    """Write both kernelspecs under ``root/share/jupyter/kernels``; returns the data dir."""
    data = root / "jupyter-data"
    for name in KERNELS:
        d = data / "kernels" / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "kernel.json").write_text(json.dumps(spec(name, sys.executable)), encoding="utf-8")
    return data


@dataclass
class Execution:
    reply: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        return str(self.reply["content"]["status"])

    @property
    def content(self) -> dict[str, Any]:
        return self.reply["content"]

    def of_type(self, msg_type: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m["msg_type"] == msg_type]

    @property
    def stdout(self) -> str:
        return "".join(
            m["content"]["text"] for m in self.of_type("stream") if m["content"]["name"] == "stdout"
        )

    def data(self, mime: str) -> list[Any]:
        out = []
        for m in self.messages:
            kinds = ("display_data", "update_display_data", "execute_result")
            if m["msg_type"] in kinds and mime in m["content"]["data"]:
                out.append(m["content"]["data"][mime])
        return out


class Kernel:
    def __init__(
        self, km: KernelManager, kc: BlockingKernelClient, log_path: Path | None = None
    ) -> None:
        self.km = km
        self.kc = kc
        self.log_path = log_path
        """The kernel process's stdout/stderr (its log)."""

    def execute(
        self,
        code: str,
        *,
        timeout: float = 60,
        on_message: Any = None,
        allow_stdin: bool = False,
        silent: bool = False,
        store_history: bool = True,
    ) -> Execution:
        msg_id = self.kc.execute(
            code, allow_stdin=allow_stdin, silent=silent, store_history=store_history
        )
        messages: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        idle = False
        while not idle:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"cell did not finish in {timeout} s: {code[:80]!r}")
            try:
                msg = self.kc.get_iopub_msg(timeout=min(remaining, 1.0))
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            messages.append(msg)
            if on_message is not None:
                on_message(msg)
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                idle = True
        reply = self.kc.get_shell_msg(timeout=max(1.0, deadline - time.monotonic()))
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.kc.get_shell_msg(timeout=max(1.0, deadline - time.monotonic()))
        return Execution(reply=reply, messages=messages)

    def python(self, code: str, *, timeout: float = 60) -> str:
        """Run Python in the kernel (whatever its default cell kind) and return stdout."""
        ex = self.execute(
            "%%python\n" + code if self.km.kernel_name == "dsh" else code, timeout=timeout
        )
        assert ex.status == "ok", ex.content
        return ex.stdout

    def events(self) -> list[dict[str, Any]]:
        """The current session's events, read from inside the kernel."""
        out = self.python(
            "import json as _j\n"
            "_h = get_ipython().kernel.host\n"
            "print(_j.dumps([{'type': e.type, 'seq': e.seq, 'data': e.data} for e in _h.agent.session.events]))"
        )
        return json.loads(out)

    def send_comm(self, comm_id: str, data: dict[str, Any]) -> None:
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.kc.shell_channel.send(msg)


@contextmanager
def start_kernel(
    tmp: Path,
    name: str = "dsh",
    env: Mapping[str, str] | None = None,
    *,
    store: Path | None = None,
) -> Iterator[Kernel]:
    """A kernel whose files all live under ``tmp``: kernelspecs, runtime and IPython dirs, the store
    (``store`` or ``tmp/store``) and its stdout/stderr (``tmp/kernel.log``). The inherited
    environment loses every ``*_API_KEY``, ``*_BASE_URL`` and ``DSH_*`` variable; ``env`` adds the test's own."""
    tmp.mkdir(parents=True, exist_ok=True)
    data = kernelspecs(tmp)
    kernel_env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_BASE_URL")) and not k.startswith("DSH_")
    }
    kernel_env.update(
        {
            "JUPYTER_PATH": str(data),
            "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
            "IPYTHONDIR": str(tmp / "ipython"),
            "MPLCONFIGDIR": str(tmp / "mpl"),
            "DSH_STORE": str(store or tmp / "store"),
            "DSH_DEV_INVARIANTS": "1",
            "PYTHONUNBUFFERED": "1",
        }
    )
    kernel_env.update(env or {})
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(data)
    log = open(tmp / "kernel.log", "ab")  # noqa: SIM115 - closed in the finally below
    try:
        km = KernelManager(kernel_name=name)
        (tmp / "runtime").mkdir(exist_ok=True)
        km.connection_file = str(tmp / "runtime" / f"kernel-{time.monotonic_ns()}.json")
        km.start_kernel(env=kernel_env, cwd=str(tmp), stdout=log, stderr=log)
    finally:
        if old is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        yield Kernel(km, kc, tmp / "kernel.log")
    finally:
        kc.stop_channels()
        with contextlib.suppress(Exception):
            km.shutdown_kernel(now=True)
        log.close()
