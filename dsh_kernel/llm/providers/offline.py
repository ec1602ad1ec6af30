"""The ``offline`` provider: a clearly labelled, scripted demo model for a first run with no key.

It is not a language model and says so in every answer. It exists so a newcomer can see the whole
product work with no key and no network: it streams a Markdown answer, calls the ``python`` tool on
something in the notebook namespace (under the approval policy, like any real model's call), reads the
tool's result, and suggests a ``%%sql`` query over the session just made. Deterministic: the same
history gives the same chunks.

It writes no summaries: ``summarizes = False`` tells compaction (``agent.compaction.run``) to reduce
the older turns deterministically instead of asking it, so a long offline session compacts the same
way every time.

How it picks a variable: from the latest runtime-context snapshot's ``notebook variables`` section
(``name: type …`` lines), preferring a name the prompt mentions. What it says of approval follows
the snapshot's ``approval policy`` section, so it is true after ``%agent approve auto`` too. It is
free: its prices are zero (``OFFLINE_INFO``; the store's ``list_prices`` has the same row).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

from dsh_kernel.ids import CallId
from dsh_kernel.llm.provider import BaseProvider
from dsh_kernel.llm.types import (
    BlockEndChunk,
    BlockStartChunk,
    FinishChunk,
    FinishStop,
    FinishToolCalls,
    GenerateRequest,
    Message,
    ModelInfo,
    PluginSource,
    StreamChunk,
    TextBlock,
    TextDeltaChunk,
    TokenUsage,
    ToolCallBlock,
    ToolCallDeltaChunk,
    ToolResultBlock,
    UsageChunk,
)

OFFLINE_LABEL = "offline demo model (scripted, not a language model)"
OFFLINE_MODEL = "offline-demo"
OFFLINE_INFO = ModelInfo(
    context_window=32_768,
    default_max_tokens=4_096,
    label=OFFLINE_LABEL,
    input_price_per_mtok=0.0,
    output_price_per_mtok=0.0,
)
"""The demo runs on this machine and costs nothing: its prices are zero, a known price."""

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _context_section(messages: tuple[Message, ...], name: str) -> str | None:
    """The text of section ``name`` of the latest runtime-context snapshot (each snapshot holds
    every section in force), or ``None``."""
    for m in reversed(messages):
        src = m.source
        if isinstance(src, PluginSource) and src.form is not None:
            sections = src.form.get("sections")
            if not isinstance(sections, list):
                continue
            for s in sections:
                if isinstance(s, dict) and s.get("name") == name:
                    text = s.get("text")
                    return text if isinstance(text, str) else None
            return None
    return None


def _variables(messages: tuple[Message, ...]) -> list[str]:
    text = _context_section(messages, "notebook variables") or ""
    names = [ln.split(":", 1)[0].strip().lstrip("- ") for ln in text.splitlines()]
    return [n for n in names if _IDENT.match(n)]


def _python_approval(messages: tuple[Message, ...]) -> str:
    """The approval mode the ``python`` tool runs under, as the runtime context's ``approval
    policy`` section states it (``default for tools that change things: ask; per tool:
    python=auto``); ``ask``, the default policy, when no section says otherwise."""
    text = _context_section(messages, "approval policy") or ""
    default, _, per_tool = text.partition("; per tool: ")
    modes: dict[str, str] = {}
    for pair in per_tool.split(","):
        tool, _, tool_mode = pair.partition("=")
        modes[tool.strip()] = tool_mode.strip()
    mode = modes.get("python") or default.rpartition(":")[2].strip()
    return mode if mode in ("ask", "auto", "never") else "ask"


_APPROVAL_NOTES = {
    "ask": "so it asks for your approval first",
    "auto": "and approval is set to auto, so it runs without asking",
    "never": "but approval is set to never, so the call will be refused",
}


def _prompt(messages: tuple[Message, ...]) -> str:
    for m in reversed(messages):
        if m.role == "user" and not isinstance(m.source, PluginSource) and m.text():
            return m.text()
    return ""


def _tool_result(message: Message) -> str | None:
    for b in message.content:
        if isinstance(b, ToolResultBlock):
            return "".join(c.text for c in b.content if isinstance(c, TextBlock))
    return None


def _estimate(text: str) -> int:
    return max(1, len(text) // 4)


class OfflineProvider(BaseProvider):
    """See the module docstring."""

    default_model = OFFLINE_MODEL
    label = OFFLINE_LABEL
    summarizes = False
    """Compaction never asks this model for a summary (the module docstring)."""

    @property
    def id(self) -> str:
        return "offline"

    def model_info(self, model: str) -> ModelInfo:
        return OFFLINE_INFO

    async def stream(self, request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        messages = request.messages
        has_python = any(t.name == "python" for t in request.tools)
        last = messages[-1] if messages else None
        result = _tool_result(last) if last is not None else None
        if result is not None:
            text = self._summary(result, request.session_id)
            call: ToolCallBlock | None = None
        else:
            text, call = self._first_step(messages, has_python)
        index = 0
        yield BlockStartChunk(index=0, block_type="text")
        for piece in re.findall(r"\S+\s*|\s+", text):
            yield TextDeltaChunk(index=0, text=piece)
        yield BlockEndChunk(index=0, block=TextBlock(text=text))
        if call is not None:
            index = 1
            yield BlockStartChunk(index=index, block_type="tool-call")
            half = len(call.arguments) // 2
            yield ToolCallDeltaChunk(
                index=index, id=call.id, name=call.name, arguments_delta=call.arguments[:half]
            )
            yield ToolCallDeltaChunk(index=index, id=call.id, arguments_delta=call.arguments[half:])
            yield BlockEndChunk(index=index, block=call)
        prompt_chars = sum(len(m.text()) for m in messages) + len(request.system or "")
        yield UsageChunk(
            usage=TokenUsage(
                input_tokens=_estimate("x" * prompt_chars), output_tokens=_estimate(text)
            )
        )
        yield FinishChunk(reason=FinishToolCalls() if call is not None else FinishStop())

    def _first_step(
        self, messages: tuple[Message, ...], has_python: bool
    ) -> tuple[str, ToolCallBlock | None]:
        prompt = _prompt(messages)
        names = _variables(messages)
        mentioned = [n for n in names if re.search(rf"\b{re.escape(n)}\b", prompt)]
        target = (mentioned or names or [None])[0]
        approval = _APPROVAL_NOTES[_python_approval(messages)]
        intro = (
            f"I am the **{OFFLINE_LABEL}**: I run with no API key and no network, so I cannot "
            "really understand your message. I can show you how this notebook agent works.\n\n"
        )
        if not has_python:
            return (
                intro + "The `python` tool is not available here, so there is nothing to run.",
                None,
            )
        if target is not None:
            code = (
                f"print(type({target}).__name__)\n"
                f"getattr({target}, 'shape', None) or "
                f"(len({target}) if hasattr({target}, '__len__') else {target})"
            )
            plan = (
                f"I'll look at `{target}` in your notebook with the `python` tool. It runs in "
                f"*your* namespace, {approval}."
            )
        else:
            code = "sorted(name for name in globals() if not name.startswith('_'))"
            plan = (
                "Your notebook has no variables yet, so I'll list the namespace with the `python` "
                f"tool. It runs in *your* namespace, {approval}."
            )
        arguments = json.dumps(
            {"code": code, "description": f"inspect {target}" if target else "list variables"}
        )
        call = ToolCallBlock(
            id=CallId(f"offline-{len(messages)}"), name="python", arguments=arguments
        )
        return intro + plan, call

    def _summary(self, result: str, session_id: str | None) -> str:
        lines = result.strip().splitlines()[:12] or ["(no output)"]
        shown = "\n".join(lines)
        where = f"session_id = '{session_id}'" if session_id else "true"
        return (
            "The tool answered:\n\n"
            f"```text\n{shown}\n```\n\n"
            "Every step of this exchange — your message, my streamed answer, the tool call, the "
            "approval decision and the result — is an event in the session log. Ask the log with SQL in a new "
            "cell:\n\n"
            "```sql\n%%sql\n"
            f"SELECT type, count(*) AS n FROM events WHERE {where} GROUP BY type ORDER BY n DESC\n"
            "```\n\n"
            f"(I am the {OFFLINE_LABEL}. Set `DEEPSEEK_API_KEY`, `OPENAI_API_KEY` or "
            "`ANTHROPIC_API_KEY` and restart the kernel to talk to a real model.)"
        )
