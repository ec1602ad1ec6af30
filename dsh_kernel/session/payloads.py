"""The event vocabulary: one ``TypedDict`` per event type, and one map from tag to payload.

This is the harness's ``SessionEventMap`` ported: ``PAYLOADS`` maps every event ``type`` to the
``TypedDict`` of its ``data``, and everything else is derived from it — the catalog
(``events.EVENT_CATALOG``: each type's required and optional keys, in declaration order, and its
meaning, the class docstring), hence ``docs/session-events.md`` and the append-time check of
required keys. ``event.data`` stays a plain dict (the README documents it as public API); the
``TypedDict`` is its static type. A writer builds its payload with the class as constructor
(``TurnStart(turn=3)``, which pyright checks key by key); a reader narrows with ``payload_of``::

    if ev.type == "tool/call":
        data = payload_of(ev, "tool/call")  # ToolCall: data["callId"] is a str

``payload_of`` checks the tag (a mismatch is a bug: ``UsageError``) and returns ``data`` typed;
it does not re-validate the values — ``problem`` did, on append and on load — and readers of
optional keys still handle their absence.

Values are JSON (``JsonObject`` for nested structures the log does not interpret itself, such as a
message or a stream chunk, whose own codecs live in ``llm/``). Where the catalog places an event
(inside a turn, between turns) is ``PLACEMENT``. The journal format is unchanged by this module.

``problem(type_, data)`` checks a payload against its type — required keys present, each key of its
JSON kind, and the same inside a nested payload type (``ToolResultError``) — for the log on every
append and the journal reader on every line, so a reader may trust the kinds of the keys it finds.

This module deliberately does not use ``from __future__ import annotations``: ``TypedDict`` reads
``NotRequired`` from evaluated annotations. It is over 500 lines because it declares one payload type
and one ``payload_of`` overload per event type: the vocabulary is long, not complicated.
"""

from collections.abc import Mapping
from typing import (
    Literal,
    NotRequired,
    Protocol,
    TypedDict,
    cast,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
    overload,
)

from dsh_kernel.errors import UsageError
from dsh_kernel.jsonvalue import JsonObject, JsonValue

# --- turns and steps ------------------------------------------------------------------------------


class TurnStart(TypedDict):
    """A turn opens, before any input is claimed."""

    turn: int


class TurnEnd(TypedDict):
    """A turn closes; always written (completed, aborted, blocked, error, max-tokens, interrupted by
    crash repair)."""

    turn: int
    reason: JsonObject


class StepStart(TypedDict):
    """One model call plus the tools it asked for begins."""

    turn: int
    step: int


class StepEnd(TypedDict):
    """The step closes."""

    turn: int
    step: int


# --- messages -------------------------------------------------------------------------------------


class UserMessage(TypedDict):
    """Surface. A user-role message: the prompt, injected context, steering, runtime-context
    snapshots. `data` is the message itself; `source` tells them apart."""

    id: str
    role: str
    content: list[JsonValue]
    source: JsonObject
    inserted: NotRequired[JsonValue]


class AssistantChunk(TypedDict):
    """One raw stream chunk, for replay and live views; never derived into messages."""

    turn: int
    step: int
    chunk: JsonObject


class AssistantMessage(TypedDict):
    """Surface. The assembled answer of one successful call (or the visible prefix of an interrupted
    one, with `interrupted: true`)."""

    turn: int
    step: int
    message: JsonObject
    usage: NotRequired[JsonObject]
    interrupted: NotRequired[bool]


# --- tools ----------------------------------------------------------------------------------------


class ToolCall(TypedDict):
    """A tool call starts; `arguments` is the model's raw JSON text."""

    turn: int
    step: int
    callId: str
    name: str
    arguments: str
    synthetic: NotRequired[bool]


class ToolResultError(TypedDict):
    """The error of a failed tool result: the exception's name and the stable code."""

    name: str
    code: str


class ToolResult(TypedDict):
    """Surface. The result of one tool call; `meta` is the tool's presentation payload; `durationMs`
    is how long the tool's body ran (a monotonic clock, not counting the wait for approval), absent
    when the body never started."""

    turn: int
    step: int
    message: JsonObject
    error: NotRequired[ToolResultError]
    meta: NotRequired[JsonObject]
    durationMs: NotRequired[int]


class ImageData(TypedDict):
    """The bytes of an image (base64 `data`), stored once per session and addressed by `sha256`;
    written before the first message whose `image` block refers to it. The block carries the media
    type, size and description; this event carries only what the block cannot."""

    sha256: str
    mediaType: str
    data: str


class TodoWrite(TypedDict):
    """A whole-list todo snapshot."""

    todos: list[JsonValue]


