"""Tool declarations: definitions, the per-call context, calls and results (SPINE §4.1, §4.4).

A ``ToolDefinition`` is pure data plus callables. Its ``execute(args, ctx)`` returns the tool's
*canonical JSON value*; ``render(args, value)`` turns that into the content blocks the model sees.
``execute`` may be a coroutine function or a plain function: a plain body runs on the event-loop
thread, deliberately — the ``python`` tool must run in the kernel's thread, where the user's namespace
lives — and therefore blocks the loop until it returns (its timeout is cooperative only).

A ``ToolResult`` is what the pipeline returns for every call, success or failure. Only ``content``,
``is_error``, ``error`` (code and name), ``meta`` and ``duration_ms`` are persisted; ``value`` is
execution-local.

An ``@tool`` function carries its definition (``ToolFunction``); whatever accepts a tool takes
either form (``ToolLike``) and reads the definition with ``definition_of``.

Failure codes the pipeline itself produces are the ``*`` constants below; a tool body may raise any
``DshError`` and its ``.code`` becomes the result's code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, ParamSpec, Protocol, TypeAlias, TypeVar

from dsh_kernel.abort import AbortSignal
from dsh_kernel.errors import UsageError
from dsh_kernel.ids import CallId
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.arguments import parse_tool_arguments
from dsh_kernel.llm.types import ContentBlock, Message, TextBlock, ToolCallBlock, ToolSchema
from dsh_kernel.tools.lean import lean_description as _lean_text
from dsh_kernel.tools.lean import lean_parameters as _lean_params
from dsh_kernel.tools.presentation import ToolCallView, ToolResultInfo, ToolResultView
from dsh_kernel.tools.schema import check_schema

UNKNOWN_TOOL: Final = "UNKNOWN_TOOL"
INVALID_ARGS: Final = "INVALID_ARGS"
INVALID_TOOL_OUTPUT: Final = "INVALID_TOOL_OUTPUT"
ABORTED: Final = "ABORTED"
ABORTED_BEFORE_DISPATCH: Final = "ABORTED_BEFORE_DISPATCH"
DENIED: Final = "DENIED"
BLOCKED: Final = "BLOCKED"
TIMEOUT: Final = "TIMEOUT"
TOOL_FAILED: Final = "TOOL_FAILED"
TOO_MANY_TOOL_CALLS: Final = "TOO_MANY_TOOL_CALLS"

TOOL_NAME_PATTERN: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
RESERVED_TOOL_NAMES: Final = frozenset({"run_code"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A call as the model wrote it. ``arguments`` is the raw JSON text, kept verbatim for the log."""

    call_id: CallId
    name: str
    arguments: str

    @classmethod
    def from_block(cls, block: ToolCallBlock) -> ToolCall:
        return cls(call_id=block.id, name=block.name, arguments=block.arguments)


def parse_arguments(raw: str) -> JsonValue:
    """Parse a call's argument text: blank → ``{}``. Raises ``ValueError`` saying what is wrong and
    where (NaN, Infinity and overflowing numbers are not JSON and are refused too, and so is nesting
    deeper than ``MAX_ARGUMENT_DEPTH`` levels: ``ArgumentsTooDeep``). See
    ``dsh_kernel.llm.arguments.parse_tool_arguments``."""
    return parse_tool_arguments(raw)


