"""Shared pieces for the store tests: a store in a temp directory, and sessions recorded by a real
``Agent`` (the provider is the only fake) with tools that succeed, fail and report code-run meta."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dsh_kernel import Agent, tool
from dsh_kernel.agent.retry import RetryPolicy
from dsh_kernel.errors import ToolError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.types import TokenUsage
from dsh_kernel.store.journal import JournalWriter, attach_journal
from dsh_kernel.store.layout import Store
from dsh_kernel.store.migrations import RETIRED
from dsh_kernel.testing import (
    ScriptedProvider,
    ScriptEntry,
    error_response,
    text_response,
    tool_call_response,
)
from dsh_kernel.tools.approval import ApprovalPolicy
from dsh_kernel.tools.types import ToolContext, ToolDefinition, ToolLike

HERE = Path(__file__).parent
PY = sys.executable


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.at(tmp_path / "store")


def usage(inp: int = 100, out: int = 20, cached: int = 0) -> TokenUsage:
    return TokenUsage(input_tokens=inp, output_tokens=out, cache_read_tokens=cached)


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(read_only=True)
def lookup(key: str) -> str:
    """Look a key up; unknown keys fail."""
    if key != "known":
        raise ToolError(f"no such key: {key}", code="NOT_FOUND")
    return "value-of-known"


def _python_run(args: JsonObject, ctx: ToolContext) -> JsonValue:
    del ctx
    code = str(args.get("code", ""))
    if "raise" in code:
        raise ToolError("ZeroDivisionError: division by zero", code="CODE_FAILED")
    return {"stdout": f"ran {len(code)} chars\n", "names": ["df"]}


def _python_meta(args: JsonObject, value: JsonValue) -> JsonValue:
    assert isinstance(value, dict)
    return {
        "code": args.get("code"),
        "stdout": value.get("stdout"),
        "stderr": "",
        "namesAdded": value.get("names"),  # the shape of the real python tool's meta
        "namesChanged": [],
        "namesRemoved": [],
    }


python_tool = ToolDefinition(
    name="python",
    description="Run Python code in the notebook namespace.",
    parameters={"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
    execute=_python_run,
    presentation_meta=_python_meta,
    read_only=True,
)

TOOLS = (add, lookup, python_tool)


def make_agent(
    store: Store,
    script: Sequence[ScriptEntry],
    *,
    model: str = "m1",
    extra_tools: Sequence[ToolLike] = (),
    tools: Sequence[ToolLike] = TOOLS,
    approval: ApprovalPolicy | None = None,
    **kw: Any,
) -> tuple[Agent, ScriptedProvider, JournalWriter]:
    provider = ScriptedProvider(script)
    agent = Agent(
        provider=provider,
        model=model,
        tools=(*tools, *extra_tools),
        retry_policy=RetryPolicy(initial_delay_ms=1, max_delay_ms=1, jitter_ratio=0.0),
        approval_policy=approval or ApprovalPolicy("auto"),
        **kw,
    )
    writer = attach_journal(agent, store)
    return agent, provider, writer


async def chat(agent: Agent, *prompts: str) -> None:
    for p in prompts:
        agent.followup(p)
        await agent.when_idle()


RICH_SCRIPT: tuple[ScriptEntry, ...] = (
    # turn 1, step 1: two tools in one message
    tool_call_response(
        "add", {"a": 2, "b": 3}, call_id="c-add", text="Let me add.", usage=usage(100, 10, 50)
    ),
    # step 2: a failing lookup
    tool_call_response("lookup", {"key": "nope"}, call_id="c-look", usage=usage(150, 12, 100)),
    # step 3: python ok
    tool_call_response("python", {"code": "df = 1"}, call_id="c-py1", usage=usage(170, 14, 120)),
    # step 4: python failing
    tool_call_response("python", {"code": "raise 1/0"}, call_id="c-py2", usage=usage(190, 16, 140)),
    # step 5: a rate-limited attempt (refused before any text: no tokens), then the retry answers
    error_response("RATE_LIMIT", "slow down", status=429),
    text_response("The sum is 5.", reasoning="2 plus 3", usage=usage(210, 30, 160), pieces=3),
    # turn 2
    text_response("You're welcome, goodbye.", usage=usage(260, 8, 200)),
)
RICH_PROMPTS = ("What is 2+3? Use the tools.", "thanks a lot")


async def record_rich_session(store: Store, **kw: Any) -> tuple[Agent, JournalWriter]:
    """A two-turn session: tool successes and failures, python runs, a retried request."""
    agent, provider, writer = make_agent(store, RICH_SCRIPT, **kw)
    await chat(agent, *RICH_PROMPTS)
    provider.assert_consumed()
    writer.flush()
    return agent, writer


def as_before_projection_versions(con: duckdb.DuckDBPyConnection) -> None:
    """Make the open database look as the code before projection versions left it: no
    ``_projection``, and ``_migrations`` listing the retired whole-schema migrations only (its
    ``prices`` table, and whatever rows it holds, stay)."""
    con.execute("DROP TABLE _projection")
    con.execute("DELETE FROM _migrations")
    con.executemany(
        "INSERT INTO _migrations VALUES (?, now()::TIMESTAMP)", [[n] for n in sorted(RETIRED)]
    )
