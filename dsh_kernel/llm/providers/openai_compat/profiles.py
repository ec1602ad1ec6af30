"""Dialects of the OpenAI-compatible wire: DeepSeek, OpenAI, and any other compatible server.

One adapter speaks Chat Completions; a ``ChatProfile`` says what differs between the servers that
accept it — the model catalogue (``dsh_kernel.llm.catalogue``; advisory, unknown ids pass through), which field carries the output
cap, whether thinking is a toggle plus an effort (DeepSeek), and whether ``reasoning_content`` is
passed back on assistant turns (mandatory on DeepSeek after tool calls, rejected by some others;
for a generic server, learned from its 400s: ``passback_for``).

Model ids are configuration (``dsh_kernel.llm.config``); the catalogue only supplies metadata for the
ids it knows. DeepSeek retired ``deepseek-chat``/``deepseek-reasoner`` on 2026-07-24 (WIRE §3.1).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from dsh_kernel.llm.catalogue import (
    DEEPSEEK_EFFORTS,
    DEEPSEEK_FALLBACK,
    DEEPSEEK_MODELS,
    OPENAI_MODELS,
)
from dsh_kernel.llm.types import LlmFailure, ModelInfo, ReasoningPassback

__all__ = ["DEEPSEEK", "DEEPSEEK_EFFORTS", "GENERIC", "OPENAI", "ChatProfile", "passback_for"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatProfile:
    """What one family of OpenAI-compatible servers expects."""

    name: str
    """For people: named in failure messages (``DeepSeek API error (HTTP 402): …``)."""
    catalogue: Mapping[str, ModelInfo] = field(default_factory=lambda: MappingProxyType({}))
    fallback: ModelInfo = field(default_factory=ModelInfo)
    """Metadata for model ids the catalogue does not list."""
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    thinking_toggle: bool = False
    """DeepSeek: effort ``off`` → ``thinking: disabled``; any other → ``enabled`` + ``reasoning_effort``."""
    off_effort: str | None = None
    """What effort ``off`` is sent as without a thinking toggle (OpenAI: ``none``); ``None``: no
    ``reasoning_effort`` is sent (the server's default)."""
    reasoning_passback: bool = False
    """Send ``reasoning_content`` back on assistant turns (``""`` on tool-call turns without any)."""
    passback_dialect: bool = False
    """Learn whether the server wants ``reasoning_content`` back (``passback_for``; the request's
    ``reasoning_passback``), sending it meanwhile only where the server streamed it on a tool-call
    turn (``serialize.py``)."""
    text_tool_calls: bool = False
    """Recover tool calls the model wrote as answer text (``text_tools``)."""
    think_tags: bool = False
    """Read ``<think>…</think>`` in ``content`` as reasoning (``think_tags``)."""
    image_parts: bool = True
    """Whether the server takes ``image_url`` content parts at all. DeepSeek does not (HTTP 400
    ``unknown variant image_url``): its requests never carry images, whatever ``DSH_VISION`` says."""
    path: str = "/chat/completions"
    discover_window: bool = False
    """Ask the server for the model's context window (``llm.providers.discovery``): servers whose
    window is set when they start, not known from a catalogue."""
    probe_empty_stream: bool = False
    """A streamed request answered with HTTP 200 and no bytes at all is sent once more without
    streaming (``max_tokens`` 1) to read the server's real error (llama-cpp-python answers an
    over-long prompt that way)."""


DEEPSEEK = ChatProfile(
    name="DeepSeek",
    catalogue=DEEPSEEK_MODELS,
    fallback=DEEPSEEK_FALLBACK,
    thinking_toggle=True,
    reasoning_passback=True,
    image_parts=False,
)

OPENAI = ChatProfile(
    name="OpenAI",
    catalogue=OPENAI_MODELS,
    max_tokens_field="max_completion_tokens",
    off_effort="none",
)

GENERIC = ChatProfile(
    name="OpenAI-compatible server",
    discover_window=True,
    probe_empty_stream=True,
    passback_dialect=True,
    text_tool_calls=True,
    think_tags=True,
)
"""vLLM, Ollama ``/v1``, llama.cpp, LM Studio, OpenRouter, LiteLLM: nothing assumed about the model
— so the context window is asked of the server, an empty stream is probed, what local servers
leave in ``content`` (tool calls as text, ``<think>``) is read, and whether the server wants
reasoning back is learned from its answer."""

_FIELD = re.compile(r"reasoning_content", re.IGNORECASE)
_WANTS_IT = re.compile(
    r"\bmissing\b|must be passed back|must include|\brequired\b|must be provided", re.IGNORECASE
)
_REFUSES_IT = re.compile(
    r"\bextra\b|\bunknown\b|unrecogni[sz]ed|not permitted|not allowed|unexpected|"
    r"not supported|\bremove\b|forbidden",
    re.IGNORECASE,
)


def passback_for(failure: LlmFailure) -> ReasoningPassback | None:
    """The passback dialect a failed request asks for: ``send`` for a 400 that says
    ``reasoning_content`` is missing (DeepSeek: "Missing `reasoning_content` field in the assistant
    message…", LiteLLM: "…must include reasoning_content"), ``omit`` for one that refuses it
    ("Extra inputs are not permitted", "unknown field"), ``None`` for anything else."""
    if failure.code != "INVALID_REQUEST" and failure.status not in (400, 422):
        return None
    text = failure.message
    if not _FIELD.search(text):
        return None
    if _WANTS_IT.search(text):
        return "send"
    if _REFUSES_IT.search(text):
        return "omit"
    return None