class ToolContext:
    """What a running body may use: its call id and name, the abort signal it must honour,
    ``defer_context(message)`` (a user message that enters the history at the next step, after this
    call's result) and ``conclude_turn()`` (on success, the model is not asked again this turn)."""

    __slots__ = ("_closed", "_concluded", "_deferred", "call_id", "name", "signal")

    def __init__(self, *, call_id: CallId, name: str, signal: AbortSignal) -> None:
        self.call_id = call_id
        self.name = name
        self.signal = signal
        self._deferred: list[Message] = []
        self._concluded = False
        self._closed = False

    def defer_context(self, message: Message) -> None:
        if self._closed:
            raise UsageError(f"defer_context after tool call {self.call_id} settled")
        if message.role != "user":
            raise UsageError("deferred context must be a user message")
        self._deferred.append(message)

    def conclude_turn(self) -> None:
        if self._closed:
            raise UsageError(f"conclude_turn after tool call {self.call_id} settled")
        self._concluded = True

    @property
    def deferred_contexts(self) -> tuple[Message, ...]:
        return tuple(self._deferred)

    @property
    def concluded(self) -> bool:
        return self._concluded

    def close(self) -> None:
        """Called by the pipeline once the body has settled; later calls are misuse."""
        self._closed = True


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFailure:
    """Why a call failed. ``message`` is without the ``Error: `` prefix; route on ``code``."""

    message: str
    name: str
    code: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    is_error: bool
    content: tuple[ContentBlock, ...]
    error: ToolFailure | None = None
    meta: JsonValue = None
    additional_contexts: tuple[Message, ...] = ()
    concludes_turn: bool = False
    value: JsonValue = None
    """The body's value. Execution-local: never persisted, so replay cannot depend on it."""
    duration_ms: int | None = None
    """How long the body ran, in milliseconds of the runtime's monotonic clock — not the wait for
    approval, nor the hooks around it; ``None`` when the body never started (logged as
    ``tool/result.durationMs``)."""

    @classmethod
    def failure(
        cls,
        message: str,
        *,
        code: str,
        name: str = "ToolError",
        additional_contexts: tuple[Message, ...] = (),
    ) -> ToolResult:
        """The one error shape: content ``Error: <message>``, ``error`` carrying code and name."""
        return cls(
            is_error=True,
            content=(TextBlock(text=f"Error: {message}"),),
            error=ToolFailure(message=message, name=name, code=code),
            additional_contexts=additional_contexts,
        )

    @property
    def info(self) -> ToolResultInfo:
        return ToolResultInfo(content=self.content, is_error=self.is_error, meta=self.meta)


ToolExecute: TypeAlias = "Callable[[JsonObject, ToolContext], Awaitable[JsonValue] | JsonValue]"
Render: TypeAlias = Callable[[JsonObject, JsonValue], tuple[ContentBlock, ...]]


def render_as_text(args: JsonObject, value: JsonValue) -> tuple[ContentBlock, ...]:
    """The default render: a string as it is, anything else as compact JSON."""
    del args
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    )
    return (TextBlock(text=text),)


def never_concurrent(args: JsonValue) -> bool:
    del args
    return False


