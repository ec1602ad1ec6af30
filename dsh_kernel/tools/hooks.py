"""The tool pipeline's interception points: what a pre- and a post-execute hook are given and what
they may decide (declarations only; ``dsh_kernel.tools.pipeline`` runs them, step 4 and step 8 of
its contract).

A pre-execute hook returns ``HookAllow`` (skip the policy's ``ask``), ``HookDeny`` (refuse),
``HookAsk`` (require approval) or ``None`` (pass); the first that decides wins. A post-execute hook,
on success only, returns ``HookAccept`` (keep the outcome, optionally replacing its content *or* its
value), ``HookBlock`` (turn it into a ``BLOCKED`` error) or ``None``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from dsh_kernel.abort import AbortSignal
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.types import ContentBlock, Message
from dsh_kernel.tools.types import ToolCall, ToolDefinition, ToolResult


@dataclass(frozen=True, slots=True, kw_only=True)
class PreExecuteInput:
    """What a pre-execute hook sees of a call about to run."""

    call: ToolCall
    args: JsonObject
    """The arguments, already validated against the tool's parameters (step 3)."""
    definition: ToolDefinition
    signal: AbortSignal


@dataclass(frozen=True, slots=True, kw_only=True)
class HookAllow:
    """Run without asking, unless the approval policy is ``never``."""

    kind: Literal["allow"] = "allow"


@dataclass(frozen=True, slots=True, kw_only=True)
class HookDeny:
    """Refuse the call (``DENIED``), telling the model ``reason``."""

    kind: Literal["deny"] = "deny"
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HookAsk:
    """Ask the user first, whatever the policy says (``reason`` is shown with the question)."""

    kind: Literal["ask"] = "ask"
    reason: str | None = None


PreDecision: TypeAlias = HookAllow | HookDeny | HookAsk


@dataclass(frozen=True, slots=True, kw_only=True)
class PostExecuteInput:
    """What a post-execute hook sees of a call that succeeded."""

    call: ToolCall
    args: JsonObject
    definition: ToolDefinition
    result: ToolResult
    """The successful result so far (earlier hooks' replacements applied)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplaceValue:
    """A new value for the call (checked and rendered again, as the body's would be)."""

    value: JsonValue


@dataclass(frozen=True, slots=True, kw_only=True)
class HookAccept:
    """Keep the outcome, optionally replacing its content *or* its value (never both)."""

    kind: Literal["accept"] = "accept"
    content: tuple[ContentBlock, ...] | None = None
    value: ReplaceValue | None = None
    additional_contexts: tuple[Message, ...] = ()

    def __post_init__(self) -> None:
        if self.content is not None and self.value is not None:
            raise ValueError("a post-execute accept replaces content or value, not both")


@dataclass(frozen=True, slots=True, kw_only=True)
class HookBlock:
    """Turn the outcome into an error whose text is ``feedback`` (code ``BLOCKED``)."""

    kind: Literal["block"] = "block"
    feedback: str
    additional_contexts: tuple[Message, ...] = ()


PostDecision: TypeAlias = HookAccept | HookBlock
PreExecuteHook: TypeAlias = Callable[[PreExecuteInput], Awaitable[PreDecision | None]]
PostExecuteHook: TypeAlias = Callable[[PostExecuteInput], Awaitable[PostDecision | None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolHooks:
    """Interception points, run in list order. A hook returning ``None`` passes."""

    pre_execute: Sequence[PreExecuteHook] = field(default_factory=lambda: ())
    post_execute: Sequence[PostExecuteHook] = field(default_factory=lambda: ())
