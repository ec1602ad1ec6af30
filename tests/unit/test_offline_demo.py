"""The offline demo model says what the approval policy in force does to its ``python`` call: it
reads the runtime context's ``approval policy`` section, a tool's own mode over the default."""

from __future__ import annotations

import pytest

from dsh_kernel.ids import new_message_id
from dsh_kernel.jsonvalue import JsonValue
from dsh_kernel.llm.providers.offline import OfflineProvider
from dsh_kernel.llm.types import (
    GenerateRequest,
    Message,
    PluginSource,
    TextBlock,
    TextDeltaChunk,
    ToolSchema,
    UserSource,
)

PYTHON = ToolSchema(name="python", description="Run Python.", parameters={"type": "object"})


def snapshot(policy: str | None) -> Message:
    sections: list[JsonValue] = [{"name": "notebook variables", "text": "- sales: list"}]
    if policy is not None:
        sections.append({"name": "approval policy", "text": policy})
    return Message(
        id=new_message_id(),
        role="user",
        content=(TextBlock(text="(runtime context)"),),
        source=PluginSource(plugin="dsh/runtime-context", form={"sections": sections}),
    )


async def first_answer(policy: str | None) -> str:
    prompt = Message(
        id=new_message_id(),
        role="user",
        content=(TextBlock(text="What is in sales?"),),
        source=UserSource(),
    )
    request = GenerateRequest(
        provider="offline",
        model="offline-demo",
        messages=(snapshot(policy), prompt),
        tools=(PYTHON,),
    )
    chunks = [c async for c in OfflineProvider().stream(request)]
    return "".join(c.text for c in chunks if isinstance(c, TextDeltaChunk))


@pytest.mark.parametrize(
    ("policy", "said"),
    [
        (None, "so it asks for your approval first"),
        ("default for tools that change things: ask", "so it asks for your approval first"),
        ("default for tools that change things: auto", "so it runs without asking"),
        ("default for tools that change things: never", "so the call will be refused"),
        (
            "default for tools that change things: auto; per tool: python=ask, sql=auto",
            "so it asks for your approval first",
        ),
        ("default for tools that change things: ask; per tool: python=auto", "without asking"),
    ],
)
async def test_what_the_demo_says_of_approval_is_the_policy_in_force(
    policy: str | None, said: str
) -> None:
    text = await first_answer(policy)
    assert "`sales`" in text and said in text, text