# --- requests -------------------------------------------------------------------------------------


class RequestHeader(TypedDict):
    """The full request envelope snapshot (config, adapter defaults, system prompt, tools)."""

    header: JsonObject
    reason: str


class RequestContext(TypedDict):
    """The route changed: provider, model, context window and where the window came from."""

    provider: str
    model: str
    contextWindow: NotRequired[int]
    contextWindowSource: NotRequired[str]
    """``configured``, ``discovered``, ``catalogue`` or ``default`` (assumed: the server did not say)."""
    contextWindowFrom: NotRequired[str]
    """For a discovered window: the server lookup that reported it (``/props``, ``/api/show``, ``/models``)."""


class ContextWarning(TypedDict):
    """The next request fills most of the model's context window (informational: the turn shows a
    one-line notice)."""

    turn: int
    step: int
    tokens: int
    """The request's size: the meter's estimate, anchored on real usage when ``measured``."""
    measured: bool
    contextWindow: int
    source: str
    """Where the window came from (as ``request/context.contextWindowSource``)."""


class EndSeed(TypedDict):
    """Marks the end of a seed copied from another session."""


# --- the inbox and approvals ----------------------------------------------------------------------


class InboxSpliced(TypedDict):
    """A durable inbox mutation (insert, claim, cancel)."""

    target: str
    start: int
    inserted: list[JsonValue]
    removedCount: NotRequired[int]
    outcome: NotRequired[str]


class ApprovalAsked(TypedDict):
    """A tool call waits for the user's approval."""

    id: str
    toolName: str
    callId: NotRequired[str]
    reason: NotRequired[str]


class ApprovalDecided(TypedDict):
    """The approval was answered (allowed-once, allowed-always, rejected, cancelled, unavailable,
    timeout)."""

    id: str
    outcome: str


class ApprovalPolicy(TypedDict):
    """The approval policy changed; the latest event wins."""

    policy: JsonObject
    source: NotRequired[str]


# --- retry ----------------------------------------------------------------------------------------


class LlmRetry(TypedDict):
    """A failed model call will be retried after `delayMs`."""

    retryId: str
    turn: int
    step: int
    provider: str
    mode: str
    policyKey: str
    retry: int
    delayMs: int
    failure: JsonObject
    maxRetries: NotRequired[int]


class LlmRetryStarted(TypedDict):
    """The retry delay elapsed and the call is re-issued."""

    retryId: str
    turn: int
    step: int
    retry: int


# --- nested calls from code -----------------------------------------------------------------------


class CodeDispatchStart(TypedDict):
    """A nested tool call made from inside code starts."""

    rootCallId: str
    parentCallId: str
    subCallId: str
    name: str
    arguments: JsonValue


class CodeDispatch(TypedDict):
    """A nested tool call made from inside code settled."""

    rootCallId: str
    parentCallId: str
    subCallId: str
    name: str
    isError: bool
    content: JsonValue


# --- between turns --------------------------------------------------------------------------------


class SessionTitle(TypedDict):
    """The session's title; the latest wins."""

    title: str
    source: JsonValue
    """Who named it: ``{"kind": "user"}`` as this kernel writes it (any JSON value is accepted)."""
    messageSeqs: NotRequired[list[int]]


class CommandRun(TypedDict):
    """A human command (a `%agent` subcommand) ran; never sent to the model."""

    commandId: str
    name: str
    args: NotRequired[str]
    source: NotRequired[JsonObject]


class CommandDone(TypedDict):
    """A human command finished."""

    commandId: str
    kind: str
    text: NotRequired[str]
    sourceEventSeq: NotRequired[int]


# --- the map --------------------------------------------------------------------------------------

EventType = Literal[
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "user/message",
    "assistant/chunk",
    "assistant/message",
    "tool/call",
    "tool/result",
    "image/data",
    "todo/write",
    "request/header",
    "request/context",
    "context/warning",
    "session/end-seed",
    "agent/inbox/spliced",
    "approval/asked",
    "approval/decided",
    "approval/policy",
    "llm/retry",
    "llm/retry-started",
    "tool/code-dispatch-start",
    "tool/code-dispatch",
    "session/title",
    "command/run",
    "command/done",
]
"""Every event type, in catalog order."""

