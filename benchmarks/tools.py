"""Benchmark: the tokens the built-in tool list costs a small model on every request.

A small local model pays for the ``tools`` array on every request. The kernel sends the lean form
(``dsh_kernel.tools.lean``) when the context window is under ``LEAN_BELOW`` tokens; this measures the
array a kernel with a 4,096-token window sends — the built-in tools a notebook kernel registers
(``python``, ``inspect``, ``ask_user``, ``notebook_read``, ``notebook_insert``, ``sql``), built by
``builtin_tools`` and serialised by the OpenAI-compatible adapter exactly as sent
(``transport.request_body``) — in three forms: lean as offered in a turn whose message names no tool
(``ask_user`` and ``sql`` are offered lean only when named: ``ToolDefinition.lean_when_named``), lean
with every tool named, and full. The quick offline figure is characters / 4 of the array's JSON as
sent.

The target (≤ 400 tokens for the lean set) is for what a real server counts: it re-renders the tools
through the model's chat template (Qwen2.5's adds a preamble of ~77 tokens and re-spaces the JSON).
With ``--server URL`` (an OpenAI-compatible ``/v1`` root, e.g. the live tier's llama-cpp-python
server), the script asks that server for the ``prompt_tokens`` of the same one-message request with
and without each tool array (non-streaming, ``max_tokens`` 1) and reports the difference. No
tokenizer is downloaded.

Run: ``python benchmarks/tools.py [--server http://127.0.0.1:PORT/v1]`` (``--quick`` is the offline
run: it takes milliseconds).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dsh_kernel import Agent  # noqa: E402
from dsh_kernel.jsonvalue import JsonValue  # noqa: E402
from dsh_kernel.kernel.notebook.comm import NotebookComms  # noqa: E402
from dsh_kernel.kernel.toolbox import builtin_tools  # noqa: E402
from dsh_kernel.kernel.toolbox.notebook import NotebookDesk  # noqa: E402
from dsh_kernel.llm.providers.base import ProviderDefaults  # noqa: E402
from dsh_kernel.llm.providers.openai_compat.profiles import GENERIC  # noqa: E402
from dsh_kernel.llm.providers.openai_compat.serialize import serialize_request  # noqa: E402
from dsh_kernel.llm.providers.transport import request_body  # noqa: E402
from dsh_kernel.llm.types import GenerateRequest  # noqa: E402
from dsh_kernel.runtime.image_reduce import ImageCaps  # noqa: E402
from dsh_kernel.store.layout import Store  # noqa: E402
from dsh_kernel.testing import ScriptedProvider  # noqa: E402

TARGET = 400
"""Tokens the lean built-in set may cost a 4,096-token window (by the server's count)."""

PROBE_MESSAGES: list[dict[str, str]] = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "hi"},
]
"""The one-message request whose prompt tokens are counted with and without the tools."""


async def _no_answer(*_args: object, **_kwargs: object) -> tuple[()]:
    return ()


def tools_json(*, lean: bool, store_dir: Path, name_all: bool = False) -> str:
    """The ``tools`` array of a request, as the OpenAI-compatible adapter sends it, in a turn whose
    message names no tool (``name_all``: every tool)."""
    agent = Agent(provider=ScriptedProvider([]), model="m")
    desk = NotebookDesk(NotebookComms(), namespace={}, notebook_name=None, python_cells=True)
    for definition in builtin_tools(
        agent,
        namespace={},
        shell=None,
        images=ImageCaps(),
        on_interrupt=lambda: None,
        ask=_no_answer,
        desk=desk,
        store=Store.open(str(store_dir)),
        live=list,
    ):
        agent.registry.register(definition)
    request = GenerateRequest(
        provider="openai-compatible",
        model="m",
        messages=(),
        tools=agent.registry.schemas(lean=lean, named=agent.registry.names() if name_all else ()),
    )
    body = serialize_request(request, GENERIC, ProviderDefaults())
    whole = request_body(body).decode()  # what goes over the wire
    sent = json.loads(whole)
    tools = json.dumps(sent["tools"], ensure_ascii=False, separators=(",", ":"))
    assert tools in whole, "the tools array is not sent compact"
    return tools


def server_tokens(base_url: str, tools: list[JsonValue] | None) -> int:
    """The ``prompt_tokens`` the server at ``base_url`` reports for ``PROBE_MESSAGES`` with ``tools``."""
    body: dict[str, object] = {
        "model": "m",
        "messages": PROBE_MESSAGES,
        "max_tokens": 1,
        "stream": False,
        "temperature": 0,
    }
    if tools is not None:
        body["tools"] = tools
    reply = httpx.post(f"{base_url.rstrip('/')}/chat/completions", json=body, timeout=900)
    reply.raise_for_status()
    return int(reply.json()["usage"]["prompt_tokens"])


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    ap.add_argument("--quick", action="store_true", help="the offline run (it is already quick)")
    ap.add_argument("--server", help="an OpenAI-compatible /v1 root whose prompt count to report")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        forms = {
            "lean": tools_json(lean=True, store_dir=Path(tmp) / "lean"),
            "lean, all named": tools_json(lean=True, store_dir=Path(tmp) / "named", name_all=True),
            "full": tools_json(lean=False, store_dir=Path(tmp) / "full"),
        }
    for label, text in forms.items():
        names = [t["function"]["name"] for t in json.loads(text)]
        print(f"{label}: {', '.join(names)}")
    base = server_tokens(args.server, None) if args.server and not args.quick else None
    for label, text in forms.items():
        chars = len(text)
        line = f"{label:>16}: {chars:>6,} chars  ≈ {chars / 4:>6,.0f} tokens (chars/4)"
        if base is not None:
            tokens = server_tokens(args.server, json.loads(text)) - base
            line += f"  {tokens:>6,} tokens by the server"
            if label == "lean":
                line += f"  (target ≤ {TARGET}: {'met' if tokens <= TARGET else 'MISSED'})"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
