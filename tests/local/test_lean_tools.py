"""The lean tool set by a real server's count (``make test-local``): what Qwen2.5-Coder's chat
template makes of the tools a kernel with a 4,096-token window offers in a turn whose message names
no tool — the difference in ``prompt_tokens`` between the same request with and without them — is
at most 400 tokens. The count is the tokenizer's and the template's, not the model's judgement, so
it is exact and repeatable. ``benchmarks/tools.py --server URL`` prints the same figures."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.local.server import LlamaServer

pytestmark = [pytest.mark.local, pytest.mark.timeout(900)]

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "tools.py"


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_tools", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_lean_tool_set_costs_at_most_400_tokens_by_the_servers_count(
    qwen: LlamaServer, tmp_path: Path
) -> None:
    tools = bench()
    lean = json.loads(tools.tools_json(lean=True, store_dir=tmp_path / "lean"))
    named = json.loads(tools.tools_json(lean=True, store_dir=tmp_path / "named", name_all=True))
    assert [t["function"]["name"] for t in lean] == [
        "inspect", "notebook_insert", "notebook_read", "python",
    ]  # fmt: skip
    base = tools.server_tokens(qwen.base_url, None)
    cost = tools.server_tokens(qwen.base_url, lean) - base
    assert 0 < cost <= tools.TARGET, cost
    # Naming ask_user and sql adds them, and they cost what the lean set saved by leaving them out.
    assert tools.server_tokens(qwen.base_url, named) - base > cost + 100