PAYLOADS: dict[str, type] = {
    "turn/start": TurnStart,
    "turn/end": TurnEnd,
    "step/start": StepStart,
    "step/end": StepEnd,
    "user/message": UserMessage,
    "assistant/chunk": AssistantChunk,
    "assistant/message": AssistantMessage,
    "tool/call": ToolCall,
    "tool/result": ToolResult,
    "image/data": ImageData,
    "todo/write": TodoWrite,
    "request/header": RequestHeader,
    "request/context": RequestContext,
    "context/warning": ContextWarning,
    "session/end-seed": EndSeed,
    "agent/inbox/spliced": InboxSpliced,
    "approval/asked": ApprovalAsked,
    "approval/decided": ApprovalDecided,
    "approval/policy": ApprovalPolicy,
    "llm/retry": LlmRetry,
    "llm/retry-started": LlmRetryStarted,
    "tool/code-dispatch-start": CodeDispatchStart,
    "tool/code-dispatch": CodeDispatch,
    "session/title": SessionTitle,
    "command/run": CommandRun,
    "command/done": CommandDone,
}
"""Tag → payload ``TypedDict``: the one source of the vocabulary."""

IN_TURN: frozenset[str] = frozenset(
    {
        "assistant/chunk",
        "assistant/message",
        "tool/call",
        "tool/result",
        "todo/write",
        "request/header",
        "request/context",
        "context/warning",
        "approval/asked",
        "approval/decided",
        "llm/retry",
        "llm/retry-started",
    }
)
"""Types that may only appear inside an open turn."""

STANDALONE: frozenset[str] = frozenset({"session/title", "command/run", "command/done"})
"""Types written between turns (they take a seq but no turn number)."""


