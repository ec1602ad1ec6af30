"""Tools: definitions, the ``@tool`` decorator and schema subset, the registry, approval, the
execution pipeline, the step scheduler, the caps on what a result carries back (``bounds``) and
presentation views.

This package sits above ``dsh_kernel.session`` (the pipeline copies tool output through its
lossless-JSON gate, ``session.codec.lossless_copy``) and below the agent: it never imports
``dsh_kernel.agent``, and never writes to a log. The agent wires the log in through callbacks (``ApprovalRecorder``, ``run_tool_calls``'s
``on_start``/``on_result``).
"""

from dsh_kernel.tools.approval import (
    ApprovalDecision,
    ApprovalMode,
    ApprovalOutcome,
    ApprovalPolicy,
    ApprovalRecorder,
    ApprovalRequest,
    ApprovalService,
)
from dsh_kernel.tools.decorator import build_definition, tool
from dsh_kernel.tools.hooks import (
    HookAccept,
    HookAllow,
    HookAsk,
    HookBlock,
    HookDeny,
    ReplaceValue,
    ToolHooks,
)
from dsh_kernel.tools.pipeline import ToolRuntime
from dsh_kernel.tools.registry import ToolRegistry
from dsh_kernel.tools.scheduler import StepToolOutcome, run_tool_calls
from dsh_kernel.tools.types import (
    ToolCall,
    ToolContext,
    ToolDefinition,
    ToolFailure,
    ToolFunction,
    ToolLike,
    ToolResult,
    definition_of,
)

__all__ = [
    "ApprovalDecision",
    "ApprovalMode",
    "ApprovalOutcome",
    "ApprovalPolicy",
    "ApprovalRecorder",
    "ApprovalRequest",
    "ApprovalService",
    "HookAccept",
    "HookAllow",
    "HookAsk",
    "HookBlock",
    "HookDeny",
    "ReplaceValue",
    "StepToolOutcome",
    "ToolCall",
    "ToolContext",
    "ToolDefinition",
    "ToolFailure",
    "ToolFunction",
    "ToolHooks",
    "ToolLike",
    "ToolRegistry",
    "ToolResult",
    "ToolRuntime",
    "build_definition",
    "definition_of",
    "run_tool_calls",
    "tool",
]