def always_concurrent(args: JsonValue) -> bool:
    del args
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDefinition:
    """A tool. ``name``, ``description`` and ``parameters`` are all the model ever sees.

    Construction checks the name (``^[a-zA-Z0-9_-]{1,64}$``) and that ``parameters`` (an object
    schema) and ``output_schema`` are in the enforced subset (``dsh_kernel.tools.schema``).
    """

    name: str
    description: str
    parameters: JsonObject
    execute: ToolExecute
    output_schema: JsonObject | None = None
    render: Render = render_as_text
    presentation_meta: Callable[[JsonObject, JsonValue], JsonValue] | None = None
    """Pure; JSON stored as ``tool/result.meta`` for the result card."""
    finalize_content: (
        Callable[[ToolContext, ToolResult], tuple[ContentBlock, ...] | None] | None
    ) = None
    """Runs exactly once per outcome (failures included); may replace the content; must not fail."""
    timeout_ms: int | None = None
    is_concurrency_safe: Callable[[JsonValue], bool] = never_concurrent
    """Only a literal ``True`` lets the call share a step with other calls."""
    read_only: bool = False
    """Read-only tools run without asking under the default approval policy."""
    present_call: Callable[[JsonObject], ToolCallView | None] | None = None
    present_result: Callable[[JsonObject, ToolResultInfo], ToolResultView | None] | None = None
    check_args: Callable[[JsonObject], object] | None = None
    """Checks the schema cannot state (e.g. a total size across items; for an ``@tool`` function,
    the pydantic validation of its signature): runs on the validated arguments before approval, and
    raises ``ToolArgsError`` (``INVALID_ARGS``) naming the problem, so a call that cannot run is
    never shown for approval."""
    lean_description: str | None = None
    """What the model is told in the lean tool set (``dsh_kernel.tools.lean``); default: the
    description's first sentence."""
    lean_parameters: JsonObject | None = None
    """The parameters in the lean tool set; default: ``parameters`` without their prose. Calls are
    always validated against ``parameters``."""
    origin: JsonObject | None = None
    """Where the tool comes from when it is not ours (an MCP server's tool: ``{"mcp": server,
    "tool": its own name}``): logged on the call's ``tool/call`` event (``agent.tool_calls``) and
    kept as ``origin`` in the meta of every result of a call to it — denied, aborted and failed
    ones too, and crash repair's — so the log and the store say whose tool it was."""
    lean_when_named: bool = False
    """In the lean tool set only in a turn whose user message names the tool (``ask_user``: a
    small model reaches for it instead of the tool the user asked for). The full set always has it,
    and a call to it runs either way."""

    def __post_init__(self) -> None:
        if not TOOL_NAME_PATTERN.match(self.name):
            raise UsageError(
                f"invalid tool name {self.name!r}: use 1-64 letters, digits, '_' or '-'"
            )
        check_schema(self.parameters)
        if self.parameters.get("type") != "object":
            raise UsageError(f"tool {self.name!r}: parameters must be an object schema")
        if self.output_schema is not None:
            check_schema(self.output_schema)
        if self.lean_parameters is not None:
            check_schema(self.lean_parameters)
        if self.timeout_ms is not None and self.timeout_ms <= 0:
            raise UsageError(f"tool {self.name!r}: timeout_ms must be positive")

    @property
    def schema(self) -> ToolSchema:
        return ToolSchema(name=self.name, description=self.description, parameters=self.parameters)

    @property
    def lean_schema(self) -> ToolSchema:
        """The schema in the lean tool set, for small context windows (``dsh_kernel.tools.lean``)."""
        return ToolSchema(
            name=self.name,
            description=self.lean_description or _lean_text(self.description),
            parameters=self.lean_parameters or _lean_params(self.parameters),
        )


_P = ParamSpec("_P")
_R_co = TypeVar("_R_co", covariant=True)

TOOL_ATTRIBUTE: Final = "tool_definition"
"""The attribute ``@tool`` sets on the function it decorates: that function's ``ToolDefinition``."""


class ToolFunction(Protocol[_P, _R_co]):
    """What ``@tool`` returns: the function as written (called as before), with its
    ``ToolDefinition`` attached as ``tool_definition``."""

    tool_definition: ToolDefinition
    __name__: str

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R_co: ...


ToolLike: TypeAlias = "ToolDefinition | ToolFunction[..., object]"
"""What accepts a tool accepts either form: a ``ToolDefinition`` or an ``@tool`` function."""


def attached_definition(value: object) -> ToolDefinition | None:
    """``value`` itself when it is a ``ToolDefinition``, the definition ``@tool`` attached to it when
    it is an ``@tool`` function, else ``None``."""
    if isinstance(value, ToolDefinition):
        return value
    attached = getattr(value, TOOL_ATTRIBUTE, None)
    return attached if isinstance(attached, ToolDefinition) else None


def definition_of(tool: ToolLike) -> ToolDefinition:
    """The ``ToolDefinition`` of a tool given in either form (``ToolLike``); anything else is a
    ``UsageError`` saying what to do."""
    found = attached_definition(tool)
    if found is None:
        what = getattr(tool, "__name__", None) or type(tool).__name__
        raise UsageError(
            f"{what!r} is not a tool: decorate the function with @tool (from dsh_kernel import "
            "tool), or pass a ToolDefinition"
        )
    return found