def fields(type_: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(required keys, optional keys)`` of ``type_``'s payload, each in declaration order."""
    cls = PAYLOADS[type_]
    order = list(cls.__annotations__)
    required: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
    return (
        tuple(k for k in order if k in required),
        tuple(k for k in order if k not in required),
    )


def summary(type_: str) -> str:
    """What ``type_`` means: its payload's docstring on one line."""
    return " ".join((PAYLOADS[type_].__doc__ or "").split())


class HasData(Protocol):
    """What ``payload_of`` reads of an event: ``SessionEvent`` is one (structural, so this module
    need not import ``events``, which derives its catalog from this one)."""

    @property
    def type(self) -> str: ...

    @property
    def data(self) -> JsonObject: ...


@overload
def payload_of(event: HasData, type_: Literal["turn/start"]) -> TurnStart: ...
@overload
def payload_of(event: HasData, type_: Literal["turn/end"]) -> TurnEnd: ...
@overload
def payload_of(event: HasData, type_: Literal["step/start"]) -> StepStart: ...
@overload
def payload_of(event: HasData, type_: Literal["step/end"]) -> StepEnd: ...
@overload
def payload_of(event: HasData, type_: Literal["user/message"]) -> UserMessage: ...
@overload
def payload_of(event: HasData, type_: Literal["assistant/chunk"]) -> AssistantChunk: ...
@overload
def payload_of(event: HasData, type_: Literal["assistant/message"]) -> AssistantMessage: ...
@overload
def payload_of(event: HasData, type_: Literal["tool/call"]) -> ToolCall: ...
@overload
def payload_of(event: HasData, type_: Literal["tool/result"]) -> ToolResult: ...
@overload
def payload_of(event: HasData, type_: Literal["image/data"]) -> ImageData: ...
@overload
def payload_of(event: HasData, type_: Literal["todo/write"]) -> TodoWrite: ...
@overload
def payload_of(event: HasData, type_: Literal["request/header"]) -> RequestHeader: ...
@overload
def payload_of(event: HasData, type_: Literal["request/context"]) -> RequestContext: ...
@overload
def payload_of(event: HasData, type_: Literal["context/warning"]) -> ContextWarning: ...
@overload
def payload_of(event: HasData, type_: Literal["session/end-seed"]) -> EndSeed: ...
@overload
def payload_of(event: HasData, type_: Literal["agent/inbox/spliced"]) -> InboxSpliced: ...
@overload
def payload_of(event: HasData, type_: Literal["approval/asked"]) -> ApprovalAsked: ...
@overload
def payload_of(event: HasData, type_: Literal["approval/decided"]) -> ApprovalDecided: ...
@overload
def payload_of(event: HasData, type_: Literal["approval/policy"]) -> ApprovalPolicy: ...
@overload
def payload_of(event: HasData, type_: Literal["llm/retry"]) -> LlmRetry: ...
@overload
def payload_of(event: HasData, type_: Literal["llm/retry-started"]) -> LlmRetryStarted: ...
@overload
def payload_of(event: HasData, type_: Literal["tool/code-dispatch-start"]) -> CodeDispatchStart: ...
@overload
def payload_of(event: HasData, type_: Literal["tool/code-dispatch"]) -> CodeDispatch: ...
@overload
def payload_of(event: HasData, type_: Literal["session/title"]) -> SessionTitle: ...
@overload
def payload_of(event: HasData, type_: Literal["command/run"]) -> CommandRun: ...
@overload
def payload_of(event: HasData, type_: Literal["command/done"]) -> CommandDone: ...
def payload_of(event: HasData, type_: EventType) -> object:
    """``event.data`` typed as ``type_``'s payload (module docstring); ``UsageError`` when the
    event is of another type."""
    if event.type != type_:
        raise UsageError(f"payload_of: a {event.type!r} event read as {type_!r}")
    return event.data


# --- checking a payload -----------------------------------------------------------------------------

_ANY: tuple[type, ...] = ()
"""Any JSON value (``JsonValue``): nothing to check beyond the log's lossless gate."""


def _kinds(annotation: object) -> tuple[type, ...]:
    """The runtime types a value of ``annotation`` may have (``_ANY``: any JSON value)."""
    origin = get_origin(annotation)
    if origin is NotRequired:
        return _kinds(get_args(annotation)[0])
    for simple in (int, str, bool):
        if annotation is simple:
            return (simple,)
    if origin is list:
        return (list,)
    if origin is dict or is_typeddict(annotation):
        return (dict,)
    return _ANY


_Check = tuple[str, type, "_Spec | None"]
"""A key to check: its name, its exact JSON type, and the spec of its value when it is a payload."""
_Spec = tuple[frozenset[str], tuple[str, ...], tuple[_Check, ...]]


def _nested(annotation: object) -> type | None:
    """The payload type of a key whose value is one (``ToolResult.error``), else ``None``."""
    if get_origin(annotation) is NotRequired:
        return _nested(get_args(annotation)[0])
    return annotation if isinstance(annotation, type) and is_typeddict(annotation) else None


def _spec(cls: type) -> _Spec:
    """``(required keys, them in order, (key, exact type, nested spec) of each key with a kind to
    check)``."""
    required: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
    hints = get_type_hints(cls)
    order = tuple(k for k in cls.__annotations__ if k in required)
    checks = tuple(
        (k, kinds[0], _spec(nested) if (nested := _nested(hints[k])) is not None else None)
        for k in cls.__annotations__
        if (kinds := _kinds(hints[k]))
    )
    return required, order, checks


_SPECS = {t: _spec(cls) for t, cls in PAYLOADS.items()}

_KIND_NAMES = {
    int: "an integer",
    str: "a string",
    bool: "true or false",
    list: "a list",
    dict: "an object",
}


def problem(type_: str, data: Mapping[str, object], *, kinds: bool = True) -> str | None:
    """What is wrong with ``data`` as ``type_``'s payload — a required key missing, or a key of the
    wrong JSON kind (an integer, a string, true/false, a list, an object: the exact JSON type, so
    ``True`` is not an integer), inside a nested payload type too (``ToolResult.error``: its keys
    are named ``error.code``) — else ``None``. Unknown types and extra keys are not this check's
    business. ``kinds=False`` checks the required keys only. Cheap (a set comparison and one type
    lookup per typed key): the log runs it on every append — the required keys only for
    ``assistant/chunk``, the hot path, whose values the agent builds from typed chunks — and the
    journal reader, in full, on every line."""
    spec = _SPECS.get(type_)
    if spec is None:
        return None
    required, order, checks = spec
    if not data.keys() >= required:
        return _missing(type_, "", order, data)
    return _kind_problem(type_, "", checks, data) if kinds else None


def _missing(type_: str, prefix: str, order: tuple[str, ...], data: Mapping[str, object]) -> str:
    missing = [prefix + k for k in order if k not in data]
    return f"{type_} event is missing data field(s): {', '.join(missing)}"


def _kind_problem(
    type_: str, prefix: str, checks: tuple[_Check, ...], data: Mapping[str, object]
) -> str | None:
    """The first key of the wrong kind (named ``<prefix><key>``), looking into nested payloads."""
    for key, kind, nested in checks:
        value = data.get(key, _ABSENT)
        if value is _ABSENT:
            continue
        if type(value) is not kind:
            what = f"{type_} data field {prefix + key!r}"
            return f"{what} must be {_KIND_NAMES[kind]}, not {value!r:.40}"
        if nested is not None:
            inner = cast("dict[str, object]", value)
            inner_required, inner_order, inner_checks = nested
            if not inner.keys() >= inner_required:
                return _missing(type_, f"{prefix}{key}.", inner_order, inner)
            wrong = _kind_problem(type_, f"{prefix}{key}.", inner_checks, inner)
            if wrong is not None:
                return wrong
    return None


_ABSENT = object()
