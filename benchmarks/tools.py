"""Benchmark: the tokens the built-in tool list costs a small model on every request.

A small local model pays for the ``tools`` array on every request. The kernel sends the lean form
(``dsh_kernel.tools.lean``) when the context window is under ``LEAN_BELOW`` tokens; this measures the
array a kernel with a 4,096-token window sends — the built-in tools a notebook kernel registers
(``python``, ``inspect``, ``ask_user``, ``notebook_read``, ``notebook_insert``, ``sql``), built by
``builtin_tools`` and serialised by the OpenAI-compatible adapter exactly as sent
(``transport.request_body``) — and the full form beside it. The figure is the quick offline one:
characters / 4 of the array's JSON as sent (target for the lean set: ≤ 400). What a local server
counts after re-rendering the tools through its chat template is measured by the live tier
(``make test-local``), which needs a real server. No tokenizer is downloaded.

Run: ``python benchmarks/tools.py`` (``--quick`` is the same run: it takes milliseconds).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dsh_kernel import Agent  # noqa: E402
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
"""Tokens (characters / 4) the lean built-in set may cost a 4,096-token window."""


async def _no_answer(*_args: object, **_kwargs: object) -> tuple[()]:
    return ()


def tools_json(*, lean: bool, store_dir: Path) -> str:
    """The ``tools`` array of a request, as the OpenAI-compatible adapter sends it."""
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
        tools=agent.registry.schemas(lean=lean),
    )
    body = serialize_request(request, GENERIC, ProviderDefaults())
    whole = request_body(body).decode()  # what goes over the wire
    sent = json.loads(whole)
    tools = json.dumps(sent["tools"], ensure_ascii=False, separators=(",", ":"))
    assert tools in whole, "the tools array is not sent compact"
    return tools


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    ap.add_argument("--quick", action="store_true", help="the same run (it is already quick)")
    ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lean = tools_json(lean=True, store_dir=Path(tmp) / "lean")
        full = tools_json(lean=False, store_dir=Path(tmp) / "full")
    names = [t["function"]["name"] for t in json.loads(lean)]
    print(f"built-in tools: {', '.join(names)}")
    for label, text in (("lean", lean), ("full", full)):
        tokens = len(text) / 4
        mark = (
            f"  (target ≤ {TARGET}: {'met' if tokens <= TARGET else 'MISSED'})"
            if label == "lean"
            else ""
        )
        print(f"{label:>5}: {len(text):>6,} chars  ≈ {tokens:>6,.0f} tokens (chars/4){mark}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
